"""Which files could need migration, decided as cheaply as possible, before the analysis.

Two stages, each a superset of what the full pipeline (engine.migrate_tree) changes or reports:

1. bytes: a file must contain one of the selected rules' declared `triggers` (derived from the
   rule classes, so a new rule cannot forget its own). A trigger that the analysis only ever
   meets as a method call (`x.backward(...)`) is refined by a linear-time regex: `.backward`
   then `(` (or `)` or a comment), with only whitespace or line continuations between, or
   `backward` first on a line (after a comment line, say); a dot on a line that starts with
   `#` or `>>>` (a comment, a doctest) does not count.
2. ast: on the tree the analysis will use (the file is parsed once), when the only triggers
   present are method triggers, the file must hold a real call `<expr>.backward(...)` and a
   real call `<expr>.step(...)` (every rule acts only where a loop trains, and the one note,
   MIG905, needs an optimizer step in the backward's function). When no training loop is
   possible the only output can be MIG905 notes; outside methods this stage computes them
   itself, exactly as `migrator.analysis.loops` does (see `screen`). MIG910's trigger
   `DataLoader` passes only if a loader class is called and so is a function imported from
   outside torch (its finding needs both). One walk of the tree recording calls, where the
   index records everything: on torch's own sources it spares the index and the analysis of
   two files in three that pass the byte stage.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field
from functools import cache

# Triggers the analysis only matches as a method name: `<expr>.NAME(...)`.
METHOD_TRIGGERS = frozenset({"backward"})
# MIG910's trigger: the ast stage decides whether its finding is possible (`could_hide_step`).
HIDDEN_STEP_TRIGGER = "DataLoader"
LOADER_SUFFIX = "DataLoader"  # every loader class patterns knows ends so (tests/bulk check)


@cache
def triggers(rules: frozenset) -> tuple[bytes, ...]:
    from migrator.rule_table import rule_triggers  # the rules' own triggers, read statically

    found: list[bytes] = []
    for code, declared in rule_triggers().items():
        if code in rules:
            found.extend(t.encode() for t in declared if t.encode() not in found)
    return tuple(found)


@cache
def _method_pattern(name: str) -> re.Pattern[bytes]:
    word = re.escape(name.encode())
    space = rb"[ \t\f\r\n\\]*"  # whitespace, newlines (inside brackets), continuations
    # `.NAME` then `(` (a call), `)` (`(x.NAME)(...)`) or `#` (a comment before the `(`); or
    # NAME first on a line, whatever precedes it (a comment line after the dot, say).
    # No nested quantifiers: linear in the input, whatever the input.
    return re.compile(rb"(?:\.|[\r\n])" + space + word + space + rb"[()#]")


def matched_triggers(data: bytes, rules: frozenset) -> set[str] | None:
    """The triggers present in `data` (None when none is: no rule can apply)."""
    present = set()
    for trigger in triggers(rules):
        if trigger not in data:
            continue
        name = trigger.decode()
        if name in METHOD_TRIGGERS and not _method_call_in_code(data, name):
            continue
        present.add(name)
    return present or None


def _method_call_in_code(data: bytes, name: str) -> bool:
    """A `.NAME(` that could be code: a dot on a line that starts with `#` is in a comment (or
    a string), one on a line that starts with `>>>` is in a doctest (no code line can start
    with `>>>`); either way it is no attribute access. Anything else counts."""
    pattern = _method_pattern(name)
    match = pattern.search(data)
    while match is not None:
        start = match.start()
        if data[start : start + 1] != b".":
            return True  # NAME first on its line
        line_start = max(data.rfind(b"\n", 0, start), data.rfind(b"\r", 0, start)) + 1
        before = data[line_start:start].lstrip(b" \t\f")
        if not before.startswith((b"#", b">>>")):
            return True
        # Search again from the next byte, not the match's end: a skipped match may cover the
        # newline that starts a real `NAME` line.
        match = pattern.search(data, start + 1)
    return False


def could_need_migration(data: bytes, rules: frozenset) -> bool:
    """From the bytes alone: could any selected rule apply? (Never parses.)"""
    return matched_triggers(data, rules) is not None


def needs_syntax_gate(present: set[str]) -> bool:
    """The ast stage knows the method triggers' and MIG910's conditions; any other trigger
    skips it."""
    return present <= METHOD_TRIGGERS | {HIDDEN_STEP_TRIGGER}


SKIP, ANALYSE, NOTES = "skip", "analyse", "notes"
# The analysis's only finding for a backward call that no loop can train (loops.py).
MIG905 = ("MIG905", "backward() outside a loop over a DataLoader; migrate this step by hand")


@dataclass
class Screening:
    verdict: str  # SKIP: nothing to change or report; ANALYSE: run it; NOTES: exactly `notes`
    notes: list = field(default_factory=list)


def could_train_or_report(text: str, present: frozenset = METHOD_TRIGGERS) -> bool:
    """From a walk of the tree: could the analysis find a training loop or report a backward
    call (or, with MIG910's trigger present, a training step in another module)?"""
    return screen(text, present).verdict != SKIP


def screen(text: str, present: frozenset = METHOD_TRIGGERS, tree: ast.Module | None = None):
    """The ast stage (see the module docstring), on `tree` (parsed from `text` if not given).
    Besides SKIP and ANALYSE it answers NOTES when the analysis could only report MIG905 notes
    and every note's conditions are decided here, as migrator.analysis.loops decides them: no
    training loop possible, no `Accelerator` in the file, no backward inside a method (a
    `self.fit()` call site is the analysis's to resolve); then a backward call gives a note
    unless its function is called by name, its receiver resolves to torch.autograd, a loop of
    its scope iterates a (wrapped) name, or its function reaches no optimizer `.step(...)`
    through calls by name. tests/bulk checks these notes equal the analysis's on every fixture
    and on torch's sources."""
    if tree is None:
        try:
            tree = _parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return Screening(ANALYSE)  # the pipeline reports why it cannot parse
    hidden_step = HIDDEN_STEP_TRIGGER in present
    facts = _CallFacts(callees=hidden_step)
    facts.visit(tree)
    if hidden_step and facts.could_hide_step():
        return Screening(ANALYSE)  # MIG910 may report a training step in another module
    if not facts.backward_sites or not facts.has_step:
        return Screening(SKIP)  # no training loop, and a note needs an optimizer step too
    if _training_possible(facts) or "Accelerator" in text:
        return Screening(ANALYSE)
    if any(site.scope.is_method for site in facts.backward_sites):
        return Screening(ANALYSE)
    noted = [
        site for site in facts.backward_sites
        if not (site.scope.kind == "function" and site.scope.name in facts.called_names)
        and not _resolves_to_autograd(site.node, facts.aliases)
        and not any(_is_batch_loop(loop, facts.aliases) for loop in site.loops)
        and facts.reaches_step(site.scope)
    ]  # fmt: skip
    return Screening(NOTES, _notes(text, noted)) if noted else Screening(SKIP)


def _parse(text: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def _training_possible(facts: _CallFacts) -> bool:
    """A loop could train only if something steps an optimizer and a loop reaches a backward."""
    if any(site.in_loop for site in facts.backward_sites):
        return True
    reaching = {site.scope.name for site in facts.backward_sites if site.scope.kind == "function"}
    grew = True
    while grew:
        grew = False
        for callee, caller, _ in facts.name_calls:
            if callee in reaching and caller.kind == "function" and caller.name not in reaching:
                reaching.add(caller.name)
                grew = True
    return any(in_loop and callee in reaching for callee, _, in_loop in facts.name_calls)


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _resolve(dotted: str, aliases: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    resolved = aliases.get(head, head)
    return f"{resolved}.{rest}" if rest else resolved


def _qualify(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """As ImportTable.qualify: a dotted name with its head resolved through the imports."""
    dotted = _dotted(node)
    return _resolve(dotted, aliases) if dotted is not None else None


def _is_batch_loop(loop: ast.stmt, aliases: dict[str, str]) -> bool:
    """As patterns.loader_base: a `for` over a name, maybe wrapped in enumerate/tqdm/iter."""
    from migrator.analysis.patterns import LOADER_WRAPPERS  # the analysis's own list

    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False  # while loops iterate nothing
    expr = loop.iter
    while isinstance(expr, ast.Call):
        if _qualify(expr.func, aliases) not in LOADER_WRAPPERS:
            return False
        arguments = sorted([*expr.args, *expr.keywords], key=lambda a: (a.lineno, a.col_offset))
        if not arguments:
            return False
        first = arguments[0]
        if isinstance(first, ast.keyword):
            if first.arg is not None:
                return False  # the first argument is a keyword: not a wrapped loader
            first = first.value  # `**kw`: its value, star aside
        elif isinstance(first, ast.Starred):
            first = first.value
        expr = first
    return (
        isinstance(expr, ast.Name)
        or (  # `self.loader` too, as patterns.name_of
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
        )
        or (isinstance(expr, ast.Constant) and (expr.value is None or isinstance(expr.value, bool)))
    )


def _resolves_to_autograd(call: ast.Call, aliases: dict[str, str]) -> bool:
    """Does the receiver resolve to torch.autograd, as the analysis resolves it? (Such calls
    are no backward sites.)"""
    return _qualify(call.func.value, aliases) in ("torch.autograd", "autograd")  # type: ignore[attr-defined]


def _notes(text: str, sites: list[_BackwardSite]) -> list:
    from migrator.findings import Finding

    lines = re.split(r"\r\n|\r|\n", text)
    notes = []
    for site in sites:
        line = lines[site.node.lineno - 1].encode("utf-8")
        column = len(line[: site.node.col_offset].decode("utf-8", errors="replace"))
        code, message = MIG905
        notes.append(Finding(code=code, message=message, level="note",
                             line=site.node.lineno, col=column + 1))  # fmt: skip
    return sorted(notes, key=lambda f: (f.line, f.col, f.code))


@dataclass(eq=False)
class _Scope:
    kind: str  # module | function | class, as the index has scopes
    name: str
    is_method: bool = False
    has_step: bool = False
    called: list = field(default_factory=list)  # names called as `name(...)`, in order


@dataclass
class _BackwardSite:
    node: ast.Call
    scope: _Scope
    in_loop: bool  # inside some loop, in any scope (an over-approximation)
    loops: tuple = ()  # the enclosing for/while statements of its own scope, as the index


class _CallFacts(ast.NodeVisitor):
    """Backward calls, `.step(...)` calls and calls by name, each with its innermost def scope
    (as the index sees scopes: module, function, class) and whether a loop encloses it."""

    def __init__(self, callees: bool = False) -> None:
        self.scope = _Scope("module", "<module>")
        self.loops = 0  # enclosing for/while statements, across scopes (an over-approximation)
        self.scope_loops: list[ast.stmt] = []  # the enclosing loops of the current scope
        self.backward_sites: list[_BackwardSite] = []
        self.aliases: dict[str, str] = {}  # local name -> qualified name, as ImportTable has it
        self.name_calls: list[tuple[str, _Scope, bool]] = []
        self.called_names: set[str] = set()
        self.functions: dict[str, _Scope] = {}  # first def of each name, as index.functions
        self.has_step = False
        self.relative: set[str] = set()  # names bound by relative imports
        # dotted names called, for MIG910's gate only (None: not collected)
        self.callees: set[str] | None = set() if callees else None

    def could_hide_step(self) -> bool:
        """MIG910's precondition, loosened: a loader is built (a callee whose qualified name
        ends like every one of patterns.LOADER_CLASSES) and a function imported from a
        module other than torch is called."""
        if not self.callees:
            return False
        heads = {callee.split(".")[0] for callee in self.callees}
        qualified = [_resolve(callee, self.aliases) for callee in self.callees]
        if not any(name.endswith(LOADER_SUFFIX) for name in qualified):
            return False
        return any(head in self.relative or self.aliases.get(head, "torch").split(".")[0]
                   != "torch" for head in heads)  # fmt: skip

    def reaches_step(self, scope: _Scope) -> bool:
        """As loops._calls_reachable: a `.step(...)` in the scope or in functions it calls by
        name (first definition of that name), transitively."""
        seen, queue = {id(scope)}, [scope]
        while queue:
            current = queue.pop()
            if current.has_step:
                return True
            for name in current.called:
                callee = self.functions.get(name)
                if callee is not None and id(callee) not in seen:
                    seen.add(id(callee))
                    queue.append(callee)
        return False

    def _scoped(self, node: ast.AST, kind: str) -> None:
        outer, outer_loops = self.scope, self.scope_loops
        scope = _Scope(kind, node.name, kind == "function" and outer.kind == "class")  # type: ignore[attr-defined]
        if kind == "function":
            self.functions.setdefault(scope.name, scope)
        self.scope, self.scope_loops = scope, []
        self.generic_visit(node)
        self.scope, self.scope_loops = outer, outer_loops

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, "function")

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, "class")

    def _loop(self, node: ast.AST) -> None:
        self.loops += 1
        self.scope_loops.append(node)  # type: ignore[arg-type]
        self.generic_visit(node)
        self.scope_loops.pop()
        self.loops -= 1

    visit_For = visit_AsyncFor = visit_While = _loop  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:  # `import torch.nn` binds `torch`
                head = alias.name.split(".")[0]
                self.aliases[head] = head

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if any(alias.name == "*" for alias in node.names):
            return  # as ImportTable: star imports are not resolved
        if node.level:  # nor relative ones, which it keeps apart
            self.relative.update(alias.asname or alias.name for alias in node.names)
            return
        for alias in node.names:
            local = alias.asname or alias.name
            self.aliases[local] = f"{node.module}.{alias.name}" if node.module else alias.name

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        in_loop = self.loops > 0
        if self.callees is not None:
            dotted = _dotted(func)
            if dotted is not None:
                self.callees.add(dotted)
        if isinstance(func, ast.Attribute):
            if func.attr == "backward":
                site = _BackwardSite(node, self.scope, in_loop, tuple(self.scope_loops))
                self.backward_sites.append(site)
            elif func.attr == "step":
                self.has_step = True
                self.scope.has_step = True
        elif isinstance(func, ast.Name):
            self.called_names.add(func.id)
            self.scope.called.append(func.id)
            self.name_calls.append((func.id, self.scope, in_loop))
        self.generic_visit(node)
