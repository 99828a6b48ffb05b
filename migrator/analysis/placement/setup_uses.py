"""Uses of a training object before `accelerator.prepare(...)` that may see the plain object.

Prepare moves a model's parameters in place and wraps the very optimizer and loader objects it
is given, so set-up code that runs before it is unaffected: a scheduler built on the optimizer
(HF Accelerate's own examples build it before prepare), a checkpoint loaded into the model's or
the optimizer's state, a parameter count, a logger showing the object, an alias kept of the
plain model (`unoptimized_model = model` before `model = torch.compile(model)`), and a helper of
this file that does no more than these with its argument (a class of this file whose
constructor does no more: an EMA keeping a deep copy of the model), an object built on the optimizer
that only holds it (a schedule of the script's own or a library's: `PolynomialLRDecay(
optimizer, ...)`), a read-only diagnostic of the model (`torchsummary.summary(model, ...)`,
catalogue/diagnostics.py). Where such a use comes before the
last definition of the training objects (a DataParallel or DDP wrap, `torch.compile`, a later
optimizer), prepare goes after that definition and the use keeps the plain object, as it had in
the original. A forward, or a hand-over to code this file cannot read, still needs the prepared
object (or a human).
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import diagnostics, patterns
from migrator.analysis.model.chains import module_alias
from migrator.analysis.model.classes import class_named
from migrator.analysis.model.forwards import switched
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Line, Scope

# Attribute uses that are fine on the unprepared object (prepare moves parameters in place).
NEUTRAL_ATTRIBUTES = {
    "to", "cuda", "cpu", "parameters", "named_parameters", "train", "eval", "load_state_dict",
    "state_dict", "apply", "requires_grad_", "dataset", "batch_size", "param_groups",
    "add_param_group", "config", "half", "float", "bfloat16", "modules", "named_modules",
    "children", "zero_grad", "register_forward_hook", "register_buffer", "resize_token_embeddings",
    "gradient_checkpointing_enable", "num_parameters", "print_trainable_parameters",
    "module",  # `ddp_model.module`: the plain model MIG010 unwraps to
}  # fmt: skip
NEUTRAL_CALLEES = {"print", "isinstance", "type", "id", "repr", "str", "hasattr", "getattr"}
# What a helper of this file may also read of its argument: its children, buffers and state.
READ_ATTRIBUTES = {"named_children", "buffers", "named_buffers", "training", "device"}

# `utils.num_params(model)`, `count_parameters(model)`, `get_n_params(model)`
PARAMETER_COUNT = re.compile(r"(^|_)(num|count|n|number|total|sum)_?(of_)?(trainable_)?param")
# `add_weight_decay(model, wd)`, `param_groups_lrd(model, ...)`, `get_params_groups(student)`,
# `create_optimizer(args, model)`: parameter groups and optimizers built from the model's
# parameters (timm, MAE, DINO, ConvNeXt), from a module this file does not hold
# `load_scheduler(cfg, optimizer)`, `build_lr_scheduler(...)`: a scheduler on the optimizer
PARAMETER_GROUPS = re.compile(
    r"(^|_)(param|params|parameter|parameters)(_|$)|weight_decay|(create|build|get|make)_optim"
    r"|(create|build|get|make|load)_(lr_)?scheduler"
)
# `logger.info(model)`, `logging.debug(...)`, `log.nofmt(model)`: a logger writes the object out
LOGGER = re.compile(r"^_?(logger|logging|log|LOGGER|LOG)$")
# `load_checkpoint(model, optimizer, path)`: state loaded into the plain objects
CHECKPOINT_LOAD = re.compile(
    r"^(load|restore|resume|restart)_(\w+_)?(checkpoint|ckpt|model|weights|state|state_dict)s?$"
)

# `weights_init(net)`, `init_weights(model)`, `initialize_weights(model)`: weights set in place
# by a helper from another module (DCGAN-style), which reads and writes parameters, runs nothing
WEIGHT_INIT = re.compile(
    r"^(weights?_init\w*|init_?weights?\w*|initiali[sz]e_weights?\w*|init_params|init_model)$"
)
# `is_metric_model(net)`, `has_aux_head(model)`: a predicate reads the object
PREDICATE = re.compile(r"^(is|has)_\w+$")


def is_setup_use(use, facts, seen: frozenset = frozenset()) -> bool:
    """Can this use of a training object (a Use of the index) see the unprepared object?"""
    if use.kind == "other":
        return _alias(use, facts, seen)
    if use.kind != "arg" or use.call is None:
        return False
    call = use.call
    if patterns.is_scheduler_call(call, facts.index.imports):
        return True  # `StepLR(optimizer, ...)`: the scheduler holds the object prepare wraps
    if use.callee in NEUTRAL_CALLEES or diagnostics.is_diagnostic(use.callee):
        return True
    if use.name in facts.optimizers and _holds_optimizer(call, facts):
        return True
    if use.callee == "copy.deepcopy":
        return _copied_as_placed(use)
    name = patterns.last_part(use.callee)
    if PARAMETER_COUNT.search(name.lower()) or CHECKPOINT_LOAD.search(name.lower()):
        return True
    func = call.func
    in_file = isinstance(func, ast.Name) and func.id in facts.index.functions
    if not in_file and PARAMETER_GROUPS.search(name.lower()):
        return True
    if not in_file and (WEIGHT_INIT.match(name.lower()) or PREDICATE.match(name.lower())):
        return True  # a helper of this file is read instead (_reads_only)
    receiver = patterns.name_of(func.value) if isinstance(func, ast.Attribute) else None
    if receiver is not None and LOGGER.match(receiver.rsplit(".", 1)[-1]):
        return True
    helper = _called_here(facts.index, func)  # `EMA(model, decay)`: its constructor
    return helper is not None and _reads_only(helper, call, use.node, facts, seen)


def _called_here(index, func: ast.expr) -> Scope | None:
    """The function of this file a call runs: a function by its name, or the `__init__` of a
    class of this file it constructs."""
    function = index.functions.get(func.id) if isinstance(func, ast.Name) else None
    if function is None:
        cls = class_named(index, func)
        function = next((m for m in cls.children if m.name == "__init__"), None) if cls else None
    return function


def copies_argument(index, use) -> bool:
    """`EMA(model, decay)` whose `__init__` keeps `copy.deepcopy(model)`, a `make_ema(model)`
    of this file doing so: a copy taken where the model is when it is handed over."""
    from migrator.analysis.model.origins import argument_for

    function = _called_here(index, use.call.func)
    if function is None:
        return False
    param = next(
        (p for p in function.params if argument_for(use.call, function, p) is use.node), None
    )
    return param is not None and any(
        isinstance(node, ast.Call)
        and index.imports.qualify(node.func) == "copy.deepcopy"
        and any(isinstance(a, ast.Name) and a.id == param for a in node.args)
        for node in ast.walk(function.node)
    )


def _holds_optimizer(call: ast.Call, facts) -> bool:
    """`PolynomialLRDecay(optimizer, max_decay_steps=n)`, `Warmup(optimizer)`: a class built on
    the optimizer that holds it - a schedule reads and writes its `param_groups`, which the
    prepared optimizer shares with the plain one it wraps. A class of this file counts where
    none of its methods steps what it holds; a function, an optimizer built on it (a
    Lookahead stepped in its place) or a loader never does."""
    imports = facts.index.imports
    if patterns.is_optimizer_call(call, imports) or patterns.is_loader_call(call, imports):
        return False
    cls = class_named(facts.index, call.func)
    if cls is not None:
        return not _steps_held(cls)
    called = dotted_name(call.func)
    if called is None or called in facts.index.functions:
        return False
    return patterns.last_part(called)[:1].isupper()


def _steps_held(cls: Scope) -> bool:
    """Does a method of `cls` call `.step()` on something it holds (`self.optimizer.step()`)?"""
    methods = [m for m in cls.children if m.kind == "function"]
    return any(site.method == "step" and patterns.name_of(site.receiver) is not None
               and patterns.name_of(site.receiver).startswith(patterns.SELF + ".")
               for method in methods for site in method.calls)  # fmt: skip


def _copied_as_placed(use) -> bool:
    """`ema = deepcopy(model)` before prepare copies the plain model, as the original did
    before its DDP wrap (DiT), and where the original had placed it: MIG003 keeps a placement
    of the model that such a copy follows (`model = Net().to(device)` or `model.to(device)`
    before `ema = deepcopy(model)`), and where there was none the copy was on the CPU in the
    original too."""
    return True


def _alias(use, facts, seen) -> bool:
    """`plain = model` (`raw = model.module if ddp else model`): a second name for the object
    as it is now (the original's alias held the same unwrapped object), used for no more than set-up reads (`plain.state_dict()`),
    never to run or train the model. Not where the alias is a training object itself."""
    line = use.statement.node
    if not isinstance(line, Line) or len(line.body) != 1:
        return False
    small = line.body[0]
    if not isinstance(small, ast.Assign) or not _names_plainly(small.value, use.node):
        return False
    targets = [patterns.name_of(t) for t in small.targets]
    trained = {*facts.models, *facts.optimizers, *facts.train_loaders, *facts.eval_loaders}
    if any(t is None or t in trained or "." in t for t in targets):
        return False
    scope = use.statement.block.scope
    if any(t in scope.declared_global for t in targets):
        return False  # a global alias: read anywhere
    uses = [u for t in targets for s in _visible(scope, t) for u in s.uses.get(t, [])]
    return all(_read(u, facts, seen) for u in uses)


def _names_plainly(value: ast.expr, node: ast.AST) -> bool:
    """`value` is the object `node` names, as the original held it unwrapped: `model`, or
    `model.module if ddp else model` where `model` was wrapped in DDP (MIG010 unwraps it)."""
    if value is node:
        return True
    if not isinstance(value, ast.IfExp) or node not in (value.body, value.orelse):
        return False
    alias = module_alias(value)
    return isinstance(node, ast.Name) and alias is not None and alias[0] == node.id


def _read(use, facts, seen) -> bool:
    if use.kind == "attr":  # its parts read or set (`m.fc.weight.data.normal_()`), not called
        return use.attr in NEUTRAL_ATTRIBUTES | READ_ATTRIBUTES or use.call is None
    return is_setup_use(use, facts, seen)


def _reads_only(helper: Scope, call: ast.Call, argument: ast.AST, facts, seen) -> bool:
    """Does this file's `helper` only read the parameter `argument` is passed as (its
    parameters, children and state, a count, a log line, a checkpoint loaded into it)?"""
    from migrator.analysis.model.origins import argument_for

    if id(helper) in seen or helper.kind != "function":
        return id(helper) in seen  # recursion: what the first visit decides
    param = next((p for p in helper.params if argument_for(call, helper, p) is argument), None)
    if param is None:
        return False
    seen = seen | {id(helper)}
    uses = [u for scope in _visible(helper, param) for u in scope.uses.get(param, [])]
    if helper.assigns(param):  # rebound inside: beyond what this reads
        return False
    return all(_read(use, facts, seen) for use in uses)


def _visible(scope: Scope, name: str) -> list[Scope]:
    found = [scope]
    for child in scope.children:
        if child.kind == "function" and name not in child.params and not child.is_local(name):
            found.extend(_visible(child, name))
    return found


def runs_object(use, name: str, facts) -> bool:
    """Does this hard use of a model or optimizer need the prepared object (a forward, a
    hand-over to code that may run it), rather than set it up (an attribute written or read,
    `print(model)`, a state loaded into it), which the plain object serves before prepare?"""
    if name in facts.train_loaders or name in facts.eval_loaders:
        return container_of(use) is not None  # the plain loader would stay in the container
    if aliased_by_mode_switch(use):
        return True  # `model = self.model.train()`: the loop would run the plain model
    return use.kind != "attr" and not _displayed(use) and not is_setup_use(use, facts)


def aliased_by_mode_switch(use) -> bool:
    """`model = self.model.train()`: the use's call switches a mode and its result is bound
    to a second name, which holds the object as it is then."""
    line = use.statement.node
    small = line.body[0] if isinstance(line, Line) and len(line.body) == 1 else None
    return (
        isinstance(small, ast.Assign)
        and use.call is not None
        and small.value is use.call
        and switched(use.call)
    )


def container_of(use) -> str | None:
    """The name `use`'s statement binds to a container holding the object itself, at any
    depth of literals (`loaders = {"train": loader_train, ...}`, `pairs = [("train",
    train_loader), ...]`), else None."""
    line = use.statement.node
    if not isinstance(line, Line) or len(line.body) != 1:
        return None
    small = line.body[0]
    if not isinstance(small, ast.Assign) or len(small.targets) != 1:
        return None
    target = small.targets[0]
    if not isinstance(target, ast.Name) or small.value is use.node:
        return None
    return target.id if _holds(small.value, use.node) else None


def _holds(value: ast.expr, node: ast.AST) -> bool:
    if value is node:
        return True
    if isinstance(value, ast.Dict):
        return any(_holds(v, node) for v in value.values)
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return any(_holds(e, node) for e in value.elts)
    return False


def _displayed(use) -> bool:
    """`model` alone on a line (a notebook cell showing the model)."""
    line = use.statement.node
    return (
        isinstance(line, Line)
        and len(line.body) == 1
        and isinstance(line.body[0], ast.Expr)
        and line.body[0].value is use.node
    )


def use_words(use) -> str:
    """` (handed to `warm_up()`, which may run it)`: what a use that needs the prepared
    object does, for MIG900; empty where the line says it."""
    if use is None:
        return ""
    if use.kind == "runs":  # a call of a function that trains on it, reading it from here
        return f" (by `{use.callee}()`, which trains with it)"
    if use.kind == "call":
        return " (a forward)"
    if use.kind == "arg" and use.call is not None:
        callee = use.callee or ast.unparse(use.call.func)
        return f" (handed to `{callee}()`, which may run it)"
    if use.kind == "iter":
        return " (iterated)"
    if use.kind == "attr" and use.call is not None:
        return f" (`.{use.attr}()` called)"
    return ""
