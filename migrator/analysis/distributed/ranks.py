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
    LAUNCH_ENV,
    LOCAL_NAME,
    LOCAL_PROCESS_INDEX,
    NUM_PROCESSES,
    PROCESS_INDEX,
    RANK_CALLS,
    SAMPLER_CLASSES,
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
from migrator.findings import Finding


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
            removed, kept = [rank], []
            code = self.index.source.text_of
            for param, value in zip(params[1:], values):
                if nprocs is not None and code(value) == code(nprocs):
                    removed.append(param)
                else:
                    kept.append(value)
            # the parameters that become the Accelerator's values must keep them; the others
            # stay parameters of a direct call, which the function may rebind as it likes
            rebound = next((b for p in removed for b in target.assigns(p)), None)
            if rebound is not None:
                self._block(site.node, "MIG907", f"the spawned function rebinds `{rebound.name}`"
                            f" (line {(rebound.small or rebound.statement.node).lineno}), which carries its rank or "
                            "the number of processes; migrate by hand")  # fmt: skip
                continue
            stored = _stored_in_attribute(target, rank)
            if stored is not None and not self.facts.launch.covers(stored.targets[0]):
                where = dotted_name(stored.targets[0])
                self._block(stored, "MIG907", f"the spawned function stores its rank in "
                            f"`{where}`, where other code reads it; migrate by hand")  # fmt: skip
                continue
            kind = LOCAL_PROCESS_INDEX if LOCAL_NAME.search(rank) else PROCESS_INDEX
            self.facts.rank_names.append(RankName(target, rank, kind))
            for param in removed[1:]:
                self.facts.rank_names.append(RankName(target, param, NUM_PROCESSES))
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
                    self._scheduler_note(scope, param)

    def _scheduler_note(self, worker: Scope, param: str) -> None:
        """The note of `_launch_note` where a worker's rank comes from a scheduler's own
        variable (`rank = int(os.environ["SLURM_PROCID"])`, passed to `train(rank, ...)`)."""
        position = worker.params.index(param)
        for site, _ in self.sites:
            if name_value(site.node.func) != worker.name:
                continue
            value = keyword_value(site.node, param, position)
            bindings = site.scope.assigns(name_value(value)) if name_value(value) else []
            source = bindings[0].value if len(bindings) == 1 else value
            key = self._scheduler_key(source) if source else None
            if key is not None:
                self._launch_note(site.node, f"its rank from `{key}`")
                return

    def _environment_key(self, node: ast.AST) -> str | None:
        """`"SLURM_PROCID"` for `os.environ["SLURM_PROCID"]` / `os.getenv("SLURM_PROCID")`."""
        if isinstance(node, ast.Subscript) and dotted_name(node.value) in self.environ:
            return patterns.string_value(node.slice)
        if isinstance(node, ast.Call) and self.imports.qualify(node.func) in (
            "os.environ.get", "os.getenv"
        ) and node.args:  # fmt: skip
            return patterns.string_value(node.args[0])
        return None

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
            elif value is not None and self._spawned_count(site.scope, value):
                continue  # `setup(rank, len(args.gpus.split(",")))`: the processes spawned
            elif value is not None and name_value(value) is None:
                self._block(site.node, "MIG907", "the process rank or world size handed to the "
                            "set-up helper is computed by hand; migrate by hand")  # fmt: skip
        return sources

    def _spawned_count(self, scope: Scope, expr: ast.AST) -> bool:
        """Is `expr`, read in the function mp.spawn starts, the `nprocs=` it was started with
        (`len(args.gpus.split(","))` there, its parameters standing for what the spawn
        passes)?"""
        for spawn in self.facts.spawns:
            if spawn.target is not scope or spawn.nprocs is None:
                continue
            params = [p for p in scope.params if not p.startswith("*")]
            values = _spawn_values(spawn)
            given = dict(zip(params[1:], values))
            if _shape(expr, given) == _shape(spawn.nprocs, {}):
                return True
        return False

    def _process_counts(self) -> None:
        """Every read of the spawned count in the spawned function (`batch_size //
        len(args.gpus.split(","))`): the number of processes."""
        removed = {id(site.statement.node) for site in self.facts.removed_calls}
        for spawn in self.facts.spawns:
            scope = spawn.target
            for statement in self.index.statement_of.values():
                if statement.block.scope is not scope or id(statement.node) in removed:
                    continue
                parts = statement.node.body if isinstance(statement.node, Line) else (
                    _header(statement.node))  # fmt: skip
                for part in parts:
                    for node in ast.walk(part):
                        if isinstance(node, ast.Call) and self._spawned_count(scope, node):
                            self.facts.process_counts.append((node, statement))

    def _setup_only_ranks(self) -> None:
        """A rank or world size the script computes itself (`rank = hosts.index(host)` on
        SageMaker, `int(os.environ["SLURM_PROCID"])`, `world_size = len(hosts)`) that only
        feeds the set-up the launcher replaces - `init_process_group`, the launch environment
        (`os.environ["RANK"] = str(rank)`), a DistributedSampler, a set-up helper - is the
        launcher's: it goes with them (issue 27 rule 4)."""
        for site, qualified in self.sites:
            if qualified != INIT:
                continue
            for keyword, kind in (("rank", PROCESS_INDEX), ("world_size", NUM_PROCESSES)):
                name = name_value(keyword_value(site.node, keyword))
                scope = site.scope
                if name is None or name in scope.params or self.facts.kind_of(scope, name):
                    continue
                bindings = scope.bindings.get(name, [])
                if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].unpacked:
                    continue
                if all(self._feeds_set_up(use) for use in scope.uses.get(name, [])):
                    self.facts.rank_names.append(RankName(scope, name, kind, bindings[0]))
                    self._launch_note(bindings[0].statement.node, f"`{name}` at line "
                                      f"{bindings[0].statement.node.lineno}")  # fmt: skip

    def _launch_note(self, node, started: str) -> None:
        """MIG010 note, once: the program no longer starts its own processes."""
        if any(f.code == "MIG010" and f.level == "note" for f in self.facts.findings):
            return
        self.facts.findings.append(Finding(code="MIG010", level="note", node=node, message=(
            f"the program set up its processes itself ({started}); it now runs as one process "
            "per device that the launcher starts: `migrate launch --nproc N script.py` (or "
            "`torchrun`, `accelerate launch`; across machines, their rendezvous options "
            "instead of the scheduler's own variables)")))  # fmt: skip

    def _feeds_set_up(self, use) -> bool:
        """`use` is read only by set-up the launcher replaces: an argument of
        `init_process_group` or of a set-up helper, a DistributedSampler's `rank=` /
        `num_replicas=`, the value of a launch-environment write."""
        line = use.statement.node
        small = line.body[0] if isinstance(line, Line) and len(line.body) == 1 else None
        if isinstance(small, ast.Assign) and len(small.targets) == 1:
            target = small.targets[0]
            if (
                isinstance(target, ast.Subscript)
                and dotted_name(target.value) in self.environ
                and patterns.string_value(target.slice) in (*ENV_KINDS, *LAUNCH_ENV)
            ):
                return True
        call = use.call if use.kind == "arg" else None
        if call is None:
            return False
        qualified = self.imports.qualify(call.func) or ""
        if qualified == INIT or name_value(call.func) in {h.name for h in self.facts.helpers}:
            return True
        return qualified in SAMPLER_CLASSES and any(
            k.arg in ("rank", "num_replicas") and k.value is use.node for k in call.keywords
        )

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
                    key = self._scheduler_key(value)  # `int(os.environ["SLURM_PROCID"])`
                    if key is not None:
                        self._launch_note(bindings[0].statement.node, f"its rank from `{key}`")

    def _scheduler_key(self, value: ast.AST) -> str | None:
        """The scheduler's variable `value` reads (`"SLURM_PROCID"`), if any: srun, mpirun
        and SageMaker start the processes themselves; a launcher starts them now."""
        return next((k for node in ast.walk(value) if (k := self._environment_key(node))
                     and k.startswith(SCHEDULER_PREFIXES)), None)  # fmt: skip

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


# Variables of the schedulers that start one task per process themselves (SLURM's srun,
# SageMaker, Open MPI, Intel MPI / PMI).
SCHEDULER_PREFIXES = ("SLURM_", "SM_", "OMPI_", "PMI_", "PMIX_")


def _spawn_values(spawn) -> list[ast.expr]:
    """The values mp.spawn's `args=(...)` passes after the rank."""
    arguments = keyword_value(spawn.site.node, "args", 1)
    if not isinstance(arguments, (ast.Tuple, ast.List)):
        return []
    return [e.value if isinstance(e, ast.Starred) else e for e in arguments.elts]


def _shape(expr: ast.AST, given: dict[str, ast.expr]) -> str:
    """`expr` as a tree with the parameters in `given` replaced by what they stand for."""

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return given.get(node.id, node)

    import copy

    return ast.dump(Substitute().visit(copy.deepcopy(expr)))


def _header(node: ast.AST) -> list[ast.AST]:
    """The expressions a compound statement evaluates itself (`if` test, `for` iterable)."""
    return [getattr(node, f) for f in ("test", "iter") if getattr(node, f, None) is not None]
