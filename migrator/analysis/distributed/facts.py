"""What MIG010 needs to know about a script's native torch.distributed code: the vocabulary
(qualified names of DDP, samplers, spawn, process-group calls) and the facts distributed.py reads
from the index, and the two syntax helpers both readers share. Kept apart from the reader so
rules and roles import the facts alone."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from migrator.analysis.syntax.index import Binding, CallSite, Scope, Statement, Use
from migrator.analysis.syntax.views import Arg, contains, keyword_value  # noqa: F401 - shared
from migrator.findings import Finding

PROCESS_INDEX, LOCAL_PROCESS_INDEX, NUM_PROCESSES = (
    "process_index", "local_process_index", "num_processes",
)  # fmt: skip
RANK_KINDS = (PROCESS_INDEX, LOCAL_PROCESS_INDEX)  # kinds that also name a device index
MAIN_PROCESS = {PROCESS_INDEX: "is_main_process", LOCAL_PROCESS_INDEX: "is_local_main_process"}

DDP_CLASSES = {
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
}
SAMPLER_CLASSES = {
    "torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler",
}  # fmt: skip
# What a single process uses in the `else:` of `if args.distributed: sampler = ...`, and the
# DistributedSampler `shuffle=` each stands for (None: the loader's own `shuffle=` decides).
FALLBACK_SAMPLERS = {
    "torch.utils.data.RandomSampler": True, "torch.utils.data.sampler.RandomSampler": True,
    "torch.utils.data.SequentialSampler": False,
    "torch.utils.data.sampler.SequentialSampler": False,
}  # fmt: skip
SPAWN_CALLS = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"}
PROCESS_CLASSES = {"torch.multiprocessing.Process", "multiprocessing.Process"}
INIT, DESTROY = "torch.distributed.init_process_group", "torch.distributed.destroy_process_group"
GROUP_CALLS = {INIT, DESTROY, "torch.cuda.set_device", "torch.accelerator.set_device_index"}
BARRIER, ALL_REDUCE = "torch.distributed.barrier", "torch.distributed.all_reduce"
RANK_CALLS = {
    "torch.distributed.get_rank": PROCESS_INDEX,
    "torch.distributed.get_world_size": NUM_PROCESSES,
    "torch.distributed.get_node_local_rank": LOCAL_PROCESS_INDEX,
}
# What the launcher tells each process: torchrun's variables, and the same facts as a
# scheduler or MPI launcher gives them (`srun`, `mpirun`) to a script that makes its own group.
ENV_KINDS = {
    "RANK": PROCESS_INDEX, "LOCAL_RANK": LOCAL_PROCESS_INDEX, "WORLD_SIZE": NUM_PROCESSES,
    "SLURM_PROCID": PROCESS_INDEX, "SLURM_LOCALID": LOCAL_PROCESS_INDEX,
    "SLURM_NTASKS": NUM_PROCESSES,
    "OMPI_COMM_WORLD_RANK": PROCESS_INDEX, "OMPI_COMM_WORLD_LOCAL_RANK": LOCAL_PROCESS_INDEX,
    "OMPI_COMM_WORLD_SIZE": NUM_PROCESSES,
    "PMI_RANK": PROCESS_INDEX, "PMI_SIZE": NUM_PROCESSES,
}  # fmt: skip
LAUNCH_ENV = {"MASTER_ADDR", "MASTER_PORT"}
REDUCE_OPS = {"SUM": "sum", "AVG": "mean"}
COLLECTIVES = {
    "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "broadcast",
    "broadcast_object_list", "reduce", "reduce_scatter", "gather", "scatter", "all_to_all",
    "send", "recv", "isend", "irecv",
}  # fmt: skip
# DDP options `prepare` reproduces or that only tune speed; any other is reported.
DDP_OPTIONS_KEPT = {"module", "device_ids", "output_device", "bucket_cap_mb",
                    "gradient_as_bucket_view"}  # fmt: skip
RPC_PREFIXES = ("torch.distributed.rpc", "torch.distributed.autograd")
SHARDING_PREFIXES = (
    "torch.distributed.fsdp", "torch.distributed._composable", "torch.distributed.tensor",
    "torch.distributed._tensor", "torch.distributed.device_mesh", "torch.distributed.pipelining",
)  # fmt: skip
LAUNCH_ARGUMENTS = {"--local_rank", "--local-rank"}
LOCAL_NAME = re.compile(r"local|gpu|device_id")
WORKER_RANK = re.compile(r"(local_|process_|proc_|worker_)?rank$|(process|proc|worker)_id$")
PURE_CALLS = {"int", "str", "torch.cuda.is_available", "torch.cuda.device_count",
              "os.environ.get", "os.getenv", "max", "min", "torch.distributed.is_initialized",
              "torch.distributed.is_available"}  # fmt: skip


@dataclass(eq=False)
class RankName:
    """A name holding this process's rank or the world size."""

    scope: Scope
    name: str
    kind: str  # process_index | local_process_index | num_processes
    binding: Binding | None = None  # None: a parameter of the spawned function


