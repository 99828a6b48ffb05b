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
