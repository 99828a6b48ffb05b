"""Ranks kept on `args`: the single-file research convention of hand-written DDP (pytorch/examples
imagenet, MoCo, Barlow Twins). `main()` computes `args.world_size` and `args.distributed`, spawns
`main_worker(gpu, ngpus_per_node, args)`, which stores `args.gpu = gpu`, computes `args.rank`
and hands both to `init_process_group`; the rest of the program reads them.

An attribute of that object (`args`) is a launch attribute when it is one of `gpu`, `local_rank`,
`rank`, `world_size`, `distributed` and the file writes it, or passes it to
`init_process_group(rank=..., world_size=...)`. MIG010 removes every write (each computes what
the launcher now decides) and makes every read the accelerator's value: `accelerator.process_index`,
`local_process_index` (`accelerator.device` where it names a device), `num_processes`, and
`accelerator.num_processes > 1` for `distributed`. Reads of `gpu`/`local_rank` in the function
that spawns the workers stay: there they are the command-line flag, not a process's device.
Rewriting the reads (rather than assigning `args.rank = accelerator.process_index` once) keeps
the result correct whatever order the functions run in, and needs no new statement.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.distributed.facts import (
    INIT,
    LOCAL_PROCESS_INDEX,
    NUM_PROCESSES,
    PROCESS_INDEX,
    SPAWN_CALLS,
    keyword_value,
)
from migrator.analysis.syntax.index import ModuleIndex, Scope, Statement
from migrator.analysis.syntax.views import name_value

DISTRIBUTED = "distributed"  # `accelerator.num_processes > 1`
ATTRIBUTE_KINDS = {
    "gpu": LOCAL_PROCESS_INDEX,
    "local_rank": LOCAL_PROCESS_INDEX,
    "rank": PROCESS_INDEX,
    "world_size": NUM_PROCESSES,
    "distributed": DISTRIBUTED,
}


@dataclass(eq=False)
class LaunchAttributes:
    base: str | None = None  # `args`
    kinds: dict[str, str] = field(default_factory=dict)  # attribute -> kind
    writes: list[tuple[ast.stmt, Statement]] = field(default_factory=list)
    reads: list[tuple[ast.Attribute, Statement, str]] = field(default_factory=list)
    impure: list[tuple[ast.stmt, str]] = field(default_factory=list)  # (write, attribute)

    def covers(self, node: ast.AST | None) -> bool:
        """`args.rank` (or another launch attribute) itself."""
        return (
            isinstance(node, ast.Attribute)
            and node.attr in self.kinds
            and name_value(node.value) == self.base
        )


def read_launch_attributes(index: ModuleIndex, sites, is_pure) -> LaunchAttributes:
    """`sites`: (CallSite, qualified name) of the file; `is_pure(expr)`: no calls but reading
    the environment or counting devices."""
    facts = LaunchAttributes()
    facts.base = _base(index, sites)
    if facts.base is None:
        return facts
    spawners = {id(site.scope) for site, q in sites if q in SPAWN_CALLS}
    written: dict[str, list] = {}
    for scope in index.scopes:
        for use in scope.uses.get(facts.base, []):
            if use.kind != "attr" or use.attr not in ATTRIBUTE_KINDS:
                continue
            small = _write_of(use)
            if small is not None:
                written.setdefault(use.attr, []).append((small, use.statement))
    passed = {
        value.attr
        for site, q in sites
        if q == INIT
        for value in (keyword_value(site.node, "rank"), keyword_value(site.node, "world_size"))
        if isinstance(value, ast.Attribute) and name_value(value.value) == facts.base
    }
    facts.kinds = {a: k for a, k in ATTRIBUTE_KINDS.items() if a in written or a in passed}
    flag = _spawn_flag(index, sites, facts.base)
    if facts.kinds and flag is not None and flag not in written:
        facts.kinds[flag] = DISTRIBUTED  # `--multiprocessing-distributed`: more than one process
    for attribute, writes in written.items():
        for small, statement in writes:
            if attribute not in facts.kinds:
                continue
            if not is_pure(small.value):
                facts.impure.append((small, attribute))
            facts.writes.append((small, statement))
    for scope in index.scopes:
        for use in scope.uses.get(facts.base, []):
            kind = facts.kinds.get(use.attr or "") if use.kind == "attr" else None
            if kind is None or _write_of(use) is not None:
                continue
            if id(scope) in spawners and (kind == LOCAL_PROCESS_INDEX or use.attr == flag):
                continue  # `if args.gpu is not None: warn(...)` in main(): the flags
            facts.reads.append((_attribute(use), use.statement, kind))
    return facts


def _base(index: ModuleIndex, sites) -> str | None:
    """The object holding the ranks: the base of `rank=args.rank` in init_process_group, or
    of `args.gpu = gpu` storing a spawned function's rank parameter."""
    for site, qualified in sites:
        if qualified != INIT:
            continue
        for keyword in ("rank", "world_size"):
            value = keyword_value(site.node, keyword)
            if isinstance(value, ast.Attribute) and value.attr in ATTRIBUTE_KINDS:
                return name_value(value.value)
    for site, qualified in sites:
        if qualified not in SPAWN_CALLS:
            continue
        target = index.functions.get(name_value(keyword_value(site.node, "fn", 0)) or "")
        params = [p for p in target.params if not p.startswith("*")] if target else []
        if params:
            base = _stored_in(target, params[0])
            if base is not None:
                return base
    return None


def _spawn_flag(index: ModuleIndex, sites, base: str | None) -> str | None:
    """`multiprocessing_distributed` for `if args.multiprocessing_distributed: mp.spawn(...)`:
    the flag that chose to start one process per GPU means "more than one process" now."""
    for site, qualified in sites:
        if qualified not in SPAWN_CALLS:
            continue
        for statement in site.statement.chain()[:-1]:
            test = getattr(statement.node, "test", None)
            if isinstance(test, ast.Attribute) and name_value(test.value) == base:
                return test.attr
    return None


def _stored_in(scope: Scope, name: str) -> str | None:
    for use in scope.uses.get(name, []):
        parent = use.statement.node
        for small in getattr(parent, "body", []) if not isinstance(parent, ast.stmt) else []:
            if (
                isinstance(small, ast.Assign)
                and small.value is use.node
                and len(small.targets) == 1
                and isinstance(small.targets[0], ast.Attribute)
                and small.targets[0].attr in ATTRIBUTE_KINDS
            ):
                return name_value(small.targets[0].value)
    return None


def _attribute(use) -> ast.Attribute:
    for node in ast.walk(use.statement.node if isinstance(use.statement.node, ast.AST) else
                         ast.Module(body=use.statement.node.body, type_ignores=[])):  # fmt: skip
        if isinstance(node, ast.Attribute) and node.value is use.node:
            return node
    raise LookupError(use.attr)


def _write_of(use) -> ast.stmt | None:
    """The statement `args.x = ...` / `args.x += ...` whose target is this use."""
    line = use.statement.node
    smalls = line.body if not isinstance(line, ast.stmt) else [line]
    for small in smalls:
        targets = (
            small.targets if isinstance(small, ast.Assign)
            else [small.target] if isinstance(small, ast.AugAssign) else []
        )  # fmt: skip
        if len(targets) == 1 and isinstance(targets[0], ast.Attribute) and (
            targets[0].value is use.node
        ):  # fmt: skip
            return small
    return None
