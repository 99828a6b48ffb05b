"""Checkpoints: what `torch.save` saved, kept by the recorder, compared by the parent.

The recorder flattens each saved object (`SavedContents.take`: nested dicts, lists, modules,
tensors, numbers, text) into named entries, `model/fc1.weight`, and keeps the last save to
each path as JSON plus float64 values (`records.saves_folder`). The parent compares the
original's with the migrated main process's without torch: the same keys (a `module.` prefix
lost or added is named: checkpoints of one program no longer load into the other), the same
shapes, tensors within tolerance, numbers (an epoch, a best accuracy) as outputs are.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from migrator.verify.compare import DRIFT_FACTOR, close
from migrator.verify.records import saves_folder

MAX_VALUES = 4_000_000  # per save: larger tensors are compared on their shape and norm
MAX_ENTRIES = 20000
PREFIX = "module."


class SavedContents:
    """The recorder's side: runs in the process that saved (imports torch lazily)."""

    def __init__(self, out_dir: Path, rank: int) -> None:
        self.folder = saves_folder(out_dir, rank)
        self.numbers: dict[str, int] = {}  # path -> file number

    def take(self, obj, path: str) -> None:
        try:
            entries, values = [], array("d")
            _flatten(obj, "", entries, values)
        except Exception:  # noqa: BLE001 - an object that cannot be read is not compared
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        number = self.numbers.setdefault(path, len(self.numbers))
        (self.folder / f"{number}.bin").write_bytes(values.tobytes())
        (self.folder / f"{number}.json").write_text(json.dumps({"path": path, "entries": entries}))


def _join(prefix: str, key) -> str:
    return f"{prefix}/{key}" if prefix else str(key)


def _flatten(obj, name: str, entries: list, values: array) -> None:
    import torch

    if len(entries) >= MAX_ENTRIES:
        return
    if isinstance(obj, torch.Tensor):
        entry = {"name": name, "kind": "tensor", "shape": list(obj.shape), "dtype": str(obj.dtype)}
        flat = obj.detach().to("cpu").flatten()
        flat = flat.abs().double() if flat.is_complex() else flat.double()
        entry["norm"] = float(flat.norm()) if flat.numel() else 0.0
        if len(values) + flat.numel() <= MAX_VALUES:
            entry["offset"], entry["numel"] = len(values), flat.numel()
            values.extend(flat.tolist())
        entries.append(entry)
    elif isinstance(obj, torch.nn.Module):
        entries.append({"name": name, "kind": "class", "value": type(obj).__name__})
        _flatten(obj.state_dict(), name, entries, values)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            _flatten(value, _join(name, key), entries, values)
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            _flatten(value, _join(name, index), entries, values)
    elif isinstance(obj, bool) or obj is None:
        entries.append({"name": name, "kind": "text", "value": repr(obj)})
    elif isinstance(obj, (int, float)):
        entries.append({"name": name, "kind": "number", "value": float(obj)})
    elif isinstance(obj, str):
        entries.append({"name": name, "kind": "text", "value": obj[:200]})
    elif hasattr(obj, "shape") and hasattr(obj, "dtype"):  # a numpy array
        _flatten(torch.as_tensor(obj), name, entries, values)
    else:
        entries.append({"name": name, "kind": "object", "value": type(obj).__name__})


# ---- the parent's side: no torch ---------------------------------------------------------


@dataclass
class Saved:
    path: str
    entries: list[dict]
    values: array


def read_saved(run_dir: Path, rank: int) -> dict[str, Saved]:
    """path -> the last object this rank saved there."""
    folder = saves_folder(run_dir, rank)
    found: dict[str, Saved] = {}
    if not folder.is_dir():
        return found
    for layout in sorted(folder.glob("*.json")):
        try:
            data = json.loads(layout.read_text())
            values = array("d")
            values.frombytes(layout.with_suffix(".bin").read_bytes())
        except (OSError, ValueError):
            continue
        found[data["path"]] = Saved(data["path"], data["entries"], values)
    return found


