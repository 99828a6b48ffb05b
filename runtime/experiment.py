"""The Accelerator's experiment-tracking methods (HF semantics; trackers live in tracking.py).

Trackers start, log and finish on the main process only; `runtime.tracking` (and with it any
tracker package) is imported only when `log_with` asks for a tracker.
"""

from __future__ import annotations

from runtime import state


class ExperimentTracking:
    def init_trackers(
        self, project_name: str, config: dict | None = None, init_kwargs: dict | None = None
    ) -> None:
        """Starts the `log_with` trackers (main process only) and stores `config` in them."""
        if not self.is_main_process:
            return
        from runtime import tracking

        for entry in self.log_with:
            made = tracking.create(entry, project_name, self.logging_dir, init_kwargs or {})
            self.trackers.append(made)
        for tracker in self.trackers:
            tracker.start()
        if config is not None:
            for tracker in self.trackers:
                tracker.store_init_configuration(config)

    def log(self, values: dict, step: int | None = None, log_kwargs: dict | None = None) -> None:
        """Logs `values` to every tracker (main process only)."""
        if not self.is_main_process:
            return
        for tracker in self.trackers:
            tracker.log(values, step=step, **(log_kwargs or {}).get(tracker.name, {}))

    def get_tracker(self, name: str, unwrap: bool = False):
        """The tracker called `name` (its underlying object with `unwrap=True`); a blank
        tracker that does nothing on the processes that have no trackers."""
        if not self.trackers:
            from runtime.tracking import GeneralTracker

            return GeneralTracker(_blank=True)
        for tracker in self.trackers:
            if tracker.name == name:
                return tracker.tracker if unwrap else tracker
        raise ValueError(f"{name} is not an available tracker stored inside the `Accelerator`.")

    def end_training(self) -> None:
        """Finishes the trackers, then a barrier and the process group's teardown."""
        for tracker in self.trackers:
            tracker.finish()
        state.shut_down_process_group()
