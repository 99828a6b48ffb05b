"""`get_logger`: a logger for multi-process scripts (HF's `accelerate.logging`).

Records go out on the main process only unless a call passes `main_process_only=False`;
`in_order=True` makes every process log, one after the other, in rank order. Messages are
prefixed with the process rank (`[RANK 0] ...`), as HF Accelerate 1.x does.
"""

from __future__ import annotations

import functools
import logging
import os

from runtime import state


class MultiProcessAdapter(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        msg, kwargs = super().process(msg, kwargs)
        kwargs.setdefault("stacklevel", 2)  # report the caller, not this adapter
        return f"[RANK {state.PartialState().process_index}] {msg}", kwargs

    def log(self, level, msg, *args, **kwargs):
        if state._process_state is None:
            raise RuntimeError(
                "You must initialize the accelerate state by calling either `PartialState()` "
                "or `Accelerator()` before using the logging utility."
            )
        main_process_only = kwargs.pop("main_process_only", True)
        in_order = kwargs.pop("in_order", False)
        if not self.isEnabledFor(level):
            return
        msg, kwargs = self.process(msg, kwargs)
        process = state.PartialState()
        if in_order:
            for rank in range(process.num_processes):
                if rank == process.process_index:
                    self.logger.log(level, msg, *args, **kwargs)
                process.wait_for_everyone()
        elif not main_process_only or process.is_main_process:
            self.logger.log(level, msg, *args, **kwargs)

    @functools.lru_cache(None)  # noqa: B019 - one warning per message for the adapter's life
    def warning_once(self, *args, **kwargs):
        self.warning(*args, **kwargs)


def get_logger(name: str, log_level: str | None = None) -> MultiProcessAdapter:
    """A logger for `name`; `log_level` (else ACCELERATE_LOG_LEVEL) sets its level."""
    log_level = log_level or os.environ.get("ACCELERATE_LOG_LEVEL")
    logger = logging.getLogger(name)
    if log_level is not None:
        logger.setLevel(log_level.upper())
        logger.root.setLevel(log_level.upper())
    return MultiProcessAdapter(logger, {})
