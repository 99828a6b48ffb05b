"""Collectives over nested tensors: gather, reduce, pad, broadcast (torch.distributed only).

Every function is a no-op returning its input on a 1-process run. Tensors travel on the
process device (nccl needs CUDA tensors) and come back where they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist


def apply_to_tensors(function: Callable[[torch.Tensor], Any], data: Any) -> Any:
    """Applies `function` to every tensor in nested lists/tuples/namedtuples/dicts."""
    if isinstance(data, torch.Tensor):
        return function(data)
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(apply_to_tensors(function, item) for item in data))
    if isinstance(data, (list, tuple)):
        return type(data)(apply_to_tensors(function, item) for item in data)
    if isinstance(data, Mapping):
        return type(data)({key: apply_to_tensors(function, value) for key, value in data.items()})
    return data


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
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return tensor.device


def gather(data: Any) -> Any:
    """All-gathers every tensor and concatenates on dim 0 (0-dim tensors become length 1)."""
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
    """All-gathers picklable objects; lists are concatenated, other objects listed per rank."""
    if not _is_distributed():
        return data
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, data)
    if all(isinstance(part, list) for part in parts):
        return [item for part in parts for item in part]
    return parts


def reduce(data: Any, reduction: str = "sum", scale: float = 1.0) -> Any:
    """All-reduces every tensor ("sum", "mean" or "max") on copies, then multiplies by `scale`."""
    if reduction not in ("sum", "mean", "max"):
        raise ValueError(f"reduction must be 'sum', 'mean' or 'max', not {reduction!r}")

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
