"""Where the one `accelerator.prepare(...)` call goes, and what it prepares.

After the last definition of the prepared objects, before their first real use (iteration,
forward, stepping, handing them to a helper, and `len(loader)` used for step counts), in the
seeds' order: models, optimizers, loaders, schedulers. A scheduler defined after that point
(sized from the prepared loader, as in the transformers recipe) or stepped once per epoch is
left unprepared, with a note saying why.

A loader wrapped into an iterator or a generator before the model or the optimizer exists
(`data_iter = cycle(train_loader)`, `it = iter(loader)`: the wrapper holds the loader object
from then on) is prepared on its own just before that statement
(`train_loader = accelerator.prepare(train_loader)`), the rest in the one call after.
"""

from __future__ import annotations

import ast
from types import SimpleNamespace

from migrator.analysis.model.chains import chain_uses
from migrator.analysis.placement.branches import branch_points, order_words
from migrator.analysis.placement.homes import plan_homes
from migrator.analysis.placement.loader_points import (
    early_loaders,
    late_loaders,
    loaders_before_a_loop,
    within_loop,
)
from migrator.analysis.placement.loaderless import loaderless_note
from migrator.analysis.placement.prepare_plan import PreparePlan
from migrator.analysis.placement.reading import (
    calls_any,
    common_block,
    conflict_finding,
    holders,
    line_of,
    training_functions,
    training_statements,
    use_kind,
)
from migrator.analysis.placement.setup_uses import (
    runs_object,
    use_words,
)
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.roles.function_homes import check_function_homes
from migrator.analysis.syntax.index import Block, Line, Statement
from migrator.analysis.syntax.points import after_imports
from migrator.findings import Finding


def _mandatory(facts: TrainingFacts) -> list[str]:
    return [*_outer_models(facts.models), *facts.optimizers, *facts.train_loaders,
            *facts.eval_loaders]  # fmt: skip


def _outer_models(models: list[str]) -> list[str]:
    """The models that are no part of another: `model.decoder` (an optimizer of its own, a
    forward of its own) is prepared with `model`, never beside it: a DDP inside a DDP syncs
    its gradients twice, and the checkpoint keys become `decoder.module.weight`. Its calls go
    through `accelerator.unwrap_model(model).decoder` (MIG007)."""
    return [m for m in models if not any(m.startswith(outer + ".") for outer in models)]


def plan_prepare(facts: TrainingFacts) -> PreparePlan:
    plan = _checked_plan(facts)
    if plan.conflict is None:
        return plan
    # An evaluation loader that no prepare can reach where it is made stays plain, with a note
    # (SPEC §3b.1), rather than refusing the training it does not take part in: the loaders
    # of one loop together, those made away from the owner first.
    evaluated = [n for n in facts.eval_loaders if n not in facts.train_loaders]
    evaluated.sort(key=lambda n: facts.homes.get(n, facts.owner) is facts.owner)
    saved = (list(facts.eval_loaders), dict(facts.homes))
    dropped: list[str] = []
    for name in evaluated:
        if name in dropped:
            continue
        dropped += _evaluated_with(facts, name)
        facts.eval_loaders = [n for n in saved[0] if n not in dropped]
        facts.homes = {n: h for n, h in saved[1].items() if n not in dropped}
        retry = _checked_plan(facts)
        if retry.conflict is None:
            retry.notes += [_plain_note(facts, n, plan.conflict) for n in dropped]
            return retry
    facts.eval_loaders, facts.homes = saved
    return plan


def _checked_plan(facts: TrainingFacts) -> PreparePlan:
    plan = _plan(facts)
    if plan.conflict is None and facts.homes:  # objects at module level and in a function
        plan.conflict = check_function_homes(facts, plan)
    return plan


def _evaluated_with(facts: TrainingFacts, name: str) -> list[str]:
    """`name` and the evaluation loaders a loop draws from together with it (`zip(a, b)`)."""
    found = [name]
    for loop in facts.eval_loops:
        names = _drawn_by(loop, [n for n in facts.eval_loaders if n not in facts.train_loaders])
        if name in names:
            found += [n for n in names if n not in found]
    return found