def compare_saved(original: Saved, migrated: Saved, *, rtol: float, atol: float) -> list[str]:
    """What differs between two saves to one path, each as a sentence; [] when equal."""
    path = original.path
    ours = {e["name"]: e for e in original.entries}
    theirs = {e["name"]: e for e in migrated.entries}
    problems, renamed = [], {}
    for group in sorted({_group(name) for name in ours} | {_group(name) for name in theirs}):
        keys_o = {_leaf(n) for n in ours if _group(n) == group}
        keys_m = {_leaf(n) for n in theirs if _group(n) == group}
        if keys_o == keys_m:
            continue
        where = f" under '{group}'" if group else ""
        lost = _without_prefix(keys_o)
        added = _without_prefix(keys_m)
        if lost is not None and lost == keys_m:
            example = min(keys_m)
            problems.append(
                f"{path}: the saved keys{where} lost their `module.` prefix ('{example}', where "
                f"the original saves '{PREFIX}{example}'): checkpoints of the original no longer "
                "load into the migrated program, nor its checkpoints into the original"
            )
            renamed.update({_join(group, PREFIX + k): _join(group, k) for k in keys_m})
        elif added is not None and added == keys_o:
            example = min(keys_o)
            problems.append(
                f"{path}: the saved keys{where} gained a `module.` prefix ('{PREFIX}{example}', "
                f"where the original saves '{example}': the DistributedDataParallel wrapper's "
                "state_dict, not the model's, e.g. accelerator.unwrap_model(model).state_dict()):"
                " checkpoints no longer load into the original program, nor its into the migrated"
            )
            renamed.update({_join(group, k): _join(group, PREFIX + k) for k in keys_o})
        else:
            only_o, only_m = sorted(keys_o - keys_m), sorted(keys_m - keys_o)
            parts = [f"only the original saves {_some(only_o)}"] if only_o else []
            parts += [f"only the migrated program saves {_some(only_m)}"] if only_m else []
            problems.append(f"{path}: the saved keys{where} differ: " + "; ".join(parts))
    for name, entry in ours.items():
        other = theirs.get(renamed.get(name, name))
        if other is None:
            continue
        difference = _entry_difference(entry, other, original, migrated, rtol, atol)
        if difference:
            problems.append(f"{path}: '{name}' {difference}")
            if len(problems) >= 6:
                break
    return problems


def _group(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def _leaf(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _without_prefix(keys: set[str]) -> set[str] | None:
    if not keys or not all(k.startswith(PREFIX) for k in keys):
        return None
    return {k[len(PREFIX) :] for k in keys}


def _some(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _entry_difference(a: dict, b: dict, saved_a: Saved, saved_b: Saved, rtol, atol) -> str:
    if a["kind"] != b["kind"]:
        return f"is a {a['kind']} in the original, a {b['kind']} in the migrated program"
    if a["kind"] == "class" and a["value"] != b["value"]:
        return f"saves a whole {b['value']}, where the original saves a {a['value']}"
    if a["kind"] in ("text", "object", "class"):
        return "" if a["value"] == b["value"] else f"is {b['value']!r}, not {a['value']!r}"
    if a["kind"] == "number":
        if close(a["value"], b["value"], rtol, atol):
            return ""
        return f"is {b['value']:.6g} in the migrated program, {a['value']:.6g} in the original"
    if a["shape"] != b["shape"]:
        return f"has shape {b['shape']} in the migrated program, {a['shape']} in the original"
    if "offset" not in a or "offset" not in b:
        equal = math.isclose(a["norm"], b["norm"], rel_tol=DRIFT_FACTOR * rtol, abs_tol=atol)
        return "" if equal else "differs (compared on its norm: too large to keep)"
    x = saved_a.values[a["offset"] : a["offset"] + a["numel"]]
    y = saved_b.values[b["offset"] : b["offset"] + b["numel"]]
    worst = max((abs(q - p) for p, q in zip(x, y)), default=0.0)
    if all(close(p, q, rtol, atol) for p, q in zip(x, y)):
        return ""
    # rounding: the tensor as a whole stays within DRIFT_FACTOR * rtol of its own size
    apart = math.sqrt(math.fsum((q - p) ** 2 for p, q in zip(x, y)))
    if apart <= DRIFT_FACTOR * rtol * a["norm"]:
        return ""
    return f"differs: max |Δ| {worst:.3g}, the tensor's size {a['norm']:.3g}"
