"""A class's training objects made in different methods (issue 16): a Trainer whose
`__init__` keeps the model and makes the optimizer while `fit_epoch()` makes the DataLoader
each epoch, or whose `__init__` makes the loader while `train()` makes the optimizers.

The owner of training stays the method that makes the loaders. An optimizer (or scheduler)
the loop steps that is made in another method of the same class is prepared in that method,
its home, right after it is made, with the models it trains: they coexist there, and the
loaders are prepared where they are made. Separate `prepare` calls are what HF Accelerate
allows for DDP (a scheduler is matched to its optimizer prepared before it); a loader made
once per epoch is prepared once per epoch without re-wrapping the model prepared once in
`__init__`.

Objects split between module level and a module-level function are homed the same way
(function_homes.py). A mixin of roles._Analyser: it reads `self.facts` and records
`facts.homes`.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import Origin, is_method
from migrator.analysis.roles import explain
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.roles.function_homes import function_home, module_function
from migrator.analysis.syntax.index import Scope


class ClassHomes:
    facts: TrainingFacts
    imports: object

    def _at_home(self, origin: Origin, owner: Scope) -> bool:
        """Is `origin` an object the owner's class prepares: made in the owner, in another
        method of its class, or on the other side of a module/function split (recorded as
        its home)? One name made on both sides of a split is a MIG900."""
        home = origin.scope if origin.scope is owner else (
            self._sibling(origin.scope, owner) or function_home(origin.scope, owner))  # fmt: skip
        if home is None:
            return False
        if not is_method(home):  # one name, two objects (module level and functions)
            first = vars(self).setdefault("_made_in", {}).setdefault((id(owner), origin.name), home)
            if first is not home:
                self._finding(self.facts.training_loops[0].node, "MIG900",
                              f"looked for one place that makes `{origin.name}`, which the "
                              f"training loops step; found it made {explain.where(first)} "
                              f"and {explain.where(home)}; migrate by hand")  # fmt: skip
                return False
        if home is owner:
            return True
        known = self.facts.homes.setdefault(origin.name, home)
        return known is home

    def _class_object(self, found: Origin, home: Scope) -> bool:
        """`found` is usable from `home`: made there, or a `self.x` of its class (a Trainer's
        `self.model` kept in `__init__` and trained by an optimizer made in `train()`)."""
        return (
            found.scope is home
            or self._module_object(found, home)
            or (
                found.name.startswith(patterns.SELF + ".")
                and self._sibling(found.scope, home) is not None
            )
        )

    def _module_object(self, found: Origin, home: Scope) -> bool:
        """A model made at module level and trained by an optimizer made in a module-level
        function, which makes or reads the loaders (function_homes.py): prepared at module
        level."""
        owner = self.facts.owner
        return (
            owner is not None
            and found.scope.kind == "module"
            and module_function(home)
            and (owner is home or function_home(home, owner) is home)
            and not home.is_local(found.name)
        )

    def _home_of(self, name: str, owner: Scope) -> Scope:
        return self.facts.homes.get(name, owner)

    def _model_homes(self, owner: Scope, models_by_home: list[tuple[Scope, list[str]]]) -> bool:
        """Each model is prepared where its optimizers are; False when optimizers made in
        different methods train one model (no one place for it)."""
        facts = self.facts
        seen: dict[str, Scope] = {}
        for home, models in models_by_home:
            for name in models:
                found = facts.origin(home, name) if module_function(home) else None
                prepared_in = home
                if found is not None and self._module_object(found, home):
                    prepared_in = found.scope  # a module-level model: at module level
                if seen.setdefault(name, prepared_in) is not prepared_in:
                    return False
                if prepared_in is not owner:
                    facts.homes[name] = prepared_in
        return True

    def _trains_itself(self, owner: Scope) -> bool:
        """MIG900 when the loop runs in a method of an `nn.Module` and trains its submodules
        (`self.albert` inside `self.forward(...)`): the module itself is the model, and `self`
        cannot be rebound to its prepared wrapper."""
        held = [m for m in self.facts.models if m.startswith(patterns.SELF + ".")]
        if held and is_method(owner) and self._is_module_class(owner.parent.node):
            self._finding(self.facts.training_loops[0].node, "MIG900",
                          f"the training loop runs in `{owner.parent.name}.{owner.name}()`, a "
                          f"method of the nn.Module it trains: its parts ({', '.join(held)}) are "
                          "not the whole model and `self` cannot be replaced by the prepared "
                          "model; train the module from a function outside the class, then "
                          "migrate")  # fmt: skip
            return True
        for loop in self.facts.training_loops:  # `model.fit(loader)`: the model trains itself
            method = loop.scope
            if not (is_method(method) and self._is_module_class(method.parent.node)):
                continue
            forward = next((c for c in loop.calls if patterns.name_of(c.node.func) in (
                patterns.SELF, f"{patterns.SELF}.forward")), None)  # fmt: skip
            if forward is None:
                continue
            self._finding(loop.node, "MIG900",
                          f"the training loop runs in `{method.parent.name}.{method.name}()`, a "
                          f"method of the nn.Module it trains, which runs its own forward "
                          f"(line {forward.node.lineno}): the prepared model's wrapper has no "
                          f"`{method.name}()`, and a forward through `self` would bypass it; "
                          "train the module from a function outside the class, then migrate")  # fmt: skip
            return True
        return False

    def _is_module_class(self, node: ast.ClassDef) -> bool:
        for base in node.bases:
            qualified = self.imports.qualify(base) or ""
            if patterns.last_part(qualified) in ("Module", "LightningModule"):
                return True
        return False

    @staticmethod
    def _sibling(scope: Scope, owner: Scope) -> Scope | None:
        """`scope` when it is another method of `owner`'s class."""
        if scope is owner or not (is_method(scope) and is_method(owner)):
            return None
        return scope if scope.parent is owner.parent else None
