"""An HF-Accelerate-compatible runtime on torch.distributed: `from runtime import Accelerator`."""

from runtime.accelerator import Accelerator
from runtime.launch import launch
from runtime.seeding import set_seed

__all__ = ["Accelerator", "launch", "set_seed"]
