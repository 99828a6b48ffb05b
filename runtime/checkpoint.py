"""save_state / load_state: HF Accelerate's checkpoint layout, hooks and registered objects.

A checkpoint directory (HF's file names, so either runtime loads the other's checkpoints):
  model.safetensors, model_1.safetensors, ...   the prepared models (pytorch_model*.bin when
                                                safe_serialization=False or no safetensors)
  optimizer.bin, optimizer_1.bin, ...           scheduler.bin, ...   scaler.pt (fp16)
  random_states_{rank}.pkl                      python / numpy / torch / cuda RNG and `step`,
                                                and (runtime only; HF ignores the key) where
                                                each prepared loader's epoch stood
  custom_checkpoint_{i}.pkl                     objects given to register_for_checkpointing
Save hooks run before the models are written, with (models, weights, output_dir); a hook that
pops from `weights` saves that model itself. Load hooks get (models, input_dir) and pop the
models they load themselves. Everything but the RNG files is written by the main process
(each node's main process with `ProjectConfiguration(save_on_each_node=True)`).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from runtime import serialization

LOADERS_KEY = "runtime_loaders"


def _numbered(stem: str, index: int, suffix: str) -> str:
    return f"{stem}{suffix}" if index == 0 else f"{stem}_{index}{suffix}"


def rng_states(step: int) -> dict:
    """HF's `random_states_{rank}.pkl` content."""
    states = {"step": step, "random_state": random.getstate()}
    numpy = _numpy()
    if numpy is not None:
        states["numpy_random_seed"] = numpy.random.get_state()
    states["torch_manual_seed"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["torch_cuda_manual_seed"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    random.setstate(states["random_state"])
    if "numpy_random_seed" in states and _numpy() is not None:
        _numpy().random.set_state(states["numpy_random_seed"])
    torch.set_rng_state(states["torch_manual_seed"])
    if "torch_cuda_manual_seed" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["torch_cuda_manual_seed"])


def _numpy():
    if "numpy" in sys.modules:
        return sys.modules["numpy"]
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _checkpoint_number(folder: str) -> int:
    numbers = re.findall(r"(\d+)(?=[^/\\]*$)", folder)
    return int(numbers[-1]) if numbers else -1


def automatic_directory(accelerator) -> str:
    """project_dir/checkpoints/checkpoint_<iteration>, dropping the oldest past total_limit."""
    config = accelerator.project_configuration
    if not config.project_dir:
        raise ValueError("automatic_checkpoint_naming needs a project_dir")
    root = os.path.join(config.project_dir, "checkpoints")
    os.makedirs(root, exist_ok=True)
    folders = sorted((os.path.join(root, f) for f in os.listdir(root)), key=_checkpoint_number)
    limit = config.total_limit
    if limit is not None and len(folders) + 1 > limit and accelerator.is_main_process:
        for folder in folders[: len(folders) + 1 - limit]:
            shutil.rmtree(folder)
    directory = os.path.join(root, f"checkpoint_{config.iteration}")
    if os.path.exists(directory):
        raise ValueError(
            f"Checkpoint directory {directory} ({config.iteration}) already exists; set "
            "accelerator.project_configuration.iteration to the iteration to start from"
        )
    accelerator.wait_for_everyone()
    return directory


def latest_automatic_directory(accelerator) -> str:
    root = os.path.join(accelerator.project_configuration.project_dir, "checkpoints")
    folders = sorted((os.path.join(root, f) for f in os.listdir(root)), key=_checkpoint_number)
    if not folders:
        raise ValueError(f"load_state: no checkpoint in {root}")
    return folders[-1]


def write_checkpoint(accelerator, output_dir: str | os.PathLike, safe_serialization: bool) -> Path:
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    writes = accelerator.writes_checkpoints
    safe = safe_serialization and serialization.has_safetensors()
    weights = [model.state_dict() for model in accelerator._models]
    for hook in list(accelerator._save_model_state_pre_hook.values()):
        hook(accelerator._models, weights, str(directory))
    if writes:
        for index, state_dict in enumerate(weights):
            suffix = ".safetensors" if safe else ".bin"
            name = _numbered("model" if safe else "pytorch_model", index, suffix)
            serialization.write(state_dict, directory / name, safe)
        for index, optimizer in enumerate(accelerator._optimizers):
            torch.save(optimizer.state_dict(), directory / _numbered("optimizer", index, ".bin"))
        for index, scheduler in enumerate(accelerator._schedulers):
            torch.save(scheduler.state_dict(), directory / _numbered("scheduler", index, ".bin"))
        if accelerator.scaler is not None:
            torch.save(accelerator.scaler.state_dict(), directory / "scaler.pt")
        for index, obj in enumerate(accelerator._custom_objects):
            torch.save(obj.state_dict(), directory / f"custom_checkpoint_{index}.pkl")
    states = rng_states(accelerator.step)
    states[LOADERS_KEY] = [
        {"position": loader.position(), "generators": [g.get_state() for g in loader.generators]}
        for loader in accelerator._dataloaders
    ]
    torch.save(states, directory / f"random_states_{accelerator.process_index}.pkl")
    accelerator.wait_for_everyone()  # the checkpoint is complete when save_state returns
    return directory


def read_checkpoint(accelerator, input_dir: str | os.PathLike, strict: bool = True) -> None:
    directory = Path(input_dir)
    device = accelerator.device
    models = list(accelerator._models)
    for hook in list(accelerator._load_model_state_pre_hook.values()):
        hook(models, str(directory))
    for index, model in enumerate(models):
        safe = directory / _numbered("model", index, ".safetensors")
        path = safe if safe.exists() else directory / _numbered("pytorch_model", index, ".bin")
        model.load_state_dict(serialization.read(path, map_location=device), strict=strict)
    for index, optimizer in enumerate(accelerator._optimizers):
        saved = torch.load(directory / _numbered("optimizer", index, ".bin"), map_location=device)
        optimizer.load_state_dict(saved)
    for index, scheduler in enumerate(accelerator._schedulers):
        scheduler.load_state_dict(torch.load(directory / _numbered("scheduler", index, ".bin")))
    if accelerator.scaler is not None and (directory / "scaler.pt").exists():
        accelerator.scaler.load_state_dict(torch.load(directory / "scaler.pt"))
    custom = [f for f in os.listdir(directory) if re.fullmatch(r"custom_checkpoint_\d+\.pkl", f)]
    if len(custom) != len(accelerator._custom_objects):
        raise RuntimeError(
            f"load_state: {directory} holds {len(custom)} custom checkpoints, but "
            f"{len(accelerator._custom_objects)} objects are registered for checkpointing; "
            "register the same objects as when the checkpoint was saved"
        )
    for index, obj in enumerate(accelerator._custom_objects):
        path = directory / f"custom_checkpoint_{index}.pkl"
        obj.load_state_dict(torch.load(path, map_location="cpu", weights_only=False))
    rank_file = directory / f"random_states_{accelerator.process_index}.pkl"
    if rank_file.exists():
        states = torch.load(rank_file, weights_only=False)
        set_rng_states(states)
        accelerator.step = states.get("step", 0)
        for loader, saved in zip(accelerator._dataloaders, states.get(LOADERS_KEY, [])):
            loader.resume_from = saved["position"]
            for generator, generator_state in zip(loader.generators, saved["generators"]):
                generator.set_state(generator_state)


class Checkpointing:
    """The Accelerator's saving methods: save, save_model, save_state / load_state, hooks."""

    def save(self, obj: Any, f, safe_serialization: bool = False) -> None:
        """Saves on the main process only (each node's with save_on_each_node)."""
        if self.writes_checkpoints:
            serialization.write(obj, f, safe_serialization)

    def save_model(
        self,
        model: torch.nn.Module,
        save_directory: str | os.PathLike,
        max_shard_size: int | str = "10GB",
        safe_serialization: bool = True,
    ) -> None:
        """The unwrapped weights in `save_directory`: `model.safetensors`, or shards of at
        most `max_shard_size` plus `model.safetensors.index.json` (as HF writes them)."""
        if os.path.isfile(save_directory):
            raise ValueError(f"save_model: {save_directory} is a file, not a directory")
        if any(p.device.type == "meta" for p in model.parameters()):
            raise RuntimeError("save_model: some parameters are on the meta device")
        serialization.save_model(
            self.get_state_dict(model),
            save_directory,
            max_shard_size=max_shard_size,
            safe_serialization=safe_serialization,
            writes=self.writes_checkpoints,
        )

    def register_save_state_pre_hook(self, hook) -> RemovableHandle:
        """`hook(models, weights, output_dir)` runs in `save_state` before the models are
        written; popping an entry of `weights` keeps `save_state` from writing that model."""
        handle = RemovableHandle(self._save_model_state_pre_hook)
        self._save_model_state_pre_hook[handle.id] = hook
        return handle

    def register_load_state_pre_hook(self, hook) -> RemovableHandle:
        """`hook(models, input_dir)` runs in `load_state` first; popping a model from
        `models` keeps `load_state` from loading it."""
        handle = RemovableHandle(self._load_model_state_pre_hook)
        self._load_model_state_pre_hook[handle.id] = hook
        return handle

    def register_for_checkpointing(self, *objects: Any) -> None:
        """Objects with `state_dict`/`load_state_dict` that save_state/load_state also keep."""
        invalid = [
            type(obj).__name__
            for obj in objects
            if not (hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"))
        ]
        if invalid:
            raise ValueError(
                "register_for_checkpointing: every object needs state_dict() and "
                f"load_state_dict(); these have not: {', '.join(invalid)}"
            )
        self._custom_objects.extend(objects)

    def save_state(
        self,
        output_dir: str | os.PathLike | None = None,
        safe_serialization: bool = True,
        **save_model_func_kwargs,
    ):
        if getattr(self.project_configuration, "automatic_checkpoint_naming", False):
            output_dir = automatic_directory(self)
        elif output_dir is None and self.project_dir:
            output_dir = os.path.join(self.project_dir, "checkpoint")
        if output_dir is None:
            raise ValueError("save_state needs an output_dir (or Accelerator(project_dir=...))")
        saved = write_checkpoint(self, output_dir, safe_serialization)
        self.project_configuration.iteration += 1
        return saved

    def load_state(
        self,
        input_dir: str | os.PathLike | None = None,
        load_kwargs: dict | None = None,
        **load_model_func_kwargs,
    ) -> None:
        if input_dir is not None:
            input_dir = os.path.expanduser(input_dir)
            if not os.path.isdir(input_dir):
                raise ValueError(f"load_state: tried to find {input_dir} but folder does not exist")
        elif getattr(self.project_configuration, "automatic_checkpoint_naming", False):
            input_dir = latest_automatic_directory(self)
        elif self.project_dir:
            input_dir = os.path.join(self.project_dir, "checkpoint")
        else:
            raise ValueError("load_state needs an input_dir (or Accelerator(project_dir=...))")
        strict = load_model_func_kwargs.get("strict", True)
        read_checkpoint(self, input_dir, strict=strict)
