"""What HF Accelerate's test scripts import besides the Accelerate API, for the runtime runs.

hf_conformance.py points the scripts' `accelerate` imports at `runtime`, except their test
helpers (`accelerate.test_utils`) and environment predicates (`is_*_available`), which come
from here. These are HF's own objects, used as they are, except `are_the_same_tensors`: HF's
asks HF's own `AcceleratorState`, so here it gathers through the runtime under test.
"""

from __future__ import annotations

import re

import torch


def are_the_same_tensors(tensor: torch.Tensor) -> bool:
    """Whether every process holds the same `tensor` (gathered through runtime)."""
    from runtime import PartialState
    from runtime.utils import gather

    state = PartialState()
    tensors = gather(tensor[None].clone().to(state.device)).cpu()
    return all(torch.equal(tensors[i], tensor.cpu()) for i in range(tensors.shape[0]))


def __getattr__(name: str):
    if re.fullmatch(r"is_\w+_available", name):
        import accelerate.utils

        return getattr(accelerate.utils, name)
    import accelerate.test_utils

    return getattr(accelerate.test_utils, name)