def _drawn_by(loop, names: list[str]) -> list[str]:
    """Those of `names` that `loop` reads (in its head or inside it)."""
    return [n for n in names if any(
        use.statement is loop.statement or (use.loop is not None and loop.contains(use.loop))
        for use in loop.scope.uses.get(n, []))]  # fmt: skip


def _plain_note(facts: TrainingFacts, name: str, conflict: Finding) -> Finding:
    why = conflict.message.removeprefix("cannot place accelerator.prepare(...): ")
    why = why.removesuffix("; migrate by hand")
    loop = next((lp for lp in facts.eval_loops if _drawn_by(lp, [name])), None)
    return Finding(code="MIG006", level="note", node=loop.node if loop else conflict.node, message=(
        f"evaluation loader `{name}` is not prepared: {why}; every process runs the whole "
        "set (the same numbers, N times the work)"))  # fmt: skip


def _plan(facts: TrainingFacts) -> PreparePlan:
    plan = PreparePlan()
    owner = facts.owner
    if owner is None or owner.body is None:
        return plan
    already = facts.prepared_already
    mandatory = [n for n in _mandatory(facts) if n not in already]
    schedulers = [s for s in facts.schedulers if s.name not in already]
    # `scheduler = StepLR(optimizer)` stepped once per epoch is never prepared: it may hold the
    # plain optimizer (the prepared one shares its param_groups), built before the loaders.
    # Every binding of it counts (`if kind == "step": scheduler = StepLR(optimizer)` / `elif`).
    kept_plain = {id(b.statement) for r in schedulers
                  if r.binding is not None and (r.plateau or not r.per_step or r.plain)
                  for b in r.binding.statement.block.scope.assigns(r.name)}  # fmt: skip
    for role in schedulers:
        if role.plateau:
            plan.notes.append(_note(role.binding, role.name, PLATEAU, role.site))
        elif not role.per_step:
            plan.notes.append(_note(role.binding, role.name, "steps once per epoch"))
        elif role.plain:
            plan.notes.append(_note(role.binding, role.name, role.plain))
    schedulers = [s for s in schedulers if s.per_step and not s.plateau and not s.plain]
    if facts.homes:
        at_home = [*mandatory, *(s.name for s in schedulers)]
        at_home = [n for n in at_home if facts.homes.get(n, owner) is not owner]

        if not plan_homes(facts, plan, at_home):
            return plan
        mandatory = [n for n in mandatory if n not in at_home]
        schedulers = [s for s in schedulers if s.name not in at_home]
    if not mandatory:  # migrated already: a model re-created after training stays plain
        block = owner.body
        defs = {name: [b.statement for b in owner.assigns(name)] for name in facts.models}
        plan.reloaded = _reloaded(facts, block, facts.models, defs)
        return plan
    early = early_loaders(facts, owner, mandatory) + late_loaders(facts, owner, mandatory)
    in_turn = loaders_before_a_loop(facts, owner, mandatory, early)
    early += in_turn
    if early:
        plan.early = early
        mandatory = [n for n in mandatory if not any(e[0] == n for e in early)]
    scheduler_names = [s.name for s in schedulers]
    names = mandatory + scheduler_names

    defs: dict[str, list[Statement]] = {}
    hard: list[Statement] = []
    hard_of: dict[str, list[Statement]] = {}
    soft: list[Statement] = []  # len(loader)
    used: dict[int, str] = {}  # id(statement) -> the object it uses (for the finding)
    how: dict = {}  # id(statement) -> that use
    runs: set[int] = set()  # ids of statements that run a model or hand it over
    training = training_functions(facts)
    for name in names:  # a model's DDP wrappers (MIG010) define and use the same object
        defs[name] = [b.statement for n in facts.distributed.names_for(owner, name)
                      for b in owner.assigns(n)]  # fmt: skip
        defs[name] += [b.statement for n in holders(name) for b in owner.assigns(n)]
        defs[name] += [b.statement for b in facts.chain_bindings(owner, name)]
        # `model = train(model, loader, optimizer)` hands the objects to training: a use,
        # and the model it returns is the one it was given
        defs[name] = [s for s in defs[name] if not _trains_and_rebinds(s, training)]
    def_nodes = {id(s.node) for stmts in defs.values() for s in stmts}
    for name in names:
        uses = [u for n in facts.distributed.names_for(owner, name) for u in owner.uses.get(n, [])]
        for use in uses + chain_uses(owner, name, facts.index.imports):  # `self.cfg.model`
            kind = use_kind(use, name, def_nodes, facts)
            if id(use.statement) in kept_plain and use.kind == "arg":
                kind = None
            if kind == "hard":
                hard.append(use.statement)
                hard_of.setdefault(name, []).append(use.statement)
                used.setdefault(id(use.statement), name)
                how.setdefault(id(use.statement), use)
                if name in mandatory and runs_object(use, name, facts):
                    runs.add(id(use.statement))  # a forward or a hand-over: never set-up
            elif kind == "soft":
                soft.append(use.statement)
    for site, read in _closure_trainings(facts, owner, names):
        # `train_one_epoch()` of a function reading the objects from this scope (a closure,
        # a global): a use of each, where it is called (in each branch that calls it)
        hard.append(site.statement)
        runs.add(id(site.statement))
        for name in read:
            hard_of.setdefault(name, []).append(site.statement)
            used.setdefault(id(site.statement), name)
        how.setdefault(id(site.statement), SimpleNamespace(kind="runs", callee=site.callee))
    if in_turn:  # `return model` after the loop reads the last pass's prepared model
        hard, soft = (within_loop(owner.body, in_turn[0][2], found) for found in (hard, soft))
    events = [s for stmts in defs.values() for s in stmts] + hard + soft
    # Nothing made here (parameters, a class's `self.x`): prepared once, before the loops, not
    # in the epoch loop that holds every use.
    block = common_block(events, owner.body) if any(defs.values()) else owner.body
    if block is None:
        lines = ", ".join(str(line) for line in sorted({line_of(s) for s in events}))
        plan.conflict = conflict_finding(facts, "looked for one block holding the definitions and uses "
                                  "of the training objects; found them in different branches "
                                  f"(lines {lines})")  # fmt: skip
        return plan

    def position(statement: Statement) -> int:
        found = statement.ancestor_in(block)
        return found.index if found is not None else -1

    plan.reloaded = _reloaded(facts, block, mandatory, defs)  # trims `defs` to before training
    training = training_statements(facts, block)

    def last_def(name: str) -> int:
        return max((position(s) for s in defs[name]), default=-1)

    last_mandatory = max((last_def(n) for n in mandatory), default=-1)
    # Uses before the last definition that run no training (`model.crop_block_size(n)`, a
    # loader inspected before the model exists) stay on the plain objects; a forward or a
    # model handed to a function before then still needs a human.
    hard = [s for s in hard
            if position(s) >= last_mandatory or position(s) in training or id(s) in runs]  # fmt: skip
    # The same inside the statement that holds the last definition (`if resume: opt = ...;
    # load_checkpoint(cp, model, opt)` / `else: opt = ...`): prepare goes after it.
    loaders = facts.loaders
    hard = [s for s in hard if last_mandatory < 0 or position(s) != last_mandatory
            or position(s) in training or id(s) in runs or used.get(id(s)) in loaders]  # fmt: skip
    first_hard = min((position(s) for s in hard), default=len(block.statements))
    first_soft = min((position(s) for s in soft), default=len(block.statements))
    if last_mandatory == first_hard:  # met in one `if`: prepared in each branch using them
        found = branch_points(facts, block, first_hard, names, defs, hard_of, runs)
        if found is not None:
            plan.block, plan.index, plan.branches = block, first_hard, found
            return plan
    if last_mandatory >= first_hard:
        use = min(hard, key=lambda s: (position(s), line_of(s)))
        late = max(mandatory, key=last_def)
        late_def = max(defs[late], key=position)
        shared = block.statements[position(use)] if position(use) == last_mandatory else None
        found = order_words(used.get(id(use), "?"), line_of(use), use_words(how.get(id(use))),
                            late, line_of(late_def), shared)  # fmt: skip
        plan.conflict = conflict_finding(
            facts, "looked for a point after the last definition of the training objects and "
            f"before their first use; {found}"
        )  # fmt: skip
        return plan
    limit = first_hard if first_soft <= last_mandatory else min(first_hard, first_soft)
    included = []
    for role in schedulers:
        if last_def(role.name) < limit:
            included.append(role.name)
        else:
            plan.notes.append(
                _note(role.binding, role.name, "is created after the loaders are prepared "
                      "(sized by the prepared loader), so it steps once per optimizer step")
            )  # fmt: skip
    start = max([last_mandatory, *(last_def(n) for n in included)]) + 1
    plan.block = block
    # after the imports made before it, not past a `len(loader)` a schedule is sized by
    plan.index = max(start, after_imports(block, limit))
    plan.objects = [*mandatory, *included]
    if facts.loaderless:
        plan.notes.append(loaderless_note(facts, plan.objects))
    return plan


