"""`split_between_processes`' arithmetic: which contiguous share of a list, tensor, dict or
`datasets.Dataset` each process takes, padded with the last item when asked (as HF does)."""

from __future__ import annotations

from typing import Any

import torch


def split_share(inputs: Any, processes: int, index: int, apply_padding: bool) -> Any:
    """Process `index`'s share of `inputs` (see `PartialState.split_between_processes`)."""
    length = len(inputs) if not isinstance(inputs, dict) else len(next(iter(inputs.values())))
    if isinstance(inputs, dict) and any(len(v) != length for v in inputs.values()):
        raise ValueError("split_between_processes: all values of the dict must have one length")
    per_process, extras = divmod(length, processes)
    start = index * per_process + min(index, extras)
    end = start + per_process + (1 if index < extras else 0)
    longest = per_process + (1 if extras else 0)

    def share(values):
        if isinstance(values, dict):
            return {key: share(value) for key, value in values.items()}
        if hasattr(values, "select") and not isinstance(values, torch.Tensor):  # datasets.Dataset
            indices = list(range(min(start, len(values)), min(end, len(values))))
            if apply_padding:
                indices += [len(values) - 1] * (longest - len(indices))
            return values.select(indices)
        if not isinstance(values, (list, tuple, torch.Tensor)):
            return values
        part = values[start:end]
        if apply_padding and len(part) < longest and len(values):
            if isinstance(values, torch.Tensor):
                padding = values[-1:].expand(longest - len(part), *values.shape[1:])
                part = torch.cat([part, padding])
            else:
                part = part + type(part)([values[-1]] * (longest - len(part)))
        return part

    return share(inputs)
