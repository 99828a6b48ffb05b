"""`GradientState`: accumulation settings, whether this micro-step syncs gradients, and the
loader being iterated (`end_of_dataloader`, `remainder` for `gather_for_metrics`). One per
process, shared by every `Accelerator` (as in HF Accelerate)."""

from __future__ import annotations

from typing import Any


class GradientState:
    """Accumulation settings, `sync_gradients`, and the loader being iterated (shared)."""

    def __new__(cls, gradient_accumulation_plugin: Any = None):
        global _gradient_state
        if _gradient_state is None:
            _gradient_state = object.__new__(cls)
            _gradient_state._setup()
        if gradient_accumulation_plugin is not None:
            _gradient_state.configure(gradient_accumulation_plugin)
        return _gradient_state

    def __init__(self, gradient_accumulation_plugin: Any = None) -> None:
        pass  # built once, in __new__

    def _setup(self) -> None:
        self.num_steps = 1
        self.sync_with_dataloader = True
        self.sync_each_batch = False
        self.sync_gradients = True
        self.active_loaders: list = []
        self.inside_accumulate = False

    def configure(self, plugin: Any) -> None:
        """Settings from a GradientAccumulationPlugin (ours or HF's); they apply process-wide."""
        steps = getattr(plugin, "num_steps", None)
        if steps is not None:
            if int(steps) < 1:
                raise ValueError("gradient_accumulation_steps must be at least 1")
            self.num_steps = int(steps)
        self.sync_with_dataloader = bool(getattr(plugin, "sync_with_dataloader", True))
        self.sync_each_batch = bool(getattr(plugin, "sync_each_batch", False))

    initialized = True
    adjust_scheduler = False  # HF 1.x never applies it either (see docs/runtime.md)

    @property
    def plugin_kwargs(self) -> dict:
        return {
            "num_steps": self.num_steps,
            "sync_with_dataloader": self.sync_with_dataloader,
            "sync_each_batch": self.sync_each_batch,
        }

    @property
    def active_dataloader(self):
        return self.active_loaders[-1] if self.active_loaders else None

    @property
    def dataloader_references(self) -> list:
        return [None, *self.active_loaders]

    @property
    def in_dataloader(self) -> bool:
        return bool(self.active_loaders)

    @property
    def end_of_dataloader(self) -> bool:
        return bool(self.active_loaders) and self.active_loaders[-1].end_of_dataloader

    @property
    def remainder(self) -> int:
        return self.active_loaders[-1].remainder if self.active_loaders else -1

    @staticmethod
    def _reset_state() -> None:
        global _gradient_state
        _gradient_state = None

    def __repr__(self) -> str:
        return (
            f"Sync Gradients: {self.sync_gradients}\n"
            f"At end of current dataloader: {self.end_of_dataloader}\n"
            f"Extra samples added: {self.remainder}\n"
            f"Gradient accumulation plugin: {self.plugin_kwargs}\n"
        )


_gradient_state: GradientState | None = None
