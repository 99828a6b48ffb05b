"""How an expression's per-process value is computed (a mixin of values.PerProcessValues):
names from the walk's state, attributes (a loader's `.dataset`, the accelerator's
`num_processes`, an instance's attributes as its methods set them), calls (gathers and
reductions, `len`, `iter`/`next`, the program's own functions per call, anything else
counting what its arguments count), arithmetic and collections."""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.catalogue.outputs import module_function
from migrator.analysis.catalogue.randomness import (
    ALL_RNGS,
    EVERY_METHOD,
    PER_PROCESS,
    is_draw,
    is_seed,
    rng_of,
)
from migrator.analysis.effects.extents import (
    CONST,
    GLOBAL,
    LOCAL,
    LOCAL_ITEMS,
    NOTHING,
    Value,
    _gathered,
    _same_everywhere,
    arithmetic,
    combine,
    join,
    local_items,
)
from migrator.analysis.model.classes import overrides
from migrator.analysis.syntax.index import Scope

GATHERS = {"gather", "gather_for_metrics", "reduce", "gather_object"}
# `accelerator.unwrap_model(model)`: the plain module inside the wrapper, with this process's
# own buffers (BatchNorm's running statistics, which each process updates on its own batches:
# the wrapper broadcasts them only at its own forward), so what it computes may differ per
# process (h9 review: an early stop on its validation loss left one process waiting)
UNWRAPPED = "unwrapped"
# calls handed the plain module that run no forward of it
NOT_RUN = {"torch.save", "copy.deepcopy", "isinstance", "print", "type", "id", "repr", "str"}
PREPARES = {"prepare", "prepare_data_loader", "prepare_model"}
# what a tensor is and where it lives, alike on every process, not what it holds
DESCRIPTIONS = {"device", "dtype", "is_cuda", "ndim", "layout", "requires_grad", "is_sparse"}


