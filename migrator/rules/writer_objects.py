"""MIG030's writing objects: a tracker or a log file made in training code (`writer =
SummaryWriter(...)`, `run = wandb.init(...)`, `log = open(path, "w")`), and writers made on
such a file (`rows = csv.writer(log)`, `csv.DictWriter(log, fieldnames)`). The object's
creation goes under the main-process guard with every statement calling its methods (or
handing it to a helper of the program), when nothing else uses it; otherwise it is left, with
a note: the name would not exist on the other processes."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import effects
from migrator.analysis.model.origins import scopes_seeing
from migrator.analysis.syntax.index import CallSite, Line, Scope, Statement
from migrator.arglists import call_items
from migrator.findings import Finding
from migrator.rules.base import RuleContext

WRITERS_ON_FILES = {"csv.writer", "csv.DictWriter"}


def own_statement(context: RuleContext, statement: Statement, small: ast.stmt):
    """The statement to guard for a simple statement: its line, when it is alone on it in an
    indented block or the module."""
    node = statement.node
    if statement.block.kind == "suite":
        return None
    if isinstance(node, Line) and len(node.body) == 1 and node.body[0] is small:
        return statement
    return None


def tracker_statements(context: RuleContext, scopes: list[Scope]) -> list[Statement]:
    """`writer = SummaryWriter(...)` in training code, with every statement calling its
    methods (or those of a writer made on it), when those are all its uses."""
    index = context.facts.index
    found: list[Statement] = []
    for scope in scopes:
        for name, bindings in scope.bindings.items():
            for binding in bindings:
                call = binding.value
                if binding.kind != "assign" or not isinstance(call, ast.Call):
                    continue
                callee = index.imports.qualify(call.func) or ""
                log_file = callee in effects.OPEN_CALLS and effects.writing_mode(call)
                if not (callee.endswith(effects.TRACKER_OBJECTS) or log_file) or binding.unpacked:
                    continue
                creation = own_statement(context, binding.statement, binding.small)
                statements = _method_statements(context, scope, name, log_file)
                if creation is not None and statements is not None:
                    found += [creation, *statements]
                    continue
                if callee == "wandb.init" and effects.effect_of(call, index.imports):
                    disable_off_main(context, call)  # `run` on every process, disabled off main
                    continue
                context.findings.append(Finding(
                    code="MIG030", level="note", node=call, by_hand=True,
                    message=f"`{name}` is used beyond calls of its methods: make it and log "
                    "to it on the main process only, by hand",
                ))  # fmt: skip
    return found


def _method_statements(
    context: RuleContext, scope: Scope, name: str, file: bool
) -> list[Statement] | None:
    """The whole statements using `name` (calls of its methods, a helper handed it, and for a
    file the writers made on it with theirs); None when another use has no statement of its
    own to guard."""
    index = context.facts.index
    found: list[Statement] = []
    if name.startswith("self.") and _read_from_outside(index, name.removeprefix("self.")):
        return None  # `trainer.tracker.writer.add_scalar(...)`: a use no guard here covers
    for use in [use for seen in scopes_seeing(scope, name) for use in seen.uses.get(name, [])]:
        site = _statement_call(index, use) or _handed_to_helper(context, use)
        statement = site and own_statement(context, site.statement, site.small)
        if statement is None and file:
            made = _writer_on(context, use)
            if made is not None:
                writer, statement = made
                theirs = _method_statements(context, statement.block.scope, writer, False)
                if theirs is None:
                    return None
                found += theirs
        if statement is None:
            return None
        found.append(statement)
    return found


def _read_from_outside(index, attribute: str) -> bool:
    """Is `attribute` read off another object than `self` anywhere in the module
    (`self.metrics.writer`, `tracker.writer`)? Those uses are not the class's own."""
    return any(
        isinstance(node, ast.Attribute) and node.attr == attribute
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        for node in ast.walk(index.tree)
    )  # fmt: skip


def _writer_on(context: RuleContext, use) -> tuple[str, Statement] | None:
    """`rows = csv.writer(log)`: the writer's name and statement, when `use` is the file
    handed to a writer that a statement of its own binds to one name."""
    call = use.call
    if use.kind != "arg" or call is None or not call.args or call.args[0] is not use.node:
        return None
    if (context.facts.index.imports.qualify(call.func) or "") not in WRITERS_ON_FILES:
        return None
    line = use.statement.node
    small = line.body[0] if isinstance(line, Line) and len(line.body) == 1 else None
    if not isinstance(small, ast.Assign) or small.value is not call or len(small.targets) != 1:
        return None
    statement = own_statement(context, use.statement, small)
    if statement is None or not isinstance(small.targets[0], ast.Name):
        return None
    return small.targets[0].id, statement


def _handed_to_helper(context: RuleContext, use) -> CallSite | None:
    """`log_weights(writer, model)`: a whole statement calling a function of this module with
    the tracker: it logs, so it runs where the tracker exists."""
    if use.kind != "arg" or use.call is None:
        return None
    site = _statement_call_of(context.facts.index, use.call)
    if site is None or context.processes.graph.callee(site) is None:
        return None
    return site


def _statement_call(index, use) -> CallSite | None:
    """The call site when `use` is `name.method(...)` making a whole statement."""
    if use.kind != "attr" or use.call is None:
        return None
    return _statement_call_of(index, use.call)


def _statement_call_of(index, call: ast.Call) -> CallSite | None:
    """The call site of `call` when the call is a whole statement."""
    for site in index.calls():
        if site.node is call:
            small = site.small
            if isinstance(small, ast.Expr) and small.value is site.node:
                return site
    return None


RUN_STATE = {"wandb.config", "wandb.run", "wandb.summary"}


def run_state_read(context: RuleContext) -> bool:
    """Does the program read wandb's run state (`config = wandb.config`, `wandb.run.name`)?
    A `wandb.init` only the main process ran leaves it unset on the others, and reading it
    there raises (h11 review: `wandb.config.validation_split` on process 1)."""
    imports = context.facts.index.imports
    return any(
        isinstance(node, ast.Attribute) and imports.qualify(node) in RUN_STATE
        for node in ast.walk(context.facts.index.module_scope.node)
    )


def disable_off_main(context: RuleContext, call: ast.Call) -> None:
    """`wandb.init(...)` on every process, a disabled run on all but the main one: the run
    state reads alike everywhere, and only the main process logs."""
    flag = context.main_process_flag(through_state=True)
    mode = next((k for k in call.keywords if k.arg == "mode"), None)
    if mode is not None:
        plain = isinstance(mode.value, (ast.Name, ast.Attribute, ast.Constant))
        context.edits.replace(mode.value, lambda text, _r: (
            f'{text if plain else f"({text})"} if {flag} else "disabled"'))  # fmt: skip
        return
    context.edits.rewrite(call, lambda _text, renderer: call_items(renderer, call).appended(
        f'mode=None if {flag} else "disabled"').render())  # fmt: skip
