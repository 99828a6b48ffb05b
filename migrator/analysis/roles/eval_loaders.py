"""Evaluation loops: the loops outside training that draw from a DataLoader. Each such loader
is prepared exactly once (SPEC §3b.1), or a note names it and says why it stays plain: an
unprepared evaluation loader gives the right numbers but makes every process evaluate the
whole set, N times the work the user migrated to avoid.

A loader is one when its value comes from a `DataLoader(...)`, however it reaches the loop
(loader_values.py: a helper's return, an alias, a dict, list or tuple). Where it is made:
- in the owner of training: prepared with the training objects (placement.py), or on its own
  where it is made after training (placement/loader_points.py);
- in another scope the program runs (an `evaluate()` that makes its test loader, a method of
  the Trainer, module code): prepared there, right after it is made, as the objects of a
  class's other methods are (its home: placement/homes.py);
- received where the training loader is received (both parameters of the function where the
  objects meet, both kept by a Trainer's `__init__`): prepared there with it;
- nowhere this file can prepare it (a parameter no call here passes, a loader built in the
  loop's head, a loop run by one process under `if rank == 0:`): plain, with a MIG006 note.

A mixin of roles._Analyser: it reads `self.index`, `self.imports`, `self.facts` and the loop
analysis (`_loop_source`).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.effects.processes import DEAD
from migrator.analysis.model.chains import chain_text, split_chain
from migrator.analysis.model.forwards import forwarded
from migrator.analysis.model.loader_values import LoaderValues
from migrator.analysis.model.origins import (
    Origin,
    argument_for,
    bindings_of,
    calls_of,
    value_call,
)
from migrator.analysis.roles import explain
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import Loop, ModuleIndex
from migrator.findings import Finding

PLAIN = (
    "prepared, the metrics computed from it would not be sound on N processes (the migration "
    "could not gather them alike: the soundness check refused that version); gather them by "
    "hand to prepare it"
)


class EvalLoaders:
    facts: TrainingFacts
    index: ModuleIndex
    imports: object

    def _is_loader(self, origin: Origin) -> bool:
        """The object `origin` names is a DataLoader: made by one there, or reaching there
        from one through a program function's return, an alias or a container."""
        if origin.name in self.facts.train_loaders:
            return True
        for binding in bindings_of(origin):
            call = value_call(binding)
            if call is not None and patterns.is_loader_call(call, self.imports):
                return True
        if self._received_beside_loader(origin):
            return True
        values = LoaderValues(self.index)
        if self._returned_with_a_loader(origin, values):
            return True
        if split_chain(origin.name) is None:
            return values.name_is_loader(origin.scope, origin.name)
        try:  # `loaders["valid"]`: read as the expression it is
            expr = ast.parse(origin.name, mode="eval").body
        except SyntaxError:
            return False
        return values.is_loader(origin.scope, expr)

    def _received_beside_loader(self, origin: Origin) -> bool:
        """Received where the training loader is (a parameter beside it, kept by the same
        `__init__`): a loader by where it comes from, not by what makes it."""
        return self._received(origin) and any(
            self._received(Origin(self.facts.homes.get(t, self.facts.owner), t))
            and self.facts.homes.get(t, self.facts.owner) is origin.scope
            for t in self.facts.train_loaders
        )

    def _returned_with_a_loader(self, origin: Origin, values: LoaderValues) -> bool:
        """`train_loader, val_loader, _ = get_dataloaders()`: a call that returns a loader
        (the one a training loop draws from, or one traced to a `DataLoader(...)`) returns
        loaders; each of its results a loop runs the model on is one too, even where the
        function that makes them is not part of the program (a module without a step)."""
        for binding in bindings_of(origin):
            small = binding.small
            if not (binding.unpacked and isinstance(small, ast.Assign)
                    and isinstance(small.value, ast.Call) and len(small.targets) == 1):  # fmt: skip
                continue
            target = small.targets[0]
            if not isinstance(target, (ast.Tuple, ast.List)):
                continue
            for element in target.elts:
                sibling = patterns.name_of(element)
                if sibling is None or sibling == origin.name:
                    continue
                if self._trains_from(Origin(origin.scope, sibling)):
                    return True
                if values.name_is_loader(origin.scope, sibling):
                    return True
        return False

    def _trains_from(self, found: Origin) -> bool:
        """A training loop draws from the object `found` names."""
        facts = self.facts
        for name in facts.train_loaders:
            home = facts.homes.get(name, facts.owner)
            if home is not None and facts.origin(home, name) == found:
                return True
        return False

    @staticmethod
    def _received(origin: Origin) -> bool:
        """`origin` is what its scope receives: a parameter, or `self.x = x` of one."""
        scope = origin.scope
        if scope is None or scope.kind != "function":
            return False
        made = scope.assigns(origin.name)
        if not made:
            return origin.name in scope.params
        return all(
            b.kind == "assign" and isinstance(b.value, ast.Name) and b.value.id in scope.params
            for b in made
        )

    def _find_eval_loops(self) -> None:
        facts = self.facts
        for scope in self.index.scopes:
            for loop in scope.loops:
                if loop in facts.training_loops or any(loop.contains(t) or t.contains(loop)
                                                       for t in facts.training_loops):  # fmt: skip
                    continue
                source = self._loop_source(loop)
                if source is None:
                    continue
                runs = scope is facts.owner or bool(calls_of(self.index, scope))
                if source.inline is not None:  # `for x in DataLoader(test_set, ...)`
                    if runs:
                        self._plain_note(loop, None, "it is built in the loop's head, where it "
                                         "has no name to prepare; make it before the loop "
                                         "and prepare it")  # fmt: skip
                    continue
                if not (source.loaders or source.held) or not runs:
                    continue
                origins = [facts.origin(source.scope, name) for name in source.loaders]
                origins = self._through_calls(source.scope, source.loaders, origins)
                untraced = [name for name, found in zip(source.loaders, origins)
                            if found is None or (not isinstance(found, tuple)
                                                 and not self._is_loader(found))]  # fmt: skip
                origins = [o for found in origins for o in _each(found)]
                if untraced:  # a loader, or a list of tensors? The model it runs says which
                    if self._runs_model(loop) and not self._one_process_only(loop.statement):
                        for name in untraced:
                            self._plain_note(loop, name, self._untraced(source.scope, name))
                    continue
                if any(found.name in shared.evaluated and found.scope is shared.caller
                       for shared in facts.shared_epochs for found in origins):  # fmt: skip
                    continue  # a train/eval epoch function evaluates it too: noted there
                if not self._runs_model(loop) and any(
                    self._received_beside_loader(found) and not self._made_as_loader(found)
                    for found in origins
                ):  # fmt: skip
                    continue  # `for i in self.tracked_ids:` kept beside the loader, no forward
                names = [found.name for found in origins] or [None]  # None: held, unnamed
                if self._one_process_only(loop.statement):
                    for name in names:  # `if rank == 0:` evaluates the whole set on one
                        self._plain_note(loop, name, "the loop runs on one process only "
                                         "(under a main-process or rank-0 test, or in a "
                                         "function called there), which evaluates the "
                                         "whole set", everywhere=False)  # fmt: skip
                    continue
                away = [found for found in origins if found.scope is not facts.owner]
                why = next((w for found in away if (w := self._no_home(found)) is not None), None)
                if why is not None:
                    for name in names:
                        self._plain_note(loop, name, why)
                    continue
                if facts.plain_evaluation:
                    why = facts.plain_evaluation
                    for name in names:
                        self._plain_note(loop, name, why if isinstance(why, str) else PLAIN)
                    continue
                for found in away:
                    facts.homes[found.name] = found.scope
                facts.eval_loops.append(loop)
                for found in origins:
                    if found.name not in facts.train_loaders + facts.eval_loaders:
                        facts.eval_loaders.append(found.name)
                # in a container with no name of their own: prepared in place where it is made
                facts.held_loaders += [h for h in source.held if h not in facts.held_loaders]

    def _one_process_only(self, statement) -> bool:
        """`statement` runs on one process only at some run of it: under `if rank == 0:` in
        its own scope, or in a function one of whose calls is (`if rank == 0 and step % k ==
        0: evaluate(...)`, beside an `evaluate(...)` every process runs): a gather or reduce
        there would wait for processes that never come (h8 ps-slm hung)."""
        if self.facts.distributed.one_process_only(statement):
            return True
        processes, scope = self.facts.processes, statement.block.scope
        if processes.scope_status(scope) == DEAD:
            return False
        return processes.guarded(statement) or processes.partly_main(scope)

    def _through_calls(self, scope, names: list[str], origins: list) -> list:
        """A loader parameter its calls fill with different loaders (`evaluate(model,
        train_loader)`, `evaluate(model, val_loader)`): the loaders of every call, where each
        is a loader this file makes (each is prepared, and the loop draws from prepared ones
        only); else None, as before. Recorded for the loop's region (`loader_params`)."""
        found = []
        for name, origin in zip(names, origins):
            if origin is not None or name not in scope.params or scope.kind != "function":
                found.append(origin)
                continue
            each = []
            for site in calls_of(self.index, scope):
                argument = argument_for(site.node, scope, name)
                named = patterns.name_of(argument) if argument is not None else None
                origin_at = self.facts.origin(site.scope, named) if named is not None else None
                if origin_at is None or not self._is_loader(origin_at):
                    each = []
                    break
                each.append(origin_at)
            found.append(tuple(dict.fromkeys(each)) or None)
            if each:
                self.facts.loader_params[(id(scope), name)] = list(dict.fromkeys(each))
        return found

    def _made_as_loader(self, origin: Origin) -> bool:
        """`origin` is a loader by what makes it (not only by where it is received)."""
        if origin.name in self.facts.train_loaders:
            return True
        values = LoaderValues(self.index)
        return split_chain(origin.name) is None and values.name_is_loader(origin.scope, origin.name)

    def _no_home(self, found: Origin) -> str | None:
        """Why an evaluation loader made away from the owner cannot be prepared where it is
        made (None: it can, in `found.scope`, its home)."""
        facts = self.facts
        scope = found.scope
        made = scope.assigns(found.name)
        if scope.kind == "class" or not made:
            return f"`{found.name}` is not made {explain.where(scope)}, where it is read"
        known = facts.homes.get(found.name)
        same_name = (  # one name, two objects (a Trainer's `self.x` is one object)
            facts.owner is not None
            and not found.name.startswith("self.")
            and facts.owner.is_local(found.name)
        )
        if (known is not None and known is not scope) or same_name:
            return (f"another object of the same name, `{found.name}`, is prepared "
                    f"{explain.where(known or facts.owner)}")  # fmt: skip
        callers = calls_of(self.index, scope) if scope.kind == "function" else []
        if scope.kind == "function" and not callers:
            return f"{explain.where(scope)}, which makes it, runs from outside this file"
        if any(_in_a_loop(site.statement) for site in callers):
            # SPEC §3b.7: no prepare in a function run once per epoch (a new loader each call)
            return (f"the function that makes it ({explain.where(scope)}) runs once per pass of a loop "
                    "(preparing it there would prepare a new loader at every call); make it "
                    "once before that loop and prepare it there")  # fmt: skip
        if any(b.loop is not None and b.loop in facts.training_loops for b in made):
            return "it is made inside the training loop"
        return None

    def _runs_model(self, loop: Loop) -> bool:
        """The loop runs a model the program trains (`model(x)`, `model.forward(x)`), itself
        or in a step function of the program it hands the loop's items to
        (`self._validation_step(batch)`: a function with no loop of its own; one with loops,
        `fit(model, loader, lr)` of a grid search, is a driver, not a step)."""
        graph = self.facts.processes.graph
        items = set(loop.target_names)
        calls, seen, first = list(loop.calls), set(), True
        for _depth in range(4):
            callees = []
            for call in calls:
                target = forwarded(call.node.func)
                called = patterns.name_of(target) or chain_text(target)  # `self.cfg.model(x)`
                if called is not None and self.facts.role(call.scope, called) == "model":
                    return True
                if first and not _hands_items(call.node, items):
                    continue
                callee = graph.callee(call)
                if callee is not None and not callee.loops and id(callee) not in seen:
                    seen.add(id(callee))
                    callees.append(callee)
            calls, first = [call for callee in callees for call in callee.calls], False
        return False

    def _untraced(self, scope, name: str) -> str:
        """Why the iterable a loop runs the model on is not known to be a DataLoader."""
        found = self.facts.origin(scope, name)
        if found is None:  # a parameter its calls fill with different objects
            return explain.untraceable(self.facts, scope, name)
        made = found.scope.assigns(found.name)
        call = made[0].value if len(made) == 1 else None
        if isinstance(call, ast.Call):
            maker = ast.unparse(call.func)
            return (f"it comes from `{maker}(...)`, which this program does not show making a "
                    "DataLoader (another module, or not a loader); if it is one, prepare it "
                    "where it is made")  # fmt: skip
        if not made:
            return (f"`{found.name}` is a parameter {explain.where(found.scope)} that this "
                    "program does not trace to a DataLoader; if it is one, prepare it where "
                    "it is made")  # fmt: skip
        return f"`{found.name}` is not traced to a DataLoader {explain.where(found.scope)}"

    def _plain_note(self, loop: Loop, name: str | None, why: str, everywhere=True) -> None:
        """MIG006 note: the loader `loop` evaluates on stays plain, and why; `everywhere`:
        the loop runs on every process (else on the main process alone, as it did)."""
        loader = f"`{name}`" if name is not None else "the DataLoader"
        what = ("every process runs the whole set (the same numbers, N times the work)"
                if everywhere else "there the main process alone evaluates the whole set, as "
                "one process does (where a DistributedSampler of the original gave it only its "
                "share, its numbers now cover the whole set); where every process runs the "
                "loop, each runs the whole set")  # fmt: skip
        self.facts.findings.append(_note(loop, (
            f"{loader}, which the loop at line {loop.node.lineno} evaluates on, is not "
            f"prepared: {why}; {what}")))  # fmt: skip


def _each(found) -> list:
    """The origins one loader name stands for: one, or every call's (a tuple)."""
    if isinstance(found, tuple):
        return list(found)
    return [found]


def _note(loop: Loop, message: str) -> Finding:
    return Finding(code="MIG006", message=message, node=loop.node, level="note")


def _in_a_loop(statement) -> bool:
    return any(
        isinstance(s.node, (ast.For, ast.AsyncFor, ast.While)) for s in statement.chain()[:-1]
    )


def _hands_items(call: ast.Call, items: set[str]) -> bool:
    """Does the call hand a loop item (the batch) to its callee?"""
    return any(
        isinstance(node, ast.Name) and node.id in items
        for argument in [*call.args, *(k.value for k in call.keywords)]
        for node in ast.walk(argument)
    )
