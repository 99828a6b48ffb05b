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
    """How `prepare` shards loaders. `dispatch_batches` and the seedable/stateful samplers are
    not implemented: they must stay at their defaults."""

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
    """Arguments forwarded to `DistributedDataParallel` (only those changed from the defaults)."""

    dim: int = 0
    broadcast_buffers: bool = True
    bucket_cap_mb: int = 25
    find_unused_parameters: bool = False
    check_reduction: bool = False
    gradient_as_bucket_view: bool = False
    static_graph: bool = False


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
