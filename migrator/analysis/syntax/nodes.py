"""The nodes of the syntactic index (index.py): lines, blocks, statements, loops, bindings,
name uses, call sites and scopes, and the names an assignment target or a parameter list
binds. Plain data; the walk that fills them is indexer.py."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.syntax.views import name_of

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
