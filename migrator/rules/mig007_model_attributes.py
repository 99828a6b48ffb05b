"""MIG007 model attributes: a prepared model is wrapped in DistributedDataParallel, which answers
the nn.Module API (`parameters()`, `train()`, `state_dict()`, calling it) but not the model's
own attributes and methods (`model.weight`, `model.config`, `model.generate(...)`), nor its class
(`model.__class__.__name__`, `type(model)`, `isinstance(model, Net)`). Those go through
`accelerator.unwrap_model(model)`, on every target (HF Accelerate fails the same way), and so
do copies (`best = copy.deepcopy(model)`: a copied wrapper saves `module.` keys).
`hasattr(model, "x")` and `getattr`/`setattr` by name go through it too, and so does indexing
(`model[-1]` of an nn.Sequential: DDP has no `__getitem__`), and the module API DDP answers
about itself (`model.children()`: its one child is the model; `get_submodule("layer1")`:
DDP's paths start with `module.`).
`model.no_sync()` exists only on DDP: it becomes `accelerator.no_sync(model)`.
A forward only the main process runs (an evaluation under `if accelerator.is_main_process:`)
runs the unwrapped model: DDP's forward syncs buffers with the other processes, which are not
there to answer.

`state_dict()` / `load_state_dict()` go through `unwrap_model` too: DDP's keys carry a
`module.` prefix, so a checkpoint saved unwrapped (MIG030, accelerator.save) loads only into the
unwrapped model, and a state copied from the wrapper would not load into a plain model. In a
function that reads the unwrapped `state_dict()`, `named_parameters()` (and the other `named_*`)
are unwrapped too, so names from both still match (a FedProx term looking parameters up by
their state-dict keys).

Functions of this file that the training functions call with the prepared model (a
`validation_step(model, batch)` beside `training_step`) get the same treatment. Helpers this
file cannot rewrite that are handed the model (`save_checkpoint(model, path)` imported) get
`accelerator.unwrap_model(model)` at the call, unless they train it (model_hand_offs.py).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.patterns import MODULE_API, SELF
from migrator.analysis.effects.processes import DEAD
from migrator.analysis.model.chains import chain_uses, read_chains
from migrator.analysis.model.origins import class_methods, is_method
from migrator.rules.base import Rule, RuleContext
from migrator.rules.model_hand_offs import hand_models_on

NAMED = {"named_parameters", "named_buffers", "named_children", "named_modules"}
# nn.Module API that DDP answers about itself, not the model: its one child is the model
# (`list(model.children())[:-1]` would drop the model whole), paths start with `module.`,
# and what is added or registered lands on the wrapper
STRUCTURE = {
    "children", "named_children", "get_submodule", "get_parameter", "get_buffer",
    "add_module", "register_buffer", "register_parameter",
}  # fmt: skip


class ModelAttributes(Rule):
    code = "MIG007"
    name = "model-attributes"
    summary = "model.<own attribute> -> accelerator.unwrap_model(model).<attribute> after prepare"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        facts = context.facts
        imports = facts.index.imports
        handed: dict[int, set[str]] = {}  # id(function) -> parameters handed the model
        scopes = _scopes_with_prepared_model(context, handed)
        for scope in [*scopes, *(m for m in _other_methods(facts) if m not in scopes)]:
            held = [(c, chain_uses(scope, c, imports)) for c in read_chains(scope)]
            for name, uses in [*scope.uses.items(), *held]:  # `model`, `self.cfg.model`
                if context.prepared_role(scope, name) != "model" and name not in handed.get(
                    id(scope), ()
                ):
                    continue  # (a parameter handed the prepared model at one call and a
                    # plain one at another is unwrapped: the plain one comes back as it is)
                if scope not in scopes and not name.startswith(SELF + "."):
                    continue
                keyed = any(use.kind == "attr" and use.attr == "state_dict" for use in uses)
                for use in uses:
                    own = use.kind == "attr" and (
                        use.attr not in MODULE_API
                        or use.attr in STRUCTURE
                        or (keyed and use.attr in NAMED)
                    )
                    alone = use.kind == "call" and _main_only(context, scope, use.statement)
                    if not (
                        own
                        or alone
                        or use.kind == "subscript"
                        or _named_attribute(use)
                        or _type_query(use, facts.index.imports)
                        or _copied(use)
                    ):
                        continue
                    if context.plan.reloaded_at(name, use.statement):
                        continue  # a model re-created after training is a plain model
                    if context.plan.before_prepare(use.statement, name) and (
                        scope is context.facts.owner or scope is context.facts.homes.get(name)
                    ):
                        continue  # set-up before prepare (a checkpoint loaded): the plain model
                    if use.attr == "no_sync" and use.call is not None and not use.call.args:
                        # Only DDP has no_sync(); accelerator.no_sync works on 1 process too.
                        no_sync = f"{context.accelerator_expr('no_sync')}({context.source.text_of(use.node)})"
                        context.edits.replace(use.call, lambda _t, _r, n=no_sync: n)
                        context.need_accelerator_at(use.statement)
                        continue
                    context.unwrap(use.node)
                    context.need_accelerator_at(use.statement, soft=use.node)
        hand_models_on(context, scopes)


def _scopes_with_prepared_model(context: RuleContext, handed: dict[int, set[str]]) -> list:
    """The training scopes, the function that prepares, the functions reading the module's
    prepared model as a global, and the functions of this file they (or those functions) call
    with the prepared model as an argument, after it is prepared (`handed`: the parameters
    that call fills with it)."""
    scopes = list(context.facts.training_scopes)
    owner = context.facts.owner
    if owner is not None and owner.kind == "function" and owner not in scopes:
        scopes.append(owner)  # a `run_training()` that prepares, and hands the model on
    if owner is not None and owner.kind == "module":
        # functions reading the module's prepared model as a global (`test_func()` run after
        # training): unwrapping a model not yet prepared gives it back as it is
        for function in context.facts.index.scopes:
            if function.kind != "function" or function in scopes:
                continue
            free = [n for n in function.uses if "." not in n and not function.is_local(n)]
            if any(context.prepared_role(function, name) == "model" for name in free):
                scopes.append(function)
    functions = context.facts.index.functions
    for scope in scopes:  # grows while it is walked
        for site in scope.calls:
            callee = functions.get(site.callee or "")
            if callee is None:
                continue
            if scope is owner and context.plan.before_prepare(site.statement):
                continue  # set-up on the plain model (`init_weights(model)`)
            filled = _filled_with_model(context, scope, site.node, callee)
            if filled:
                handed.setdefault(id(callee), set()).update(filled)
                if callee not in scopes:
                    scopes.append(callee)
    return scopes


def _filled_with_model(context: RuleContext, scope, call: ast.Call, callee) -> set[str]:
    """The parameters of `callee` that `call` (in `scope`) passes the prepared model."""
    filled: set[str] = set()
    for position, arg in enumerate(call.args):
        if _is_model(context, scope, arg) and position < len(callee.params):
            filled.add(callee.params[position])
    for keyword in call.keywords:
        if keyword.arg is not None and _is_model(context, scope, keyword.value):
            filled.add(keyword.arg)
    return filled


def _is_model(context: RuleContext, scope, arg: ast.expr) -> bool:
    return isinstance(arg, ast.Name) and context.prepared_role(scope, arg.id) == "model"


def _named_attribute(use) -> bool:
    """`hasattr(model, "best_state")`, `getattr(model, "config", None)`, `setattr(model, ...)`:
    an attribute by name, which DDP answers only for its own (False, or AttributeError, for
    the model's); a name in nn.Module's API (`hasattr(model, "module")`) keeps the wrapper."""
    call = use.call
    if use.kind != "arg" or use.callee not in ("hasattr", "getattr", "setattr"):
        return False
    if call is None or len(call.args) < 2 or call.args[0] is not use.node:
        return False
    attribute = call.args[1]
    return not (isinstance(attribute, ast.Constant) and attribute.value in MODULE_API)


def _copied(use) -> bool:
    """`best = copy.deepcopy(model)`: a copy of the wrapper is a second DDP wrapper, whose
    `state_dict()` keys carry `module.` (a best checkpoint that no plain model loads); the
    model's own copy is what the original kept."""
    call = use.call
    return (
        use.kind == "arg"
        and use.callee in ("copy.deepcopy", "copy.copy")
        and call is not None
        and bool(call.args)
        and call.args[0] is use.node
    )


def _type_query(use, imports) -> bool:
    """`type(model)`, `isinstance(model, Regressor)`: the wrapper's class is not the model's
    (a run folder named after `type(model).__name__` would read DistributedDataParallel);
    `isinstance(model, nn.Module)` and other torch classes keep the wrapper."""
    call = use.call
    if use.kind != "arg" or use.callee not in ("type", "isinstance") or call is None:
        return False
    if not call.args or call.args[0] is not use.node or call.keywords:
        return False
    if use.callee == "type":
        return len(call.args) == 1
    classes = call.args[1].elts if isinstance(call.args[1], ast.Tuple) else [call.args[1]]
    return len(call.args) == 2 and not any(
        (imports.qualify(c) or "").startswith("torch.") for c in classes
    )


def _other_methods(facts) -> list:
    """The other methods of the class whose method owns training (a `keep_best()` called from
    outside): its `self.model` is the prepared one there too. Not `__init__`, which runs
    before any other method has prepared it."""
    if facts.owner is None or not is_method(facts.owner):
        return []
    return [m for m in class_methods(facts.owner)
            if m not in facts.training_scopes and m.name != "__init__"]  # fmt: skip


def _main_only(context: RuleContext, scope, statement) -> bool:
    """Does `statement` run on the main process only, at least at some run of it (under a
    guard, or in a function some guarded code calls)?"""
    processes = context.processes
    if processes.scope_status(scope) == DEAD:
        return False
    return not processes.runs_on_every_process(statement) or processes.partly_main(scope)
