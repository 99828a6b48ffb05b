"""save_state / load_state: models, optimizers, schedulers, scaler, RNG states, loader positions.

Layout of a checkpoint directory (written by the main process, except RNG files, one per rank):
  model.bin, model_1.bin, ...        unwrapped state dicts of the prepared models
  optimizer.bin, optimizer_1.bin, ...
  scheduler.bin, scheduler_1.bin, ...
  scaler.pt                           when fp16 uses a GradScaler
  loaders.bin                         position of each prepared loader inside its epoch
  random_states_{rank}.pkl            python / numpy / torch / cuda RNG states and the step
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import torch

from runtime.wrappers import unwrap_model


def _numbered(stem: str, index: int, suffix: str = ".bin") -> str:
    return f"{stem}{suffix}" if index == 0 else f"{stem}_{index}{suffix}"


def rng_states() -> dict:
    states = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if "numpy" in sys.modules:  # numpy is only seeded/saved if the script uses it
        states["numpy"] = sys.modules["numpy"].random.get_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    random.setstate(states["python"])
    torch.set_rng_state(states["torch"])
    if "numpy" in states:
        import numpy

        numpy.random.set_state(states["numpy"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def save_state(accelerator, output_dir: str | os.PathLike) -> Path:
    directory = Path(output_dir)
    state = accelerator.state
    if state.is_main_process:
        directory.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()  # the directory exists before any rank writes
    if state.is_main_process:
        for index, model in enumerate(accelerator._models):
            weights = unwrap_model(model).state_dict()
            torch.save(weights, directory / _numbered("model", index))
        for index, optimizer in enumerate(accelerator._optimizers):
            torch.save(optimizer.state_dict(), directory / _numbered("optimizer", index))
        for index, scheduler in enumerate(accelerator._schedulers):
            torch.save(scheduler.state_dict(), directory / _numbered("scheduler", index))
        if accelerator.scaler is not None:
            torch.save(accelerator.scaler.state_dict(), directory / "scaler.pt")
        loaders = [
            {
                "position": loader.position(),
                "generators": [g.get_state() for g in loader.generators],
            }
            for loader in accelerator._dataloaders
        ]
        torch.save(loaders, directory / "loaders.bin")
    random_states = rng_states()
    random_states["step"] = accelerator.gradient_state.step
    torch.save(random_states, directory / f"random_states_{state.process_index}.pkl")
    accelerator.wait_for_everyone()  # the checkpoint is complete when save_state returns
    return directory


def load_state(accelerator, input_dir: str | os.PathLike) -> None:
    directory = Path(input_dir)
    if not directory.is_dir():
        raise FileNotFoundError(f"load_state: no checkpoint directory at {directory}")
    device = accelerator.device
    for index, model in enumerate(accelerator._models):
        weights = torch.load(directory / _numbered("model", index), map_location=device)
        unwrap_model(model).load_state_dict(weights)
    for index, optimizer in enumerate(accelerator._optimizers):
        saved = torch.load(directory / _numbered("optimizer", index), map_location=device)
        optimizer.load_state_dict(saved)
    for index, scheduler in enumerate(accelerator._schedulers):
        scheduler.load_state_dict(torch.load(directory / _numbered("scheduler", index)))
    if accelerator.scaler is not None and (directory / "scaler.pt").exists():
        accelerator.scaler.load_state_dict(torch.load(directory / "scaler.pt"))
    if (directory / "loaders.bin").exists():
        loaders = torch.load(directory / "loaders.bin", weights_only=False)
        for loader, saved in zip(accelerator._dataloaders, loaders):
            loader.resume_from = saved["position"]
            for generator, generator_state in zip(loader.generators, saved["generators"]):
                generator.set_state(generator_state)
    rank_file = directory / f"random_states_{accelerator.process_index}.pkl"
    if rank_file.exists():
        random_states = torch.load(rank_file, weights_only=False)
        set_rng_states(random_states)
        accelerator.gradient_state.step = random_states.get("step", 0)
