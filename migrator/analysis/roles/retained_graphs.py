"""Backward passes that reuse a retained graph through a prepared model's forward.

`loss_d.backward(retain_graph=True)` followed by a backward of a loss built on the same forward
of a model (`ld_p = D(x_p)` feeds both losses) runs two backward passes through one forward.
DistributedDataParallel reduces a model's gradients once per forward: the second backward
either fails ("Expected to mark a variable ready only once") or leaves its gradients
unaveraged, so each process trains its own copy [measured, torch 2.13, gloo]. A GAN whose
discriminator loss sees `G(z).detach()` and whose generator loss runs `D` again is fine, and so
is a superfluous `retain_graph=True`: only a forward both backward passes reach is refused.

The check follows one function's statements in order: each call of a prepared model (or of a
helper handed one, `gradient_penalty(critic, ...)`) is a forward; names carry the forwards their
values were computed from, except through `.detach()`, `.item()`, `.data` and `torch.no_grad()`;
loops run twice, so a forward made before a loop and backwarded in it counts twice.

A mixin of roles._Analyser, kept in its own module for size.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.catalogue import patterns
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import ModuleIndex, Scope

# Tensor methods whose result carries no graph.
CUTTING = frozenset({"detach", "item", "tolist", "numpy", "detach_"})
# Module methods that run no forward.
NOT_FORWARD = frozenset({
    "parameters", "named_parameters", "train", "eval", "zero_grad", "state_dict",
    "load_state_dict", "to", "cuda", "cpu", "apply", "modules", "children", "requires_grad_",
    "buffers", "named_modules", "register_forward_hook", "half", "float",
})  # fmt: skip
NO_GRAD = ("no_grad", "inference_mode")

Forward = tuple  # (id of the call node, loop passes): one run of a model's forward


@dataclass
class _State:
    names: dict[str, frozenset] = field(default_factory=dict)
    retained: dict[Forward, ast.Call] = field(default_factory=dict)  # -> the retaining backward

    def copy(self) -> _State:
        return _State(dict(self.names), dict(self.retained))

    def merge(self, other: _State) -> None:
        for name, forwards in other.names.items():
            self.names[name] = self.names.get(name, frozenset()) | forwards
        for forward, site in other.retained.items():
            self.retained.setdefault(forward, site)


@dataclass
class Reuse:
    first: ast.Call  # the backward(retain_graph=True)
    second: ast.Call  # the later backward through the same forward
    forward: ast.Call  # the model call both reach
    model: str


class _Walk:
    """Follows one function's statements, recording the forwards every name depends on."""

    def __init__(self, model_of, forwards_of) -> None:
        self.model_of = model_of  # call -> the model whose forward it runs, or None
        self.forwards_of = forwards_of  # id(call) -> model, for the calls already seen
        self.passes: tuple[int, ...] = ()
        self.no_grad = 0
        self.reuse: Reuse | None = None

    def block(self, body: list[ast.stmt], state: _State) -> None:
        for statement in body:
            self.statement(statement, state)

    def statement(self, node: ast.stmt, state: _State) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            value = self.value(node.value, state) if node.value is not None else frozenset()
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self.bind(target, value, state, keep=isinstance(node, ast.AugAssign))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            before = state.copy()
            for turn in range(2):
                self.passes = (*self.passes, turn)
                if isinstance(node, (ast.For, ast.AsyncFor)):
                    self.bind(node.target, self.value(node.iter, state), state, keep=False)
                else:
                    self.value(node.test, state)
                self.block(node.body, state)
                self.passes = self.passes[:-1]
            state.merge(before)
            self.block(node.orelse, state)
        elif isinstance(node, ast.If):
            self.value(node.test, state)
            other = state.copy()
            self.block(node.body, state)
            self.block(node.orelse, other)
            state.merge(other)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            quiet = any(self._no_grad(item.context_expr) for item in node.items)
            for item in node.items:
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, frozenset(), state, keep=False)
            self.no_grad += quiet
            self.block(node.body, state)
            self.no_grad -= quiet
        elif isinstance(node, ast.Try):
            for part in (node.body, *[h.body for h in node.handlers], node.orelse, node.finalbody):
                self.block(part, state)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.value(child, state)

    def bind(self, target: ast.expr, value: frozenset, state: _State, keep: bool) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element, value, state, keep)
            return
        if isinstance(target, ast.Starred):
            self.bind(target.value, value, state, keep)
            return
        if isinstance(target, ast.Subscript):  # `losses["d"] = loss`: the container holds it
            name, keep = patterns.name_of(target.value), True
        else:
            name = patterns.name_of(target)
        if name is not None:
            old = state.names.get(name, frozenset()) if keep else frozenset()
            state.names[name] = old | value

    def value(self, node: ast.expr | None, state: _State) -> frozenset:
        if node is None or self.no_grad and not self._has_backward(node):
            return frozenset()
        name = patterns.name_of(node)
        if name is not None:
            return state.names.get(name, frozenset())
        if isinstance(node, ast.Attribute):
            return frozenset() if node.attr == "data" else self.value(node.value, state)
        if isinstance(node, ast.Call):
            return self.call(node, state)
        found: frozenset = frozenset()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                found |= self.value(child, state)
            elif isinstance(child, ast.comprehension):
                found |= self.value(child.iter, state)
        return found

    def call(self, node: ast.Call, state: _State) -> frozenset:
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        arguments = [*node.args, *(k.value for k in node.keywords)]
        found: frozenset = frozenset()
        for argument in arguments:
            found |= self.value(argument, state)
        if method == "backward":
            self.backward(node, self.value(func.value, state), state)
            return frozenset()
        if method in CUTTING:
            return frozenset()
        if method is not None:
            found |= self.value(func.value, state)
        model = self.model_of(node)
        if model is not None and not self.no_grad:
            self.forwards_of[id(node)] = (node, model)
            found |= {(id(node), self.passes)}
        return found

    def backward(self, node: ast.Call, reached: frozenset, state: _State) -> None:
        for forward in sorted(reached, key=self._position):
            first = state.retained.get(forward)
            if first is not None and self.reuse is None:
                call, model = self.forwards_of[forward[0]]
                self.reuse = Reuse(first, node, call, model)
        if _retains(node):
            for forward in reached:
                state.retained.setdefault(forward, node)

    def _position(self, forward: Forward) -> tuple:
        call = self.forwards_of[forward[0]][0]
        return (call.lineno, call.col_offset, forward[1])

    @staticmethod
    def _no_grad(expr: ast.expr) -> bool:
        func = expr.func if isinstance(expr, ast.Call) else expr
        return patterns.last_part(patterns.name_of(func) or "") in NO_GRAD or (
            isinstance(func, ast.Attribute) and func.attr in NO_GRAD
        )

    @staticmethod
    def _has_backward(node: ast.expr) -> bool:
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "backward"
            for n in ast.walk(node)
        )  # fmt: skip


