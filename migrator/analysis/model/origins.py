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
from migrator.analysis.model.classes import class_named, made_class, method_of
from migrator.analysis.model.forwards import mode_alias
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
        if result is not None and facts.through_instances:
            result = _constructor_argument(facts, result, seen) or result
    elif facts.distributed.launch_param(scope, name):  # the rank `mp.spawn` passes
        result = Origin(scope, name)
    elif scope.kind == "function" and name in scope.params:
        results = set()
        sites = call_sites_of(facts.index, scope)
        if facts.through_instances and is_method(scope):  # `trainer.fit(loader)` in main()
            sites += instance_calls(facts.index, scope)
        if not sites or scope is facts.meeting:
            # No caller in this file (a driver elsewhere calls it), or the function where the
            # training objects meet: the parameter is the object, prepared in this function.
            results.add(Origin(scope, name))
        for site in sites if scope is not facts.meeting else []:
            argument = argument_for(site.node, scope, name)
            absent = argument is None and none_default(scope, name)
            if (absent or passes_none(argument)) and not scales(facts, scope, name):
                continue  # `run_epoch(model, val_loader)`, `(..., None)`: no optimizer here
            if patterns.name_of(argument) is not None:
                results.add(_origin(facts, site.scope, patterns.name_of(argument), seen))
            elif isinstance(argument, ast.Call) and _on_instance(site):
                results.add(Origin(scope, name))  # `clf.fit(DataLoader(...))`: made for it
            else:
                results.add(None)
        result = results.pop() if len(results) == 1 else None
    elif (alias := mode_alias(scope, name)) is not None:  # `model = self.model.train()`
        result = _origin(facts, scope, alias, seen)
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


def _constructor_argument(facts, found: Origin, seen: frozenset) -> Origin | None:
    """`self.optimizer = optimizer` in `__init__`, the class made as `Trainer(model, optimizer,
    device)` in `main()`: the object is the one each construction passes (main's `optimizer`),
    when every construction in this module (a joined program's included) passes the same one
    by name. None otherwise (kept where `__init__` binds it)."""
    init = found.scope
    if init.name != "__init__" or not is_method(init):
        return None
    bindings = init.assigns(found.name)
    params = [b.value.id for b in bindings if b.kind == "assign" and not b.unpacked
              and isinstance(b.value, ast.Name)]  # fmt: skip
    if len(bindings) != 1 or len(params) != 1 or params[0] not in init.params:
        return None
    if init.assigns(params[0]):
        return None  # rebound before it is kept: not what the callers pass
    sites = constructions(facts.index, init.parent)
    results = set()
    for site in sites:
        argument = argument_for(site.node, init, params[0])
        name = patterns.name_of(argument) if argument is not None else None
        results.add(_origin(facts, site.scope, name, seen) if name is not None else None)
    return results.pop() if len(results) == 1 else None


def _on_instance(site: CallSite) -> bool:
    """`trainer.fit(...)`: a method called on an instance (not `self.fit(...)`)."""
    func = site.node.func
    return isinstance(func, ast.Attribute) and patterns.name_of(func.value) != patterns.SELF


def constructions(index: ModuleIndex, cls: Scope) -> list[CallSite]:
    """The calls of this module that make an instance of `cls` (`Trainer(...)`, under the
    names a joined program's imports give it)."""
    return [site for site in index.calls() if class_named(index, site.node.func) is cls]


def calls_of(index: ModuleIndex, function: Scope) -> list[CallSite]:
    """The calls that run `function`: by name, as a sibling method, and on an instance of its
    class (`trainer.train_step(...)`)."""
    found = call_sites_of(index, function)
    return found + instance_calls(index, function) if is_method(function) else found


def call_sites_of(index: ModuleIndex, function: Scope) -> list[CallSite]:
    if is_method(function):  # `self.train_epoch(...)` from a sibling method
        return [
            site for site in index.calls_named(f"{patterns.SELF}.{function.name}")
            if site.scope.parent is function.parent
        ]  # fmt: skip
    return list(index.calls_named(function.name))


# Methods whose calls on an instance are the object's own work, not a step of the program
# (a model's forward, its placement): never traced as calls of the program's methods.
OWN_WORK = frozenset({"forward", "__call__", "to", "cuda", "parameters"})


def instance_calls(index: ModuleIndex, method: Scope) -> list[CallSite]:
    """`trainer.train_step(img, ...)`: the calls of `method` on a name bound in its scope to
    an instance of its class (or of a subclass inheriting it), `trainer = Trainer(...)`."""
    if method.name in OWN_WORK or method.name.startswith("__"):
        return []
    found = []
    for site in index.calls():
        func = site.node.func
        if site.method != method.name or not isinstance(func, ast.Attribute):
            continue
        receiver = func.value
        if not isinstance(receiver, ast.Name) or receiver.id == patterns.SELF:
            continue
        cls = instance_class(index, site.scope, receiver.id)
        if cls is not None and method_of(index, cls, method.name) is method:
            found.append(site)
    return found


def instance_class(index: ModuleIndex, scope: Scope, name: str) -> Scope | None:
    """The one program class whose instance the local `name` holds: every binding of it
    makes one (`trainer = Trainer(...)`, `model = GPT.from_pretrained(...).to(device)`)."""
    bindings = scope.assigns(name) if scope.is_local(name) else []
    calls = [value_call(b) for b in bindings if b.kind == "assign" and not b.unpacked]
    if not calls or len(calls) != len(bindings) or None in calls:
        return None
    classes = [made_class(index, call) for call in calls]
    if None in classes or any(c is not classes[0] for c in classes):
        return None  # not certainly one class of the program
    return classes[0]


def called_function(index: ModuleIndex, call: ast.Call, scope: Scope | None) -> Scope | None:
    """The program's function a call runs: a module function by name; with the calling
    `scope` known, also a sibling method (`self.step(...)`) and a method of an instance the
    scope holds (`model.configure_optimizers(...)`)."""
    function = index.functions.get(dotted_name(call.func) or "")
    if function is not None and function.kind == "function":
        return function
    func = call.func
    if scope is None or not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return None
    if func.value.id == patterns.SELF:
        method = scope
        while method is not None and not is_method(method):
            method = method.parent
        cls = method.parent if method is not None else None
    else:
        cls = instance_class(index, scope, func.value.id)
    return method_of(index, cls, func.attr) if cls is not None else None


def handed_to_parameter(index: ModuleIndex, use, scope: Scope | None = None):
    """(the program's function, its parameter) that an argument use hands a name to
    (`train(model, loader, device)`; with the use's `scope`, methods too, as
    `called_function` finds them), when that parameter is nothing but what it receives
    there (no other binding of it)."""
    function = called_function(index, use.call, scope)
    if function is None:
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


def passes_none(argument: ast.expr | None) -> bool:
    """A call's argument that is the constant `None` (`run(model, val_loader, None)`)."""
    return isinstance(argument, ast.Constant) and argument.value is None


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
