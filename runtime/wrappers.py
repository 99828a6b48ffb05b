"""Prepared model, optimizer and scheduler, and mixed-precision plumbing.

Models are moved to the device and wrapped in `DistributedDataParallel`; optimizers and
schedulers are proxies that step only when gradients are synchronised (HF Accelerate's
accumulation semantics); a prepared scheduler steps once per process per optimizer step
unless batches are split (the schedule was sized on the un-sharded loader).
"""

from __future__ import annotations

import functools
from contextlib import nullcontext

import torch
from torch.nn.parallel import DistributedDataParallel

from runtime.collectives import apply_to_tensors

AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def check_mixed_precision(mixed_precision: str, device: torch.device) -> None:
    if mixed_precision not in ("no", "fp16", "bf16"):
        raise ValueError(f"mixed_precision must be 'no', 'fp16' or 'bf16', not {mixed_precision!r}")
    if mixed_precision == "fp16" and device.type == "cpu":
        raise ValueError(
            "mixed_precision='fp16' needs an accelerator (CUDA, XPU, ...): this process runs on "
            "the CPU, where fp16 autocast and GradScaler do not apply (HF Accelerate silently "
            "trains in fp32 here). Use mixed_precision='bf16' on CPU, or 'no'."
        )


def autocast_context(mixed_precision: str, device: torch.device, **autocast_kwargs):
    """`torch.autocast` for the configured precision (AutocastKwargs applied), or a null context."""
    if mixed_precision in AUTOCAST_DTYPES:
        dtype = AUTOCAST_DTYPES[mixed_precision]
        return torch.autocast(device_type=device.type, dtype=dtype, **autocast_kwargs)
    return nullcontext()


def make_grad_scaler(mixed_precision: str, device: torch.device, **scaler_kwargs):
    if mixed_precision == "fp16" and device.type not in ("cpu", "mps"):
        return torch.amp.GradScaler(device.type, **scaler_kwargs)
    return None


def _outputs_to_fp32(output):
    return apply_to_tensors(
        lambda t: t.float() if t.dtype in (torch.float16, torch.bfloat16) else t, output
    )


def prepare_model(
    model: torch.nn.Module,
    *,
    state,
    mixed_precision: str,
    device_placement: bool,
    evaluation_mode: bool = False,
    ddp_kwargs: dict | None = None,
    autocast_kwargs: dict | None = None,
) -> torch.nn.Module:
    """Autocast forward (outputs back to fp32), `.to(device)`, then DDP on several processes."""
    if mixed_precision in AUTOCAST_DTYPES and not hasattr(model, "_original_forward"):
        original = model.forward
        autocast = functools.partial(
            autocast_context, mixed_precision, state.device, **(autocast_kwargs or {})
        )

        @functools.wraps(original)
        def forward(*args, **kwargs):
            with autocast():
                return _outputs_to_fp32(original(*args, **kwargs))

        model._original_forward = original
        model.forward = forward
    if device_placement:
        model.to(state.device)
    trainable = any(parameter.requires_grad for parameter in model.parameters())
    wrap = (
        not isinstance(model, DistributedDataParallel)  # a script's own DDP is kept as is
        and state.distributed
        and state.num_processes > 1
        and trainable
        and not evaluation_mode
    )
    if wrap:
        on_device = state.device.index is not None  # an accelerator, not the CPU
        model = DistributedDataParallel(
            model,
            device_ids=[state.device.index] if on_device else None,
            output_device=state.device.index if on_device else None,
            **(ddp_kwargs or {}),
        )
    model._is_accelerate_prepared = True
    return model


def unwrap_model(
    model: torch.nn.Module, keep_fp32_wrapper: bool = True, keep_torch_compile: bool = True
) -> torch.nn.Module:
    """Peels DDP/DataParallel (and torch.compile unless kept) off a prepared model."""
    compiled = None
    while True:
        if isinstance(model, (DistributedDataParallel, torch.nn.DataParallel)):
            model = model.module
        elif type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod"):
            compiled = compiled or model
            model = model._orig_mod
        else:
            break
    if not keep_fp32_wrapper and "_original_forward" in model.__dict__:
        model.forward = model.__dict__.pop("_original_forward")
    if compiled is not None and keep_torch_compile:
        return compiled
    return model


