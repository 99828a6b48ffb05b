"""Writing weights: safetensors (when installed) or torch.save, and `save_model`'s shards.

Names and layout follow HF Accelerate / huggingface_hub, so a directory written by
`save_model` loads with `from_pretrained`-style loaders: `model.safetensors`, or
`model-00001-of-00003.safetensors` ... plus `model.safetensors.index.json`
(`pytorch_model*.bin` without safetensors). Shards are filled in state-dict order and a new
one starts when the next tensor would pass `max_shard_size`; a tensor larger than that gets a
shard of its own; tensors sharing storage (tied weights) are written once.
safetensors is imported only when a file is written with it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
from collections import OrderedDict
from typing import Any

import torch

logger = logging.getLogger(__name__)

SAFE_WEIGHTS = "model{suffix}.safetensors"
PICKLED_WEIGHTS = "pytorch_model{suffix}.bin"
_SIZE_UNITS = {"TB": 10**12, "GB": 10**9, "MB": 10**6, "KB": 10**3}


def has_safetensors() -> bool:
    return importlib.util.find_spec("safetensors") is not None


def parse_size(size: int | str) -> int:
    """Bytes in `size`: an int, or digits and a decimal unit ("5MB", "10GB"), as HF reads it."""
    if isinstance(size, int):
        return size
    text = size.strip()
    unit = text[-2:].upper()
    if unit not in _SIZE_UNITS:
        raise ValueError(f"max_shard_size {size!r}: the unit must be one of TB, GB, MB, KB")
    try:
        return int(float(text[:-2]) * _SIZE_UNITS[unit])
    except ValueError:
        raise ValueError(f"max_shard_size {size!r}: no number before the unit") from None


def _storage_key(tensor: torch.Tensor) -> tuple:
    storage = tensor.untyped_storage()
    return tensor.device, storage.data_ptr(), storage.nbytes()


def without_shared_tensors(state_dict: dict) -> dict:
    """Keeps the first name of tensors that share storage (safetensors refuses aliases)."""
    seen: set = set()
    kept = OrderedDict()
    for name, tensor in state_dict.items():
        key = _storage_key(tensor) if isinstance(tensor, torch.Tensor) else None
        if key is not None and key in seen:
            logger.warning("Removed shared tensor %s while saving (tied to an earlier one)", name)
            continue
        if key is not None:
            seen.add(key)
        kept[name] = tensor
    return kept


def write(obj: Any, path: str | os.PathLike, safe_serialization: bool) -> None:
    """One file: safetensors (metadata format=pt, as HF writes it) or torch.save."""
    if safe_serialization:
        from safetensors.torch import save_file

        if isinstance(obj, OrderedDict):
            obj = without_shared_tensors(obj)
        tensors = {k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in obj.items()}
        save_file(tensors, path, metadata={"format": "pt"})
    else:
        torch.save(obj, path)


def read(path: str | os.PathLike, map_location: Any = "cpu") -> dict:
    if str(path).endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path, device=str(map_location))
    return torch.load(path, map_location=map_location)


def split_into_shards(state_dict: dict, max_bytes: int, pattern: str) -> dict[str, list[str]]:
    """File name -> tensor names; one file named `pattern` with no suffix when it all fits."""
    shards: list[list[str]] = []
    current: list[str] = []
    current_bytes = 0
    aliases: dict[tuple, list[str]] = {}
    for name, tensor in state_dict.items():
        key = _storage_key(tensor)
        if key in aliases:  # shares storage with an earlier tensor: goes to its shard
            aliases[key].append(name)
            continue
        aliases[key] = [name]
        size = tensor.untyped_storage().nbytes()
        if size > max_bytes:
            shards.append([name])
            continue
        if current and current_bytes + size > max_bytes:
            shards.append(current)
            current, current_bytes = [], 0
        current.append(name)
        current_bytes += size
    if current:
        shards.append(current)
    for names in aliases.values():
        for shard in shards:
            if names[0] in shard:
                shard.extend(names[1:])
                break
    if len(shards) == 1:
        return {pattern.format(suffix=""): shards[0]}
    count = len(shards)
    return {
        pattern.format(suffix=f"-{index + 1:05d}-of-{count:05d}"): names
        for index, names in enumerate(shards)
    }


def total_size(state_dict: dict) -> int:
    sizes = {_storage_key(t): t.untyped_storage().nbytes() for t in state_dict.values()}
    return sum(sizes.values())


def save_model(
    state_dict: dict,
    directory: str | os.PathLike,
    *,
    max_shard_size: int | str,
    safe_serialization: bool,
    writes: bool,
) -> None:
    """Writes `state_dict` to `directory` in shards (see the module docstring).

    Every process creates the directory; only processes with `writes` remove stale shards
    of an earlier save and write files.
    """
    if safe_serialization and not has_safetensors():
        logger.warning("save_model: safetensors is not installed; writing pytorch_model*.bin")
        safe_serialization = False
    os.makedirs(directory, exist_ok=True)
    if safe_serialization:
        state_dict = without_shared_tensors(OrderedDict(state_dict))
    pattern = SAFE_WEIGHTS if safe_serialization else PICKLED_WEIGHTS
    shards = split_into_shards(state_dict, parse_size(max_shard_size), pattern)
    if not writes:
        return
    stem = pattern.format(suffix="").rsplit(".", 1)[0]
    stale = re.compile(re.escape(stem) + r"-\d{5}-of-\d{5}\." + pattern.rsplit(".", 1)[1])
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if stale.fullmatch(name) and name not in shards and os.path.isfile(path):
            os.remove(path)
    for filename, names in shards.items():
        shard = OrderedDict((name, state_dict[name]) for name in names)
        write(shard, os.path.join(directory, filename), safe_serialization)
    if len(shards) > 1:
        index = {
            "metadata": {"total_size": total_size(state_dict)},
            "weight_map": {name: filename for filename, names in shards.items() for name in names},
        }
        index_name = pattern.format(suffix="") + ".index.json"
        with open(os.path.join(directory, index_name), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
