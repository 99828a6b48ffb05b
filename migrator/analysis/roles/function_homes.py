"""Training objects split between module level and one module-level function (issue 16):
the loaders are made at module level and `train()` makes the model and the optimizer and
loops over the module-level loader (a global it reads); or the reverse, the model and the
optimizer made at module level and the loaders in the function.

The owner of training stays the scope that makes the loaders. The objects made in the other
scope are prepared there, right after they are made (their home, as a class's objects made in
another method: homes.py), and the loaders where they are made: `train_loader =
accelerator.prepare(train_loader)` at module level, `net, optimizer = accelerator.prepare(net,
optimizer)` in `train()`. HF Accelerate and our runtime both take several prepare calls.

Refused by name, where one prepare per scope would be wrong:
- a module-level object a function rebinds (`global train_loader; train_loader = ...`): the
  function would replace the prepared object with a plain one;
- module-level code that calls the function (directly or through other functions) before the
  module-level objects are prepared, or a module-level loader made again after code that
  trains: the function would run on the plain ones;
- an object prepared in the function that is a global there: `model =
  accelerator.prepare(model)` would make it local;
- one name made on both sides (an `optimizer` in `warmup()` and another in `train()`):
  homes are found by name (homes.py).

A model made at module level and trained by an optimizer the function makes is prepared at
module level (homes.py), the optimizer on its own in the function; module code that makes a
model of a name the function trained, after it ran, holds another, plain model (facts.held).

`function_home` answers homes.py's `_at_home` for a function; `check_function_homes` reads
the plan (placement.py) once it is made.
"""

from __future__ import annotations

from migrator.analysis.model.drivers import calls_reaching
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import Block, Scope, Statement
from migrator.findings import Finding


def module_function(scope: Scope) -> bool:
    """A function defined at module level (not a method, not nested)."""
    return scope.kind == "function" and scope.parent is not None and scope.parent.kind == "module"


def function_home(scope: Scope, owner: Scope) -> Scope | None:
    """The other scope of a module/function split that makes an object: `scope` when one of
    `scope` and `owner` is the module and the other a module-level function."""
    if owner.kind == "module" and module_function(scope):
        return scope
    if module_function(owner) and scope.kind == "module":
        return scope
    return None


def check_function_homes(facts: TrainingFacts, plan) -> Finding | None:
    """A MIG900 when objects prepared at module level and in a function cannot be prepared
    one call per scope (see the module docstring); None when they can, with the models module
    code re-creates after training noted in the plan."""
    module = facts.index.module_scope
    owner = facts.owner
    functions = {id(h): h for h in facts.homes.values() if module_function(h)}
    if owner is None or not (functions or facts.homes and module_function(owner)):
        return None
    if module_function(owner):
        functions[id(owner)] = owner
    prepared = _prepared_at(plan, module)
    loaders = facts.loaders
    for name, block, index in plan.reloaded:
        if block.scope is module and name in loaders:  # `train()`, a new loader, `train()`
            return _finding(facts, f"`{name}` is made again at line "
                            f"{block.statements[index].lineno}, after code that trains; the "
                            "training that runs after it would read a plain loader")  # fmt: skip
    for name, block, _index in prepared:
        found = _rebound_in_function(facts, name)
        if found is not None:
            scope, statement = found
            return _finding(facts, f"`{name}` is prepared at module level, and "
                            f"`{scope.name}()` binds it at line {statement.node.lineno} "
                            "(declared global): a plain object would replace the prepared "
                            "one")  # fmt: skip
    _recreated_after_training(facts, plan, functions.values())
    for function in functions.values():
        for name in _prepared_in(plan, function):
            if name in function.declared_global or not function.is_local(name):
                made = module.assigns(name)
                where = f" (line {made[0].statement.node.lineno})" if made else ""
                return _finding(facts, f"`{name}` is made at module level{where} and is "
                                f"prepared in `{function.name}()`, where it is a global; "
                                "preparing it there would make it local")  # fmt: skip
        for name, block, index in prepared:
            early = _early_call(facts, function, block, index)
            if early is not None:
                return _finding(facts, f"module-level code calls `{function.name}()` at line "
                                f"{early.statement.node.lineno}, before `{name}` is made and "
                                "prepared at module level; it would run on the plain "
                                "object")  # fmt: skip
    return None


def _recreated_after_training(facts: TrainingFacts, plan, functions) -> None:
    """Module code that makes a model of the name a function trained and prepared, after
    that function ran (`train()`, then `model = Net(); model.load_state_dict(torch.load(
    path))`): another, plain model (facts.held), made once every process is past the main
    process's save (`accelerator.wait_for_everyone()` before it)."""
    module = facts.index.module_scope
    for function in functions:
        calls = [s.statement for s in calls_reaching(facts.index, function)
                 if s.scope.kind == "module"]  # fmt: skip
        for name in _prepared_in(plan, function):
            if name not in facts.models or not calls:
                continue
            for binding in module.assigns(name):
                statement = binding.statement
                if any(_runs_after(statement, c.block, c.index + 1) for c in calls):
                    if (statement.block, statement.index) not in plan.waits:
                        plan.waits.append((statement.block, statement.index))
                    break


def _prepared_at(plan, module: Scope) -> list[tuple[str, Block, int]]:
    """(name, block, index) of the objects prepared in module-level code."""
    found = []
    if plan.block is not None and plan.block.scope is module:
        found += [(name, plan.block, plan.index) for name in plan.objects]
    found += [(name, block, index) for name, block, index in plan.early if block.scope is module]
    for names, block, index in plan.homes:
        if block.scope is module:
            found += [(name, block, index) for name in names]
    return found


def _prepared_in(plan, function: Scope) -> list[str]:
    names = list(plan.objects) if plan.block is not None and plan.block.scope is function else []
    names += [name for name, block, _index in plan.early if block.scope is function]
    for held, block, _index in plan.homes:
        if block.scope is function:
            names += held
    return names


def _rebound_in_function(facts: TrainingFacts, name: str) -> tuple[Scope, Statement] | None:
    for scope in facts.index.scopes:
        if scope.kind == "function" and name in scope.declared_global and scope.assigns(name):
            return scope, scope.assigns(name)[0].statement
    return None


def _early_call(facts: TrainingFacts, function: Scope, block: Block, index: int):
    """A module-level call that runs `function` before `block.statements[index]` does."""
    for site in calls_reaching(facts.index, function):
        if site.scope.kind != "module":
            continue
        if not _runs_after(site.statement, block, index):
            return site
    return None


def _runs_after(statement: Statement, block: Block, index: int) -> bool:
    """Does module-level `statement` run after the point before `block.statements[index]`:
    in that block from the point on, or after the statement that holds the block (the
    innermost one whose block holds `statement` too)? In another branch of it: no."""
    found = statement.ancestor_in(block)
    if found is not None:
        return found.index >= index
    for outer in reversed(block.parent.chain() if block.parent is not None else []):
        found = statement.ancestor_in(outer.block)
        if found is not None:
            return found.index > outer.index
    return False


def _finding(facts: TrainingFacts, why: str) -> Finding:
    loop = facts.training_loops[0] if facts.training_loops else None
    return Finding(
        code="MIG900",
        message=f"cannot prepare at module level and in a function: {why}; migrate by hand",
        node=loop.node if loop is not None else None,
    )