@dataclass(eq=False)
class Wrap:
    """`target = DistributedDataParallel(inner, ...)`."""

    site: CallSite
    target: str
    inner: ast.expr
    inner_name: str | None  # the wrapped model's name, seen through `.to(...)`/`.cuda(...)`
    dropped_options: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Sampler:
    site: CallSite  # the DistributedSampler(...) call
    binding: Binding | None  # None when built inline in `DataLoader(sampler=...)`
    shuffle: ast.expr | None  # None: DistributedSampler's default, True
    loader_args: list[tuple[ast.Call, Arg]] = field(default_factory=list)
    # `else: sampler = None | RandomSampler(ds)` of `if args.distributed: sampler = ...`
    fallbacks: list[Binding] = field(default_factory=list)
    # `BatchSampler(sampler, ...)` feeding `DataLoader(batch_sampler=...)`: BatchLoader
    batch_loaders: list[Any] = field(default_factory=list)
    # `return loader, sampler` of a loader factory whose callers only `set_epoch` it: None
    returned: list[ast.expr] = field(default_factory=list)


@dataclass(eq=False)
class Spawn:
    site: CallSite
    target: Scope
    removed_params: list[str]
    arguments: list[ast.expr]  # what the direct call passes on
    nprocs: ast.expr | None


@dataclass(eq=False)
class Worker:
    """A function every process runs: its rank / world-size parameters go, the Accelerator
    answers instead (the mp.spawn target, or a function handing them to init_process_group)."""

    scope: Scope
    removed_params: list[str]


@dataclass(eq=False)
class Reduction:
    """`dist.all_reduce(t, op=SUM|AVG)` as a statement: becomes `t = accelerator.reduce(...)`."""

    site: CallSite
    tensor: str
    reduction: str


