"""Reading the value a name of the script holds, for device_requests.py: where it is assigned
(its scope's statements in order, `if` branches merged by their test, a `global` written by
one function), what every call passes for a parameter, and how the code that creates the
Accelerator can read an expression (`args.no_cuda`, a helper's parameter spelt as its
caller's argument)."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.chains import chain_text
from migrator.analysis.model.origins import (
    argument_for,
    call_sites_of,
    instance_origin,
    is_method,
    param_default,
)
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Scope
from migrator.rules.cpu_conditions import Cond, both, either, negate, render

UNSET = object()  # nothing in the code read assigns the name
AVAILABLE = ("cuda", "mps", "accelerator", "xpu", "npu")


class ValueReader:
    """The value-reading half of CpuRequests: `test` (a condition) comes from it."""

    def __init__(self, context) -> None:
        self.context = context
        self.facts = context.facts
        self.index = context.facts.index
        self.imports = self.index.imports
        self.source = context.source

    def test(self, expr, scope: Scope, env=None, depth: int = 0) -> Cond | None:
        raise NotImplementedError

    def _named(self, expr, scope: Scope, env, depth: int, evaluate):
        """The value a name or an attribute chain (`args.device`, `self.device`) holds, read
        where it is assigned: UNSET when nothing in this file assigns it."""
        target = expr.id if isinstance(expr, ast.Name) else chain_text(expr)
        if target is None:
            return None
        root = target.split(".", 1)[0].split("[", 1)[0]
        if root == patterns.SELF:
            head = ".".join(target.split(".")[:2])
            home = instance_origin(scope, head) if "." in target else None
            if home is None:
                return UNSET
            return self._interpret(home.scope.node.body, target, UNSET, home.scope, None,
                                   depth, evaluate)  # fmt: skip
        where = defining(scope, root)
        if where is None:
            return UNSET
        kind, owner = where
        writers = [s for s in self.index.scopes if root in s.declared_global and s.assigns(root)]
        if owner.kind == "module" and len(writers) == 1:
            owner = writers[0]  # `global device` in main(), where the device is chosen
        inner = env if env is not None and env[0] is owner else None
        start = UNSET
        if kind == "param" and target == root:
            start = self._parameter(owner, root, evaluate, depth)
            if not owner.assigns(root):
                return start
        body = owner.node.body if owner.kind != "module" else self.index.tree.body
        return self._interpret(body, target, start, owner, inner, depth, evaluate)

    def _parameter(self, function: Scope, name: str, evaluate, depth: int):
        """What every call of `function` passes as `name` (a constructor's calls for
        `__init__`); UNSET when no call in this file is seen."""
        sites = call_sites_of(self.index, function)
        if function.name == "__init__" and is_method(function):
            sites = list(self.index.calls_named(function.parent.name))
        values = []
        for site in sites:
            argument = argument_for(site.node, function, name)
            where = site.scope
            if argument is None:
                argument, where = param_default(function, name), function.parent
            if argument is None or any(isinstance(a, ast.Starred) for a in site.node.args):
                return None
            values.append(evaluate(argument, where, None, depth + 1))
        if not values:
            return UNSET
        if any(v is None for v in values) or len({render(v) for v in values}) != 1:
            return None
        return values[0]

    def _interpret(self, statements, target: str, state, scope: Scope, env, depth, evaluate):
        """The value `target` holds after `statements`, assignments read in order (`if`
        branches merged by their test)."""
        for node in statements:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for written in targets:
                    if _text(written) == target and node.value is not None:
                        state = evaluate(node.value, scope, env, depth + 1)
                    elif any(_text(t) == target for t in ast.walk(written)):
                        state = None  # unpacked, or an element of it
            elif isinstance(node, ast.AugAssign) and _text(node.target) == target:
                state = None
            elif isinstance(node, ast.If):
                body = self._interpret(node.body, target, state, scope, env, depth, evaluate)
                other = self._interpret(node.orelse, target, state, scope, env, depth, evaluate)
                if body is not state or other is not state:
                    test = self.test(node.test, scope, env, depth + 1)
                    state = merge(test, body, other)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                state = self._interpret(node.body, target, state, scope, env, depth, evaluate)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            elif any(_text(t) == target for t in _written(node)):
                state = None  # assigned in a loop, a try
        return state

    def _portable(self, expr, scope: Scope, env):
        """(code, names) of `expr` as the code creating the Accelerator reads it."""
        if isinstance(expr, ast.Constant):
            return self.source.text_of(expr).strip(), ()
        root = expr
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            bound = bound_argument(env, scope, root.id)
            if bound is not None:
                base = self._portable(bound[0], bound[1], bound[2])
                if base is None:
                    return None
                rest = self.source.text_of(expr).strip()[len(root.id) :]
                code = base[0] if not rest or atomic(bound[0]) else f"({base[0]})"
                return code + rest, base[1]
        if isinstance(expr, ast.Call) and not expr.args and not expr.keywords:
            called = dotted_name(expr.func)  # `torch.backends.mps.is_available()`
            module = called.split(".", 1)[0] if called else None
            if module is not None and module in self.imports.aliases:
                return self.source.text_of(expr).strip(), ()
            return None
        if not isinstance(expr, (ast.Name, ast.Attribute)):
            return None
        return self.context.owner_expression(scope, expr)


def merge(test: Cond | None, body, other) -> Cond | None:
    """`body if test else other`; a branch leaving the name unassigned is no value anyone
    reads (`if __name__ == "__main__": device = ...`): the other branch's."""
    if other is UNSET and body is not UNSET:
        return body
    if body is UNSET and other is not UNSET:
        return other
    if test is None or any(v is None or v is UNSET for v in (body, other)):
        return None
    return either(both(test, body), both(negate(test), other))


