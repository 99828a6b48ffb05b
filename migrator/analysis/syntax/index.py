"""One syntactic pass over a module: scopes, blocks, statements, bindings, name uses, calls, loops.

Built from CPython's `ast` in a single walk (no metadata providers): positions are statement
paths (block + index), scopes are tracked by hand, and "store vs load" is decided from the
syntactic slot a name sits in. A block's statements are *lines*: simple statements that share
a logical line (`a = 1; b = 2`) form one `Line`, as a reader sees them, and edits address them
that way. Role inference (roles.py) reads this index; nothing here knows about models or
optimizers.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.syntax.imports import ImportTable, dotted_name
from migrator.analysis.syntax.views import call_args, name_of
from migrator.source import Source

ScopeNode = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
LoopNode = ast.For | ast.AsyncFor | ast.While
COMPOUND = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor,
    ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())  # fmt: skip


@dataclass(eq=False)
class Line:
    """Simple statements on one logical line (`x = 1; y = 2`): one statement of its block."""

    body: list[ast.stmt]

    @property
    def lineno(self) -> int:
        return self.body[0].lineno

    @property
    def col_offset(self) -> int:
        return self.body[0].col_offset

    @property
    def end_lineno(self) -> int:
        return self.body[-1].end_lineno

    @property
    def end_col_offset(self) -> int:
        return self.body[-1].end_col_offset


@dataclass(eq=False)
class Block:
    """A statement list: a scope body, or the body of a compound statement.

    `kind` is "module", "body" (an indented block) or "suite" (`if x: a; b`, whose statements
    are the simple statements themselves). `owner` is the compound statement (or elif) whose
    field `field` holds it.
    """

    kind: str
    statements: list
    scope: Scope
    parent: Statement | None  # the compound statement that owns this block
    owner: ast.AST | None = None
    field: str = "body"

    def __post_init__(self) -> None:
        self.positions = {id(node): i for i, node in enumerate(self.statements)}

    @property
    def holder(self) -> Block:
        return self


@dataclass(eq=False, slots=True)
class Statement:
    node: ast.AST  # a Line, a compound statement, or a simple statement of a suite
    block: Block
    index: int

    def chain(self) -> list[Statement]:
        """This statement and its enclosing statements, outermost first, within its scope."""
        chain = [self]
        while chain[0].block.parent is not None:
            chain.insert(0, chain[0].block.parent)
        return chain

    def ancestor_in(self, block: Block) -> Statement | None:
        """The statement of `block` that contains this one (itself if it is in `block`)."""
        for statement in self.chain():
            if statement.block is block:
                return statement
        return None


@dataclass(eq=False)
class Loop:
    node: LoopNode
    statement: Statement
    scope: Scope
    parent: Loop | None
    target_names: list[str] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)  # calls anywhere inside (this scope)

    @property
    def iter(self) -> ast.expr | None:
        return self.node.iter if isinstance(self.node, (ast.For, ast.AsyncFor)) else None

    def ancestors(self) -> list[Loop]:
        loops, loop = [], self.parent
        while loop is not None:
            loops.append(loop)
            loop = loop.parent
        return loops

    def contains(self, other: Loop | None) -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False


@dataclass(eq=False, slots=True)
class Binding:
    name: str
    kind: str  # assign | augassign | for | with | param | def
    statement: Statement
    value: ast.expr | None = None  # the whole right-hand side
    element: ast.expr | None = None  # the matching element of a tuple RHS
    unpacked: bool = False  # bound by unpacking (`a, b = value`)
    loop: Loop | None = None
    small: ast.stmt | None = None  # the simple statement that binds it (Assign, ...)


@dataclass(eq=False, slots=True)
class Use:
    name: str
    node: ast.AST  # a Name, or the `self.x` Attribute
    kind: str  # iter | call | arg | attr | subscript | other
    statement: Statement
    loop: Loop | None
    call: ast.Call | None = None  # for arg/attr-call uses: the call
    attr: str | None = None  # for attr uses
    callee: str | None = None  # for arg uses: the callee's qualified name


@dataclass(eq=False, slots=True)
class CallSite:
    node: ast.Call
    statement: Statement
    scope: Scope
    loop: Loop | None
    callee: str | None  # qualified name of the called expression, if it is a dotted name
    receiver: ast.expr | None = None  # for method calls `recv.method(...)`
    method: str | None = None
    small: ast.stmt | None = None  # the enclosing simple statement


@dataclass(eq=False)
class Scope:
    kind: str  # module | function | class
    node: ScopeNode
    name: str
    parent: Scope | None
    params: list[str] = field(default_factory=list)
    body: Block | None = None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    uses: dict[str, list[Use]] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    children: list[Scope] = field(default_factory=list)
    declared_global: set[str] = field(default_factory=set)

    def assigns(self, name: str) -> list[Binding]:
        return [b for b in self.bindings.get(name, []) if b.kind != "param"]

    def is_local(self, name: str) -> bool:
        return name in self.bindings and name not in self.declared_global

    def within(self, outer: Scope) -> bool:
        """Is this scope `outer` or nested in it?"""
        scope: Scope | None = self
        while scope is not None:
            if scope is outer:
                return True
            scope = scope.parent
        return False

    def descendants(self) -> list[Scope]:
        found = []
        for child in self.children:
            found.append(child)
            found.extend(child.descendants())
        return found


class ModuleIndex:
    def __init__(self, tree: ast.Module, source: Source) -> None:
        self.tree = tree
        self.source = source
        self.imports = ImportTable()
        self.scopes: list[Scope] = []
        self.functions: dict[str, Scope] = {}  # module-level and nested functions by name
        self.statement_of: dict[int, Statement] = {}
        self.loop_of: dict[int, Loop] = {}
        self.scope_of_node: dict[int, Scope] = {}
        self.blocks: dict[tuple[int, str], Block] = {}  # (id(owner), field) -> block
        self.small_line: dict[int, Line] = {}  # id of a simple statement -> its Line
        self._calls: list[CallSite] | None = None
        self._calls_by_name: dict[str, list[CallSite]] | None = None
        from migrator.analysis.syntax.indexer import Indexer

        Indexer(self).run()
        self.aliases: dict[str, str] = {}

    def add_aliases(self, aliases: dict[str, str]) -> None:
        """Other names a call may use for a function or class of this module: in a program
        joined into one module (`migrator/program.py`), `g` for `from engine import
        train_one_epoch as g` and `engine.train_one_epoch` for `import engine`."""
        self.aliases.update(aliases)
        for alias, name in aliases.items():
            if name in self.functions and alias not in self.functions:
                self.functions[alias] = self.functions[name]
        self._calls_by_name = None

    def statement_of_small(self, small: ast.stmt) -> Statement | None:
        """The Statement of the line that holds the simple statement `small`."""
        line = self.small_line.get(id(small))
        return self.statement_of.get(id(line)) if line is not None else None

    @property
    def module_scope(self) -> Scope:
        return self.scopes[0]

    def calls(self) -> list[CallSite]:
        if self._calls is None:
            self._calls = [call for scope in self.scopes for call in scope.calls]
        return self._calls

    def calls_named(self, name: str) -> list[CallSite]:
        """The calls of `name(...)` (or `self.name(...)` for "self.name"), in index order."""
        if self._calls_by_name is None:
            by_name: dict[str, list[CallSite]] = {}
            for site in self.calls():
                called = name_of(site.node.func)
                if called is not None:
                    by_name.setdefault(called, []).append(site)
                aliased = self.aliases.get(dotted_name(site.node.func) or "")
                if aliased is not None:
                    by_name.setdefault(aliased, []).append(site)
            self._calls_by_name = by_name
        return self._calls_by_name.get(name, [])

    def block(self, owner: ast.AST, field_name: str = "body") -> Block | None:
        return self.blocks.get((id(owner), field_name))


def param_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    arguments = node.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    if arguments.vararg is not None:
        names.append("*" + arguments.vararg.arg)
    names.extend(a.arg for a in arguments.kwonlyargs)
    if arguments.kwarg is not None:
        names.append("**" + arguments.kwarg.arg)
    return names


def target_names(node: ast.expr) -> list[tuple[str, int | None]]:
    """Names bound by an assignment target (`self.x` included), with their position in a flat
    tuple target."""
    name = name_of(node)
    if name is not None:
        return [(name, None)]
    if isinstance(node, (ast.Tuple, ast.List)):
        names = []
        for i, element in enumerate(node.elts):
            value = element.value if isinstance(element, ast.Starred) else element
            name = name_of(value)
            if name is not None:
                names.append((name, i))
            else:
                names.extend((found, None) for found, _ in target_names(value))
        return names
    if isinstance(node, ast.Starred):
        return target_names(node.value)
    return []


__all__ = [
    "COMPOUND", "Binding", "Block", "CallSite", "Line", "Loop", "ModuleIndex", "Scope",
    "Statement", "Use", "call_args", "param_names", "target_names",
]  # fmt: skip


def reaching_binding(bindings: list[Binding], at: Statement | None) -> Binding | None:
    """The binding of `at`'s block, before `at`, with no other binding between them: the one
    whose value `at` reads."""
    if at is None:
        return None
    block = at.block
    before = [(b.statement.ancestor_in(block), b) for b in bindings]
    before = [(s.index, b) for s, b in before if s is not None and s.index < at.index]
    if not before:
        return None
    index, binding = max(before, key=lambda pair: pair[0])
    direct = binding.statement.block is block
    alone = sum(1 for i, _ in before if i == index) == 1
    return binding if direct and alone else None
