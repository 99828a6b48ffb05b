"""The `accelerate.utils` names scripts import, at the same path: `from runtime.utils import ...`.

Configuration classes and enums come from `runtime.config`; `set_seed` from `runtime.seeding`;
`gather`, `reduce`, `broadcast`, `pad_across_processes`, `copy_tensor_to_devices`,
`send_to_device` from the runtime's collectives; `synchronize_rng_states` from seeding.
"""

from runtime.collectives import (
    DistributedOperationException,
    broadcast,
    broadcast_object_list,
    copy_tensor_to_devices,
    gather,
    gather_object,
    pad_across_processes,
    reduce,
)
from runtime.config import (
    AutocastKwargs,
    DataLoaderConfiguration,
    DDPCommunicationHookType,
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
    RNGType,
)
from runtime.data import send_to_device
from runtime.seeding import set_seed, synchronize_rng_state, synchronize_rng_states
from runtime.wrappers import unwrap_model as extract_model_from_parallel

__all__ = [
    "AutocastKwargs",
    "DDPCommunicationHookType",
    "DataLoaderConfiguration",
    "DistributedDataParallelKwargs",
    "DistributedOperationException",
    "DistributedType",
    "GradScalerKwargs",
    "GradientAccumulationPlugin",
    "InitProcessGroupKwargs",
    "KwargsHandler",
    "LoggerType",
    "PrecisionType",
    "ProfileKwargs",
    "ProjectConfiguration",
    "RNGType",
    "broadcast",
    "broadcast_object_list",
    "copy_tensor_to_devices",
    "extract_model_from_parallel",
    "gather",
    "gather_object",
    "pad_across_processes",
    "reduce",
    "send_to_device",
    "set_seed",
    "synchronize_rng_state",
    "synchronize_rng_states",
]
