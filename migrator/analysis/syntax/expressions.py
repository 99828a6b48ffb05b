"""The expression half of the index walk (indexer.py): uses and call sites.

Each expression is walked with the syntactic slot it sits in (kind, call, attr, callee): a
name directly in an assignment target is a binding and records no use, under an attribute it
is an `attr` use, as a call's argument an `arg` use; tuples, lists, sets and starred elements
pass their slot through. Every call becomes a CallSite of its scope and of each enclosing loop.
A mixin of `Indexer`, which holds the scope, loop, statement and imports being walked.
"""

from __future__ import annotations

import ast

from migrator.analysis.syntax.nodes import CallSite, Use
from migrator.analysis.syntax.views import SELF, call_args

# Slots: (kind, call, attr, callee). STORE and EXCLUDED record no use.
STORE = ("store", None, None, None)
EXCLUDED = ("excluded", None, None, None)  # a parameter's default: LibCST-era index skipped it
OTHER = ("other", None, None, None)
ITER = ("iter", None, None, None)
SUBSCRIPT = ("subscript", None, None, None)
_SILENT = (STORE, EXCLUDED)
_PASS_THROUGH = (ast.Tuple, ast.List, ast.Set)


class ExpressionWalk:
    def _expr(self, node: ast.AST, slot: tuple) -> None:
        kind = type(node)
        if kind is ast.Name:
            if slot not in _SILENT:
                self._use(node.id, node, slot)
        elif kind is ast.Constant:
            return
        elif kind is ast.Attribute:
            value = node.value
            if slot not in _SILENT and type(value) is ast.Name and value.id == SELF:
                self._use(f"{SELF}.{node.attr}", node, slot)
            call = slot[1] if slot[0] == "call" else None
            self._expr(value, ("attr", call, node.attr, None))
        elif kind is ast.Call:
            self._call(node)
        elif kind in _PASS_THROUGH:
            for element in node.elts:
                self._expr(element, slot)
        elif kind is ast.Starred:
            self._expr(node.value, slot)
        elif kind is ast.Subscript:
            self._expr(node.value, SUBSCRIPT)
            self._expr(node.slice, OTHER)
        elif kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp):
            self._expr(node.elt, OTHER)
            self._comprehensions(node.generators)
        elif kind is ast.DictComp:
            self._expr(node.key, OTHER)
            self._expr(node.value, OTHER)
            self._comprehensions(node.generators)
        elif kind is ast.Lambda:
            self._arguments(node.args)
            self._expr(node.body, OTHER)
        elif kind is ast.NamedExpr:
            self._expr(node.target, OTHER)  # the LibCST-era index counted it as a use
            self._expr(node.value, OTHER)
        elif kind is ast.IfExp:
            self._expr(node.body, OTHER)
            self._expr(node.test, OTHER)
            self._expr(node.orelse, OTHER)
        elif kind is ast.Dict:
            for key, value in zip(node.keys, node.values):
                if key is not None:
                    self._expr(key, OTHER)
                self._expr(value, OTHER)
        elif kind is ast.BinOp:  # the common operators, without the generic field walk
            self._expr(node.left, OTHER)
            self._expr(node.right, OTHER)
        elif kind is ast.Compare:
            self._expr(node.left, OTHER)
            for comparator in node.comparators:
                self._expr(comparator, OTHER)
        elif kind is ast.BoolOp:
            for value in node.values:
                self._expr(value, OTHER)
        elif kind is ast.UnaryOp:
            self._expr(node.operand, OTHER)
        else:
            self._generic(node)

    def _generic(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._expr(child, OTHER)
            else:
                self._generic(child)

    def _comprehensions(self, generators: list[ast.comprehension]) -> None:
        for generator in generators:
            self._expr(generator.target, STORE)
            self._expr(generator.iter, OTHER)
            for condition in generator.ifs:
                self._expr(condition, OTHER)

    def _call(self, node: ast.Call) -> None:
        scope = self.scope
        func = node.func
        receiver = method = None
        if type(func) is ast.Attribute:
            receiver, method = func.value, func.attr
        callee = self.imports.qualify(func)
        site = CallSite(node=node, statement=self.statement, scope=scope, loop=self.loop,
                        callee=callee, receiver=receiver, method=method,
                        small=self.small)  # fmt: skip
        scope.calls.append(site)
        loop = self.loop
        while loop is not None:
            loop.calls.append(site)
            loop = loop.parent
        self._expr(func, ("call", node, None, None))
        slot = ("arg", node, None, callee)
        if node.keywords and node.args and isinstance(node.args[-1], ast.Starred):
            for arg in call_args(node):
                self._expr(arg.value, slot)
            return
        for arg in node.args:
            self._expr(arg, slot)
        for item in node.keywords:
            self._expr(item.value, slot)

    def _use(self, name: str, node: ast.AST, slot: tuple) -> None:
        kind, call, attr, callee = slot
        if kind == "call" or kind == "other" or kind == "iter" or kind == "subscript":
            use = Use(name=name, node=node, kind=kind, statement=self.statement, loop=self.loop,
                      call=call if kind == "call" else None)  # fmt: skip
        elif kind == "attr":
            use = Use(name=name, node=node, kind="attr", statement=self.statement,
                      loop=self.loop, call=call, attr=attr)  # fmt: skip
        else:  # arg
            use = Use(name=name, node=node, kind="arg", statement=self.statement,
                      loop=self.loop, call=call, callee=callee)  # fmt: skip
        self.scope.uses.setdefault(name, []).append(use)