def no_sync(model: torch.nn.Module):
    """DDP's `no_sync()` when the model is DDP-wrapped, else a null context."""
    if isinstance(model, DistributedDataParallel):
        return model.no_sync()
    return nullcontext()


class PreparedOptimizer(torch.optim.Optimizer):
    """Steps and zeroes only on synchronising micro-steps; fp16 steps through the GradScaler."""

    # A fused optimizer says it reads a GradScaler's `grad_scale` / `found_inf` from itself:
    # a user's `scaler.step(prepared)` would set them on this wrapper, where the inner step
    # never sees them, and a step with inf gradients would not be skipped. The wrapper says
    # no (as HF Accelerate's does), so the scaler unscales and checks the gradients itself.
    _step_supports_amp_scaling = False

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        gradient_state,
        scaler=None,
        device_placement: bool = True,
    ) -> None:
        self.optimizer = optimizer
        self.gradient_state = gradient_state
        self.scaler = scaler
        self.step_was_skipped = False
        self._is_accelerate_prepared = True
        if device_placement and optimizer.state:
            # loading its own state dict casts state tensors to each parameter's device
            optimizer.load_state_dict(optimizer.state_dict())

    def __getattr__(self, name):
        if name == "optimizer":
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    def __getstate__(self) -> dict:
        # the wrapper whole (`torch.save(optimizer.state_dict)` pickles the bound method's
        # object): torch.optim.Optimizer's own keeps only the fields it defines
        return dict(self.__dict__)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    @property
    def state(self):
        return self.optimizer.state

    @state.setter
    def state(self, value):
        self.optimizer.state = value

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self.optimizer.param_groups = value

    @property
    def defaults(self):
        return self.optimizer.defaults

    @defaults.setter
    def defaults(self, value):
        self.optimizer.defaults = value

    def add_param_group(self, param_group: dict) -> None:
        self.optimizer.add_param_group(param_group)

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.optimizer.load_state_dict(state_dict)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self.gradient_state.sync_gradients:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        if not self.gradient_state.sync_gradients:
            return None
        if self.scaler is None:
            self.step_was_skipped = False
            return self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        scale_before = self.scaler.get_scale()
        result = (
            self.scaler.step(self.optimizer, closure)
            if closure
            else self.scaler.step(self.optimizer)
        )
        self.scaler.update()
        # GradScaler lowers its scale exactly when it skipped the step on inf/nan gradients
        self.step_was_skipped = self.scaler.get_scale() < scale_before
        return result

    def train(self):
        if hasattr(self.optimizer, "train"):
            self.optimizer.train()

    def eval(self):
        if hasattr(self.optimizer, "eval"):
            self.optimizer.eval()

    def __repr__(self) -> str:
        return f"PreparedOptimizer({self.optimizer!r})"


class PreparedScheduler:
    """Steps with the optimizer: skipped between syncs and after skipped fp16 steps."""

    def __init__(
        self,
        scheduler,
        *,
        optimizers: list,
        gradient_state,
        num_processes: int,
        split_batches: bool,
        step_with_optimizer: bool,
    ) -> None:
        self.scheduler = scheduler
        self.optimizers = optimizers
        self.gradient_state = gradient_state
        self.num_processes = num_processes
        self.split_batches = split_batches
        self.step_with_optimizer = step_with_optimizer
        self._is_accelerate_prepared = True

    def __getattr__(self, name):
        if name == "scheduler":
            raise AttributeError(name)
        return getattr(self.scheduler, name)

    def step(self, *args, **kwargs) -> None:
        if not self.step_with_optimizer:
            self.scheduler.step(*args, **kwargs)
            return
        if not self.gradient_state.sync_gradients:
            return
        if any(getattr(optimizer, "step_was_skipped", False) for optimizer in self.optimizers):
            return
        repeats = 1 if self.split_batches else self.num_processes
        for _ in range(repeats):
            total = getattr(self.scheduler, "total_steps", None)  # OneCycleLR raises past it
            if total is not None and self.scheduler._step_count > total:
                break
            self.scheduler.step(*args, **kwargs)

    def get_last_lr(self):
        return self.scheduler.get_last_lr()

    def state_dict(self) -> dict:
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.scheduler.load_state_dict(state_dict)

    def __repr__(self) -> str:
        return f"PreparedScheduler({self.scheduler!r})"