class ValueExpressions:
    _seeds: dict[str, list[bool]] | None = None  # RNG -> its seeds (True: per process)

    def _eval(self, expr: ast.AST, scope: Scope) -> Value:
        value = self._evaluate(expr, scope)
        self.seen.setdefault(id(expr), set()).add(value.extent)
        self.roles_seen[id(expr)] = self.roles_seen.get(id(expr), frozenset()) | value.roles
        return value

    def _evaluate(self, expr: ast.AST, scope: Scope) -> Value:
        if isinstance(expr, ast.Constant):
            return NOTHING
        name = patterns.name_of(expr)
        if name is not None and not isinstance(expr, ast.Call):
            return self._lookup(scope, name)
        if isinstance(expr, ast.Attribute):
            return self._attribute(expr, scope)
        if isinstance(expr, ast.Call):
            return self._call(expr, scope)
        if isinstance(expr, ast.Subscript):
            index = self._eval(expr.slice, scope)
            held = self._eval(expr.value, scope)
            if isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape":
                return _size(held)  # `x.shape[0]`
            if held.extent == CONST and index.extent == LOCAL:
                return Value(LOCAL)  # `data[ix]`, `ix` this process's own draw: its own rows
            return Value(held.extent, _taken(held.roles))  # `loaders[phase]`: a loader
        if isinstance(expr, ast.Lambda):
            return NOTHING
        if isinstance(expr, ast.IfExp):  # `tqdm(loader) if progress else loader`: either
            self._eval(expr.test, scope)
            return join(self._eval(expr.body, scope), self._eval(expr.orelse, scope))
        if isinstance(expr, ast.BinOp):
            return arithmetic(expr.op, self._eval(expr.left, scope), self._eval(expr.right, scope))
        if isinstance(expr, ast.Compare) and self._none_test(expr, scope):
            return NOTHING  # `best is None`: alike on every process (see _none_test)
        if isinstance(expr, ast.Compare) and self._key_test(expr, scope):
            return self._eval(expr.left, scope)  # `key in history`: the keys decide
        if isinstance(expr, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            children = [c for c in ast.iter_child_nodes(expr) if isinstance(c, ast.expr)]
            return combine(*(self._eval(c, scope) for c in children))
        if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in expr.generators:
                self._loop_targets(scope, generator.target, generator.iter)
            parts = [expr.elt] if not isinstance(expr, ast.DictComp) else [expr.key, expr.value]
            values = [self._eval(p, scope) for p in parts]
            return Value(join(*values).extent, _held(values))  # `{p: loader(p) for p in ...}`
        children = [c for c in ast.iter_child_nodes(expr) if isinstance(c, ast.expr)]
        values = [self._eval(c, scope) for c in children]
        gathered = _gathered(*values)  # tuples, f-strings
        if isinstance(expr, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
            return Value(gathered.extent, gathered.roles | _held(values))
        return gathered

    def _attribute(self, expr: ast.Attribute, scope: Scope) -> Value:
        owner = self._eval(expr.value, scope)
        if expr.attr in DESCRIPTIONS:
            return NOTHING  # `x.device.type` shown beside a loss is no share of the data
        if expr.attr == "shape":
            return _size(owner)  # `images.shape`: this process's batch size, not its data
        if "accelerator" in owner.roles:
            # ranks and main-process flags differ per process but count no data: guards are
            # processes.py's business
            return Value(CONST, frozenset({"world"})) if expr.attr == "num_processes" else NOTHING
        if expr.attr == "dataset" and owner.roles & {"loader", "plainloader"}:
            return Value(GLOBAL, frozenset({"dataset"}))
        for role in owner.roles:  # `meter.avg` of an instance of a class of this program
            if role.startswith("instance:"):
                held = self.names.get((int(role.split(":", 1)[1]), f"self.{expr.attr}"))
                if held is not None:
                    return Value(held.extent)
        return Value(owner.extent)

    def _call(self, call: ast.Call, scope: Scope) -> Value:
        func = call.func
        arguments = [*call.args, *(k.value for k in call.keywords)]
        if patterns.is_accelerator_call(call, self.imports):
            return Value(CONST, frozenset({"accelerator"}))
        if patterns.is_dataset_call(call, self.imports):
            for argument in arguments:
                self._eval(argument, scope)
            # `TensorDataset(x, y)`, `MNIST(...)`: the same on every process; `len()` of it
            # counts the whole set
            return Value(CONST, frozenset({"dataset"}))
        for recognise, role in (
            (patterns.is_loader_call, "plainloader"), (patterns.is_optimizer_call, "optimizer"),
            (patterns.is_scheduler_call, "scheduler"),
        ):  # fmt: skip
            if recognise(call, self.imports):
                for argument in arguments:
                    self._eval(argument, scope)
                return Value(CONST, frozenset({role}))
        if isinstance(func, ast.Attribute) and self._is_accelerator(func.value, scope):
            values = [self._eval(a, scope) for a in arguments]
            if func.attr == "reduce" and _reduced_by(call) == "mean":
                return Value(CONST)  # an average over the processes: alike everywhere, and
                # on the scale of one process's value (a batch's mean loss over its size)
            if func.attr in GATHERS:
                return Value(GLOBAL)
            if func.attr in PREPARES and len(call.args) == 1:
                return self._prepared(call.args[0], scope)
            if func.attr == "unwrap_model" and _running_buffers(self.index.source.text):
                return Value(join(*values).extent, frozenset({UNWRAPPED}))
            return Value(join(*values).extent)
        qualified = self.imports.qualify(func) or ""
        if is_draw(qualified) and self._draws_differ(qualified):
            for argument in arguments:
                self._eval(argument, scope)
            given = any(k.arg == "generator" for k in call.keywords)
            return Value(CONST if given else LOCAL)  # this process's own draw
        drawn = self.imports.helper_draws.get(qualified)
        drawn = drawn if drawn is not None and self._draws_differ(drawn.draw) else None
        if (drawn is not None and drawn.methods is None) or self._method_draws(func, scope):
            for argument in arguments:
                self._eval(argument, scope)
            return Value(LOCAL)  # a project helper's own draws (program/helper_draws.py)
        if qualified == "len" and call.args:
            inner = self._eval(call.args[0], scope)
            if "loader" in inner.roles:
                return Value(LOCAL, frozenset({"iterations"}))  # the batches this process sees
            if "filled" in inner.roles and inner.extent == LOCAL:
                return Value(LOCAL, frozenset({"iterations"}))  # one item per pass
            if inner.roles & {"dataset", "plainloader"}:
                return Value(GLOBAL)
            return _size(inner)
        if qualified in ("iter", "next") and call.args:
            inner = self._eval(call.args[0], scope)
            items = LOCAL if local_items(inner) else inner.extent  # a prepared loader's
            if inner.roles & {"loader", "iterator"}:  # or a generator's, which count theirs
                return Value(items, frozenset({"iterator"} if qualified == "iter" else ()))
            return Value(inner.extent)
        site = self.sites.get(id(call))
        callee = self.graph.callee(site) if site is not None else None
        if callee is not None and callee.kind == "function":
            # a base's stub the program's classes override (`self.calculate_loss(batch)`):
            # what any override returns
            targets = overrides(self.index, callee) or [callee]
            returned = join(*(self._summary(target, call, scope) for target in targets))
            cls = callee.parent
            if callee.name == "__init__" and cls is not None and cls.kind == "class":
                if _is_dataset_class(cls.node, self.imports):  # `len(data)`: the whole set's
                    return Value(CONST, frozenset({f"instance:{id(cls)}", "dataset"}))
                return Value(CONST, frozenset({f"instance:{id(cls)}"}))  # `Meter(...)`
            return returned
        receiver = self._eval(func, scope)
        values = [self._eval(a, scope) for a in arguments]
        if isinstance(func, ast.Attribute) and func.attr == "size" and len(call.args) == 1:
            return _size(receiver)  # `x.size(0)`
        if _runs_unwrapped(func, receiver, values, qualified):
            return Value(LOCAL)
        wrapped = [v for v in values if v.roles & {"loader", "iterator"}]
        if wrapped and (isinstance(func, ast.Name) or module_function(call, self.imports)):
            # `tqdm(loader)`, `enumerate(loader)`, `itertools.cycle(it)`, bound to a name or
            # not, may be an iterator over the items of what it wraps: iterated, it yields
            # them; the value itself counts nothing (`load_checkpoint(path, model)` neither)
            local = any(local_items(v) for v in wrapped)
            return Value(CONST, frozenset({"iterator", LOCAL_ITEMS} if local else {"iterator"}))
        if isinstance(func, ast.Name) and not receiver.roles:
            receiver = NOTHING  # a function's own extent: only its arguments count
        # a function of counts every process holds alike (`"{} of {}".format(step,
        # len(loader))`, `math.ceil(len(loader) / k)`) is one too
        roles = _same_everywhere([receiver, *values])
        if drawn is not None:  # an instance of a project class whose methods draw
            roles |= {f"{DRAWN}{qualified}"}
        return Value(join(receiver, *values).extent, roles)

    def _method_draws(self, func: ast.expr, scope: Scope) -> bool:
        """Is `func` a drawing method of an instance of a project class whose methods draw
        (`reader.data_gen` of `reader = DataReader(...)`)?"""
        if not isinstance(func, ast.Attribute):
            return False
        for role in self._eval(func.value, scope).roles:
            if role.startswith(DRAWN):
                methods = self.imports.helper_draws[role.removeprefix(DRAWN)].methods
                if EVERY_METHOD in methods or func.attr in methods:
                    return True
        return False

    def _none_test(self, expr: ast.Compare, scope: Scope) -> bool:
        """`best is None` (`is not None`) where the name is bound to None and otherwise only
        to values that are never None (numbers, arithmetic, comparisons, names bound so): every
        process has bound it alike, so the test comes out alike, whatever the value."""
        if len(expr.ops) != 1 or not isinstance(expr.ops[0], (ast.Is, ast.IsNot)):
            return False
        compared = expr.comparators[0]
        if not (isinstance(compared, ast.Constant) and compared.value is None):
            return False
        return isinstance(expr.left, ast.Name) and self._never_none(expr.left.id, scope, 3)

    def _key_test(self, expr: ast.Compare, scope: Scope) -> bool:
        """`key in history` (`not in`) where `history` is only ever bound to a dict literal
        with constant keys or an empty `dict()`/`defaultdict(...)`: the processes fill it
        with their own values under the same keys, so only `key` decides."""
        if len(expr.ops) != 1 or not isinstance(expr.ops[0], (ast.In, ast.NotIn)):
            return False
        held = expr.comparators[0]
        name = patterns.name_of(held)
        if name is None or isinstance(held, ast.Call):
            return False
        owner = self._owner(scope, name)
        if owner is None:
            return False
        holders = [owner] if not name.startswith("self.") else [
            m for m in owner.children if m.kind == "function"
        ]  # fmt: skip
        bindings = [b for h in holders for b in h.bindings.get(name, [])]
        return bool(bindings) and all(
            b.kind == "assign" and not b.unpacked and _keyed_dict(b.value, self.imports)
            for b in bindings
        )

    def _never_none(self, name: str, scope: Scope, depth: int) -> bool:
        owner = self._owner(scope, name)
        if owner is None or depth == 0:
            return False
        bindings = owner.assigns(name)
        if not bindings or any(b.kind not in ("assign", "augassign") for b in bindings):
            return False
        for binding in bindings:
            value = binding.element if binding.unpacked else binding.value
            if isinstance(value, ast.Constant) and value.value is None:
                continue
            if isinstance(value, ast.Name):
                if not self._never_none(value.id, owner, depth - 1):
                    return False
            elif not _never_none_value(value):
                return False
        return True

    def _draws_differ(self, qualified: str) -> bool:
        """Does each process draw its own numbers from the RNG `qualified` draws from? Yes
        unless the program seeds that RNG (or all of them, `set_seed(args.seed)`) with one
        value on every process and nothing seeds it per process after (`seed +
        accelerator.process_index`, MIG009's offset). Unseeded, torch draws its seed at
        start-up, per process."""
        if self._seeds is None:
            self._seeds = {}
            for site in self.index.calls():
                seeded = self.imports.qualify(site.node.func) or ""
                if is_seed(seeded):
                    apart = any(word in ast.unparse(a) for a in site.node.args
                                for word in PER_PROCESS)  # fmt: skip
                    self._seeds.setdefault(rng_of(seeded), []).append(apart)
        seeds = [*self._seeds.get(rng_of(qualified), []), *self._seeds.get(ALL_RNGS, [])]
        return not seeds or any(seeds)


DICTS = {"dict", "collections.defaultdict", "collections.OrderedDict"}


def _keyed_dict(value: ast.expr | None, imports) -> bool:
    """`{"loss": [], "acc": []}` (constant keys), `dict()`, `defaultdict(list)`."""
    if isinstance(value, ast.Dict):
        return all(isinstance(k, ast.Constant) for k in value.keys)
    if not isinstance(value, ast.Call) or value.keywords:
        return False
    made = imports.qualify(value.func)
    if made == "collections.defaultdict":
        return len(value.args) <= 1  # its default factory
    return made in DICTS and not value.args


def _never_none_value(value: ast.expr | None) -> bool:
    """A number, arithmetic, a comparison, `loss.item()`: never None."""
    if isinstance(value, (ast.BinOp, ast.Compare, ast.Constant, ast.UnaryOp)):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and (
        value.func.attr == "item"
    )  # fmt: skip


LOADER_ROLES = {"loader", "plainloader"}
DRAWN = "drawn:"  # an instance of a project class whose methods draw: `drawn:<its class>`


def _reduced_by(call: ast.Call) -> str:
    """The reduction of `accelerator.reduce(x, "mean")` (`reduction=`; "sum" by default)."""
    given = call.args[1] if len(call.args) > 1 else None
    given = next((k.value for k in call.keywords if k.arg == "reduction"), given)
    return given.value if isinstance(given, ast.Constant) else "sum"


def _is_dataset_class(node, imports) -> bool:
    """A class of the program made on torch's `Dataset` (`class Rows(Dataset):`): its
    instances hold the whole data set on every process."""
    return isinstance(node, ast.ClassDef) and any(
        patterns.last_part(imports.qualify(base)) in patterns.DATASET_BASES for base in node.bases
    )


def _held(values: list[Value]) -> frozenset:
    """A literal container holding loaders (`{"train": train_loader, "val": val_loader}`):
    `held:loader` (prepared) / `held:plainloader` for what an item of it is."""
    return frozenset(f"held:{role}" for v in values for role in v.roles & LOADER_ROLES)


def _taken(roles: frozenset) -> frozenset:
    """The roles of an item taken from a container of loaders (`loaders[phase]`)."""
    return frozenset(r.removeprefix("held:") for r in roles if r.startswith("held:"))


def _size(batch: Value) -> Value:
    """A size read from a value: of this process's batch, a batch size every process holds
    alike (`len(x)`, `x.size(0)`, `x.shape[0]`)."""
    if batch.extent == LOCAL:
        return Value(LOCAL, frozenset({"batchsize"}))
    return Value(batch.extent)


# what a module whose models may keep running statistics shows of them: BatchNorm's kinds, a
# buffer of its own, a torchvision or timm network (ResNets, VGGs ... are BatchNorm models)
BUFFERS = re.compile(r"BatchNorm|InstanceNorm|register_buffer|running_mean|torchvision\.models"
                     r"|\btimm\b|\b(?:res|wide_res|resnext|dense|efficient|mobile|reg)net|\bvgg",
                     re.IGNORECASE)  # fmt: skip


def _running_buffers(text: str) -> bool:
    """May a model of this module keep running statistics (updated per process in training,
    so the plain module inside the wrapper differs per process)? Read from the module's text:
    a plain `nn.Linear` stack has none, and its plain module computes alike everywhere."""
    return BUFFERS.search(text) is not None


def _runs_unwrapped(func, receiver, values, qualified: str) -> bool:
    """Does the call run the plain module's forward: called itself (`unwrapped(x)`,
    `unwrapped.forward(x)`), or handed to a function of another module that may
    (`evaluate(accelerator.unwrap_model(model), loader)`)?"""
    if UNWRAPPED in receiver.roles and not isinstance(func, ast.Attribute):
        return True
    if isinstance(func, ast.Attribute) and func.attr in ("forward", "generate"):
        return False  # the receiver is evaluated as a whole: its roles are the attribute's
    return qualified not in NOT_RUN and any(UNWRAPPED in v.roles for v in values)
