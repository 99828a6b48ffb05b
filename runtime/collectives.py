"""Collectives over nested tensors: gather, reduce, pad, broadcast (torch.distributed only).

Every function is a no-op returning its input on a 1-process run. Tensors travel on the
process device (nccl needs CUDA tensors) and come back where they were. In debug mode
(`ACCELERATE_DEBUG_MODE=1`, or `PartialState().debug = True`) `gather`, `reduce`,
`broadcast` and `pad_across_processes` first check that every process passed tensors of the
same shapes, and raise `DistributedOperationException` naming each process's shapes instead
of hanging or failing inside the backend (as HF Accelerate does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from runtime.state import debug_mode, get_process_state


class DistributedOperationException(Exception):
    """A collective refused in debug mode: the processes passed tensors of different shapes."""


def apply_to_tensors(
    function: Callable[[Any], Any], data: Any, leaf_type: type = torch.Tensor
) -> Any:
    """Applies `function` to every tensor (or `leaf_type` object) in nested
    lists/tuples/namedtuples/dicts; other leaves are returned as they are."""
    if isinstance(data, leaf_type):
        return function(data)
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(apply_to_tensors(function, item, leaf_type) for item in data))
    if isinstance(data, (list, tuple)):
        return type(data)(apply_to_tensors(function, item, leaf_type) for item in data)
    if isinstance(data, Mapping):
        return type(data)(
            {key: apply_to_tensors(function, value, leaf_type) for key, value in data.items()}
        )
    return data


def require_tensors(data: Any, operation: str) -> None:
    """Raises TypeError unless `data` is a tensor or a nest of containers of tensors."""
    if not is_tensor_tree(data):
        raise TypeError(
            f"{operation} takes tensors, or nested lists/tuples/dicts of tensors; "
            f"got {type(data).__name__} holding other objects"
        )


def is_tensor_tree(data: Any) -> bool:
    """True when `data` is a tensor or a nest of containers holding only tensors."""
    if isinstance(data, torch.Tensor):
        return True
    if isinstance(data, (list, tuple)):
        return all(is_tensor_tree(item) for item in data)
    if isinstance(data, Mapping):
        return all(is_tensor_tree(value) for value in data.values())
    return False


def _is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _comm_device(tensor: torch.Tensor) -> torch.device:
    """gloo sends tensors from where they are; nccl and the other device backends need them
    on the process's device."""
    if dist.get_backend() == "gloo":
        return tensor.device
    return get_process_state().device


def _check_same_shapes(operation: str, data: Any) -> None:
    """Debug mode: every process must pass tensors of the same shapes, on the process device."""
    if not (_is_distributed() and debug_mode()):
        return
    device_type = get_process_state().device.type
    misplaced = []
    apply_to_tensors(
        lambda t: misplaced.append(t.device) if t.device.type != device_type else t, data
    )
    if misplaced:
        raise DistributedOperationException(
            f"One or more of the tensors passed to {operation} were on {misplaced[0]} while "
            f"the processes run on {device_type}: move them to {device_type} before calling "
            f"{operation}."
        )
    shapes = apply_to_tensors(lambda tensor: list(tensor.shape), data)
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, shapes)
    if any(other != everyone[0] for other in everyone):
        listed = "\n  - ".join(f"Process {i}: {shape}" for i, shape in enumerate(everyone))
        raise DistributedOperationException(
            "Cannot apply desired operation due to shape mismatches. All shapes across devices "
            f"must be valid.\n\nOperation: `{operation}`\nInput shapes:\n  - {listed}"
        )


def gather(data: Any) -> Any:
    """All-gathers every tensor and concatenates on dim 0 (0-dim tensors become length 1)."""
    _check_same_shapes("gather", data)
    if not _is_distributed():
        return data

    def gather_one(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.ndim == 0:
            tensor = tensor.unsqueeze(0)
        sent = tensor.contiguous().to(_comm_device(tensor))
        parts = [torch.empty_like(sent) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, sent)
        return torch.cat(parts, dim=0).to(tensor.device)

    return apply_to_tensors(gather_one, data)


def gather_object(data: Any) -> list:
    """All-gathers picklable objects. As HF's `gather_object`, what each process sent is
    flattened into one list (a list, a tuple, an array: their items, in rank order); where a
    process sent something that is not iterable (a number), the objects are listed per rank
    (HF raises TypeError there)."""
    if not _is_distributed():
        return data
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, data)
    if all(_iterable(part) for part in parts):
        return [item for part in parts for item in part]
    return parts


def _iterable(value: Any) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return True