def _retains(node: ast.Call) -> bool:
    """`backward(retain_graph=True)` / `backward(gradient, True)`: a truthy retain_graph."""
    value = next((k.value for k in node.keywords if k.arg == "retain_graph"), None)
    if value is None and len(node.args) > 1:
        value = node.args[1]
    if value is None:
        return False
    return not (isinstance(value, ast.Constant) and not value.value)


class RetainedGraphs:
    facts: TrainingFacts
    index: ModuleIndex

    def _find_reused_forwards(self) -> None:
        """MIG900 on a backward that passes again through a model forward a retained backward
        already went through (module docstring)."""
        facts = self.facts
        scopes: dict[int, Scope] = {}
        for site in facts.backward_calls:
            if isinstance(site.node.func, ast.Attribute) and _retains(site.node):
                scopes.setdefault(id(site.scope), site.scope)
        for scope in scopes.values():
            walk = _Walk(lambda call, scope=scope: self._model_called(scope, call), {})
            body = getattr(scope.node, "body", [])
            walk.block(body if isinstance(body, list) else [], _State())
            if walk.reuse is not None:
                self._reuse_finding(walk.reuse)
                return

    def _model_called(self, scope: Scope, call: ast.Call) -> str | None:
        """The prepared model a call runs: `D(x)`, `self.G(z)`, `G.sample(n)`,
        `self.model.decoder(h)`, or a helper handed it (`gradient_penalty(critic, x, y)`)."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in NOT_FORWARD:
            return None
        model = self._model_named(scope, patterns.root_name(func))
        if model is not None:
            return model
        for argument in call.args:
            model = self._model_named(scope, patterns.name_of(argument))
            if model is not None:
                return model
        return None

    def _model_named(self, scope: Scope, name: str | None) -> str | None:
        if name is None:
            return None
        models = self.facts.models
        if name in models:
            return name
        found = self.facts.origin(scope, name)
        return found.name if found is not None and found.name in models else None

    def _reuse_finding(self, reuse: Reuse) -> None:
        text = self.index.source.text_of
        first, second = reuse.first, reuse.second
        self._finding(
            second,
            "MIG900",
            f"`{text(first)}` (line {first.lineno}) and the backward at line {second.lineno} "
            f"both pass through one forward of `{reuse.model}` (`{text(reuse.forward)}`, line "
            f"{reuse.forward.lineno}): DistributedDataParallel reduces a model's gradients once "
            "per forward, so the second backward fails or leaves its gradients unaveraged; run "
            "that forward again (or `.detach()` its output) for the second loss, or add the "
            "losses and call backward once; migrate by hand",
        )
