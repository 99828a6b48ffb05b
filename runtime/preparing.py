"""The Accelerator's prepare methods (HF semantics): each object by type, schedulers last.

A model is wrapped in DDP (and autocast), an optimizer in PreparedOptimizer, a loader sharded
per process, a scheduler bound to the prepared optimizers it drives. An object prepared
before (tagged `_is_accelerate_prepared`), or a plain object this process already prepared,
comes back as it is. A mixin of `Accelerator`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader

from runtime import data, loader_sharding, wrappers


class Preparing:
    def prepare(self, *objects: Any, device_placement: list[bool] | None = None):
        """Prepares each object by type, in order; unknown or already prepared ones pass through."""
        placements = device_placement or [None] * len(objects)
        if len(placements) != len(objects):
            raise ValueError("device_placement needs one entry per object passed to prepare()")
        prepared = [self._prepare_one(obj, place) for obj, place in zip(objects, placements)]
        # schedulers last: they must find the prepared optimizer they drive
        prepared = [self._prepare_one(obj, None, schedulers=True) for obj in prepared]
        return prepared[0] if len(prepared) == 1 else tuple(prepared)

    def _prepare_one(self, obj: Any, placement: bool | None, schedulers: bool = False) -> Any:
        if getattr(obj, "_is_accelerate_prepared", False):
            return obj
        # A plain object this process prepared before (a training function called once per
        # fold or epoch, its callers passing the same plain objects) gets the same prepared
        # object back: one DDP wrapper per model, one wrapper per optimizer and loader.
        # HF Accelerate only passes through the objects it returned (tagged
        # `_is_accelerate_prepared`) and wraps a plain object again on every call.
        prepared_before = self._prepared_objects()
        if id(obj) in prepared_before and prepared_before[id(obj)][0] is obj:
            return self._adopt(obj, prepared_before[id(obj)][1])
        if schedulers:
            prepared = self.prepare_scheduler(obj) if _is_scheduler(obj) else obj
        elif isinstance(obj, DataLoader):
            prepared = self.prepare_data_loader(obj, device_placement=placement)
        elif isinstance(obj, torch.nn.Module):
            prepared = self.prepare_model(obj, device_placement=placement)
        elif isinstance(obj, torch.optim.Optimizer):
            prepared = self.prepare_optimizer(obj, device_placement=placement)
        else:
            return obj
        if prepared is not obj:
            prepared_before[id(obj)] = (obj, prepared)
        return prepared

    def _adopt(self, plain: Any, prepared: Any) -> Any:
        """Another Accelerator of the process prepared it: this one saves and steps it too."""
        if isinstance(plain, torch.nn.Module):
            registry = self._models
            entry = plain
        elif isinstance(plain, DataLoader):
            registry, entry = self._dataloaders, prepared
        elif isinstance(plain, torch.optim.Optimizer):
            registry, entry = self._optimizers, prepared
        else:
            registry, entry = self._schedulers, prepared
        if not any(known is entry for known in registry):
            registry.append(entry)
        return prepared

    def _prepared_objects(self) -> dict[int, tuple[Any, Any]]:
        """id(plain object) -> (plain object, what prepare returned), shared by every
        Accelerator of the process (forgotten with the state, as in tests)."""
        state = self.state
        if "_prepared_objects" not in state.__dict__:
            state.__dict__["_prepared_objects"] = {}
        return state.__dict__["_prepared_objects"]

    def prepare_model(
        self,
        model: torch.nn.Module,
        device_placement: bool | None = None,
        evaluation_mode: bool = False,
    ) -> torch.nn.Module:
        if getattr(model, "_is_accelerate_prepared", False):
            return model
        placement = self.device_placement if device_placement is None else device_placement
        ddp_kwargs = self.ddp_handler.to_kwargs() if self.ddp_handler else {}
        for hook_option in ("comm_hook", "comm_wrapper", "comm_state_option"):
            ddp_kwargs.pop(hook_option, None)  # HF's handler registers these after wrapping
        self._models.append(wrappers.unwrap_model(model))  # HF keeps the unwrapped module
        prepared = wrappers.prepare_model(
            model,
            state=self.state.partial_state,
            mixed_precision=self.mixed_precision,
            device_placement=placement,
            evaluation_mode=evaluation_mode,
            ddp_kwargs=ddp_kwargs,
            autocast_kwargs=self.autocast_handler.to_kwargs() if self.autocast_handler else {},
        )
        if prepared is not model and hasattr(self.ddp_handler, "register_comm_hook"):
            self.ddp_handler.register_comm_hook(prepared)
        return prepared

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool | None = None
    ) -> wrappers.PreparedOptimizer:
        if getattr(optimizer, "_is_accelerate_prepared", False):
            return optimizer
        placement = self.device_placement if device_placement is None else device_placement
        prepared = wrappers.PreparedOptimizer(
            optimizer,
            gradient_state=self.gradient_state,
            scaler=self.scaler,
            device_placement=placement,
        )
        self._optimizers.append(prepared)
        return prepared

    def prepare_data_loader(
        self,
        data_loader: DataLoader,
        device_placement: bool | None = None,
        slice_fn_for_dispatch=None,
    ) -> data.PreparedDataLoader:
        """Shards `data_loader` (HF's signature: `slice_fn_for_dispatch(batch, slice,
        process_index=, num_processes=)` cuts dispatched batches)."""
        if getattr(data_loader, "_is_accelerate_prepared", False):
            return data_loader
        placement = self.device_placement if device_placement is None else device_placement
        settings = self.dataloader_config
        prepared = loader_sharding.prepare_data_loader(
            data_loader,
            state=self.state.partial_state,
            gradient_state=self.gradient_state,
            split_batches=settings.split_batches,
            even_batches=settings.even_batches,
            device_placement=placement,
            dispatch_batches=settings.dispatch_batches,
            use_seedable_sampler=settings.use_seedable_sampler,
            data_seed=settings.data_seed,
            non_blocking=settings.non_blocking,
            slice_fn=slice_fn_for_dispatch,
        )
        self._dataloaders.append(prepared)
        return prepared

    def prepare_scheduler(self, scheduler) -> wrappers.PreparedScheduler:
        if getattr(scheduler, "_is_accelerate_prepared", False):
            return scheduler
        target = getattr(scheduler, "optimizer", None)
        driving = [
            optimizer
            for optimizer in self._optimizers
            if optimizer is target or optimizer.optimizer is target
        ]
        prepared = wrappers.PreparedScheduler(
            scheduler,
            optimizers=driving or list(self._optimizers),
            gradient_state=self.gradient_state,
            num_processes=self.num_processes,
            split_batches=self.split_batches,
            step_with_optimizer=self.step_scheduler_with_optimizer,
        )
        self._schedulers.append(prepared)
        return prepared

    def skip_first_batches(self, dataloader: DataLoader, num_batches: int = 0) -> DataLoader:
        """The loader without its first `num_batches` batches (this rank's, if prepared)."""
        return data.skip_first_batches(dataloader, num_batches)


def _is_scheduler(obj: Any) -> bool:
    schedulers = torch.optim.lr_scheduler
    return isinstance(obj, (schedulers.LRScheduler, schedulers.ReduceLROnPlateau))