def bound_argument(env, scope: Scope, name: str):
    """(argument, its scope, its env) a call passes as the parameter `name` of the function
    being read through that call."""
    if env is None or env[0] is not scope:
        return None
    return env[1].get(name)


def defining(scope: Scope, name: str):
    """("param" | "local", the scope) where `name`, read in `scope`, is bound."""
    current = scope
    while current is not None:
        if current.kind != "class" or current is scope:
            if name in current.params:
                return "param", current
            if current.is_local(name):
                return "local", current
        current = current.parent
    return None


def asks_availability(expr, imports) -> bool:
    """`torch.cuda.is_available()`, `torch.accelerator.is_available()`,
    `torch.cuda.device_count() > 0`: true wherever the Accelerator has a GPU to pick."""
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        count = expr.left
        called = imports.qualify(count.func) if isinstance(count, ast.Call) else None
        limit = expr.comparators[0]
        if called == "torch.cuda.device_count" and isinstance(limit, ast.Constant):
            op = type(expr.ops[0])
            return (op is ast.Gt and limit.value == 0) or (op is ast.GtE and limit.value == 1) \
                or (op is ast.NotEq and limit.value == 0)  # fmt: skip
        return False
    if not isinstance(expr, ast.Call) or expr.args:
        return False
    called = imports.qualify(expr.func) or dotted_name(expr.func) or ""
    parts = called.split(".")
    return parts[-1] == "is_available" and any(p in AVAILABLE for p in parts[:-1])


def _text(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else chain_text(node)


def _written(node) -> list:
    """The assignment targets anywhere inside a compound statement."""
    found = []
    for inner in ast.walk(node):
        if isinstance(inner, ast.Assign):
            found.extend(inner.targets)
        elif isinstance(inner, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            found.append(inner.target)
    return [n for t in found for n in ast.walk(t)]


def returns_in(node) -> bool:
    return any(isinstance(inner, (ast.Return, ast.Raise)) for inner in ast.walk(node))


def atomic(expr) -> bool:
    return isinstance(expr, (ast.Name, ast.Attribute, ast.Constant, ast.Call, ast.Subscript))
