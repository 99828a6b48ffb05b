"""An HF-Accelerate-compatible runtime on torch.distributed: `from runtime import Accelerator`.

`Accelerator` is loaded on first use (PEP 562), so `import runtime` costs almost nothing
beyond `import torch`; `launch` and `set_seed` are small and imported eagerly.
"""

from typing import TYPE_CHECKING

from runtime.launch import launch
from runtime.seeding import set_seed

if TYPE_CHECKING:
    from runtime.accelerator import Accelerator

__all__ = ["Accelerator", "launch", "set_seed"]


def __getattr__(name: str):
    if name == "Accelerator":
        from runtime.accelerator import Accelerator

        globals()["Accelerator"] = Accelerator
        return Accelerator
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
