"""MIG030's file writes and trackers: in training code every process would write the same file
at the same time (torn files) and log the same run twice (duplicate runs in trackers). These
statements go under `if accelerator.is_main_process:`:

- `with open(path, "w" | "a" | "x" ...) as f:` (any writing mode; its whole body), unless the
  body trains or evaluates (a loop over a loader, a backward or optimizer step);
- a statement that is a call writing a file: `np.save` / `np.savez` / `np.savetxt`,
  `torchvision.utils.save_image`, `json.dump`, `pickle.dump`, `plt.savefig`,
  `torch.onnx.export`, and the methods `.to_csv(...)`, `.savefig(...)`, `.write_text(...)`,
  `.write_bytes(...)`, `.save_pretrained(...)` (a model's or a tokenizer's files);
- log files: `logging.basicConfig(filename=...)`, `logger.addHandler(logging.FileHandler(...))`;
- trackers: `wandb.init / log / finish / watch / save(...)` statements, and a
  `writer = SummaryWriter(...)` (or `run = wandb.init(...)`, `log = open(path, "w")`) with
  every statement that calls its methods, when nothing else uses it (otherwise it is left,
  with a note: the name would not exist on the other processes).

Adjacent statements share one `if`. Statements already under a guard that reads the process
rank (`if accelerator.is_main_process:`, `if rank == 0:`, `if args.local_rank in [-1, 0]:`)
are left. Reads, and writes outside training code, stay as they are. `torch.save` is MIG030's
own (checkpoints of prepared models).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import scopes_seeing
from migrator.analysis.syntax.index import CallSite, Line, Scope, Statement
from migrator.findings import Finding
from migrator.rules.base import RuleContext
from migrator.source import continuation_lines, split_lines

WRITING_CALLS = {
    "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt",
    "torchvision.utils.save_image", "json.dump", "pickle.dump", "matplotlib.pyplot.savefig",
    "torch.onnx.export",
}  # fmt: skip
WRITING_METHODS = {"to_csv", "savefig", "write_text", "write_bytes", "save_pretrained"}
TRACKER_CALLS = {"wandb.init", "wandb.log", "wandb.finish", "wandb.watch", "wandb.save"}
TRACKER_OBJECTS = ("SummaryWriter", "wandb.init")  # callee suffixes making a tracker object
WRITE_MODES = set("wax+")
GUARD_WORDS = ("main_process", "rank", "is_master", "is_main")
TRAINING_METHODS = {"backward", "step", "zero_grad"}


def epoch_helpers(facts) -> list[Scope]:
    """Training code beyond the training scopes: the module's functions called from inside an
    epoch loop (a loop of a training scope that holds a training loop or calls a training
    scope: `for epoch in ...: train(epoch); test(); checkpoint(epoch)`), and the functions
    they call in turn."""
    training = facts.training_scopes
    functions = facts.index.functions
    found: list[Scope] = []
    pending = []
    for scope in training:
        for loop in scope.loops:
            called = [functions.get(patterns.name_of(site.node.func) or "") for site in loop.calls]
            if any(loop.contains(t) for t in facts.training_loops) or any(
                c in training for c in called if c is not None
            ):
                pending += [c for c in called if c is not None]
    while pending:
        scope = pending.pop()
        if scope in training or scope in found:
            continue
        found.append(scope)
        pending += [functions.get(patterns.name_of(s.node.func) or "") for s in scope.calls]
        pending = [c for c in pending if c is not None]
    return found


def guard_writes(context: RuleContext, scopes: list[Scope]) -> None:
    """Register the guards (module docstring) for the training code in `scopes`."""
    statements: dict[int, Statement] = {}
    for scope in scopes:
        for site in scope.calls:
            statement = _writing_statement(context, site)
            if statement is not None:
                statements[id(statement.node)] = statement
    for statement in _tracker_statements(context, scopes):
        statements[id(statement.node)] = statement
    for key, statement in list(statements.items()):
        if _runs_collectives(context, statement):
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
                    code="MIG030", level="note", node=call,
                    message="this file write runs the model on every process; compute it "
                    "first, then write it under `if accelerator.is_main_process:` by hand",
                ))  # fmt: skip
                return True
    return False


def _writing_statement(context: RuleContext, site: CallSite) -> Statement | None:
    imports = context.facts.index.imports
    qualified = imports.qualify(site.node.func) or ""
    if qualified in ("open", "io.open") and _writing_mode(site.node):
        return _with_statement_of(context, site)
    small = site.small
    if not isinstance(small, ast.Expr) or small.value is not site.node:
        return None  # only a call that is a whole statement
    if (
        qualified in WRITING_CALLS
        or qualified in TRACKER_CALLS
        or site.method in WRITING_METHODS
        or _log_file(imports, site.node)
    ):
        return _own_statement(context, site.statement, small)
    return None


def _log_file(imports, call: ast.Call) -> bool:
    """`logging.basicConfig(filename=...)`, `<logger>.addHandler(logging.FileHandler(...))`."""
    qualified = imports.qualify(call.func)
    if qualified == "logging.basicConfig":
        return patterns.keyword(call, "filename") is not None
    if isinstance(call.func, ast.Attribute) and call.func.attr == "addHandler" and call.args:
        handler = call.args[0]
        return isinstance(handler, ast.Call) and (imports.qualify(handler.func) or "").endswith(
            "FileHandler"
        )
    return False


def _writing_mode(call: ast.Call) -> bool:
    mode = patterns.keyword(call, "mode")
    if mode is None:
        positional = patterns.positional(call)
        mode = positional[1].value if len(positional) > 1 else None
    text = patterns.string_value(mode)
    return text is not None and bool(WRITE_MODES & set(text))


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


def _own_statement(context: RuleContext, statement: Statement, small: ast.stmt):
    """The statement to guard for a simple statement: its line, when it is alone on it in an
    indented block or the module."""
    node = statement.node
    if statement.block.kind == "suite":
        return None
    if isinstance(node, Line) and len(node.body) == 1 and node.body[0] is small:
        return statement
    return None


def _tracker_statements(context: RuleContext, scopes: list[Scope]) -> list[Statement]:
    """`writer = SummaryWriter(...)` in training code, with every statement calling its
    methods, when those are all its uses."""
    facts = context.facts
    index = facts.index
    found: list[Statement] = []
    for scope in scopes:
        for name, bindings in scope.bindings.items():
            for binding in bindings:
                call = binding.value
                if binding.kind != "assign" or not isinstance(call, ast.Call):
                    continue
                callee = index.imports.qualify(call.func) or ""
                log_file = callee in ("open", "io.open") and _writing_mode(call)
                if not (callee.endswith(TRACKER_OBJECTS) or log_file) or binding.unpacked:
                    continue
                creation = _own_statement(context, binding.statement, binding.small)
                seeing = scopes_seeing(scope, name)
                uses = [use for seen in seeing for use in seen.uses.get(name, [])]
                method_statements = []
                for use in uses:
                    site = _statement_call(index, use)
                    statement = site and _own_statement(context, site.statement, site.small)
                    if statement is None:
                        break
                    method_statements.append(statement)
                else:
                    if creation is not None:
                        found += [creation, *method_statements]
                        continue
                context.findings.append(Finding(
                    code="MIG030", level="note", node=call,
                    message=f"`{name}` is used beyond calls of its methods: make it and log "
                    "to it on the main process only, by hand",
                ))  # fmt: skip
    return found


def _statement_call(index, use) -> CallSite | None:
    """The call site when `use` is `name.method(...)` making a whole statement."""
    if use.kind != "attr" or use.call is None:
        return None
    for site in index.calls():
        if site.node is use.call:
            small = site.small
            if isinstance(small, ast.Expr) and small.value is site.node:
                return site
    return None


def _guarded(context: RuleContext, statement: Statement) -> bool:
    """Inside an `if` whose test reads the process rank or the main-process flag."""
    source = context.source
    for outer in statement.chain()[:-1]:
        node = outer.node
        if isinstance(node, ast.If):
            test = source.text_of(node.test)
            if any(word in test for word in GUARD_WORDS):
                return True
    return False


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


def _guard(context: RuleContext, group: list[Statement]) -> None:
    """The first statement becomes `if <main>:` plus itself one level deeper; the others one
    level deeper, so they join its body."""
    flag = context.accelerator_expr("is_main_process")
    for position, statement in enumerate(group):
        header = f"if {flag}:" if position == 0 else None
        context.edits.replace(statement.node, _indented(context, statement, header))
    context.need_accelerator_at(group[0])


def _indented(context: RuleContext, statement: Statement, header: str | None):
    source = context.source
    node = statement.node
    start = source.line_starts[node.lineno - 1]
    indent = source.text[start : start + source.column(node)]
    step = "\t" if "\t" in indent else "    "

    def render(text: str, renderer) -> str:
        body = deeper(text, step)
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
