"""Prepare in the scopes that make training objects away from the owner (homes.py and
function_homes.py decide which: a class's other methods, module level or a module-level
function): one prepare per scope, after their last definition there and before their first
use there, once every branch has made them. Uses placement.py's reading of definitions and
uses.

Set-up uses before the last object is made (an attribute written on the model, a state loaded,
`print(self.model)`) keep the plain model, as at function level. An object made only in some
branches of an `if` (`if infogan: self.optim_info = Adam(...)`, an if/elif chain with no
`else`) is prepared on its own right after each branch makes it, or with the others at the
top level when `__init__` gives it a placeholder on every path (prepare passes None through).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import class_methods, is_method
from migrator.analysis.placement import reading
from migrator.analysis.placement.prepare_plan import PreparePlan
from migrator.analysis.placement.setup_uses import runs_object, use_words
from migrator.analysis.roles import explain
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import Statement
from migrator.analysis.syntax.points import after_imports, binds_on_every_path, flat


def plan_homes(facts: TrainingFacts, plan: PreparePlan, names: list[str]) -> bool:
    """One prepare per method of the owner's class that makes some of the objects: after
    their last definition there, before their first use there. False (with `plan.conflict`)
    when no such point exists."""
    by_home: dict[int, tuple] = {}
    for name in names:
        home = facts.homes[name]
        by_home.setdefault(id(home), (home, []))[1].append(name)
    for home, held in by_home.values():
        defs = {name: reading.definitions(facts, home, name) for name in held}
        def_nodes = {id(s.node) for stmts in defs.values() for s in stmts}
        hard, uses, runs = [], {}, set()
        for name in held:
            for use in home.uses.get(name, []):
                if reading.use_kind(use, name, def_nodes, facts) == "hard":
                    hard.append(use.statement)
                    uses.setdefault(id(use.statement), (name, use))
                    if runs_object(use, name, facts):
                        runs.add(id(use.statement))
        block = home.body  # at the method's top level, once every branch has made them
        if home.kind == "module":  # (module code: in the block holding them all, such as
            # `if __name__ == "__main__":`)
            block = reading.common_block([*(s for d in defs.values() for s in d), *hard],
                                           home.body) or home.body  # fmt: skip

        def position(statement: Statement, block=block) -> int:
            found = statement.ancestor_in(block)
            return found.index if found is not None else -1

        last_of = {n: max((position(s) for s in defs[n]), default=-1) for n in held}
        for name in list(held):  # `if infogan: self.optim_info = Adam(...)`: not always made
            maker = home if defs[name] else _maker(facts, home, name)
            before = [] if maker is None else maker.body.statements if maker is not home else (
                block.statements[: last_of[name] + 1])  # fmt: skip
            if (
                name in home.params
                or binds_on_every_path(flat(before), name)
                or _placeholder(home, name)
            ):
                continue
            branches = _branch_points(defs[name]) if maker is home else None
            if branches is None:
                made = ", ".join(str(reading.line_of(d)) for d in defs[name])
                where = f" (line {made}), not in the branches of an `if`" if made else ""
                plan.conflict = reading.conflict_finding(facts, f"looked for a point {_where(home)} where "
                                          f"`{name}` always exists; found it made only under "
                                          f"a condition or in a loop{where}")  # fmt: skip
                return False
            # prepared on its own in each branch that makes it, right after it is made
            plan.homes.extend(([name], b, i) for b, i in branches)
            held.remove(name)
            del last_of[name]
        # Set-up before the last object is made (`self.model.best = None`, a state loaded,
        # `print(self.model)`) keeps the plain model, as at function level (placement.py); a
        # forward or a hand-over before then still needs a human.
        last = max(last_of.values(), default=-1)
        training = reading.training_statements(facts, block)
        hard = [s for s in hard
                if position(s) >= last or position(s) in training or id(s) in runs]  # fmt: skip
        first = min((position(s) for s in hard), default=len(block.statements))
        if last >= first:
            use = min(hard, key=lambda s: (position(s), reading.line_of(s)))
            late = max(held, key=lambda n: last_of[n])
            name, how = uses[id(use)]
            made = reading.line_of(max(defs[late], key=position))
            shared = block.statements[position(use)]  # the top-level statement holding the use
            where = (f"inside the `{_keyword(shared)}` at line {shared.lineno}, which also makes "
                     f"`{late}` (line {made}): they are made and used in one branch"
                     if position(use) == last and position(use) >= 0 else
                     f"before `{late}`, made at line {made}")  # fmt: skip
            plan.conflict = reading.conflict_finding(
                facts, f"looked for a point {_where(home)} after the objects it makes and "
                f"before their first use; found `{name}` used at line {reading.line_of(use)}"
                f"{use_words(how)} {where}"
            )  # fmt: skip
            return False
        if held:
            plan.homes.append((held, block, max(last + 1, after_imports(block, first))))
    return True


def _maker(facts: TrainingFacts, home, name: str):
    """The method that makes `self.x` (a model kept in `__init__`, trained in `home`)."""
    found = facts.origin(home, name)
    return found.scope if found is not None and found.scope.body is not None else None


def _placeholder(home, name: str) -> bool:
    """`self.optim_info = None` on every path of the class's `__init__`, made in `home` (another
    method) only under a condition: prepare passes a placeholder through as it is (HF
    Accelerate too), so the object is prepared at the method's top level, made or not."""
    init = next((m for m in class_methods(home) if m.name == "__init__"), None)
    if init is None or init is home or not name.startswith(patterns.SELF + "."):
        return False
    placeholders = [b.element if b.element is not None else b.value for b in init.assigns(name)]
    if not placeholders or not all(
        isinstance(v, ast.Constant) and v.value is None for v in placeholders
    ):
        return False  # an object made in `__init__` too: not only a placeholder
    return binds_on_every_path(flat(init.body.statements), name)


def _keyword(node) -> str:
    """`if`, `for`, `with`, `try`: how a compound statement starts (`statement` otherwise)."""
    words = {"If": "if", "For": "for", "While": "while", "With": "with", "Try": "try"}
    return words.get(type(node).__name__, "statement")


def _branch_points(defs: list[Statement]) -> list[tuple] | None:
    """(block, index) right after each definition of an object made only under conditions
    (`if kind == "info": self.opt_info = Adam(...)`), when each is a statement of an `if`'s
    branch (in no loop, `with` or `try`): prepared there, it is prepared exactly when made,
    and a path that never makes it never prepares it. None otherwise."""
    points = []
    for statement in defs:
        chain = statement.chain()
        if len(chain) < 2 or not all(isinstance(s.node, ast.If) for s in chain[:-1]):
            return None
        if statement.block.kind != "body":  # `if x: opt = SGD(...)` on one line
            return None
        points.append((statement.block, statement.index + 1))
    return points


def _where(home) -> str:
    """`in `setup()``, `at module level`, `in `train()` (line 9)`."""
    return f"in `{home.name}()`" if is_method(home) else explain.where(home)
