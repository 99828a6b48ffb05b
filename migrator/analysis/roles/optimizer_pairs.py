"""Several optimizers in one loop (GANs, encoder/decoder pairs): one prepare holds them all, with
their models, when each is built here on the parameters of models found here - directly, through
a name holding them (`params_g = chain(G.parameters(), Q.parameters())`), or through a helper of
this file handed the model (`make_optimizer(D_A, lr)`, `opt_g, opt_d = make_optimizers(G, D)`),
either side of `Adam(...) if adam else RMSprop(...)`, an optimizer class taken as a parameter
(`optim=torch.optim.RMSprop`) - or, with a MIG906 note, when every optimizer and every model the
loop runs is handed in by the callers (a Trainer's `__init__(gen, dis, opt_gen, opt_dis)`), or
every optimizer comes from a factory of another module handed only models the loop runs and
settings. Anything else (an EMA's `.step()`, a factory also handed something that could be
another model) stays MIG906.

A mixin of roles._Analyser, kept in its own module for size.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import Origin, is_method
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import ModuleIndex, Scope

SETTING_NAME = re.compile(
    r"^(lr|learning_rate|.*_lr|lr_.*|betas?\d?|b\d|eps|.*decay|momentum|wd|args|opts?|cfg|"
    r"config|hparams|hyper.*|settings|device)$",
    re.IGNORECASE,
)


class OptimizerPairs:
    facts: TrainingFacts
    index: ModuleIndex
    imports: object

    # from objects.ObjectRoles: _bindings, _from_prepare, _kept_on_self, _known_optimizer;
    # from trained_models.TrainedModels: _parameters_named

    def _each_trains_a_model(self, owner: Scope, optimizers: list[str]) -> bool:
        """One prepare may hold these optimizers with the models found (module docstring)."""
        if self._all_handed_in(owner, optimizers):
            return True
        for name in optimizers:
            home = self._home_of(name, owner)
            roots = self._optimizer_models(home, name)
            models = self.facts.models
            if not roots or not all(self._kept_on_self(home, r) in models for r in roots):
                return self._made_by_factories(owner, optimizers)
        return True

    def unpaired_optimizers(self, owner: Scope, optimizers: list[str]) -> str:
        """MIG906's message where one prepare cannot hold these optimizers with the models."""
        parts = self.parts_of_one_module(owner, optimizers)
        why = (
            f"each is built on a part of one module ({', '.join(f'`{p}`' for p in parts)}): "
            "that module prepared whole, DDP needs find_unused_parameters=True and each "
            "part stepped through accelerator.unwrap_model(...)"
            if parts else "not every one is built on a model's parameters here"
        )  # fmt: skip
        return (
            f"several optimizers ({', '.join(optimizers)}) train in one loop, and {why}; "
            "pair models, optimizers and backward passes by hand"
        )

    def parts_of_one_module(self, owner: Scope, optimizers: list[str]) -> list[str]:
        """`c_optim = Adam(wgan.critic.parameters())`, `g_optim = Adam(wgan.generator...)`:
        the parts of one object the optimizers are built on, where each is built on one
        part of that one object (else [])."""
        parts = []
        for name in optimizers:
            home = self._home_of(name, owner)
            made = self.facts.origin(home, name)  # a parameter: where its callers made it
            if made is not None:
                home, name = made.scope, made.name
            bindings = [b for b in self._bindings(Origin(home, name)) if not self._from_prepare(b)]
            calls = [b.value for b in bindings if isinstance(b.value, ast.Call)]
            if len(calls) != len(bindings) or not calls:
                return []
            for call in calls:
                arguments = [a.value for a in patterns.call_args(call)]
                first = arguments[0] if arguments else None
                func = first.func if isinstance(first, ast.Call) else None
                if not (isinstance(func, ast.Attribute) and func.attr == "parameters"):
                    return []
                if not isinstance(func.value, ast.Attribute):
                    return []
                parts.append(ast.unparse(func.value))
        heads = {part.rsplit(".", 1)[0] for part in parts}
        return list(dict.fromkeys(parts)) if len(heads) == 1 and len(set(parts)) > 1 else []

    def _made_by_factories(self, owner: Scope, optimizers: list[str]) -> bool:
        """Every optimizer comes from a factory of another module handed models the loop runs
        (`opt_g, opt_d = init_optimizers(net_g, net_d)`, `opt = build_optimizer(cfg, model)`),
        with nothing else that could be a model among its arguments: prepared with those
        models, and a note that the factories must train only the models they are handed."""
        models = self.facts.models
        factories: dict[str, list[str]] = {}
        for name in optimizers:
            home = self._home_of(name, owner)
            bindings = [b for b in self._bindings(Origin(home, name)) if not self._from_prepare(b)]
            if not bindings:
                return False
            for binding in bindings:
                call = binding.value if binding.element is None else binding.element
                if (
                    not isinstance(call, ast.Call)
                    or self._known_optimizer(call)
                    or self._helper_function(home, call.func) is not None
                ):
                    return False
                handed = [self._kept_on_self(home, n) for n in self._handed_models(home, call)]
                if not handed or not all(m in models for m in handed):
                    return False
                factory = factories.setdefault(self.index.source.text_of(call.func), [])
                factory += [m for m in handed if m not in factory]
        made = "; ".join(f"`{f}()` is handed {', '.join(f'`{m}`' for m in handed)}"
                         for f, handed in factories.items())  # fmt: skip
        listed = ", ".join(f"`{name}`" for name in optimizers)
        self._finding(self.facts.training_loops[0].node, "MIG906",
                      f"the optimizers {listed} are made by factories of other modules ({made}): "
                      "prepared with the models the loop runs, which must be every model they "
                      "train", level="note")  # fmt: skip
        return True

    def _handed_models(self, home: Scope, call: ast.Call) -> list[str]:
        """The models among a factory call's arguments; [] (refused) when an argument could be
        a model the loop does not run or a part of one (`model.encoder`)."""
        found: list[str] = []
        for argument in [*call.args, *(k.value for k in call.keywords)]:
            kind = self._argument_kind(home, argument)
            if kind is None:
                return []
            if kind != "setting":
                found.append(kind)
        return found

    def _argument_kind(self, home: Scope, argument: ast.expr) -> str | None:
        """A model's name, "setting" (`lr`, `args.lr`, `(0.5, 0.999)`), or None."""
        if isinstance(argument, ast.Constant):
            return "setting"
        if isinstance(argument, ast.Tuple):
            kinds = [self._argument_kind(home, element) for element in argument.elts]
            return "setting" if all(k == "setting" for k in kinds) else None
        name = patterns.name_of(argument)
        root = name or patterns.root_name(argument)
        if root is None:
            return None
        if self._kept_on_self(home, root) in self.facts.models:
            return root if name is not None else None  # a part of a model is not ours to pair
        return "setting" if self._plain_value(home, root) else None

    def _plain_value(self, home: Scope, name: str) -> bool:
        """A name that holds no model: bound here only to literals and settings (`lr = 2e-4`,
        `betas = (args.b1, args.b2)`), or a parameter named for a setting (`lr`, `args`)."""
        if name in home.params:
            return SETTING_NAME.search(name) is not None
        bindings = self._bindings(Origin(home, name))
        return bool(bindings) and not any(
            isinstance(b.element if b.element is not None else b.value, ast.Call) or (
                b.unpacked and b.element is None) for b in bindings
        )  # fmt: skip

    def _optimizer_models(self, home: Scope, name: str) -> list[str] | None:
        """The models an optimizer made in `home` is built on, for every binding of it: a known
        optimizer (either side of `Adam(...) if adam else RMSprop(...)`), or one a helper of
        this file returns (`opt_g, opt_d = make_optimizers(G, D)` included); None when one
        binding is anything else (an EMA's `.step()`, a factory from another module)."""
        bindings = [b for b in self._bindings(Origin(home, name)) if not self._from_prepare(b)]
        roots: list[str] = []
        for binding in bindings:
            value = binding.element if binding.element is not None else binding.value
            index = _unpacked_index(binding) if binding.element is None else None
            if binding.unpacked and binding.element is None and index is None:
                return None
            choices = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            for call in choices:
                if not isinstance(call, ast.Call):
                    return None
                if index is None and (
                    self._known_optimizer(call) or self._optimizer_class_parameter(home, call)
                ):
                    roots += [root for arg in patterns.call_args(call)
                              for root in patterns.parameter_roots(arg.value) or (
                                  self._parameters_named(home, arg.value) or [])]  # fmt: skip
                    continue
                made = self._optimizer_helper_models(home, call, index)
                if made is None:
                    return None
                roots += made
        return roots or None

    def _all_handed_in(self, owner: Scope, optimizers: list[str]) -> bool:
        """Every optimizer comes from the callers (`self.opt_gen = opt_gen`, `opt_d =
        optimizers["d"]` in the function or `__init__` receiving them) and so does every model
        the loop runs: prepared together, with a note that those models must be every model
        the optimizers train. One optimizer built here and one handed in is not paired."""
        models = self.facts.models
        if not models or not all(self._handed_in(owner, name) for name in optimizers):
            return False
        if not all(self._handed_in(owner, name) for name in models):
            return False
        listed = ", ".join(f"`{name}`" for name in optimizers)
        self._finding(self.facts.training_loops[0].node, "MIG906",
                      f"the optimizers {listed} come from the callers: prepared with the models "
                      f"the loop runs ({', '.join(f'`{m}`' for m in models)}), which must be "
                      "every model they train", level="note")  # fmt: skip
        return True

    def _handed_in(self, owner: Scope, name: str) -> bool:
        """`name` is a parameter of the function that makes it, or bound there only from one
        (`self.opt_gen = opt_gen`, `optimizers["gen"]`; not from `self`, which this class
        fills itself)."""
        home = self._home_of(name, owner)
        received = home.params[1:] if is_method(home) else home.params
        if name in received:
            return True
        bindings = [b for b in self._bindings(Origin(home, name)) if not self._from_prepare(b)]
        for binding in bindings:
            value = binding.element if binding.unpacked else binding.value
            while isinstance(value, (ast.Subscript, ast.Attribute)):  # `optimizers["gen"]`
                value = value.value
            if not (isinstance(value, ast.Name) and value.id in received):
                return False
        return bool(bindings)

    def _optimizer_class_parameter(self, home: Scope, call: ast.Call) -> bool:
        """`optim(generator.parameters(), lr=lr)` where `optim` is a parameter of the function
        making it whose default is an optimizer class (`optim=torch.optim.RMSprop`)."""
        func = call.func
        node = home.node
        if not isinstance(func, ast.Name) or not isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef
        ):
            return False
        arguments = node.args
        positional = arguments.posonlyargs + arguments.args
        defaults = dict(zip([a.arg for a in positional[len(positional) - len(arguments.defaults):]],
                            arguments.defaults))  # fmt: skip
        defaults.update(
            (a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d
        )
        default = defaults.get(func.id)
        if default is None:
            return False
        qualified = self.imports.qualify(default) or ""
        return ".lr_scheduler." not in qualified and (
            qualified.startswith("torch.optim.")
            or patterns.last_part(qualified) in patterns.OPTIMIZER_CLASSES
        )

    def _optimizer_helper_models(
        self, scope: Scope, call: ast.Call, index: int | None
    ) -> list[str] | None:
        """The models handed to a helper of this file that returns a known optimizer built on
        the parameters of its own parameters (`make_optimizer(D_A, lr)` over `def
        make_optimizer(net, lr): return Adam(net.parameters(), lr)`), or a tuple of them of
        which the caller unpacks the `index`-th; None for anything else."""
        helper = self._helper_function(scope, call.func)
        if helper is None:
            return None
        params = helper.params[1:] if isinstance(call.func, ast.Attribute) else helper.params
        returns = [n.value for n in _own_nodes(helper.node) if isinstance(n, ast.Return)]
        if index is not None:
            returns = [v.elts[index] if isinstance(v, ast.Tuple) and index < len(v.elts) else None
                       for v in returns]  # fmt: skip
        built = [_returned_call(helper, value) for value in returns]
        if not built or any(b is None or not self._known_optimizer(b) for b in built):
            return None
        models = []
        for optimizer in built:
            for arg in patterns.call_args(optimizer):
                for root in patterns.parameter_roots(arg.value):
                    handed = _argument_for(call, params, root)
                    if handed is None:
                        return None
                    models.append(handed)
        return models or None

    def _helper_function(self, scope: Scope, func: ast.expr) -> Scope | None:
        """The function of this file a call runs: `helper(...)` defined at module level (or in
        the calling scope), `self.helper(...)` a method of the calling method's class."""
        if isinstance(func, ast.Name):
            parents, name = (scope, self.index.module_scope), func.id
        elif (
            isinstance(func, ast.Attribute)
            and patterns.name_of(func.value) == patterns.SELF
            and is_method(scope)
        ):
            parents, name = (scope.parent,), func.attr
        else:
            return None
        found = [s for s in self.index.scopes
                 if s.kind == "function" and s.name == name and s.parent in parents]  # fmt: skip
        return found[0] if len(found) == 1 else None


def _own_nodes(function: ast.AST):
    """The nodes of a function's body, not of the functions and classes it defines."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _returned_call(helper: Scope, value: ast.expr | None) -> ast.Call | None:
    """`return Adam(...)`, or `return optimizer` where `optimizer = Adam(...)` once."""
    name = patterns.name_of(value) if value is not None else None
    if name is not None:
        bindings = helper.assigns(name)
        value = bindings[0].value if len(bindings) == 1 and not bindings[0].unpacked else None
    return value if isinstance(value, ast.Call) else None


def _argument_for(call: ast.Call, params: list[str], root: str) -> str | None:
    """The name the call passes for the helper's parameter `root` (positional or keyword)."""
    if root not in params:
        return None
    position = params.index(root)
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if index == position:
            return patterns.name_of(arg)
    keyword = next((k.value for k in call.keywords if k.arg == root), None)
    return patterns.name_of(keyword) if keyword is not None else None


def _unpacked_index(binding) -> int | None:
    """`b`'s position in `a, b = make_optimizers(...)`; None for anything else."""
    statement = binding.small
    targets = statement.targets if isinstance(statement, ast.Assign) else []
    if len(targets) != 1 or not isinstance(targets[0], (ast.Tuple, ast.List)):
        return None
    names = [patterns.name_of(element) for element in targets[0].elts]
    return names.index(binding.name) if names.count(binding.name) == 1 else None
