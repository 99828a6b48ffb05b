"""Which models the optimizers train: the roots of the `.parameters()` they are built on
(through a local name: `params = list(decoder.parameters()) + list(encoder.parameters())`),
the model whose own method builds the optimizer (`model.configure_optimizers(...)`), or, for
an optimizer built elsewhere, what the loop calls (`model(x)`, `model.forward(x)`) and the
script places on a device or switches to train mode, wherever it does.

A mixin of roles._Analyser, kept in its own module for size.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.chains import module_alias
from migrator.analysis.model.origins import (
    Origin,
    argument_for,
    constructions,
    is_method,
    param_default,
    value_call,
)
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import ModuleIndex, Scope

MAX_NAME_HOPS = 4  # names followed from an optimizer's argument to `model.parameters()`
# Attribute calls that show a name holds the model: placed, switched to training, or read for
# its parameters.
PLACING = ("to", "cuda", "train", "parameters")


class TrainedModels:
    facts: TrainingFacts
    index: ModuleIndex
    imports: object

    def _models(self, owner: Scope, optimizers: list[str], forwards: list[Origin]) -> list[str]:
        """The models the optimizers (made in `owner`, the owner of training or the method
        of its class that makes them) train."""
        models: list[str] = []
        saw_constructor = False
        for name in optimizers:
            for binding in self._bindings(Origin(owner, name)):
                for call, home in self._built(owner, binding):
                    saw_constructor = True
                    maker = self._optimizer_maker(home, call)  # `model.configure_optimizers(...)`
                    if maker is not None and maker not in models:
                        models.append(maker)
                    for position, arg in enumerate(patterns.call_args(call)):
                        if self._models_unnamed(name, call, arg.value):
                            return []
                        fed = arg.keyword == "params" or (position == 0 and arg.keyword is None)
                        roots = patterns.parameter_roots(arg.value) or (
                            self._parameters_named(home, arg.value) if fed or isinstance(
                                arg.value, ast.Name) else [])  # fmt: skip
                        if roots is None:
                            return []
                        if (
                            not roots
                        ):  # `AdamW(add_weight_decay(model, wd))`, `create_optimizer(args, model)`
                            roots = self._model_handed_over(home, arg.value, forwards)
                        for root in roots:
                            found = self.facts.origin(home, root)
                            if found is None or not self._class_object(found, owner):
                                self._block(call, root, home)
                                return []
                            model = (self._held_model(found, call, forwards)  # `self.cfg.model`
                                     or self._called_alias_target(found, forwards) or found.name)  # fmt: skip
                            model = self._kept_on_self(owner, model)
                            if model not in models:
                                models.append(model)
        if saw_constructor:
            return models
        # The optimizer was built elsewhere (a fragment): the model is what the loop calls and
        # the script places on a device or switches to train mode.
        for origin in forwards:
            if not self._class_object(origin, owner) or patterns.LOSS_NAME.search(origin.name):
                continue
            if self._given_functions(origin):  # `self.transform_fn(x)`: a function passed in
                continue
            uses = origin.scope.uses.get(origin.name, [])
            placed = any(u.kind == "attr" and u.attr in PLACING for u in uses) or (
                self._placed_or_received(origin.scope, origin.name)
                or self._placed_where_called(origin) or self._held_placed(origin))  # fmt: skip
            if (placed or origin.name in self.facts.prepared_already) and (
                origin.name not in models
            ):
                models.append(origin.name)
        return models

    def _built(self, owner: Scope, binding) -> list[tuple[ast.Call, Scope]]:
        """The calls that build an optimizer bound here, each with the scope it is in: its own
        (`Adam(...)`, either side of an `if`), or, for one returned by a function or method of
        this program (`self.optimizer = self._create_optimizer()`, `make_optimizer(model)`),
        the optimizers its `return`s build, read in that function (its parameters lead back
        to this call's arguments, its `self.model` is the class's)."""
        calls = _constructions(binding)
        built = [(call, owner) for call in calls]
        if len(calls) != 1 or patterns.is_optimizer_call(calls[0], self.imports):
            return built
        site = next((c for c in owner.calls if c.node is calls[0]), None)
        callee = self._callee_scope(site) if site is not None else None
        if callee is None or callee.kind != "function":
            return built
        returned = [node.value for node in _own_returns(callee.node) if node.value is not None]
        made = [c for value in returned for c in _sides(value)]
        if not made or not all(
            isinstance(c, ast.Call) and patterns.is_optimizer_call(c, self.imports) for c in made
        ):
            return built
        return [(c, callee) for c in made]

    def _given_functions(self, origin: Origin) -> bool:
        """`self.transform_fn`, kept in `__init__` from a parameter that every construction of
        the class (and the parameter's default, where one omits it) fills with a function of
        this program (`Trainer(..., transform_fn=flatten_mnist)`): called in the loop, it is a
        function, not a model."""
        init = origin.scope
        if init.name != "__init__" or not is_method(init):
            return False
        bindings = init.assigns(origin.name)
        value = bindings[0].value if len(bindings) == 1 and not bindings[0].unpacked else None
        if not isinstance(value, ast.Name) or value.id not in init.params:
            return False
        sites = constructions(self.index, init.parent)
        given = [argument_for(s.node, init, value.id) or param_default(init, value.id)
                 for s in sites] or [param_default(init, value.id)]  # fmt: skip
        return all(
            isinstance(g, ast.Name) and g.id in self.index.functions
            and self.index.functions[g.id].kind == "function"
            for g in given
        )  # fmt: skip

    def _model_handed_over(self, owner: Scope, expr: ast.expr, forwards: list[Origin]) -> list[str]:
        """The model a parameter-group helper or an optimizer factory receives
        (`param_groups = add_weight_decay(model_without_ddp, wd)`, `create_optimizer(args,
        model)`, `get_params_groups(student)`): the one argument that names a model the loop
        runs (or an alias of it); [] when none or several do."""
        name = patterns.name_of(expr)
        if name is not None and not self._is_run(owner, name, forwards):
            bindings = owner.assigns(name)
            if len(bindings) != 1 or bindings[0].unpacked:
                return []
            expr = bindings[0].value
        if isinstance(expr, ast.Call):
            names = [patterns.name_of(a.value) for a in patterns.call_args(expr)]
        else:
            names = [patterns.name_of(expr)]
        models = {n for n in names if n is not None and self._is_run(owner, n, forwards)}
        return list(models) if len(models) == 1 else []

    def _is_run(self, owner: Scope, name: str, forwards: list[Origin]) -> bool:
        """`name` (or what it aliases: `model_without_ddp = model`) is a model the loop runs."""
        found = self.facts.origin(owner, name)
        if found is None or not self._class_object(found, owner):
            return False
        names = {found.name, self._called_alias_target(found, forwards)}
        return any(o.name in names and o.scope is found.scope for o in forwards)

    @staticmethod
    def _called_alias_target(found: Origin, forwards: list[Origin]) -> str | None:
        """`model_without_ddp = model` (or `model.module`, `model.module if ddp else model`), the
        optimizer built on `model_without_ddp.parameters()` and the loop calling `model`: one
        object under two names, and prepare must rebind the
        name the loop runs (else the loop trains the plain module and no gradient is synced)."""
        targets = set()
        for binding in found.scope.assigns(found.name):
            alias = None if binding.unpacked else module_alias(binding.value)
            if alias is None:
                return None
            targets.add(alias[0])
        if len(targets) != 1:
            return None
        target = targets.pop()
        if any(o.name == target and o.scope is found.scope for o in forwards):
            return target
        return None

    def _optimizer_maker(self, owner: Scope, call: ast.Call) -> str | None:
        """The model whose own method builds the optimizer (nanoGPT's
        `optimizer = model.configure_optimizers(weight_decay, lr, betas, device_type)`)."""
        func = call.func
        if not isinstance(func, ast.Attribute) or "optim" not in func.attr.lower():
            return None
        receiver = patterns.name_of(func.value)
        found = self.facts.origin(owner, receiver) if receiver is not None else None
        if found is None or not self._class_object(found, owner):
            return None
        if not any(b.kind == "assign" for b in found.scope.assigns(found.name)):
            return None
        return found.name

    def _parameters_named(self, owner: Scope, expr: ast.expr, depth: int = 0) -> list[str] | None:
        """The models behind `Adam(params)` where `params` is bound once here from whole
        models' `.parameters()`, directly or through other names bound once here
        (`param_optimizer = list(model.named_parameters())`, then `groups = [{"params": [p
        for n, p in param_optimizer if ...]}, ...]`); [] when it is not; None (with a MIG900)
        when it holds parts of a model (`encoder.linear.parameters()`): DDP would wrap all of
        `encoder` and wait for gradients of parameters the optimizer does not train."""
        name = patterns.name_of(expr)
        if name is None and depth == 0 and isinstance(expr, (ast.List, ast.Tuple, ast.Dict)):
            return self._parameters_read(owner, expr, None, depth)  # `[{"params": decay}, ...]`
        bindings = owner.assigns(name) if name is not None else []
        if len(bindings) != 1 or bindings[0].value is None or bindings[0].unpacked:
            return []
        value = bindings[0].value
        if self._models_unnamed(name, bindings[0].statement.node, value):
            return None
        roots = patterns.parameter_roots(value) or self._filled_from_parameters(owner, value)
        if not roots and depth < MAX_NAME_HOPS:
            roots = self._parameters_read(owner, value, name, depth)
            if roots is None:
                return None
        parts = [
            self.index.source.text_of(node.func.value)
            for node in ast.walk(value)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("parameters", "named_parameters")
            and patterns.name_of(node.func.value) is None
        ]
        if parts:
            line = bindings[0].statement.node.lineno
            self._finding(self.facts.training_loops[0].node, "MIG900",
                          f"could not tell which model the optimizer trains: `{name}` (line "
                          f"{line}) holds the parameters of parts of models "
                          f"({', '.join(f'`{p}`' for p in parts)}); preparing the whole model "
                          "would make DDP wait for gradients the optimizer does not use; "
                          "migrate by hand")  # fmt: skip
            return None
        return roots

    def _parameters_read(self, owner: Scope, value: ast.expr, name: str | None, depth: int):
        """The models behind the names `value` reads (each bound once here), as
        `_parameters_named` finds them; None (with its MIG900) where one holds parts."""
        roots: list[str] = []
        for inner in _names_read(value, exclude=name):
            found = self._parameters_named(owner, inner, depth + 1)
            if found is None:
                return None
            roots += [r for r in found if r not in roots]
        return roots

    def _filled_from_parameters(self, owner: Scope, value: ast.expr) -> list[str]:
        """The models behind parameter groups of lists filled in a loop over a model's
        parameters (Barlow Twins' weight/bias split, the usual weight-decay split):

            decay, no_decay = [], []                      # (or one `= []` each)
            for name, p in model.named_parameters():
                if p.ndim == 1: no_decay.append(p)
                else: decay.append(p)
            groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

        Every list named in `value` must be bound once to `[]` and grown only by `.append` in
        loops over whole named models' parameters; [] otherwise."""
        lists = _group_lists(value)
        if not lists:
            return []
        roots: list[str] = []
        for name in dict.fromkeys(lists):
            bindings = owner.assigns(name)
            if len(bindings) != 1 or not _empty_list(bindings[0]):
                return []
            appends = [c for c in owner.calls if c.method == "append"
                       and patterns.name_of(c.receiver) == name]  # fmt: skip
            uses = [u for u in owner.uses.get(name, []) if u.kind == "attr"]
            if not appends or len(uses) != len(appends):
                return []  # grown some other way (`extend`, `+=`): not told apart here
            for call in appends:
                root = _parameters_loop_root(call.loop)
                if root is None:
                    return []
                if root not in roots:
                    roots.append(root)
        return roots

    def _models_unnamed(self, name: str, node: ast.AST, expr: ast.expr) -> bool:
        """MIG900 when `expr` feeds the parameters of models a comprehension runs over
        (`chain(*[m.parameters() for m in self.discriminators])`): each model must be prepared
        by its own name, and these have none here."""
        unnamed = patterns.unnamed_parameter_owners(expr)
        if not unnamed:
            return False
        text = self.index.source.text_of
        each = ", ".join(f"`{var}` in `{text(iterable)}`" for var, iterable in unnamed)
        self._finding(self.facts.training_loops[0].node, "MIG900",
                      f"could not tell which models the optimizer trains: `{name}` (line "
                      f"{node.lineno}) is built on the parameters of every {each}: prepare "
                      "needs each model by its own name; build it on named models "
                      "(`chain(D_A.parameters(), D_B.parameters())`) or migrate by hand")  # fmt: skip
        return True

    def _placed_where_called(self, origin: Origin) -> bool:
        """A model received as a parameter (`train(model, loader, optimizer)`) and placed or
        switched to train mode by a helper the loop runs (`model.train()` in
        `train_one_epoch(model, ...)`)."""
        for scope in self.facts.training_scopes or self.index.scopes:
            for name, uses in scope.uses.items():
                if not any(u.kind == "attr" and u.attr in PLACING for u in uses):
                    continue
                if self.facts.origin(scope, name) == origin:
                    return True
        return False


def _constructions(binding) -> list[ast.Call]:
    """The calls that build a name: `Adam(...)`, or either side of `Adam(...) if adam else
    RMSprop(...)`."""
    call = value_call(binding)
    if call is not None:
        return [call]
    value = binding.element if binding.element is not None else binding.value
    if isinstance(value, ast.IfExp) and not (binding.unpacked and binding.element is None):
        return [side for side in (value.body, value.orelse) if isinstance(side, ast.Call)]
    return []


def _sides(value: ast.expr) -> list[ast.expr]:
    """What an expression may be: itself, or either side of `a if c else b`."""
    if isinstance(value, ast.IfExp):
        return _sides(value.body) + _sides(value.orelse)
    return [value]


def _own_returns(function: ast.AST) -> list[ast.Return]:
    """The `return` statements of `function` itself, not of the functions it defines."""
    found, stack = [], list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _group_lists(value: ast.expr) -> list[str]:
    """The names a parameter-group literal lists: `[w, b]`, `[{"params": w}, {"params": b,
    ...}]`; [] when any element is something else."""
    if not isinstance(value, (ast.List, ast.Tuple)) or not value.elts:
        return []
    names = []
    for element in value.elts:
        if isinstance(element, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in element.keys]
            element = element.values[keys.index("params")] if "params" in keys else None
        if not isinstance(element, ast.Name):
            return []
        names.append(element.id)
    return names


def _empty_list(binding) -> bool:
    value = binding.element if binding.unpacked else binding.value
    return isinstance(value, ast.List) and not value.elts


def _parameters_loop_root(loop) -> str | None:
    """The model `m` of the innermost enclosing `for ... in m.parameters()` (or
    `m.named_parameters()`); None when there is none or it runs over a part of a model."""
    while loop is not None:
        calls = patterns.parameter_calls(loop.iter) if loop.iter is not None else []
        if calls:
            roots = {patterns.name_of(c.func.value) for c in calls}
            return roots.pop() if len(roots) == 1 and None not in roots else None
        loop = loop.parent
    return None


def _names_read(value: ast.expr, exclude: str | None) -> list[ast.Name]:
    """The plain names `value` reads, not those its comprehensions bind (`n, p` in `[p for
    n, p in param_optimizer if n not in no_decay]`), one node per name."""
    bound = {
        target.id
        for node in ast.walk(value)
        if isinstance(node, ast.comprehension)
        for target in ast.walk(node.target)
        if isinstance(target, ast.Name)
    }
    found: dict[str, ast.Name] = {}
    for node in ast.walk(value):
        if isinstance(node, ast.Name) and node.id not in bound and node.id != exclude:
            found.setdefault(node.id, node)
    return list(found.values())
