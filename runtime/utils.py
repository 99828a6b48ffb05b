"""The `accelerate.utils` names scripts import, at the same path: `from runtime.utils import ...`.

Configuration classes and enums come from `runtime.config`; `set_seed` from `runtime.seeding`;
`gather`, `reduce`, `pad_across_processes`, `send_to_device` from the runtime's collectives.
"""

from runtime.collectives import gather, gather_object, pad_across_processes, reduce
from runtime.config import (
    AutocastKwargs,
    DataLoaderConfiguration,
    DistributedDataParallelKwargs,
    DistributedType,
    GradientAccumulationPlugin,
    GradScalerKwargs,
    InitProcessGroupKwargs,
    KwargsHandler,
    LoggerType,
    PrecisionType,
    ProfileKwargs,
    ProjectConfiguration,
)
from runtime.data import send_to_device
from runtime.seeding import set_seed
from runtime.wrappers import unwrap_model as extract_model_from_parallel

__all__ = [
    "AutocastKwargs",
    "DataLoaderConfiguration",
    "DistributedDataParallelKwargs",
    "DistributedType",
    "GradScalerKwargs",
    "GradientAccumulationPlugin",
    "InitProcessGroupKwargs",
    "KwargsHandler",
    "LoggerType",
    "PrecisionType",
    "ProfileKwargs",
    "ProjectConfiguration",
    "extract_model_from_parallel",
    "gather",
    "gather_object",
    "pad_across_processes",
    "reduce",
    "send_to_device",
    "set_seed",
]
