"""The one walk that builds a ModuleIndex (index.py) from an `ast.Module`.

An explicit recursive walk in source order (decorators and parameters before the body, a
conditional expression's value before its test), with the syntactic slot each expression
sits in passed down instead of a parent chain: a name directly in an assignment target is a
binding, under an attribute it is an `attr` use, as a call's argument an `arg` use, and so on
(tuples, lists, sets and starred elements pass their slot through). Calls and uses inside a
`for` header or a function's decorators and defaults belong to the loop / function, as they
always have.
"""

from __future__ import annotations

import ast

from migrator.analysis.syntax.expressions import EXCLUDED, ITER, OTHER, STORE, ExpressionWalk
from migrator.analysis.syntax.nodes import (
    COMPOUND,
    Binding,
    Block,
    Line,
    Loop,
    Scope,
    Statement,
    param_names,
    target_names,
)
from migrator.analysis.syntax.views import name_of
from migrator.layout import is_suite
from migrator.source import Source


class Indexer(ExpressionWalk):
    def __init__(self, index) -> None:  # a ModuleIndex being filled
        self.index = index
        self.source = index.source
        self.imports = index.imports
        self.scope: Scope | None = None
        self.loop: Loop | None = None
        self.statement: Statement | None = None
        self.small: ast.stmt | None = None

    def run(self) -> None:
        tree = self.index.tree
        self._open_scope("module", tree, "<module>")
        self._block(tree.body, "module", tree, "body")
        self.imports.complete()

    # -- structure -------------------------------------------------------------------------
    def _open_scope(self, kind: str, node, name: str) -> Scope:
        parent = self.scope
        scope = Scope(kind=kind, node=node, name=name, parent=parent)
        if parent is not None:
            parent.children.append(scope)
        self.index.scopes.append(scope)
        self.index.scope_of_node[id(node)] = scope
        self.scope = scope
        self.loop = None  # loops do not cross scope boundaries
        return scope

    def _block(self, statements: list[ast.stmt], kind: str, owner: ast.AST, field: str) -> Block:
        scope = self.scope
        parent = self.statement
        if parent is not None and parent.block.scope is not scope:
            parent = None  # a scope's own body has no parent statement
        if kind == "body" and is_suite(self.source, statements[0]):
            kind = "suite"
        entries = (
            list(statements)
            if kind == "suite"
            else group_statements(self.source, statements, self.index.small_line)
        )
        block = Block(kind=kind, statements=entries, scope=scope, parent=parent, owner=owner,
                      field=field)  # fmt: skip
        if scope.body is None:
            scope.body = block
        self.index.blocks[(id(owner), field)] = block
        saved = self.statement
        for position, entry in enumerate(entries):
            statement = Statement(node=entry, block=block, index=position)
            self.index.statement_of[id(entry)] = statement
            self.statement = statement
            if isinstance(entry, Line):
                for small in entry.body:
                    self._small(small)
            elif kind == "suite":
                self._small(entry)
            else:
                self._compound(entry)
        self.statement = saved
        return block

    # -- statements ------------------------------------------------------------------------
    def _compound(self, node: ast.stmt) -> None:
        kind = type(node)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            self._function(node)
        elif kind is ast.ClassDef:
            self._class(node)
        elif kind in (ast.For, ast.AsyncFor, ast.While):
            self._loop(node)
        elif kind is ast.If:
            self._if(node)
        elif kind in (ast.With, ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    for name, _ in target_names(item.optional_vars):
                        self._bind(name, "with", value=item.context_expr)
                self._expr(item.context_expr, OTHER)
                if item.optional_vars is not None:
                    self._expr(item.optional_vars, STORE)
            self._block(node.body, "body", node, "body")
        elif kind is ast.Match:
            self._expr(node.subject, OTHER)
            for case in node.cases:
                self._generic(case.pattern)
                if case.guard is not None:
                    self._expr(case.guard, OTHER)
                self._block(case.body, "body", case, "body")
        else:  # Try, TryStar
            self._block(node.body, "body", node, "body")
            for handler in node.handlers:
                if handler.type is not None:
                    self._expr(handler.type, OTHER)
                self._block(handler.body, "body", handler, "body")
            if node.orelse:
                self._block(node.orelse, "body", node, "orelse")
            if node.finalbody:
                self._block(node.finalbody, "body", node, "finalbody")

    def _function(self, node) -> None:
        self._bind(node.name, "def")
        saved_scope, saved_loop = self.scope, self.loop
        scope = self._open_scope("function", node, node.name)
        scope.params = param_names(node)
        self.index.functions.setdefault(node.name, scope)
        for decorator in node.decorator_list:
            self._expr(decorator, OTHER)
        self._arguments(node.args)
        if node.returns is not None:
            self._expr(node.returns, OTHER)
        self._block(node.body, "body", node, "body")
        self.scope, self.loop = saved_scope, saved_loop

    def _class(self, node: ast.ClassDef) -> None:
        self._bind(node.name, "def")
        saved_scope, saved_loop = self.scope, self.loop
        self._open_scope("class", node, node.name)
        for decorator in node.decorator_list:
            self._expr(decorator, OTHER)
        for base in node.bases:
            self._expr(base, OTHER)
        for item in node.keywords:
            self._expr(item.value, OTHER)
        self._block(node.body, "body", node, "body")
        self.scope, self.loop = saved_scope, saved_loop

    def _arguments(self, arguments: ast.arguments) -> None:
        ordered = [*arguments.posonlyargs, *arguments.args]
        defaults = [None] * (len(ordered) - len(arguments.defaults)) + list(arguments.defaults)
        for arg, default in zip(ordered, defaults):
            self._param(arg, default)
        if arguments.vararg is not None:
            self._param(arguments.vararg, None)
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            self._param(arg, default)
        if arguments.kwarg is not None:
            self._param(arguments.kwarg, None)

    def _param(self, arg: ast.arg, default: ast.expr | None) -> None:
        self._bind(arg.arg, "param", value=default)
        if arg.annotation is not None:
            self._expr(arg.annotation, OTHER)
        if default is not None:
            self._expr(default, EXCLUDED)

    def _loop(self, node) -> None:
        scope = self.scope
        loop = Loop(node=node, statement=self.statement, scope=scope, parent=self.loop)
        is_for = not isinstance(node, ast.While)
        if is_for:
            loop.target_names = [name for name, _ in target_names(node.target)]
            for name in loop.target_names:
                self._bind(name, "for", value=node.iter, loop=loop)
        scope.loops.append(loop)
        self.index.loop_of[id(node)] = loop
        saved = self.loop
        self.loop = loop
        if is_for:
            self._expr(node.target, STORE)
            self._expr(node.iter, ITER)
        else:
            self._expr(node.test, OTHER)
        self._block(node.body, "body", node, "body")
        if node.orelse:
            self._block(node.orelse, "body", node, "orelse")
        self.loop = saved

    def _if(self, node: ast.If) -> None:
        self._expr(node.test, OTHER)
        self._block(node.body, "body", node, "body")
        orelse = node.orelse
        if not orelse:
            return
        if len(orelse) == 1 and isinstance(orelse[0], ast.If) and self.is_elif(orelse[0]):
            self._if(orelse[0])  # an elif: part of this statement, as LibCST's If.orelse
        else:
            self._block(orelse, "body", node, "orelse")

    def is_elif(self, node: ast.If) -> bool:
        return self.source.text.startswith("elif", self.source.start(node))

    def _small(self, node: ast.stmt) -> None:
        self.small = node
        kind = type(node)
        if kind is ast.Expr:
            self._expr(node.value, OTHER)
        elif kind is ast.Assign:
            self._bind_assign(node)
            for target in node.targets:
                self._expr(target, STORE)
            self._expr(node.value, OTHER)
        elif kind is ast.AugAssign:
            for name, _ in target_names(node.target):
                self._bind(name, "augassign", value=node.value)
            self._expr(node.target, STORE)
            self._expr(node.value, OTHER)
        elif kind is ast.AnnAssign:
            for name, _ in target_names(node.target):
                self._bind(name, "assign", value=node.value)
            self._expr(node.target, STORE)
            self._expr(node.annotation, OTHER)
            if node.value is not None:
                self._expr(node.value, OTHER)
        elif kind is ast.Import:
            self.imports.add_import(node)
            for alias in node.names:
                self._module_head(alias.name, alias)
        elif kind is ast.ImportFrom:
            self.imports.add_import_from(node)
            if node.module:
                self._module_head(node.module, node)
        elif kind is ast.Global:
            self.scope.declared_global.update(node.names)
        elif kind is ast.Delete:
            for target in node.targets:
                self._expr(target, OTHER)
        elif kind is ast.Return:
            if node.value is not None:
                self._expr(node.value, OTHER)
        else:  # Raise, Assert, Pass, Break, Continue, Nonlocal
            self._generic(node)
        self.small = None

    def _module_head(self, dotted: str, node: ast.AST) -> None:
        """`import torch.nn`: LibCST saw `torch` as a name under an attribute (an attr use)."""
        head, _, rest = dotted.partition(".")
        if rest:
            self._use(head, node, ("attr", None, rest.split(".")[0], None))

    def _bind(self, name, kind, value=None, element=None, unpacked=False, loop=None) -> None:
        statement = self.statement
        if statement is None:
            return
        binding = Binding(
            name=name,
            kind=kind,
            statement=statement,
            value=value,
            element=element,
            unpacked=unpacked,
            loop=loop if loop is not None else self.loop,
            small=self.small,
        )
        self.scope.bindings.setdefault(name, []).append(binding)

    def _bind_assign(self, node: ast.Assign) -> None:
        value = node.value
        for target in node.targets:
            names = target_names(target)
            unpacked = name_of(target) is None
            elements = None
            if unpacked and isinstance(value, (ast.Tuple, ast.List)):
                elements = [e.value if isinstance(e, ast.Starred) else e for e in value.elts]
            for name, position in names:
                element = None
                if elements is not None and position is not None and position < len(elements):
                    element = elements[position]
                self._bind(name, "assign", value=value, element=element, unpacked=unpacked)


def group_statements(source: Source, statements: list[ast.stmt], small_line=None) -> list:
    """Statements grouped as written: simple statements sharing a line form one Line."""
    entries: list = []
    current: Line | None = None
    for node in statements:
        if isinstance(node, COMPOUND):
            entries.append(node)
            current = None
            continue
        if current is not None and _same_line(source, current.body[-1], node):
            current.body.append(node)
            continue
        current = Line([node])
        entries.append(current)
    if small_line is not None:
        for entry in entries:
            if isinstance(entry, Line):
                for small in entry.body:
                    small_line[id(small)] = entry
    return entries


def _same_line(source: Source, previous: ast.stmt, node: ast.stmt) -> bool:
    if node.lineno == previous.end_lineno:
        return True
    between = source.text[source.end(previous) : source.start(node)]
    if ";" not in between:
        return False
    cleaned = between.replace("\\\r\n", "").replace("\\\n", "").replace("\\\r", "")
    return "\n" not in cleaned and "\r" not in cleaned
