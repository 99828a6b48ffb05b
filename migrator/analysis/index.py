"""One syntactic pass over a module: scopes, blocks, statements, bindings, name uses, calls, loops.

No LibCST metadata providers: positions are statement paths (block + index), scopes are tracked
by hand, and "store vs load" is decided from the parent chain. Role inference (roles.py) reads
this index; nothing here knows about models or optimizers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrator.analysis.imports import ImportTable
from migrator.analysis.patterns import SELF, name_of

ScopeNode = cst.Module | cst.FunctionDef | cst.ClassDef
LoopNode = cst.For | cst.While


@dataclass(eq=False)
class Block:
    """A statement list: a scope body, or the body of a compound statement."""

    holder: cst.CSTNode  # Module, IndentedBlock or SimpleStatementSuite
    statements: list[cst.CSTNode]
    scope: Scope
    parent: Statement | None  # the compound statement that owns this block

    def __post_init__(self) -> None:
        self.positions = {id(node): i for i, node in enumerate(self.statements)}


@dataclass(eq=False)
class Statement:
    node: cst.CSTNode
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
    def iter(self) -> cst.BaseExpression | None:
        return self.node.iter if isinstance(self.node, cst.For) else None

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


@dataclass(eq=False)
class Binding:
    name: str
    kind: str  # assign | augassign | for | with | comp | param | import | def
    statement: Statement
    value: cst.BaseExpression | None = None  # the whole right-hand side
    element: cst.BaseExpression | None = None  # the matching element of a tuple RHS
    unpacked: bool = False  # bound by unpacking (`a, b = value`)
    loop: Loop | None = None
    small: cst.CSTNode | None = None  # the small statement that binds it (Assign, ...)


@dataclass(eq=False)
class Use:
    name: str
    node: cst.CSTNode  # a Name, or the `self.x` Attribute
    kind: str  # iter | call | arg | attr | subscript | other
    statement: Statement
    loop: Loop | None
    call: cst.Call | None = None  # for arg/attr-call uses: the call
    attr: str | None = None  # for attr uses
    callee: str | None = None  # for arg uses: the callee's qualified name


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    statement: Statement
    scope: Scope
    loop: Loop | None
    callee: str | None  # qualified name of the called expression, if it is a dotted name
    receiver: cst.BaseExpression | None = None  # for method calls `recv.method(...)`
    method: str | None = None
    small: cst.CSTNode | None = None  # the enclosing small statement


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

    def descendants(self) -> list[Scope]:
        found = []
        for child in self.children:
            found.append(child)
            found.extend(child.descendants())
        return found


class ModuleIndex:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.imports = ImportTable()
        self.scopes: list[Scope] = []
        self.functions: dict[str, Scope] = {}  # module-level and nested functions by name
        self.statement_of: dict[int, Statement] = {}
        self.loop_of: dict[int, Loop] = {}
        self.scope_of_node: dict[int, Scope] = {}
        module.visit(_Indexer(self))

    @property
    def module_scope(self) -> Scope:
        return self.scopes[0]

    def calls(self) -> list[CallSite]:
        return [call for scope in self.scopes for call in scope.calls]


def _param_names(node: cst.FunctionDef) -> list[str]:
    params = node.params
    ordered = [*params.posonly_params, *params.params]
    names = [p.name.value for p in ordered]
    if isinstance(params.star_arg, cst.Param):
        names.append("*" + params.star_arg.name.value)
    names.extend(p.name.value for p in params.kwonly_params)
    if params.star_kwarg is not None:
        names.append("**" + params.star_kwarg.name.value)
    return names


def _target_names(node: cst.BaseExpression) -> list[tuple[str, int | None]]:
    """Names bound by an assignment target (`self.x` included), with their position in a flat
    tuple target."""
    if name_of(node) is not None:
        return [(name_of(node), None)]
    if isinstance(node, (cst.Tuple, cst.List)):
        names = []
        for i, element in enumerate(node.elements):
            value = element.value
            if name_of(value) is not None:
                names.append((name_of(value), i))
            else:
                names.extend((name, None) for name, _ in _target_names(value))
        return names
    if isinstance(node, cst.StarredElement):
        return _target_names(node.value)
    return []


class _Indexer(cst.CSTVisitor):
    def __init__(self, index: ModuleIndex) -> None:
        super().__init__()
        self.index = index
        self.parents: list[cst.CSTNode] = []
        self.scopes: list[Scope] = []
        self.blocks: list[Block] = []
        self.statements: list[Statement] = []
        self.loops: list[Loop | None] = []
        self.smalls: list[cst.CSTNode] = []

    # -- structure -------------------------------------------------------------------------
    def _open_scope(self, kind: str, node: ScopeNode, name: str) -> Scope:
        parent = self.scopes[-1] if self.scopes else None
        scope = Scope(kind=kind, node=node, name=name, parent=parent)
        if parent is not None:
            parent.children.append(scope)
        self.index.scopes.append(scope)
        self.index.scope_of_node[id(node)] = scope
        self.scopes.append(scope)
        self.loops.append(None)  # loops do not cross scope boundaries
        return scope

    def _open_block(self, holder: cst.CSTNode, statements) -> None:
        parent = self.statements[-1] if self.statements else None
        scope = self.scopes[-1]
        if parent is not None and parent.block.scope is not scope:
            parent = None  # a scope's own body has no parent statement
        block = Block(holder=holder, statements=list(statements), scope=scope, parent=parent)
        if scope.body is None:
            scope.body = block
        self.blocks.append(block)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.parents.append(node)
        block = self.blocks[-1] if self.blocks else None
        if (
            block is not None
            and id(node) in block.positions
            and node is block.statements[block.positions[id(node)]]
        ):
            statement = Statement(node=node, block=block, index=block.positions[id(node)])
            self.statements.append(statement)
            self.index.statement_of[id(node)] = statement
        if isinstance(node, cst.BaseSmallStatement):
            self.smalls.append(node)
        if isinstance(node, cst.Module):
            self._open_scope("module", node, "<module>")
            self._open_block(node, node.body)
        elif isinstance(node, cst.FunctionDef):
            self._bind(node.name.value, "def", value=None)
            scope = self._open_scope("function", node, node.name.value)
            scope.params = _param_names(node)
            self.index.functions.setdefault(node.name.value, scope)
        elif isinstance(node, cst.ClassDef):
            self._bind(node.name.value, "def", value=None)
            self._open_scope("class", node, node.name.value)
        elif isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            self._open_block(node, node.body)
        elif isinstance(node, cst.SimpleStatementLine):
            pass
        elif isinstance(node, (cst.For, cst.While)):
            self._open_loop(node)
        elif isinstance(node, cst.Param):
            self._bind(node.name.value, "param", value=node.default)
        elif isinstance(node, cst.Import):
            self.index.imports.add_import(node)
        elif isinstance(node, cst.ImportFrom):
            self.index.imports.add_import_from(node)
        elif isinstance(node, cst.Global):
            self.scopes[-1].declared_global.update(n.name.value for n in node.names)
        elif isinstance(node, cst.Assign):
            self._bind_assign(node)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            kind = "augassign" if isinstance(node, cst.AugAssign) else "assign"
            for name, _ in _target_names(node.target):
                self._bind(name, kind, value=node.value)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            for name, _ in _target_names(node.asname.name):
                self._bind(name, "with", value=node.item)
        elif isinstance(node, cst.Call):
            self._record_call(node)
        elif isinstance(node, cst.Name):
            self._record_name(node)
        elif (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == SELF
        ):
            self._record_name(node, name_of(node))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        node = self.parents.pop()
        if isinstance(node, (cst.Module, cst.FunctionDef, cst.ClassDef)):
            self.scopes.pop()
            self.loops.pop()
        if isinstance(node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite)):
            self.blocks.pop()
        if isinstance(node, (cst.For, cst.While)):
            self.loops.pop()
        if self.statements and self.statements[-1].node is node:
            self.statements.pop()
        if self.smalls and self.smalls[-1] is node:
            self.smalls.pop()

    # -- events ----------------------------------------------------------------------------
    def _open_loop(self, node: LoopNode) -> None:
        scope = self.scopes[-1]
        loop = Loop(node=node, statement=self.statements[-1], scope=scope, parent=self.loops[-1])
        if isinstance(node, cst.For):
            loop.target_names = [name for name, _ in _target_names(node.target)]
            for name in loop.target_names:
                self._bind(name, "for", value=node.iter, loop=loop)
        scope.loops.append(loop)
        self.index.loop_of[id(node)] = loop
        self.loops.append(loop)

    def _bind(self, name, kind, value=None, element=None, unpacked=False, loop=None) -> None:
        scope = self.scopes[-1] if self.scopes else None
        if scope is None:
            return
        statement = self.statements[-1] if self.statements else None
        if statement is None:
            return
        binding = Binding(
            name=name,
            kind=kind,
            statement=statement,
            value=value,
            element=element,
            unpacked=unpacked,
            loop=loop if loop is not None else self.loops[-1],
            small=self.smalls[-1] if self.smalls else None,
        )
        scope.bindings.setdefault(name, []).append(binding)

    def _bind_assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            names = _target_names(target.target)
            unpacked = name_of(target.target) is None
            elements = None
            if unpacked and isinstance(node.value, (cst.Tuple, cst.List)):
                elements = [e.value for e in node.value.elements]
            for name, position in names:
                element = None
                if elements is not None and position is not None and position < len(elements):
                    element = elements[position]
                self._bind(name, "assign", value=node.value, element=element, unpacked=unpacked)

    def _record_call(self, node: cst.Call) -> None:
        scope = self.scopes[-1]
        receiver = method = None
        if isinstance(node.func, cst.Attribute):
            receiver, method = node.func.value, node.func.attr.value
        site = CallSite(
            node=node,
            statement=self.statements[-1],
            scope=scope,
            loop=self.loops[-1],
            callee=self.index.imports.qualify(node.func),
            receiver=receiver,
            method=method,
            small=self.smalls[-1] if self.smalls else None,
        )
        scope.calls.append(site)
        loop = self.loops[-1]
        while loop is not None:
            loop.calls.append(site)
            loop = loop.parent

    def _record_name(self, node: cst.CSTNode, name: str | None = None) -> None:
        kind, call, attr, callee = self._classify(node)
        if kind is None:
            return
        scope = self.scopes[-1]
        use = Use(
            name=name or node.value,
            node=node,
            kind=kind,
            statement=self.statements[-1],
            loop=self.loops[-1],
            call=call,
            attr=attr,
            callee=callee,
        )
        scope.uses.setdefault(use.name, []).append(use)

    def _classify(self, node: cst.CSTNode):
        """(kind, call, attr, callee) for a Name in load context; kind None for non-loads."""
        parents = self.parents
        child: cst.CSTNode = node
        for depth in range(len(parents) - 2, -1, -1):
            parent = parents[depth]
            if isinstance(parent, cst.Attribute):
                if child is parent.attr:
                    return None, None, None, None
                grand = parents[depth - 1] if depth > 0 else None
                call = grand if isinstance(grand, cst.Call) and grand.func is parent else None
                return "attr", call, parent.attr.value, None
            if isinstance(parent, cst.Subscript):
                return "subscript", None, None, None
            if isinstance(parent, (cst.Tuple, cst.List, cst.StarredElement, cst.Element)):
                child = parent
                continue
            if isinstance(parent, cst.AssignTarget) or (
                isinstance(parent, (cst.AnnAssign,)) and child is parent.target
            ):
                return None, None, None, None
            if isinstance(parent, (cst.For, cst.CompFor)) and child is parent.target:
                return None, None, None, None
            if (
                isinstance(parent, cst.AsName)
                or isinstance(parent, cst.AugAssign)
                and (child is parent.target)
            ):
                return None, None, None, None
            if isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias)):
                return None, None, None, None
            if isinstance(parent, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)):
                return None, None, None, None
            if isinstance(parent, cst.Arg):
                if child is parent.keyword:
                    return None, None, None, None
                call = parents[depth - 1]
                if isinstance(call, cst.Call):
                    return "arg", call, None, self.index.imports.qualify(call.func)
                return "other", None, None, None
            if isinstance(parent, cst.Call) and child is parent.func:
                return "call", parent, None, None
            if isinstance(parent, cst.For) and child is parent.iter:
                return "iter", None, None, None
            return "other", None, None, None
        return "other", None, None, None
