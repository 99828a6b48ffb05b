"""Where a native DDP script keeps its ranks: `mp.spawn` entry points and the spawned
function's rank / world-size parameters, workers handing them to `init_process_group`, names
bound to `int(os.environ["RANK"])` / `dist.get_rank()`, and `args.local_rank`. A part of
distributed.py's reader, kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import (
    ENV_KINDS,
    INIT,
    LAUNCH_ARGUMENTS,
    LOCAL_NAME,
    LOCAL_PROCESS_INDEX,
    NUM_PROCESSES,
    PROCESS_INDEX,
    RANK_CALLS,
    SPAWN_CALLS,
    DistributedFacts,
    RankName,
    Spawn,
    Worker,
    keyword_value,
    whole_statement,
)
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Line, ModuleIndex, Scope
from migrator.analysis.syntax.views import call_args, name_value


def env_kind(expr: ast.AST | None, imports, environ=frozenset({"os.environ"})) -> str | None:
    """The rank kind of `int(os.environ["LOCAL_RANK"])`, `int(os.getenv("RANK", 0))`, ...;
    `environ`: the names holding the environment (`env_dict = {k: os.environ[k] for k in ...}`)."""
    if not isinstance(expr, ast.Call) or imports.qualify(expr.func) != "int":
        return None
    args = call_args(expr)
    if not args:
        return None
    inner = args[0].value
    key = None
    if isinstance(inner, ast.Subscript) and dotted_name(inner.value) in environ:
        key = patterns.string_value(inner.slice)
    elif isinstance(inner, ast.Call) and imports.qualify(inner.func) in ("os.environ.get",
                                                                         "os.getenv"):  # fmt: skip
        inner_args = call_args(inner)
        key = patterns.string_value(inner_args[0].value) if inner_args else None
    return ENV_KINDS.get(key or "")


def environment_copies(index: ModuleIndex) -> set[str]:
    """Names bound once to a copy of the environment: `{k: os.environ[k] for k in keys}`,
    `dict(os.environ)`, `os.environ.copy()` (pytorch/examples' distributed/ddp example)."""
    found = set()
    for scope in index.scopes:
        for name, bindings in scope.bindings.items():
            value = bindings[0].value if len(bindings) == 1 else None
            if isinstance(value, ast.DictComp):
                value = value.value.value if isinstance(value.value, ast.Subscript) else None
            elif isinstance(value, ast.Call) and not value.keywords and (
                dotted_name(value.func) == "os.environ.copy"
                or (dotted_name(value.func) == "dict" and len(value.args) == 1)
            ):  # fmt: skip
                value = value.args[0] if value.args else value.func.value
            if value is not None and dotted_name(value) == "os.environ":
                found.add(name)
    return found


class RankReader:
    index: ModuleIndex
    imports: object
    facts: DistributedFacts
    sites: list
    environ: set[str]

    def _block(self, node, code: str, message: str, level: str = "warning") -> None:
        raise NotImplementedError

    def _spawns(self) -> None:
        for site, qualified in self.sites:
            if qualified not in SPAWN_CALLS:
                continue
            function = keyword_value(site.node, "fn", 0)
            target = None
            if name_value(function) is not None:
                target = self.index.functions.get(name_value(function))
            arguments = keyword_value(site.node, "args", 1)
            nprocs = keyword_value(site.node, "nprocs", 2)
            if arguments is None:
                arguments = ast.Tuple(elts=[])
            if (
                target is None
                or not isinstance(arguments, (ast.Tuple, ast.List))
                or not (whole_statement(site))
            ):
                self._block(site.node, "MIG907", "cannot tell which function mp.spawn runs, or "
                            "with which arguments; migrate by hand")  # fmt: skip
                continue
            params = [p for p in target.params if not p.startswith("*")]
            values = [e.value if isinstance(e, ast.Starred) else e for e in arguments.elts]
            if not params or len(values) > len(params) - 1:
                self._block(site.node, "MIG907", "mp.spawn passes arguments the spawned "
                            "function does not take; migrate by hand")  # fmt: skip
                continue
            rank = params[0]
            if any(target.assigns(p) for p in params):
                self._block(site.node, "MIG907", "the spawned function rebinds its rank or "
                            "arguments; migrate by hand")  # fmt: skip
                continue
            stored = _stored_in_attribute(target, rank)
            if stored is not None and not self.facts.launch.covers(stored.targets[0]):
                where = dotted_name(stored.targets[0])
                self._block(stored, "MIG907", f"the spawned function stores its rank in "
                            f"`{where}`, where other code reads it; migrate by hand")  # fmt: skip
                continue
            kind = LOCAL_PROCESS_INDEX if LOCAL_NAME.search(rank) else PROCESS_INDEX
            self.facts.rank_names.append(RankName(target, rank, kind))
            removed, kept = [rank], []
            code = self.index.source.text_of
            for param, value in zip(params[1:], values):
                if nprocs is not None and code(value) == code(nprocs):
                    removed.append(param)
                    self.facts.rank_names.append(RankName(target, param, NUM_PROCESSES))
                else:
                    kept.append(value)
            self.facts.spawns.append(Spawn(site, target, removed, kept, nprocs))
            self.facts.workers.append(Worker(target, removed))

    def _workers(self) -> None:
        """`def train(rank, world_size): setup(rank, world_size)` with no mp.spawn in sight: the
        parameters that reach init_process_group's `rank=` / `world_size=` are the launcher's."""
        for site, qualified in self.sites:
            if qualified != INIT:
                continue
            for keyword, kind in (("rank", PROCESS_INDEX), ("world_size", NUM_PROCESSES)):
                value = keyword_value(site.node, keyword)
                if name_value(value) not in site.scope.params:
                    continue
                for scope, param in self._param_sources(site.scope, name_value(value)):
                    if self.facts.kind_of(scope, param) is not None:
                        continue
                    self.facts.remove_rank_param(scope, param, kind)

    def _param_sources(self, scope: Scope, param: str) -> list[tuple[Scope, str]]:
        """The worker parameters a set-up helper's parameter is called with."""
        if scope not in self.facts.helpers:
            return [(scope, param)]  # its direct callers lose the argument with it
        sources = []
        position = scope.params.index(param)
        for site, _ in self.sites:
            if name_value(site.node.func) != scope.name:
                continue
            value = keyword_value(site.node, param, position)
            if name_value(value) in site.scope.params:
                sources.append((site.scope, name_value(value)))
            elif value is not None and name_value(value) is None:
                self._block(site.node, "MIG907", "the process rank or world size handed to the "
                            "set-up helper is computed by hand; migrate by hand")  # fmt: skip
        return sources

    def _rank_names(self) -> None:
        for scope in self.index.scopes:
            for name, bindings in scope.bindings.items():
                if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].unpacked:
                    continue  # rebound ranks stay as they are: still valid under a launcher
                value = bindings[0].value
                kind = env_kind(value, self.imports, self.environ)
                if kind is None and isinstance(value, ast.Call):
                    kind = RANK_CALLS.get(self.imports.qualify(value.func) or "")
                if kind is not None:
                    self.facts.rank_names.append(RankName(scope, name, kind, bindings[0]))

    def _rank_attributes(self) -> None:
        declared = any(site.method == "add_argument" and any(
            patterns.string_value(a.value) in LAUNCH_ARGUMENTS for a in call_args(site.node)
        ) for site, _ in self.sites)  # fmt: skip
        for scope in self.index.scopes if declared else []:
            for uses in scope.uses.values():
                self.facts.rank_attributes.extend(
                    u for u in uses if u.kind == "attr" and u.attr == "local_rank"
                )


def _stored_in_attribute(scope: Scope, name: str) -> ast.Assign | None:
    """`args.gpu = gpu`: the rank parameter copied into an attribute other functions read."""
    for use in scope.uses.get(name, []):
        line = use.statement.node
        if not isinstance(line, Line):
            continue
        for small in line.body:
            if (
                isinstance(small, ast.Assign)
                and small.value is use.node
                and any(isinstance(t, ast.Attribute) for t in small.targets)
            ):
                return small
    return None
