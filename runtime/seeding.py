"""`set_seed`: one call seeds python, numpy (when installed), torch and CUDA."""

from __future__ import annotations

import os
import random

import torch


def set_seed(seed: int, device_specific: bool = False, deterministic: bool = False) -> None:
    """Seeds every RNG a training script uses; `device_specific` adds the process rank."""
    if device_specific:
        initialised = torch.distributed.is_available() and torch.distributed.is_initialized()
        seed += torch.distributed.get_rank() if initialised else int(os.environ.get("RANK", "0"))
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None:
        numpy.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds CUDA too
    if deterministic:
        torch.use_deterministic_algorithms(True)


_RNG_STATE_MODULES = ("cuda", "xpu", "npu", "mlu", "musa", "hpu")


def synchronize_rng_state(rng_type: str | None = None, generator: torch.Generator | None = None):
    """Gives this process rank 0's state of one RNG: "torch", "generator" (pass it), or a
    device's ("cuda", "xpu", ...), as HF's `synchronize_rng_state`."""
    from runtime.collectives import broadcast_from_main  # only here: `import runtime` stays light

    kind = str(getattr(rng_type, "value", rng_type))
    if kind == "torch":
        torch.set_rng_state(broadcast_from_main(torch.get_rng_state()))
    elif kind == "generator":
        if generator is None:
            raise ValueError(
                "synchronize_rng_state('generator') needs the generator to synchronize"
            )
        generator.set_state(broadcast_from_main(generator.get_state()))
    elif kind in _RNG_STATE_MODULES:
        module = getattr(torch, kind, None)
        if module is None or not module.is_available():
            raise ValueError(f"synchronize_rng_state({kind!r}): no {kind} device here")
        module.set_rng_state(broadcast_from_main(module.get_rng_state()))
    elif kind == "xla":
        raise NotImplementedError(
            "synchronize_rng_state('xla') needs TPUs, which runtime does not support"
        )
    else:
        raise ValueError(f"unknown RNG type {rng_type!r}: use 'torch', 'generator' or a device's")


def synchronize_rng_states(rng_types: list, generator: torch.Generator | None = None) -> None:
    """`synchronize_rng_state` for each RNG type listed (a collective: every process calls it)."""
    for rng_type in rng_types:
        synchronize_rng_state(rng_type, generator=generator)