def reduce(data: Any, reduction: str = "mean", scale: float = 1.0) -> Any:
    """All-reduces every tensor ("sum", "mean" or "max") on copies, then multiplies by `scale`.
    The default is "mean", as HF's `accelerate.utils.reduce` (`Accelerator.reduce`: "sum");
    "none" sums, as in HF Accelerate (whose docs list it beside the others)."""
    if reduction not in ("sum", "mean", "max", "none"):
        raise ValueError(f"reduction must be 'sum', 'mean' or 'max', not {reduction!r}")
    _check_same_shapes("reduce", data)

    def reduce_one(tensor: torch.Tensor) -> torch.Tensor:
        result = tensor.clone()
        if _is_distributed():
            sent = result.to(_comm_device(tensor))
            dist.all_reduce(sent, op=dist.ReduceOp.MAX if reduction == "max" else dist.ReduceOp.SUM)
            if reduction == "mean":
                sent = sent / dist.get_world_size()
            result = sent.to(tensor.device)
        return result * scale if scale != 1.0 else result

    return apply_to_tensors(reduce_one, data)


def pad_across_processes(
    data: Any, dim: int = 0, pad_index: int = 0, pad_first: bool = False
) -> Any:
    """Pads every tensor along `dim` to the largest size any rank has, so `gather` works."""
    if not _is_distributed():
        return data
    try:
        # the processes must agree on each tensor's number of dimensions
        _check_same_shapes("pad_across_processes", apply_to_tensors(lambda t: [t.ndim], data))
    except DistributedOperationException as error:
        raise DistributedOperationException(
            "Error found while calling `pad_across_processes`: the processes passed tensors "
            "with different numbers of dimensions (see the earlier error)."
        ) from error

    def pad_one(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.ndim == 0 or dim >= tensor.ndim or dim < -tensor.ndim:
            return tensor
        size = torch.tensor([tensor.shape[dim]], device=_comm_device(tensor))
        dist.all_reduce(size, op=dist.ReduceOp.MAX)
        longest = int(size.item())
        if longest == tensor.shape[dim]:
            return tensor
        shape = list(tensor.shape)
        shape[dim] = longest
        padded = tensor.new_full(shape, pad_index)
        start = longest - tensor.shape[dim] if pad_first else 0
        padded.narrow(dim, start, tensor.shape[dim]).copy_(tensor)
        return padded

    return apply_to_tensors(pad_one, data)


def broadcast_from_main(tensor: torch.Tensor) -> torch.Tensor:
    """Returns rank 0's value of `tensor` on every rank (a new tensor; the input is untouched)."""
    if not _is_distributed():
        return tensor
    sent = tensor.clone().to(_comm_device(tensor))
    dist.broadcast(sent, src=0)
    return sent.to(tensor.device)


def broadcast(data: Any, from_process: int = 0) -> Any:
    """Every tensor takes process `from_process`'s values, in place (HF's `broadcast`): every
    process must pass tensors of the same shapes and dtypes; returns `data`."""
    require_tensors(data, "broadcast")
    _check_same_shapes("broadcast", data)
    if not _is_distributed():
        return data

    def broadcast_one(tensor: torch.Tensor) -> torch.Tensor:
        device = _comm_device(tensor)
        sent = tensor if tensor.is_contiguous() and tensor.device == device else None
        if sent is None:
            sent = tensor.contiguous().to(device)
        dist.broadcast(sent, src=from_process)
        if sent is not tensor:
            tensor.copy_(sent)
        return tensor

    return apply_to_tensors(broadcast_one, data)


def broadcast_object_list(object_list: list, from_process: int = 0) -> list:
    """Process `from_process`'s picklable objects, in place in `object_list` on every process."""
    if _is_distributed():
        dist.broadcast_object_list(object_list, src=from_process)
    return object_list


def copy_tensor_to_devices(tensor: torch.Tensor | None = None) -> torch.Tensor:
    """The tensor that exactly one process holds (the others pass None), on every process's
    device: unlike `broadcast`, the receivers need not know its shape or dtype."""
    device = get_process_state().device
    if not _is_distributed():
        return tensor
    described: list = [None] * dist.get_world_size()
    dist.all_gather_object(
        described, None if tensor is None else (tuple(tensor.shape), tensor.dtype)
    )
    holders = [rank for rank, shape in enumerate(described) if shape is not None]
    if len(holders) != 1:
        raise ValueError(
            f"copy_tensor_to_devices: exactly one process must pass a tensor, not {len(holders)}"
        )
    shape, dtype = described[holders[0]]
    received = (
        tensor.to(device) if tensor is not None else torch.empty(shape, dtype=dtype, device=device)
    )
    return broadcast(received, from_process=holders[0])
