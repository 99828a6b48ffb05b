"""The Accelerator's constructor options, read the way HF Accelerate reads them.

Configuration objects may be runtime's or HF's (`accelerate.utils.DataLoaderConfiguration`,
`GradientAccumulationPlugin`, kwargs handlers): they are read by duck typing / class name.
The MIGRATE_* and ACCELERATE_* environment overrides apply here.
"""

from __future__ import annotations

import os
from typing import Any

from runtime import config, state


def loader_configuration(given: Any, split_batches: bool, even_batches: bool):
    """Our DataLoaderConfiguration from HF's or ours (duck typing) and the env overrides."""
    dispatch_batches = seedable = data_seed = None
    non_blocking = False
    if given is not None:
        if getattr(given, "use_stateful_dataloader", False):
            raise NotImplementedError(
                "DataLoaderConfiguration(use_stateful_dataloader=True) needs torchdata's "
                "StatefulDataLoader, which runtime does not support"
            )
        split_batches = getattr(given, "split_batches", split_batches)
        even_batches = getattr(given, "even_batches", even_batches)
        dispatch_batches = getattr(given, "dispatch_batches", None)
        seedable = getattr(given, "use_seedable_sampler", False)
        data_seed = getattr(given, "data_seed", None)
        non_blocking = getattr(given, "non_blocking", False)
    return config.DataLoaderConfiguration(
        split_batches=bool(state.env_flag("MIGRATE_SPLIT_BATCHES", split_batches)),
        even_batches=bool(state.env_flag("MIGRATE_EVEN_BATCHES", even_batches)),
        dispatch_batches=dispatch_batches,
        use_seedable_sampler=bool(seedable),
        non_blocking=bool(non_blocking),
        data_seed=data_seed,
    )


_HANDLERS = {
    "DistributedDataParallelKwargs",
    "GradScalerKwargs",
    "InitProcessGroupKwargs",
    "AutocastKwargs",
    "ProfileKwargs",
}
_FP8_HANDLERS = {"FP8RecipeKwargs", "AORecipeKwargs", "TERecipeKwargs", "MSAMPRecipeKwargs"}


def kwargs_handlers(handlers: list | None) -> dict:
    """Kwargs handlers (ours or HF's) by class name, at most one of each."""
    found: dict = {}
    for handler in handlers or []:
        kind = type(handler).__name__
        if kind in _FP8_HANDLERS:
            raise NotImplementedError(f"{kind}: fp8 training (TransformerEngine, torchao, MS-AMP)")
        if kind not in _HANDLERS:
            raise TypeError(f"unsupported kwargs handler {kind}; runtime takes {sorted(_HANDLERS)}")
        if kind in found:
            raise ValueError(f"You can only pass one {kind} in `kwargs_handlers`.")
        found[kind] = handler
    return found


def accumulation_plugin(plugin: Any, steps: int | None):
    """What this Accelerator sets for accumulation process-wide; None keeps the current one."""
    if plugin is not None:
        if steps not in (None, 1):
            raise ValueError(
                "You can only pass one of `gradient_accumulation_steps` and "
                "`gradient_accumulation_plugin`."
            )
        return plugin
    if steps is None:
        from_env = os.environ.get("ACCELERATE_GRADIENT_ACCUMULATION_STEPS")
        steps = int(from_env) if from_env else None
    if steps is None:
        return None
    if steps < 1:
        raise ValueError("gradient_accumulation_steps must be at least 1")
    return config.GradientAccumulationPlugin(num_steps=steps)


def trackers(log_with: Any, logging_dir: str | None) -> list:
    if log_with is None:
        return []
    from runtime import tracking  # only when trackers are asked for

    return tracking.resolve(log_with, logging_dir)
