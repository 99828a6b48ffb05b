"""Obligation 3: a value computed from per-process data that reaches an output or a decision
is reduced or gathered consistently (analysis/effects/values.py says what each value counts).

Refused here:
- an output (`print`, `accelerator.print`, a logger, a tracker; a CSV row or a plot's data
  gets the same per-process note) of a `MIXED` value: a whole
  data's count over this process's count (accuracy N times too high), or the reverse;
- a decision on a `MIXED` value, or on a per-process value where the branch runs a
  collective (a gather, a wait, a prepared model's forward) or leaves a loop or function
  that runs one (leaving.py): the processes disagree and one waits forever for the others;
- a metric-driven scheduler (`scheduler.step(val_loss)`) stepped with a per-process value: the
  processes' learning rates drift apart;
- a prepared model run on gathered inputs: every process evaluates the whole set again.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.catalogue.outputs import shows
from migrator.analysis.effects.extents import GLOBAL, LOCAL, MIXED
from migrator.analysis.effects.values import PerProcessValues
from migrator.findings import Finding
from migrator.soundness.leaving import Leaving
from migrator.soundness.model import OutputModel

CODE = "MIG953"


def per_process_values(model: OutputModel) -> list[Finding]:
    values = model.values()
    found: list[Finding] = []
    for site in model.index.calls():
        scope = site.scope
        call = site.node
        written = _writes_down(model, site)
        if (_is_output(model, call) or written) and (
            model.processes.runs_on_every_process(site.statement)
            or _prints_on_main(call)
            or (written and model.processes.guarded(site.statement))
        ):
            arguments = [*call.args, *(k.value for k in call.keywords)]
            shares = [a for a in arguments if values.differs(a, scope)
                      and MIXED not in values.extents(a, scope)
                      and "batchsize" not in values.roles(a, scope)]  # fmt: skip
            # (a batch's shape is the original's at the default batch: nothing to reduce)
            if shares:
                verb = "written" if written else "shown"
                part = _own_part(values, scope, shares[0])
                found.append(Finding(code=CODE, level="note", node=part, message=(
                    f"`{_text(model, part)}` {verb} here is this process's own value (computed "
                    "from its share of the data or from its own random draws), not the one a "
                    "1-process run shows; to show that, reduce a number or tensor over the "
                    "processes first (`accelerator.reduce(...)`), or gather Python objects "
                    "(`accelerator.gather_object(...)`)")))  # fmt: skip
            for argument in arguments:
                if MIXED in values.extents(argument, scope):
                    found.append(_finding(model, argument, (
                        f"`{_text(model, argument)}` mixes this process's share of the data "
                        "with the whole data's (a gathered count over a per-process count): "
                        "the printed number would be off by the number of processes; gather "
                        "or reduce both sides alike, by hand")))  # fmt: skip
        if site.method == "step" and call.args:
            metric = values.extents(call.args[0], scope)
            if metric & {LOCAL, MIXED} and model.processes.runs_on_every_process(site.statement):
                found.append(_finding(model, call, (
                    f"`{_text(model, call.func)}({_text(model, call.args[0])})` steps on "
                    "this process's value: each process would set its own learning rate; "
                    "reduce the metric first (`accelerator.reduce(...)`), by hand")))  # fmt: skip
        if values.runs_model(call, scope) and any(
            GLOBAL in values.extents(a, scope) for a in call.args
        ):
            found.append(
                _finding(
                    model,
                    call,
                    (
                        f"`{_text(model, call)}` runs the prepared model on gathered inputs: every "
                        "process would evaluate the whole set; gather the outputs instead, by hand"
                    ),
                )
            )
    leaving = Leaving(model, values)
    for scope in model.index.scopes:
        for node in _tests(scope):
            found += _decision(model, values, leaving, scope, node)
    return found


def _decision(
    model: OutputModel, values: PerProcessValues, leaving: Leaving, scope, node
) -> list[Finding]:
    if model.processes.main_test(node.test, scope) is not None:
        return []  # a main-process guard, not a decision on data
    statement = model.index.statement_of.get(id(node))
    if statement is not None and not model.processes.runs_on_every_process(statement):
        return []
    extents = values.extents(node.test, scope)
    if MIXED in extents or (values.differs(node.test, scope) and leaving.out_of_step(scope, node)):
        return [
            _finding(
                model,
                node.test,
                (
                    f"`{_text(model, node.test)}` decides on this process's value: the processes "
                    "may take different branches and wait for each other forever; reduce the value "
                    "first (`accelerator.reduce(...)`) so every process decides alike, by hand"
                ),
            )
        ]
    return []


def _own_part(values: PerProcessValues, scope, shown: ast.expr) -> ast.expr:
    """The part of a shown f-string or `"...".format(...)` that is this process's own (the
    others may be reduced already, or alike everywhere); `shown` itself otherwise."""
    parts: list[ast.expr] = []
    if isinstance(shown, ast.JoinedStr):
        parts = [v.value for v in shown.values if isinstance(v, ast.FormattedValue)]
    elif (
        isinstance(shown, ast.Call)
        and isinstance(shown.func, ast.Attribute)
        and shown.func.attr == "format"
        and isinstance(shown.func.value, ast.Constant)
    ):
        parts = [*shown.args, *(k.value for k in shown.keywords)]
    own = [p for p in parts if values.differs(p, scope)]
    return own[0] if len(own) == 1 else shown


def _tests(scope):
    """The `if`/`while` statements of `scope`'s own body (not nested scopes')."""
    stack = list(scope.node.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.While)):
            yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                stack.append(child)


PLOTS = {"plot", "scatter", "bar", "hist", "imshow", "errorbar", "fill_between"}
ROW_WRITES = {"writerow", "writerows"}


def _writes_down(model: OutputModel, site) -> bool:
    """A call that writes its arguments where the user reads them later: a CSV row
    (`writer.writerow([epoch, val_iou])`), a figure's data (`plt.plot(losses)`), a file of the
    catalogue (`np.save(path, scores)`): a per-process value there is process 0's own, as in a
    print (main-only writes included)."""
    call = site.node
    if site.method in ROW_WRITES:
        return True
    qualified = model.index.imports.qualify(call.func) or ""
    if qualified.startswith("matplotlib.") and qualified.rsplit(".", 1)[-1] in PLOTS:
        return True
    return site.method in PLOTS and (patterns.name_of(site.receiver) or "").startswith("ax")


def _is_output(model: OutputModel, call: ast.Call) -> bool:
    """A call that shows its arguments, by the binding of its receiver: `torch.log(x)` is a
    module's function and shows nothing (catalogue/outputs.py)."""
    return shows(call, model.index.imports)


