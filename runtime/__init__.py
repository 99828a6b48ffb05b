"""An HF-Accelerate-compatible runtime on torch.distributed: `from runtime import Accelerator`.

Everything but `launch` (also named `notebook_launcher`) and `set_seed` is loaded on first use
(PEP 562), so `import runtime` costs almost nothing beyond `import torch`; trackers and
safetensors load only when used.
The names of `accelerate` and `accelerate.utils` that scripts use are here too (and in
`runtime.utils`, `runtime.state`, `runtime.logging` for the same import paths).
"""

from importlib import import_module
from typing import TYPE_CHECKING

from runtime.launch import launch, notebook_launcher
from runtime.seeding import set_seed

if TYPE_CHECKING:
    from runtime.accelerator import Accelerator
    from runtime.config import (
        AutocastKwargs,
        DataLoaderConfiguration,
        DDPCommunicationHookType,
        DistributedDataParallelKwargs,
        DistributedType,
        GradientAccumulationPlugin,
        GradScalerKwargs,
        InitProcessGroupKwargs,
        LoggerType,
        PrecisionType,
        ProfileKwargs,
        ProjectConfiguration,
    )
    from runtime.state import AcceleratorState, GradientState, PartialState
    from runtime.tracking import GeneralTracker

_LAZY = {
    "Accelerator": "runtime.accelerator",
    "PartialState": "runtime.state",
    "AcceleratorState": "runtime.state",
    "GradientState": "runtime.state",
    "GeneralTracker": "runtime.tracking",
    **dict.fromkeys(
        [
            "AutocastKwargs",
            "DataLoaderConfiguration",
            "DDPCommunicationHookType",
            "DistributedDataParallelKwargs",
            "DistributedType",
            "GradientAccumulationPlugin",
            "GradScalerKwargs",
            "InitProcessGroupKwargs",
            "LoggerType",
            "PrecisionType",
            "ProfileKwargs",
            "ProjectConfiguration",
        ],
        "runtime.config",
    ),
}

__all__ = [
    "Accelerator",
    "AcceleratorState",
    "AutocastKwargs",
    "DDPCommunicationHookType",
    "DataLoaderConfiguration",
    "DistributedDataParallelKwargs",
    "DistributedType",
    "GeneralTracker",
    "GradScalerKwargs",
    "GradientAccumulationPlugin",
    "GradientState",
    "InitProcessGroupKwargs",
    "LoggerType",
    "PartialState",
    "PrecisionType",
    "ProfileKwargs",
    "ProjectConfiguration",
    "launch",
    "notebook_launcher",
    "set_seed",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
