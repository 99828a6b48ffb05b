"""The MIG905 note of a training loop that draws no batches from a DataLoader (nanoGPT's
`get_batch`, replay buffers, full-batch graphs): nothing shards its data, and what N processes
then do is said as it is.

- With the model prepared, DDP averages its gradients over the processes every step: the
  processes keep one model, and each step sees every process's batch. Batches drawn alike on
  every process (a seeded draw, a fixed tensor) make the original's steps at N times the
  compute; batches drawn at random per process make each step average N of them.
- Where the batches live: the script's own `.to(...)` / `.cuda()` in the loop (or in the
  helpers it calls, or once before it) put them where it says (its device, now `accelerator.device`); with none,
  they stay on the CPU while the prepared model is on `accelerator.device`.
"""

from __future__ import annotations

import ast

from migrator.analysis.model.calls import CallGraph
from migrator.analysis.model.forwards import index_name
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import Loop, Scope
from migrator.findings import Finding

PLACEMENT = ("to", "cuda")
ON_THE_CPU = (
    "the script puts no batch on a device: its tensors stay on the CPU, while the prepared "
    "model is on `accelerator.device`; where that is a GPU, move them there "
    "(`.to(accelerator.device)`)"
)
# said instead where MIG004 placed them, or kept the program on the CPU (rules/host_inputs.py)
KEPT_ON_THE_CPU = (
    "the script puts no tensor on a device, and the Accelerator keeps it on the CPU "
    "(`cpu=True`, see the MIG004 note), where its tensors are"
)
PLACED_WHERE_MADE = (
    "the script computed on the CPU alone: the tensors it builds and hands to the model, or "
    "that meet what the model returns, now go to `accelerator.device` where they are made, "
    "and their reads by host libraries (`.numpy()`, numpy, sklearn) take a host copy"
)
DEPTH = 3  # helpers of helpers the loop calls, followed this deep


def loaderless_note(facts: TrainingFacts, prepared: list[str]) -> Finding:
    loop = facts.training_loops[0]
    where = (
        "the batches go where the script's own `.to(...)` puts them"
        if places_tensors(facts, loop)
        else ON_THE_CPU
    )
    if any(name in facts.models for name in prepared):
        how = (
            "each process draws its own batches and DDP averages the prepared model's "
            "gradients over the processes, which keep one model: the same batches on every "
            "process when the script draws them alike (the original's steps, at N times the "
            "compute), different ones when it draws them at random per process (each step "
            "then averages N batches: N times the original's batch)"
        )
    else:
        how = (
            "the processes train N replicas, on the same batches when the script draws them "
            "alike on every process (N times the compute for one process's result), on their "
            "own when it draws them at random per process"
        )
    return Finding(
        code="MIG905",
        level="note",
        node=loop.node,
        message=f"the training loop at line {loop.node.lineno} draws no batches from a "
        f"DataLoader, so nothing shards its data: {how}; {where}",
    )


def places_tensors(facts: TrainingFacts, loop: Loop) -> bool:
    """Does the loop, or a function of the program it calls, move a value that is not a model
    of the program to a device (`x.to(device)`, `.cuda()`, `torch.tensor(..., device=d)`)?"""
    graph = CallGraph(facts.index)
    seen: set[int] = set()
    # the tensors a full-batch loop reads may be placed once, before it (`data =
    # dataset[0].to(device)`), in its scope or at module level
    before = [site for site in facts.index.calls()
              if (site.scope is loop.scope or site.scope.kind == "module")
              and site.node.lineno < loop.node.lineno]  # fmt: skip
    if any(_places(facts, site) and _binds_data(facts, site) for site in before):
        return True
    calls = list(loop.calls)
    depth = {id(site): 0 for site in calls}
    while calls:
        site = calls.pop()
        if _places(facts, site):
            return True
        level = depth.get(id(site), 0)
        callee = graph.callee(site)
        if callee is None or id(callee) in seen or level >= DEPTH:
            continue
        seen.add(id(callee))
        for inner in _calls_in(facts, callee):
            depth[id(inner)] = level + 1
            calls.append(inner)
    return False


def _places(facts: TrainingFacts, site) -> bool:
    call = site.node
    if any(k.arg == "device" for k in call.keywords):
        return True
    if site.method not in PLACEMENT or site.receiver is None:
        return False
    name = index_name(site.receiver)
    return name is None or facts.role(site.scope, name) != "model"


def _binds_data(facts: TrainingFacts, site) -> bool:
    """`data = dataset[0].to(device)`: a placement bound to a name that is no model."""
    small = site.small
    if not isinstance(small, ast.Assign):
        return False
    value = small.value
    parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
    if not any(part is site.node for part in parts):  # `x, y = x.to(d), y.to(d)` too
        return False
    names = [n.id for t in small.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return bool(names) and all(facts.role(site.scope, n) != "model" for n in names)


def _calls_in(facts: TrainingFacts, function: Scope) -> list:
    return [site for site in facts.index.calls() if site.scope is function]