def _prints_on_main(call: ast.Call) -> bool:
    """`accelerator.print(...)`: it prints on the main process, whatever runs it."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "print"


def _text(model: OutputModel, node: ast.AST) -> str:
    text = model.source.text_of(node).strip()
    return text if len(text) <= 60 else text[:57] + "..."


def _finding(model: OutputModel, node: ast.AST, message: str) -> Finding:
    return Finding(code=CODE, node=node, message=message)


MAIN_ONLY_COLLECTIVES = {
    "gather", "gather_for_metrics", "reduce", "gather_object", "wait_for_everyone", "prepare",
    "backward", "save_state", "load_state", "pad_across_processes",
}  # fmt: skip


def main_only_collectives(model: OutputModel) -> list[Finding]:
    """A collective in code only the main process runs waits forever for the others: an
    accelerator gather, reduce or wait, a prepared model's forward (DDP syncs its buffers),
    iterating a prepared loader (its sampler syncs the processes' random state)."""
    values = model.values()
    found = []
    for site in model.index.calls():
        if not _main_only(model, site):
            continue
        call = site.node
        method = call.func.attr if isinstance(call.func, ast.Attribute) else None
        syncs = (
            method in MAIN_ONLY_COLLECTIVES
            and isinstance(call.func, ast.Attribute)
            and "accelerator" in values.roles(call.func.value, site.scope)
        ) or values.runs_model(call, site.scope)
        if syncs:
            found.append(_finding(model, call, (
                f"`{_text(model, call)}` runs on the main process only, but it waits for "
                "every process (a collective, or a prepared model's forward): the run would "
                "hang; run it on every process and keep only its output on the main process, "
                "by hand")))  # fmt: skip
    return found


def _main_only(model: OutputModel, site) -> bool:
    status = model.processes.scope_status(site.scope)
    if status == "main process":
        return True
    return status == "every process" and model.processes.guarded(site.statement)
