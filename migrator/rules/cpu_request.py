"""The `cpu=` the Accelerator gets: what the devices the original put its model and its batches
on ask for (device_requests.py reads each), joined: the CPU when any of them picks it. A
`.cuda()` (or `.to(device)`) under `if use_cuda:` / `x.cuda() if args.cuda else x` leaves them
on the CPU when the test is false. Placements of other tensors (a host copy with
`.to("cpu")`, a metric on `eval_device`) say nothing of where training runs."""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.dataflow import data_root
from migrator.analysis.syntax.views import call_args
from migrator.rules.cpu_conditions import FALSE, Cond, both, either, negate
from migrator.rules.device_requests import CpuRequests

DEVICE_WORDS = re.compile(r"cuda|gpu|cpu|device|accel", re.IGNORECASE)


def cpu_request(context) -> tuple[Cond, list[ast.AST], list[ast.AST]]:
    """(when the original trained on the CPU though CUDA was there, the device expressions
    that could not be read, those that were). An object is on the CPU when none of its placements moves it
    off (`if args.gpu is not None: model.cuda(args.gpu)` / `else: model.cuda()`); the
    models decide, else the batches."""
    facts = context.facts
    imports = facts.index.imports
    requests = CpuRequests(context)
    sites: dict[str, list] = {"model": [], "batch": []}  # (cpu?, the expression it reads)
    for scope in facts.training_scopes:
        devices = facts.device_names(scope)
        for site in scope.calls:
            kind = patterns.placement_call(site.node, devices, imports)
            placed = _placed(facts, scope, site) if kind is not None else None
            if placed is None:
                continue
            cond: Cond | None = FALSE  # `.cuda()`, `.cuda(local_rank)`
            read = site.node
            if kind == "to":
                read = _device_argument(site.node, devices, imports)
                if read is None or patterns.moves_off_device(site.node, site.small, imports):
                    continue
                cond = requests.device(read, scope)
            guard = _guard(site)
            if guard is not None and _about_ranks(requests, guard[0], scope):
                guard = None  # `if args.gpu is not None: model.cuda(args.gpu)`: which GPU
            if guard is not None and cond is not None:
                test = requests.test(guard[0], scope)
                read = guard[0] if test is None else read
                cond = None if test is None else either(cond, negate(test) if guard[1] else test)
            sites[placed].append((cond, read))
    found = sites["model"] or sites["batch"]
    conds = [cond for cond, _ in found if cond is not None]
    known = both(*conds) if conds else FALSE
    if known == FALSE and conds:
        return FALSE, [], []  # one placement moves it off the CPU: the rest cannot matter
    unread = list(dict.fromkeys(read for cond, read in found if cond is None))
    return known, unread, [read for cond, read in found if cond is not None]


def places_off_cpu(context) -> bool:
    """Does the original place anything where a GPU can be (`.cuda()`, `.to(device)`,
    `.to("cuda")`)? If not, its `x.to("cpu")` is where it computes, a placement like any
    other; if so, a `.to("cpu")` copies a value to the host (SPEC §3b.5)."""
    facts = context.facts
    imports = facts.index.imports
    for site in facts.index.calls():
        if patterns.placement_call(site.node, facts.device_names(site.scope), imports) and (
            not patterns.moves_to_cpu(site.node, imports)
        ):
            return True
    return False


def _placed(facts, scope, site) -> str | None:
    """ "model" / "batch": what the placement call moves, or None."""
    receiver = site.receiver
    root = patterns.root_name(receiver) if receiver is not None else None
    if root is not None and facts.role(scope, root) == "model":
        return "model"
    small = site.small  # `model = Net().to(device)`
    if (
        isinstance(small, ast.Assign)
        and len(small.targets) == 1
        and _within(small.value, site.node)
    ):
        name = patterns.name_of(small.targets[0])
        if name is not None and facts.role(scope, name) == "model":
            return "model"
    if any(r.contains(site) and data_root(receiver, r.names) for r in facts.regions):
        return "batch"
    return None


def _within(value, call) -> bool:
    """`Net().to(device)` / `Net().to(device).float()`: the call is on the value's spine."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if value is call:
            return True
        value = value.func.value
    return value is call


def _device_argument(call: ast.Call, devices, imports):
    args = call_args(call)
    plain = [a for a in args if a.plain]
    if plain and patterns.is_devicey(plain[0].value, devices, imports):
        return plain[0].value
    keyword = next((a for a in args if a.keyword == "device"), None)
    return keyword.value if keyword is not None else None


def _guard(site) -> tuple[ast.expr, bool] | None:
    """(test, placed when true) of the `if` that decides whether this placement runs, when
    that test is about the device: `x.cuda() if use_cuda else x`, `if args.cuda:`."""
    for node in ast.walk(site.small) if site.small is not None else ():
        if isinstance(node, ast.IfExp) and _device_test(node.test):
            if any(inner is site.node for inner in ast.walk(node.body)):
                return node.test, True
            if any(inner is site.node for inner in ast.walk(node.orelse)):
                return node.test, False
    block = site.statement.block
    while block is not None and block.parent is not None:
        owner = block.owner
        if isinstance(owner, ast.If) and _device_test(owner.test):
            return owner.test, block.field == "body"
        block = block.parent.block
    return None


def _about_ranks(requests, test: ast.expr, scope) -> bool:
    """A test that reads this process's GPU index (`args.gpu`, `local_rank`) and no other
    device word: it picks a GPU (native DDP, MIG010), not the CPU."""
    words = [n for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))
             and DEVICE_WORDS.search(n.id if isinstance(n, ast.Name) else n.attr)]  # fmt: skip
    return bool(words) and all(requests.rank(n, scope) for n in words)


def _device_test(test: ast.expr) -> bool:
    return any(
        DEVICE_WORDS.search(node.id if isinstance(node, ast.Name) else node.attr)
        for node in ast.walk(test)
        if isinstance(node, (ast.Name, ast.Attribute))
    )
