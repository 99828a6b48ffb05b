"""Where the object a name holds is made (`Origin`): the program model's answer for names.

`_origin(facts, scope, name)` follows a helper's parameter back through the call sites that
pass it (`train_epoch(model, loader, ...)` from `main()`), a Trainer's `self.x` to the method
that binds it (`__init__`), a wrapper (`ddp_model = DDP(model)`) to what it wraps, an alias of
an object held on another (`model = self.cfg.model`) to its holder, and a free name to its
enclosing scope. `facts` is the TrainingFacts being built: its cache (`origins`), the function
where the objects meet (`meeting`) and the native-DDP reading (`distributed`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.chains import held_alias
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Binding, CallSite, ModuleIndex, Scope


@dataclass(frozen=True)
class Origin:
    """Where an object a name holds is made: the scope and the name it has there."""

    scope: Scope
    name: str


def is_method(scope: Scope | None) -> bool:
    return (
        scope is not None
        and scope.kind == "function"
        and scope.parent is not None
        and scope.parent.kind == "class"
    )


def instance_origin(scope: Scope, name: str) -> Origin | None:
    """Where a Trainer's `self.x` is made: `__init__`, else the one method that binds it."""
    while scope is not None and not is_method(scope):
        scope = scope.parent
    if scope is None:
        return None
    methods = [m for m in scope.parent.children if m.kind == "function" and m.assigns(name)]
    methods.sort(key=lambda m: m.name != "__init__")
    made = [m for m in methods if not all(_placeholder(b) for b in m.assigns(name))]
    if len(made) == 1 and len(methods) > 1:  # `self.optimizer = None` in __init__, made in run()
        return Origin(made[0], name)
    if len(methods) == 1 or (methods and methods[0].name == "__init__"):
        return Origin(methods[0], name)
    return None


def _placeholder(binding: Binding) -> bool:
    """`self.optimizer = None`: a slot filled by the method that makes the object."""
    value = binding.element if binding.unpacked else binding.value
    return isinstance(value, ast.Constant) and value.value is None


def class_methods(scope: Scope) -> list[Scope]:
    """The methods of the class `scope` is a method of (itself included)."""
    if not is_method(scope):
        return [scope]
    return [m for m in scope.parent.children if m.kind == "function"]


def _origin(facts, scope: Scope, name: str, seen: frozenset) -> Origin | None:
    key = (id(scope), name)
    if key in facts.origins:
        return facts.origins[key]
    if key in seen:
        return None
    seen = seen | {key}
    result: Origin | None
    if name.startswith(patterns.SELF + "."):
        result = instance_origin(scope, name)
    elif facts.distributed.launch_param(scope, name):  # the rank `mp.spawn` passes
        result = Origin(scope, name)
    elif scope.kind == "function" and name in scope.params:
        results = set()
        sites = call_sites_of(facts.index, scope)
        if not sites or scope is facts.meeting:
            # No caller in this file (a driver elsewhere calls it), or the function where the
            # training objects meet: the parameter is the object, prepared in this function.
            results.add(Origin(scope, name))
        for site in sites if scope is not facts.meeting else []:
            argument = argument_for(site.node, scope, name)
            if argument is None and none_default(scope, name) and not scales(facts, scope, name):
                continue  # `run_epoch(model, val_loader)`: no optimizer at this call
            if patterns.name_of(argument) is not None:
                results.add(_origin(facts, site.scope, patterns.name_of(argument), seen))
            else:
                results.add(None)
        result = results.pop() if len(results) == 1 else None
    elif scope.kind == "module" or scope.is_local(name):
        wrapped = facts.distributed.unwrapped(scope, name)  # `ddp_model = DDP(model)` is `model`
        held = held_alias(scope, name, facts.index.imports)  # `model = self.cfg.model`
        result = _origin(facts, scope, wrapped, seen) if wrapped else Origin(scope, name)
        target = facts.origin(scope, held) if held is not None and not wrapped else None
        if target is not None and target.scope is not scope:  # held before this function runs
            result = target
    else:
        enclosing = scope.parent
        while enclosing is not None and enclosing.kind == "class":
            enclosing = enclosing.parent
        result = (
            _origin(facts, enclosing, name, seen) if enclosing is not None else Origin(scope, name)
        )
    facts.origins[key] = result
    return result


