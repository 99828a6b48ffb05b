"""The public `Accelerator`: HF Accelerate 1.x names and semantics, delegating to the modules.

Environment overrides, read here (for `migrate verify` and for users who cannot edit code):
  MIGRATE_SPLIT_BATCHES=1|0   forces `split_batches`      MIGRATE_EVEN_BATCHES=1|0 forces `even_batches`
  ACCELERATE_MIXED_PRECISION  default for `mixed_precision` when the argument is not given
  ACCELERATE_GRADIENT_ACCUMULATION_STEPS  default when the argument is left at 1
  ACCELERATE_USE_CPU=1        same as cpu=True
"""

from __future__ import annotations

import gc
import os
import warnings
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch.utils.data import DataLoader

from runtime import checkpoint, collectives, data, state, wrappers


class Accelerator:
    """Prepares a training script's objects for N processes launched by torchrun."""

    def __init__(
        self,
        device_placement: bool = True,
        split_batches: bool = False,
        mixed_precision: str | None = None,
        gradient_accumulation_steps: int = 1,
        cpu: bool = False,
        dataloader_config: Any = None,
        step_scheduler_with_optimizer: bool = True,
        even_batches: bool = True,
        gradient_accumulation_plugin: Any = None,
        kwargs_handlers: list | None = None,
        rng_types: list | None = None,
        project_dir: str | None = None,
        log_with: Any = None,
    ) -> None:
        if dataloader_config is not None:  # HF's DataLoaderConfiguration, read by duck typing
            split_batches = getattr(dataloader_config, "split_batches", split_batches)
            even_batches = getattr(dataloader_config, "even_batches", even_batches)
        self.split_batches = bool(state.env_flag("MIGRATE_SPLIT_BATCHES", split_batches))
        self.even_batches = bool(state.env_flag("MIGRATE_EVEN_BATCHES", even_batches))
        if gradient_accumulation_plugin is not None:
            gradient_accumulation_steps = gradient_accumulation_plugin.num_steps
        elif gradient_accumulation_steps == 1:
            env_steps = os.environ.get("ACCELERATE_GRADIENT_ACCUMULATION_STEPS")
            gradient_accumulation_steps = int(env_steps) if env_steps else 1
        if gradient_accumulation_steps < 1:
            raise ValueError("gradient_accumulation_steps must be at least 1")
        cpu = cpu or bool(state.env_flag("ACCELERATE_USE_CPU", False))
        self.state = state.get_process_state(cpu=cpu)
        self.mixed_precision = (
            mixed_precision or os.environ.get("ACCELERATE_MIXED_PRECISION") or "no"
        ).lower()
        wrappers.check_mixed_precision(self.mixed_precision, self.device)
        self.scaler = wrappers.make_grad_scaler(self.mixed_precision, self.device)
        self.device_placement = device_placement
        self.step_scheduler_with_optimizer = step_scheduler_with_optimizer
        self.gradient_state = state.GradientState(gradient_accumulation_steps)
        self.project_dir = project_dir
        self.ddp_kwargs: dict = {}
        for handler in kwargs_handlers or []:
            if type(handler).__name__ == "DistributedDataParallelKwargs":
                self.ddp_kwargs = handler.to_kwargs()
        self._models: list = []
        self._optimizers: list = []
        self._schedulers: list = []
        self._dataloaders: list = []
        self._inside_accumulate = False
        self._warned_backward_outside_accumulate = False

    # ---- facts -------------------------------------------------------------------------
    device = property(lambda self: self.state.device)
    process_index = property(lambda self: self.state.process_index)
    local_process_index = property(lambda self: self.state.local_process_index)
    num_processes = property(lambda self: self.state.num_processes)
    is_main_process = property(lambda self: self.state.is_main_process)
    is_local_main_process = property(lambda self: self.state.is_local_main_process)
    use_distributed = property(lambda self: self.state.num_processes > 1)
    sync_gradients = property(lambda self: self.gradient_state.sync_gradients)
    end_of_dataloader = property(lambda self: self.gradient_state.end_of_dataloader)

    @property
    def gradient_accumulation_steps(self) -> int:
        return self.gradient_state.num_steps

    @gradient_accumulation_steps.setter
    def gradient_accumulation_steps(self, steps: int) -> None:
        self.gradient_state.num_steps = steps

    @property
    def step(self) -> int:
        return self.gradient_state.step

    @property
    def optimizer_step_was_skipped(self) -> bool:
        return any(optimizer.step_was_skipped for optimizer in self._optimizers)

    # ---- prepare -----------------------------------------------------------------------
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
        if schedulers:
            if _is_scheduler(obj):
                return self.prepare_scheduler(obj)
            return obj
        if isinstance(obj, DataLoader):
            return self.prepare_data_loader(obj, device_placement=placement)
        if isinstance(obj, torch.nn.Module):
            return self.prepare_model(obj, device_placement=placement)
        if isinstance(obj, torch.optim.Optimizer):
            return self.prepare_optimizer(obj, device_placement=placement)
        return obj

    def prepare_model(
        self,
        model: torch.nn.Module,
        device_placement: bool | None = None,
        evaluation_mode: bool = False,
    ) -> torch.nn.Module:
        if getattr(model, "_is_accelerate_prepared", False):
            return model
        placement = self.device_placement if device_placement is None else device_placement
        prepared = wrappers.prepare_model(
            model,
            state=self.state,
            mixed_precision=self.mixed_precision,
            device_placement=placement,
            evaluation_mode=evaluation_mode,
            ddp_kwargs=self.ddp_kwargs,
        )
        self._models.append(prepared)
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
        self, data_loader: DataLoader, device_placement: bool | None = None
    ) -> data.PreparedDataLoader:
        if getattr(data_loader, "_is_accelerate_prepared", False):
            return data_loader
        placement = self.device_placement if device_placement is None else device_placement
        prepared = data.prepare_data_loader(
            data_loader,
            state=self.state,
            gradient_state=self.gradient_state,
            split_batches=self.split_batches,
            even_batches=self.even_batches,
            device_placement=placement,
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

    # ---- training step -----------------------------------------------------------------
    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        """Divides by `gradient_accumulation_steps` (as HF does), then backward (scaled in fp16)."""
        steps = self.gradient_state.num_steps
        if steps > 1:
            if not self._inside_accumulate and not self._warned_backward_outside_accumulate:
                self._warned_backward_outside_accumulate = True
                warnings.warn(
                    f"backward() divides the loss by gradient_accumulation_steps={steps}, but it "
                    "runs outside `with accelerator.accumulate(model):`, so every batch steps "
                    f"the optimizer with 1/{steps} of the gradient.",
                    stacklevel=2,
                )
            loss = loss / steps
        if self.scaler is not None:
            self.scaler.scale(loss).backward(**kwargs)
        else:
            loss.backward(**kwargs)

    @contextmanager
    def accumulate(self, *models: torch.nn.Module):
        """One micro-step: gradients sync (and optimizers step) every k-th call or at loader end."""
        self.gradient_state.do_sync()
        self._inside_accumulate = True
        try:
            with ExitStack() as stack:
                if not self.gradient_state.sync_gradients:
                    for model in models:
                        stack.enter_context(wrappers.no_sync(model))
                yield
        finally:
            self._inside_accumulate = False

    def no_sync(self, model: torch.nn.Module):
        return wrappers.no_sync(model)

    def autocast(self, autocast_handler: Any = None):
        return wrappers.autocast_context(self.mixed_precision, self.device)

    def unscale_gradients(self, optimizer=None) -> None:
        if self.scaler is None or not self.gradient_state.sync_gradients:
            return
        targets = [optimizer] if optimizer is not None else self._optimizers
        for target in targets:
            self.scaler.unscale_(getattr(target, "optimizer", target))

    def clip_grad_norm_(self, parameters, max_norm: float, norm_type: float = 2):
        parameters = list(parameters)
        self.unscale_gradients()
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

    def clip_grad_value_(self, parameters, clip_value: float) -> None:
        parameters = list(parameters)
        self.unscale_gradients()
        torch.nn.utils.clip_grad_value_(parameters, clip_value)

    # ---- collectives -------------------------------------------------------------------
    def gather(self, tensor: Any) -> Any:
        return collectives.gather(tensor)

    def gather_for_metrics(self, input_data: Any, use_gather_object: bool = False) -> Any:
        """`gather`, minus the samples `even_batches` duplicated into the last batch."""
        as_objects = use_gather_object or not collectives.is_tensor_tree(input_data)
        if as_objects:
            gathered = collectives.gather_object(input_data)
        else:
            gathered = collectives.gather(input_data)
        remainder = self.gradient_state.remainder
        if self.num_processes > 1 and self.gradient_state.end_of_dataloader and remainder > 0:
            if as_objects:
                return gathered[:remainder]
            return collectives.apply_to_tensors(lambda tensor: tensor[:remainder], gathered)
        return gathered

    def reduce(self, tensor: Any, reduction: str = "sum", scale: float = 1.0) -> Any:
        return collectives.reduce(tensor, reduction, scale)

    def pad_across_processes(
        self, tensor: Any, dim: int = 0, pad_index: int = 0, pad_first: bool = False
    ) -> Any:
        return collectives.pad_across_processes(tensor, dim, pad_index, pad_first)

    # ---- processes ---------------------------------------------------------------------
    def print(self, *args, **kwargs) -> None:
        if self.is_local_main_process:
            print(*args, **kwargs)

    def wait_for_everyone(self) -> None:
        self.state.wait_for_everyone()

    @contextmanager
    def main_process_first(self):
        if not self.is_main_process:
            self.wait_for_everyone()
        yield
        if self.is_main_process:
            self.wait_for_everyone()

    @contextmanager
    def local_main_process_first(self):
        if not self.is_local_main_process:
            self.wait_for_everyone()
        yield
        if self.is_local_main_process:
            self.wait_for_everyone()

    def end_training(self) -> None:
        state.shut_down_process_group()

    # ---- models and checkpoints --------------------------------------------------------
    def unwrap_model(
        self,
        model: torch.nn.Module,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        return wrappers.unwrap_model(model, keep_fp32_wrapper, keep_torch_compile)

    def get_state_dict(self, model: torch.nn.Module, unwrap: bool = True) -> dict:
        return (self.unwrap_model(model) if unwrap else model).state_dict()

    def save(self, obj: Any, f, safe_serialization: bool = False) -> None:
        """Saves on the main process only."""
        if not self.is_main_process:
            return
        if safe_serialization:
            from safetensors.torch import save_file

            save_file(obj, f)
        else:
            torch.save(obj, f)

    def save_state(self, output_dir: str | os.PathLike | None = None, **kwargs):
        directory = output_dir or (
            self.project_dir and os.path.join(self.project_dir, "checkpoint")
        )
        if not directory:
            raise ValueError("save_state needs an output_dir (or Accelerator(project_dir=...))")
        return checkpoint.save_state(self, directory)

    def load_state(self, input_dir: str | os.PathLike | None = None, **kwargs) -> None:
        directory = input_dir or (self.project_dir and os.path.join(self.project_dir, "checkpoint"))
        if not directory:
            raise ValueError("load_state needs an input_dir (or Accelerator(project_dir=...))")
        checkpoint.load_state(self, directory)

    def free_memory(self, *objects: Any) -> list:
        """Drops this accelerator's references to prepared objects; returns one None per object."""
        self._models.clear()
        self._optimizers.clear()
        self._schedulers.clear()
        self._dataloaders.clear()
        self.gradient_state.step = 0
        gc.collect()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
        return [None for _ in objects]

    clear = free_memory


def _is_scheduler(obj: Any) -> bool:
    schedulers = torch.optim.lr_scheduler
    return isinstance(obj, (schedulers.LRScheduler, schedulers.ReduceLROnPlateau))