@dataclass(eq=False)
class DistributedFacts:
    removed_calls: list[CallSite] = field(default_factory=list)  # whole statements that go
    removed_smalls: list[tuple[ast.stmt, Statement]] = field(default_factory=list)  # environ
    helpers: list[Scope] = field(default_factory=list)  # setup()/cleanup(): removed whole
    wraps: list[Wrap] = field(default_factory=list)
    samplers: list[Sampler] = field(default_factory=list)
    spawns: list[Spawn] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    rank_names: list[RankName] = field(default_factory=list)
    rank_calls: list[tuple[CallSite, str]] = field(default_factory=list)
    # `len(args.gpus.split(","))` in the spawned function, the count mp.spawn starts: each
    # reads `accelerator.num_processes` (a removed set-up call's copy goes with the call)
    process_counts: list[tuple[ast.expr, Statement]] = field(default_factory=list)
    # `args.local_rank` where the script declares `--local_rank` (torch.distributed.launch)
    rank_attributes: list[Use] = field(default_factory=list)
    barriers: list[CallSite] = field(default_factory=list)
    reductions: list[Reduction] = field(default_factory=list)
    collectives: list[CallSite] = field(default_factory=list)  # left as they are, reported
    # `model_without_ddp = model` ... `model_without_ddp = model.module`: the `.module` bindings
    aliases: list[tuple[Scope, str, list[Binding]]] = field(default_factory=list)
    launch: Any = None  # LaunchAttributes (launch_attributes.py): `args.rank`, `args.gpu`, ...
    findings: list[Finding] = field(default_factory=list)
    blocking: bool = False  # a finding says this file's distributed code is not ours to rewrite

    @property
    def present(self) -> bool:
        return any((self.removed_calls, self.removed_smalls, self.helpers, self.wraps,
                    self.samplers, self.spawns, self.rank_names, self.rank_calls,
                    self.rank_attributes, self.barriers, self.reductions,
                    self.collectives)) or bool(self.launch and self.launch.writes)  # fmt: skip

    def unwrapped(self, scope: Scope, name: str) -> str | None:
        """`model` for `ddp_model` when `ddp_model = DDP(model, ...)` in `scope`."""
        for wrap in self.wraps:
            if wrap.site.scope is scope and wrap.target == name and wrap.inner_name not in (
                None, name,
            ):  # fmt: skip
                return wrap.inner_name
        return None

    def plain_alias(self, scope: Scope, small: ast.AST) -> bool:
        """`model_without_ddp = model`, where the script rebinds it to `model.module` once
        wrapped: the plain model by design, which stays a plain reference before prepare."""
        return (
            isinstance(small, ast.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0], ast.Name)
            and any(s is scope and n == small.targets[0].id for s, n, _ in self.aliases)
        )

    def one_process_only(self, statement: Statement) -> bool:
        """`statement` runs under `if rank == 0:` (or `args.rank == 0`, `dist.get_rank() == 0`,
        `is_main_process`): work of one process that must not shard its loader or gather."""
        scope = statement.block.scope
        for enclosing in statement.chain()[:-1]:
            test = getattr(enclosing.node, "test", None)
            # `if rank == 0 and step % k == 0:` holds on one process too
            tests = (
                test.values
                if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)
                else [test]
            )
            if any(self._main_test(scope, one) for one in tests):
                return True
        return False

    def _main_test(self, scope: Scope, test) -> bool:
        """`is_main_process`, `rank == 0`, `args.rank == 0`, `dist.get_rank() == 0`."""
        if isinstance(test, ast.Attribute) and test.attr in ("is_main_process",
                                                             "is_local_main_process"):  # fmt: skip
            return True
        if not (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == 0
        ):
            return False
        left = test.left
        if isinstance(left, ast.Name) and self.kind_of(scope, left.id) in RANK_KINDS:
            return True
        if self.launch is not None and self.launch.covers(left) and (
            self.launch.kinds[left.attr] in RANK_KINDS
        ):  # fmt: skip
            return True
        return isinstance(left, ast.Call) and getattr(left.func, "attr", None) == "get_rank"

    def names_for(self, scope: Scope, name: str) -> list[str]:
        """`name` and the DDP wrappers that stand for it in `scope`."""
        aliases = [w.target for w in self.wraps if w.site.scope is scope and w.inner_name == name]
        return [name, *(a for a in aliases if a != name)]

    def launch_param(self, scope: Scope, name: str) -> bool:
        return any(r.binding is None and r.scope is scope and r.name == name
                   for r in self.rank_names)  # fmt: skip

    def remove_rank_param(self, scope: Scope, param: str, kind: str) -> None:
        """A worker's (or its `__init__`'s) parameter carrying the rank or world size: read as
        the accelerator's `kind`, and dropped from the function and its calls."""
        self.rank_names.append(RankName(scope, param, kind))
        worker = next((w for w in self.workers if w.scope is scope), None)
        if worker is None:
            worker = Worker(scope, [])
            self.workers.append(worker)
        worker.removed_params.append(param)

    def kind_of(self, scope: Scope, name: str) -> str | None:
        for rank_name in self.rank_names:
            if rank_name.scope is scope and rank_name.name == name:
                return rank_name.kind
        return None


def whole_statement(site: CallSite) -> bool:
    return isinstance(site.small, ast.Expr) and site.small.value is site.node