def call_sites_of(index: ModuleIndex, function: Scope) -> list[CallSite]:
    if is_method(function):  # `self.train_epoch(...)` from a sibling method
        return [
            site for site in index.calls_named(f"{patterns.SELF}.{function.name}")
            if site.scope.parent is function.parent
        ]  # fmt: skip
    return list(index.calls_named(function.name))


def handed_to_parameter(index: ModuleIndex, use) -> tuple[Scope, str] | None:
    """(the module function, its parameter) that an argument use hands a name to
    (`train(model, loader, device)`), when that parameter is nothing but what it receives
    there (no other binding of it)."""
    function = index.functions.get(dotted_name(use.call.func) or "")
    if function is None or function.kind != "function":
        return None
    for parameter in function.params:
        if argument_for(use.call, function, parameter) is use.node:
            bindings = function.bindings.get(parameter, [])
            return (function, parameter) if all(b.kind == "param" for b in bindings) else None
    return None


def argument_for(call: ast.Call, function: Scope, param: str) -> ast.expr | None:
    positional = [p for p in function.params if not p.startswith("*")]
    if is_method(function):
        positional = positional[1:]  # `self` is not passed
    for item in call.keywords:
        if item.arg == param:
            return item.value
    position = positional.index(param) if param in positional else -1
    plain = [a for a in call.args if not isinstance(a, ast.Starred)]
    if 0 <= position < len(plain):
        return plain[position]
    return None


def none_default(function: Scope, param: str) -> bool:
    """`optimizer=None`, never re-bound in the function: a call that omits it passes no
    object (`run_epoch(model, val_loader)` evaluates; the call passing one trains)."""
    default = param_default(function, param)
    return (
        isinstance(default, ast.Constant)
        and default.value is None
        and not (function.assigns(param))
    )


def scales(facts, function: Scope, param: str) -> bool:
    """`scaler.scale(loss)` outside a train/eval epoch function: left out, it keeps MIG020's way."""
    scopes = [function, *function.descendants()]
    uses = [use.attr for scope in scopes for use in scope.uses.get(param, []) if use.kind == "attr"]
    shared = any(epoch.function is function for epoch in facts.shared_epochs)
    return not shared and bool({"scale", "unscale_", "get_scale"} & set(uses))


def param_default(function: Scope, param: str) -> ast.expr | None:
    """The default value of a function's parameter (None: it has none)."""
    arguments = function.node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = list(zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults))
    pairs += list(zip(arguments.kwonlyargs, arguments.kw_defaults))
    return next((d for a, d in pairs if a.arg == param), None)


def bindings_of(origin: Origin | None) -> list[Binding]:
    if origin is None:
        return []
    return origin.scope.assigns(origin.name)


def value_call(binding: Binding) -> ast.Call | None:
    value = binding.element if binding.element is not None else binding.value
    if binding.unpacked and binding.element is None:
        return None
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and (value.func.attr in ("to", "cuda"))
    ):
        value = value.func.value  # `Net().to(device)` is built by `Net()`
    return value if isinstance(value, ast.Call) else None


def scopes_seeing(scope: Scope, name: str) -> list[Scope]:
    """Where `name`, as `scope` binds it, is read: `scope` and the nested scopes where it
    still means that variable; for an attribute of `self` (`self.writer` set in `__init__`),
    those of every method of the class."""
    if name.startswith("self."):
        return [s for m in class_methods(scope) for s in visible_scopes(m, name)]
    return visible_scopes(scope, name)


def visible_scopes(scope: Scope, name: str) -> list[Scope]:
    """`scope` and the nested scopes where `name` still means `scope`'s variable."""
    found = [scope]
    for child in scope.children:
        if name in child.params or child.is_local(name):
            continue
        found.extend(visible_scopes(child, name))
    return found
