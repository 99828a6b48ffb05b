"""Prepare in the methods that make a class's training objects (homes.py decides which):
one prepare per method, after their last definition there and before their first use there
(set-up uses before it, like a scheduler built on the first network's optimizer before the
second network is made, keep the plain object: setup_uses.py), once every branch has made
them. Uses placement.py's reading of definitions and uses."""

from __future__ import annotations

from migrator.analysis import placement
from migrator.analysis.facts import TrainingFacts
from migrator.analysis.index import Statement
from migrator.analysis.setup_uses import is_setup_use
from migrator.analysis.statement_points import after_imports, binds_on_every_path, flat


def plan_homes(facts: TrainingFacts, plan: placement.PreparePlan, names: list[str]) -> bool:
    """One prepare per method of the owner's class that makes some of the objects: after
    their last definition there, before their first use there. False (with `plan.conflict`)
    when no such point exists."""
    by_home: dict[int, tuple] = {}
    for name in names:
        home = facts.homes[name]
        by_home.setdefault(id(home), (home, []))[1].append(name)
    for home, held in by_home.values():
        defs = {name: placement.definitions(facts, home, name) for name in held}
        def_nodes = {id(s.node) for stmts in defs.values() for s in stmts}
        hard, uses, set_up = [], {}, []
        for name in held:
            for use in home.uses.get(name, []):
                if placement.use_kind(use, name, def_nodes, facts) == "hard":
                    if is_setup_use(use, facts):  # `StepLR(self.opt_c)` before `self.net_g`
                        set_up.append(use.statement)
                        continue
                    hard.append(use.statement)
                    uses.setdefault(id(use.statement), name)
        block = home.body  # at the method's top level, once every branch has made them

        def position(statement: Statement, block=block) -> int:
            found = statement.ancestor_in(block)
            return found.index if found is not None else -1

        last_of = {n: max((position(s) for s in defs[n]), default=-1) for n in held}
        for name in held:  # `if infogan: self.optim_info = Adam(...)`: not always made
            maker = home if defs[name] else _maker(facts, home, name)
            before = [] if maker is None else maker.body.statements if maker is not home else (
                block.statements[: last_of[name] + 1])  # fmt: skip
            if name not in home.params and not binds_on_every_path(flat(before), name):
                plan.conflict = placement.conflict_finding(facts, f"looked for a point in `{home.name}()` where "
                                          f"`{name}` always exists; found it made only under "
                                          "a condition")  # fmt: skip
                return False
        last = max(last_of.values(), default=-1)
        # A set-up use before the last definition keeps the plain object, as in the original;
        # after it, it waits for prepare like any other use.
        hard += [s for s in set_up if position(s) > last]
        first = min((position(s) for s in hard), default=len(block.statements))
        if last >= first:
            use = min(hard, key=lambda s: (position(s), placement.line_of(s)))
            late = max(held, key=lambda n: last_of[n])
            plan.conflict = placement.conflict_finding(
                facts, f"looked for a point in `{home.name}()` after the objects it makes and "
                f"before their first use; found `{uses[id(use)]}` used at line {placement.line_of(use)} "
                f"before (or in the statement that makes) `{late}`, made at line "
                f"{placement.line_of(max(defs[late], key=position))}"
            )  # fmt: skip
            return False
        plan.homes.append((held, block, max(last + 1, after_imports(block, first))))
    return True


def _maker(facts: TrainingFacts, home, name: str):
    """The method that makes `self.x` (a model kept in `__init__`, trained in `home`)."""
    found = facts.origin(home, name)
    return found.scope if found is not None and found.scope.body is not None else None
