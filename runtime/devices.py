"""Which device a process trains on, and which process-group backend goes with it.

As HF Accelerate 1.16 does, the accelerator is discovered through `torch.accelerator`
(torch >= 2.6: CUDA, ROCm, XPU, MPS, and out-of-tree backends such as NPU or HPU that
register with it), with CUDA-only discovery on older torch. Process r of a node takes
accelerator `local_rank % device_count`; CPU when there is none or `cpu=True`. The backend
is torch's default for that device type (nccl for CUDA, xccl for XPU, gloo for CPU).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from runtime.config import DistributedType

_DISTRIBUTED_TYPES = {
    "cpu": DistributedType.MULTI_CPU,
    "cuda": DistributedType.MULTI_GPU,
    "xpu": DistributedType.MULTI_XPU,
    "npu": DistributedType.MULTI_NPU,
    "mlu": DistributedType.MULTI_MLU,
    "musa": DistributedType.MULTI_MUSA,
    "sdaa": DistributedType.MULTI_SDAA,
    "hpu": DistributedType.MULTI_HPU,
    "neuron": DistributedType.MULTI_NEURON,
}
_BACKENDS = {
    "cuda": "nccl",
    "xpu": "xccl",
    "npu": "hccl",
    "mlu": "cncl",
    "musa": "mccl",
    "hpu": "hccl",
}


def accelerator_type() -> str | None:
    """The device type of this machine's accelerator ("cuda", "xpu", "mps", ...), or None.
    Neither call initialises the device, so forked workers stay usable."""
    api = getattr(torch, "accelerator", None)
    if api is not None and hasattr(api, "current_accelerator"):
        return api.current_accelerator().type if api.is_available() else None
    return "cuda" if torch.cuda.is_available() else None


def device_count(kind: str) -> int:
    api = getattr(torch, "accelerator", None)
    if api is not None and hasattr(api, "device_count"):
        return api.device_count()
    return getattr(torch, kind).device_count()


def use_device(device: torch.device) -> None:
    """Makes `device` the current one of its type (so collectives never guess device 0)."""
    api = getattr(torch, "accelerator", None)
    if api is not None and hasattr(api, "set_device_index"):
        api.set_device_index(device.index)
    else:
        getattr(torch, device.type).set_device(device.index)


def process_device(cpu: bool, local_rank: int, world_size: int) -> torch.device:
    """The device process `local_rank` of this node uses (module docstring)."""
    kind = None if cpu else accelerator_type()
    if kind is None:
        return torch.device("cpu")
    if kind == "mps":
        if world_size > 1:
            raise RuntimeError(
                "MPS runs one process: launch the script without torchrun, or pass "
                "Accelerator(cpu=True) to run several processes on the CPU"
            )
        return torch.device("mps")
    return torch.device(kind, local_rank % device_count(kind))


def default_backend(device: torch.device) -> str:
    """torch's default process-group backend for `device` (gloo on CPU)."""
    if device.type == "cpu":
        return "gloo"
    try:
        return dist.get_default_backend_for_device(device)
    except (AttributeError, RuntimeError, ValueError):  # older torch, or not registered
        return _BACKENDS.get(device.type, "gloo")


def distributed_type(device: torch.device) -> DistributedType:
    return _DISTRIBUTED_TYPES.get(device.type, DistributedType.MULTI_GPU)
