"""Configuration objects with HF Accelerate 1.x names: enums, settings, kwargs handlers.

They mirror `accelerate.utils` so that scripts can import them from `runtime` (or
`runtime.utils`). The `Accelerator` reads configuration by duck typing, so HF's own objects
(`accelerate.utils.ProjectConfiguration`, `DataLoaderConfiguration`, ...) work as well, and
`DistributedType` members compare equal to HF's (both are `str` enums with the same values).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any


class DistributedType(str, enum.Enum):
    """The kind of distributed run; `runtime` itself produces NO, MULTI_CPU and MULTI_GPU."""

    NO = "NO"
    MULTI_CPU = "MULTI_CPU"
    MULTI_GPU = "MULTI_GPU"
    MULTI_NPU = "MULTI_NPU"
    MULTI_MLU = "MULTI_MLU"
    MULTI_SDAA = "MULTI_SDAA"
    MULTI_MUSA = "MULTI_MUSA"
    MULTI_XPU = "MULTI_XPU"
    DEEPSPEED = "DEEPSPEED"
    FSDP = "FSDP"
    XLA = "XLA"
    MEGATRON_LM = "MEGATRON_LM"
    MULTI_HPU = "MULTI_HPU"
    MULTI_NEURON = "MULTI_NEURON"


class _ValueEnum(enum.Enum):
    """`str(member)` is its value; `"x" in Enum` tests values (as HF's enums do)."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def list(cls) -> list[str]:
        return [member.value for member in cls]

    @classmethod
    def has(cls, value: Any) -> bool:
        return str(getattr(value, "value", value)) in cls.list()


class LoggerType(_ValueEnum):
    """Experiment trackers `log_with=` understands (JSONL is runtime's own, dependency-free)."""

    ALL = "all"
    JSONL = "jsonl"
    TENSORBOARD = "tensorboard"
    WANDB = "wandb"
    MLFLOW = "mlflow"
    COMETML = "comet_ml"
    AIM = "aim"
    CLEARML = "clearml"
    DVCLIVE = "dvclive"
    SWANLAB = "swanlab"
    TRACKIO = "trackio"


class RNGType(_ValueEnum):
    """The random number generators `synchronize_rng_states` can align across processes."""

    TORCH = "torch"
    CUDA = "cuda"
    MLU = "mlu"
    SDAA = "sdaa"
    MUSA = "musa"
    NPU = "npu"
    XLA = "xla"
    XPU = "xpu"
    HPU = "hpu"
    GENERATOR = "generator"


class DDPCommunicationHookType(_ValueEnum):
    """DDP gradient communication hooks (`DistributedDataParallelKwargs(comm_hook=...)`)."""

    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"
    POWER_SGD = "power_sgd"
    BATCHED_POWER_SGD = "batched_power_sgd"


class PrecisionType(str, _ValueEnum):
    NO = "no"
    FP8 = "fp8"
    FP16 = "fp16"
    BF16 = "bf16"


class Settings:
    """Settings with class-level defaults, set by keyword (or position, in field order).

    A light stand-in for a dataclass: `from runtime import Accelerator` pays no code
    generation for these classes (each @dataclass costs about a millisecond at import).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.field_names()
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} arguments")
        kwargs.update(zip(names, args))
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected arguments {unknown}")
        for name in names:
            setattr(self, name, kwargs.get(name, getattr(type(self), name)))
        if hasattr(self, "__post_init__"):
            self.__post_init__()

    @classmethod
    def field_names(cls) -> list[str]:
        return [
            name
            for klass in reversed(cls.__mro__)
            for name in vars(klass).get("__annotations__", {})
        ]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(self) == vars(other)

    __hash__ = None

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.field_names())
        return f"{type(self).__name__}({values})"


class KwargsHandler(Settings):
    """`to_kwargs()`: the fields that differ from the class defaults (as HF forwards them)."""

    def to_kwargs(self) -> dict:
        defaults = type(self)()
        return {
            name: getattr(self, name)
            for name in self.field_names()
            if getattr(self, name) != getattr(defaults, name)
        }


class DataLoaderConfiguration(Settings):
    """How `prepare` shards loaders (HF's fields and defaults). `dispatch_batches=None`
    dispatches IterableDatasets only; `use_stateful_dataloader` (torchdata) is not
    implemented and must stay False."""

    split_batches: bool = False
    dispatch_batches: bool | None = None
    even_batches: bool = True
    use_seedable_sampler: bool = False
    data_seed: int | None = None
    non_blocking: bool = False
    use_stateful_dataloader: bool = False


class ProjectConfiguration(Settings):
    """Where checkpoints and logs go; `automatic_checkpoint_naming` numbers `save_state` folders
    `project_dir/checkpoints/checkpoint_<iteration>` and keeps at most `total_limit` of them."""

    project_dir: str | None = None
    logging_dir: str | None = None
    automatic_checkpoint_naming: bool = False
    total_limit: int | None = None
    iteration: int = 0
    save_on_each_node: bool = False

    def set_directories(self, project_dir: str | None = None) -> None:
        self.project_dir = project_dir
        if self.logging_dir is None:
            self.logging_dir = project_dir

    def __post_init__(self) -> None:
        self.set_directories(self.project_dir)


class GradientAccumulationPlugin(KwargsHandler):
    num_steps: int | None = None
    adjust_scheduler: bool = True  # accepted; HF 1.x never applies it either
    sync_with_dataloader: bool = True
    sync_each_batch: bool = False


class DistributedDataParallelKwargs(KwargsHandler):
    """Arguments forwarded to `DistributedDataParallel` (only those changed from the defaults),
    and a gradient communication hook registered on the wrapped model (`register_comm_hook`):
    `comm_hook` fp16 / bf16 compression or PowerSGD (`comm_state_option` are PowerSGDState's
    arguments), optionally wrapped by `comm_wrapper` fp16 / bf16 compression."""

    dim: int = 0
    broadcast_buffers: bool = True
    bucket_cap_mb: int = 25
    find_unused_parameters: bool = False
    check_reduction: bool = False
    gradient_as_bucket_view: bool = False
    static_graph: bool = False
    comm_hook: DDPCommunicationHookType = DDPCommunicationHookType.NO
    comm_wrapper: DDPCommunicationHookType = DDPCommunicationHookType.NO
    comm_state_option: dict | None = None

    _HOOK_OPTIONS = ("comm_hook", "comm_wrapper", "comm_state_option")

    def __post_init__(self) -> None:
        # HF's enum members, ours or their values: read by value
        self.comm_hook = DDPCommunicationHookType(
            str(getattr(self.comm_hook, "value", self.comm_hook))
        )
        self.comm_wrapper = DDPCommunicationHookType(
            str(getattr(self.comm_wrapper, "value", self.comm_wrapper))
        )
        if self.comm_wrapper not in (
            DDPCommunicationHookType.NO,
            DDPCommunicationHookType.FP16,
            DDPCommunicationHookType.BF16,
        ):
            raise ValueError(f"comm_wrapper must be NO, FP16 or BF16, not {self.comm_wrapper}")
        self.comm_state_option = dict(self.comm_state_option or {})

    def to_kwargs(self) -> dict:
        """DDP's own arguments only: the hook is registered after wrapping."""
        kwargs = super().to_kwargs()
        return {name: value for name, value in kwargs.items() if name not in self._HOOK_OPTIONS}

    def register_comm_hook(self, model) -> None:
        """Registers the configured hook on a `DistributedDataParallel` model (HF's mapping to
        `torch.distributed.algorithms.ddp_comm_hooks`)."""
        if self.comm_hook == DDPCommunicationHookType.NO:
            return
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

        hooks = {
            DDPCommunicationHookType.FP16: default_hooks.fp16_compress_hook,
            DDPCommunicationHookType.BF16: default_hooks.bf16_compress_hook,
            DDPCommunicationHookType.POWER_SGD: powerSGD_hook.powerSGD_hook,
            DDPCommunicationHookType.BATCHED_POWER_SGD: powerSGD_hook.batched_powerSGD_hook,
        }
        wrappers = {
            DDPCommunicationHookType.FP16: default_hooks.fp16_compress_wrapper,
            DDPCommunicationHookType.BF16: default_hooks.bf16_compress_wrapper,
        }
        hook = hooks[self.comm_hook]
        if self.comm_wrapper in wrappers:
            hook = wrappers[self.comm_wrapper](hook)
        power_sgd = self.comm_hook in (
            DDPCommunicationHookType.POWER_SGD,
            DDPCommunicationHookType.BATCHED_POWER_SGD,
        )
        state = powerSGD_hook.PowerSGDState(None, **self.comm_state_option) if power_sgd else None
        model.register_comm_hook(state=state, hook=hook)


class GradScalerKwargs(KwargsHandler):
    init_scale: float = 65536.0
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    enabled: bool = True


class InitProcessGroupKwargs(KwargsHandler):
    """Forwarded to `torch.distributed.init_process_group` (`backend` overrides gloo/nccl)."""

    backend: str | None = None
    init_method: str | None = None
    timeout: Any = None


class AutocastKwargs(KwargsHandler):
    enabled: bool = True
    cache_enabled: bool | None = None


class ProfileKwargs(KwargsHandler):
    """`torch.profiler.profile` settings for `Accelerator.profile()`; with `output_trace_dir`
    each process also writes a Chrome trace, `profile_<process_index>.json`."""

    activities: list[str] | None = None
    schedule_option: dict[str, int] | None = None
    on_trace_ready: Callable | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    output_trace_dir: str | None = None

    def build(self):
        from torch import profiler

        kinds = {"cpu": profiler.ProfilerActivity.CPU, "cuda": profiler.ProfilerActivity.CUDA}
        activities = None
        if self.activities is not None:
            unknown = [a for a in self.activities if a not in kinds]
            if unknown:
                raise ValueError(f"profiler activities must be 'cpu' or 'cuda', not {unknown}")
            activities = [kinds[a] for a in self.activities]
        schedule = profiler.schedule(**self.schedule_option) if self.schedule_option else None
        return profiler.profile(
            activities=activities,
            schedule=schedule,
            on_trace_ready=self.on_trace_ready,
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
            with_flops=self.with_flops,
            with_modules=self.with_modules,
        )
