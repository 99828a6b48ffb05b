"""MIG030's side effects: on N processes every process would write the same file at the same
time (torn files), log the same run twice (duplicate runs in trackers), download into one
folder at once. In code that runs on every process (analysis/effects/processes.py: module
code, and every function it reaches, at any depth, outside a main-process guard), the
catalogue's effects (analysis/catalogue/effects.py) are made safe:

- a statement that is a call writing a file (`np.save`, `save_image`, `plt.savefig`,
  `shutil.copy`, `.to_csv(...)`, `.savefig(...)`, `.save_pretrained(...)`, ..., a helper of
  the program whose body writes, or an unseen one named for it: `save_checkpoint(...)`), a
  `with open(path, "w" | "a" | "x" ...) as f:` (its whole body, unless it trains or
  evaluates), a log file (`logging.basicConfig(filename=...)`,
  `logger.addHandler(logging.FileHandler(...))`) and tracker calls (`wandb.init / log /
  finish`, `mlflow.log_metric`...) go under `if accelerator.is_main_process:`;
- a tracker object (`writer = SummaryWriter(...)`, `run = wandb.init(...)`, `log = open(path,
  "w")`) goes there with every statement that calls its methods, when nothing else uses it
  (otherwise it is left, with a note: the name would not exist on the other processes);
- `os.makedirs(path)` / `os.mkdir(path)` / `Path(...).mkdir()` get `exist_ok=True`: every
  process may create the folder, none fails because another did first;
- a data set downloaded where it is made (`MNIST(root, download=True)`) is made inside
  `with accelerator.main_process_first():`: the main process downloads, then the others read
  (`PartialState().main_process_first()` where the accelerator cannot be seen: a Trainer's).

Adjacent statements share one `if`. Statements already under a main-process guard are left.
`torch.save` is MIG030's own (accelerator.save).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import effects, patterns
from migrator.analysis.effects.processes import EVERY
from migrator.analysis.model.chains import chain_text
from migrator.analysis.model.hand_offs import BODY, NAMED, helper_writes
from migrator.analysis.model.origins import scopes_seeing
from migrator.analysis.syntax.index import CallSite, Line, Scope, Statement
from migrator.arglists import call_items
from migrator.findings import Finding
from migrator.rules.base import RuleContext
from migrator.rules.writer_objects import (
    disable_off_main,
    own_statement,
    run_state_read,
    tracker_statements,
)
from migrator.source import continuation_lines, split_lines

TRAINING_METHODS = {"backward", "step", "zero_grad"}


def every_process_scopes(context: RuleContext) -> list[Scope]:
    """The scopes of the input that run on every process: module code and what it reaches."""
    processes = context.processes
    return [s for s in context.facts.index.scopes if processes.scope_status(s) == EVERY]


def guard_writes(context: RuleContext, scopes: list[Scope]) -> None:
    """Register the guards (module docstring) for the training code in `scopes`."""
    statements: dict[int, Statement] = {}
    for scope in scopes:
        for site in scope.calls:
            statement = _writing_statement(context, site)
            if statement is not None:
                statements[id(statement.node)] = statement
    for statement in tracker_statements(context, scopes):
        statements[id(statement.node)] = statement
    guarded = [s.node for s in statements.values()]
    for key, statement in list(statements.items()):
        if _runs_collectives(context, statement) or _binds_what_follows_reads(
            context, statement, guarded
        ):
            del statements[key]
    nodes = set(statements)
    kept = [
        s
        for s in statements.values()
        if not _guarded(context, s) and not any(id(o.node) in nodes for o in s.chain()[:-1])
    ]
    for group in _adjacent_groups(kept):
        _guard(context, group)


def _runs_collectives(context: RuleContext, statement: Statement) -> bool:
    """Does the statement call a prepared model (a DDP forward syncs buffers across processes)
    or the accelerator (a gather)? It cannot run on one process only: left, with a note."""
    scope = statement.block.scope
    node = statement.node
    for small in node.body if isinstance(node, Line) else [node]:
        for call in ast.walk(small):
            if not isinstance(call, ast.Call):
                continue
            called = patterns.name_of(call.func) or ""
            receiver = called.rsplit(".", 1)[0] if "." in called else ""
            if context.prepared_role(scope, called) == "model" or (
                receiver and receiver in context.facts.accelerator_names
            ):
                context.findings.append(Finding(
                    code="MIG030", level="note", node=call, by_hand=True,
                    message="this file write runs the model on every process; compute it "
                    "first, then write it under `if accelerator.is_main_process:` by hand",
                ))  # fmt: skip
                return True
    return False


def _binds_what_follows_reads(context: RuleContext, statement: Statement, guarded) -> bool:
    """Does the write also bind a name that code after it reads (`class_names = [...]` inside
    `with open(log, "w") as f:`, read by every process later)? Guarded, the name would not
    exist on the other processes (NameError there): left, with a note, for the soundness
    check to refuse."""
    node = statement.node
    parts = node.body if isinstance(node, Line) else [node]
    handles = {
        n.id for item in getattr(node, "items", []) if item.optional_vars is not None
        for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)
    }  # fmt: skip
    bound = {
        n.id for part in parts for n in ast.walk(part)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    } - handles  # fmt: skip
    end = max(part.end_lineno or part.lineno for part in parts)
    scope = statement.block.scope
    read = sorted(
        name for name in bound
        if any(use.node.lineno > end and not _within(use.statement, guarded)
               for current in scopes_seeing(scope, name)
               for use in current.uses.get(name, []))
    )  # fmt: skip
    if not read:
        return False
    context.findings.append(Finding(
        code="MIG030", level="note", node=parts[0], by_hand=True,
        message=f"this file write also binds `{read[0]}`, which code after it reads on every "
        "process: guarded whole, the name would not exist on the other processes; bind it "
        "before the write and put only the write under `if accelerator.is_main_process:`, "
        "by hand",
    ))  # fmt: skip
    return True


def _within(statement: Statement, guarded) -> bool:
    """Is `statement` one of the statements guarded alike (a tracker's method calls), or in
    one?"""
    return any(outer.node is node for outer in statement.chain() for node in guarded)


def _writing_statement(context: RuleContext, site: CallSite) -> Statement | None:
    imports = context.facts.index.imports
    qualified = imports.qualify(site.node.func) or ""
    path_open = site.method == "open" and effects.path_opens_for_writing(site.node)
    if qualified in effects.OPEN_CALLS or path_open:  # `open(p, "w")`, `log_path.open("w")`
        if not (path_open or effects.writing_mode(site.node)):
            return None
        within = _with_statement_of(context, site)
        if within is not None or isinstance(site.statement.node, ast.With):
            return within
    small = site.small
    if not isinstance(small, ast.Expr):
        return None  # only a call in an expression statement (`json.dump(x, open(p, "w"))`)
    effect = effects.effect_of(site.node, imports, effects.values_in(site.scope))
    if qualified == "wandb.init" and effect is not None and run_state_read(context):
        disable_off_main(context, site.node)
        return None
    kept = {"torch.save", *effects.MAKE_DIRS, "os.mkdir"}  # MIG030's own, and made safe below
    if qualified in kept or site.method == "mkdir":
        return None
    if effect is not None and effect.kind != "download":  # a log file's handler included
        return own_statement(context, site.statement, small)
    if guarded_helper(context, site):  # `save_checkpoint(...)`
        return own_statement(context, site.statement, small)
    return None


def guarded_helper(context: RuleContext, site: CallSite) -> bool:
    """A call of a helper this program cannot rewrite that writes, which MIG030 runs on the
    main process only: one named for writing, or one handed the prepared model whose body
    writes (a checkpoint); a data preparation step that only its body shows writing is left
    (the other processes may read its files right after)."""
    if context.processes.graph.callee(site) is not None:
        return False  # a function of this program: its own writes are guarded inside
    kind = helper_writes(site.node, context.facts.index.imports, context.library)
    if kind == NAMED:
        return True
    return kind == BODY and any(
        context.prepared_role(site.scope, name) == "model"
        for argument in [*site.node.args, *(k.value for k in site.node.keywords)]
        if (name := patterns.name_of(argument) or chain_text(argument)) is not None
    )


def make_folders_safe(context: RuleContext, scopes: list[Scope]) -> None:
    """`os.makedirs(d)` -> `os.makedirs(d, exist_ok=True)` (and `os.mkdir(d)`, `p.mkdir()`)
    where every process runs it."""
    imports = context.facts.index.imports
    for scope in scopes:
        for site in scope.calls:
            qualified = imports.qualify(site.node.func) or ""
            folder = qualified in (*effects.MAKE_DIRS, "os.mkdir") or (
                site.method == "mkdir" and qualified not in ("os.mkdir",)
            )
            if not folder or not context.processes.runs_on_every_process(site.statement):
                continue
            if effects.effect_of(site.node, imports) is None and qualified != "os.mkdir":
                continue  # exist_ok=True already, or each process's own folder
            call = site.node
            make = "os.makedirs" if qualified == "os.mkdir" else None
            if make is not None and not isinstance(call.func, ast.Attribute):
                continue  # `from os import mkdir`: left to the soundness check
            if make is not None and len(call.args) != 1:
                continue  # `os.mkdir(path, mode)`: by hand

            def rewrite(_text: str, renderer, call=call, make=make) -> str:
                items = call_items(renderer, call).appended("exist_ok=True").render()
                if make is None:
                    return items
                head = renderer.text_of(call.func.value)
                return f"{head}.makedirs{items[items.index('(') :]}"

            context.edits.rewrite(call, rewrite)


def _with_statement_of(context: RuleContext, site: CallSite) -> Statement | None:
    """The `with` statement whose item is this `open(...)`, if its body neither trains nor
    evaluates."""
    node = site.statement.node
    if not isinstance(node, ast.With) or not any(i.context_expr is site.node for i in node.items):
        return None
    facts = context.facts
    for loop in [*facts.training_loops, *facts.eval_loops]:
        if any(statement.node is node for statement in loop.statement.chain()):
            return None
    for call in site.scope.calls:
        if call.method in TRAINING_METHODS and any(
            statement.node is node for statement in call.statement.chain()[:-1]
        ):
            return None
    return site.statement


def _guarded(context: RuleContext, statement: Statement) -> bool:
    """Runs on the main process only already (analysis/effects/processes.py)."""
    return not context.processes.runs_on_every_process(statement)


def _adjacent_groups(statements: list[Statement]) -> list[list[Statement]]:
    """Statements of one block on consecutive lines (no blank or comment line between), in
    order."""
    ordered = sorted(statements, key=lambda s: (id(s.block), s.index))
    groups: list[list[Statement]] = []
    for statement in ordered:
        last = groups[-1][-1] if groups else None
        if (
            last is not None
            and last.block is statement.block
            and statement.index == last.index + 1
            and statement.node.lineno == _end_line(last.node) + 1
        ):
            groups[-1].append(statement)
        else:
            groups.append([statement])
    return groups


def _end_line(node) -> int:
    return node.end_lineno


def guard_statement(context: RuleContext, statement: Statement, through_state: bool) -> None:
    """One statement under the main process (MIG030's `torch.save` where no accelerator can
    be seen)."""
    _guard(context, [statement], through_state)


def _guard(context: RuleContext, group: list[Statement], through_state: bool = False) -> None:
    """The first statement becomes `if <main>:` plus itself one level deeper; the others one
    level deeper, so they join its body. Where the accelerator cannot be seen, the flag is
    the process-wide state's."""
    flag = context.main_process_flag(through_state)
    # a helper of the project whose files the others may read next (preprocessing, a
    # vocabulary): outside a loop the others wait until the main process has written them
    wait = _calls_writing_helper(context, group) and not any(
        isinstance(s.node, (ast.For, ast.AsyncFor, ast.While)) for s in group[0].chain()[:-1]
    )
    for position, statement in enumerate(group):
        header = f"if {flag}:" if position == 0 else None
        after = None
        if wait and position == len(group) - 1:
            after = f"{flag.removesuffix('.is_main_process')}.wait_for_everyone()"
        context.edits.replace(statement.node, indented(context, statement, header, after))
    if not through_state:

        def fallback() -> None:
            for statement in group:
                context.edits.cancel(statement.node)
            _guard(context, group, through_state=True)

        context.need_accelerator_at(group[0], fallback=fallback)


def _calls_writing_helper(context: RuleContext, group: list[Statement]) -> bool:
    imports = context.facts.index.imports
    if not imports.helper_effects:
        return False
    for statement in group:
        smalls = statement.node.body if isinstance(statement.node, Line) else [statement.node]
        for node in (n for small in smalls for n in ast.walk(small)):
            if not isinstance(node, ast.Call):
                continue
            effect = imports.helper_effects.get(imports.qualify(node.func) or "")
            if effect is not None and effect.kind != "tracker":
                return True
    return False


def indented(context: RuleContext, statement: Statement, header: str | None, after=None):
    source = context.source
    node = statement.node
    start = source.line_starts[node.lineno - 1]
    indent = source.text[start : start + source.column(node)]
    step = "\t" if "\t" in indent else "    "

    def render(text: str, renderer) -> str:
        body = deeper(text, step)
        if after is not None:  # a line of its own after the statement, at its indent
            ending = body[len(body.rstrip("\r\n")) :]
            body = f"{body.rstrip(chr(13) + chr(10))}{renderer.newline}{indent}{after}{ending}"
        if header is None:
            return step + body
        return f"{header}{renderer.newline}{indent}{step}{body}"

    return render


def deeper(text: str, step: str) -> str:
    """A statement's text (its first line without indentation) one level deeper: `step` before
    every later line that is code or a comment, not blank lines and not lines that start
    inside a string or after a backslash."""
    skip = continuation_lines(text)
    out = []
    for number, line in enumerate(split_lines(text), start=1):
        if number > 1 and number not in skip and line.strip():
            line = step + line
        out.append(line)
    return "".join(out)
