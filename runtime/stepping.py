"""The Accelerator's training-step methods (HF semantics): backward, accumulation, clipping.

`backward` divides the loss by `gradient_accumulation_steps` and scales it in fp16;
`accumulate` advances one micro-step of the process-wide gradient state, and between syncs
DDP's `no_sync()` skips the all-reduce. A mixin of `Accelerator`.
"""

from __future__ import annotations

import warnings
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

from runtime import wrappers


class TrainingStep:
    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        """Divides by `gradient_accumulation_steps` (as HF does), then backward (scaled in fp16)."""
        steps = self.gradient_state.num_steps
        if steps > 1:
            inside = self.gradient_state.inside_accumulate
            if not inside and not self._warned_backward_outside_accumulate:
                self._warned_backward_outside_accumulate = True
                warnings.warn(
                    f"backward() divides the loss by gradient_accumulation_steps={steps}, but it "
                    "runs outside `with accelerator.accumulate(model):`, so every batch steps "
                    f"the optimizer with 1/{steps} of the gradient.",
                    stacklevel=2,
                )
            loss = loss / steps
        kwargs.pop("learning_rate", None)  # HF's LOMO argument; no LOMO optimizer here
        if self.scaler is not None:
            self.scaler.scale(loss).backward(**kwargs)
        else:
            loss.backward(**kwargs)

    def _do_sync(self) -> None:
        """One micro-step: sync every k-th, and on a loader's last batch (then restart)."""
        gradient_state = self.gradient_state
        if gradient_state.sync_with_dataloader and gradient_state.end_of_dataloader:
            self.step = 0
            gradient_state.sync_gradients = True
        else:
            self.step += 1
            gradient_state.sync_gradients = self.step % gradient_state.num_steps == 0

    @contextmanager
    def accumulate(self, *models: torch.nn.Module):
        """One micro-step: gradients sync (and optimizers step) every k-th call or at loader end."""
        self._do_sync()
        gradient_state = self.gradient_state
        skip_sync = not gradient_state.sync_gradients and not (
            gradient_state.sync_each_batch and self.use_distributed
        )
        gradient_state.inside_accumulate = True
        try:
            with ExitStack() as stack:
                for model in models if skip_sync else ():
                    stack.enter_context(wrappers.no_sync(model))
                yield
        finally:
            gradient_state.inside_accumulate = False

    def no_sync(self, model: torch.nn.Module):
        return wrappers.no_sync(model)

    @staticmethod
    @contextmanager
    def trigger_sync_in_backward(model: torch.nn.Module):
        """Makes the next backward of a DDP model inside `no_sync` all-reduce after all."""
        if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
            yield
            return
        saved = model.require_backward_grad_sync, model.require_forward_param_sync
        model.require_backward_grad_sync = model.require_forward_param_sync = True
        model.reducer.prepare_for_backward([])
        try:
            yield
        finally:
            model.require_backward_grad_sync, model.require_forward_param_sync = saved

    def autocast(self, autocast_handler: Any = None):
        handler = autocast_handler or self.autocast_handler
        kwargs = handler.to_kwargs() if handler is not None else {}
        return wrappers.autocast_context(self.mixed_precision, self.device, **kwargs)

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