def _closure_trainings(facts: TrainingFacts, owner, names: list[str]) -> list:
    """The calls in `owner` of a function holding a training loop that reads some of `names`
    from `owner` itself rather than receiving them (a nested `def train_one_epoch():` or a
    module function over module globals), each with the names it reads."""
    trainers = {id(loop.scope): loop.scope for loop in facts.training_loops
                if loop.scope.kind == "function"}  # fmt: skip
    found = []
    for site in owner.calls:
        for scope in trainers.values():
            if site.callee != scope.name or not _visible_from(scope, owner):
                continue
            read = [n for n in names if n in scope.uses and not scope.is_local(n)
                    and n not in scope.params]  # fmt: skip
            if read:
                found.append((site, read))
                break
    return found


def _visible_from(function, owner) -> bool:
    """`function` is defined in `owner` (a closure) or at module level beside it."""
    parent = function.parent
    return parent is owner or (parent is not None and parent.kind == "module")


def _trains_and_rebinds(statement: Statement, training: set[str]) -> bool:
    """`model = train(model, ...)`: one assignment of a call of a function in `training`."""
    node = statement.node
    if not isinstance(node, Line) or len(node.body) != 1:
        return False
    small = node.body[0]
    value = small.value if isinstance(small, (ast.Assign, ast.AnnAssign)) else None
    return isinstance(value, ast.Call) and calls_any(value, training)


def _reloaded(facts: TrainingFacts, block: Block, names: list[str], defs: dict) -> list:
    """(name, block, index) of objects re-created after the last statement of `block` that
    trains (a model reloaded for inference); their later definitions leave `defs`."""
    training = training_statements(facts, block)
    if not training:
        return []
    end = max(training)
    found = []

    def position(statement: Statement) -> int:
        ancestor = statement.ancestor_in(block)
        return ancestor.index if ancestor is not None else -1

    for name in names:
        late = [s for s in defs[name] if position(s) > end]
        if late and len(late) < len(defs[name]):
            defs[name] = [s for s in defs[name] if position(s) <= end]
            found.append((name, block, min(position(s) for s in late)))
    return found


PLATEAU = (
    "steps on a metric (ReduceLROnPlateau-style `.step(metric)`), like a per-epoch scheduler; "
    "every process must pass it the same value (gather a metric computed on a prepared loader "
    "first)"
)


def _note(binding, name: str, why: str, site: ast.AST | None = None) -> Finding:
    return Finding(
        code="MIG006",
        message=f"scheduler `{name}` is not prepared: it {why}",
        level="note",
        node=binding.statement.node if binding is not None else site,
    )
