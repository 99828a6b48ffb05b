"""Experiment trackers for `Accelerator(log_with=...)`, `init_trackers`, `log`, `get_tracker`.

HF Accelerate's semantics: trackers run on the main process only; `log_with` takes names
("tensorboard", "wandb", "mlflow", "all"), `LoggerType` members (ours or HF's) and tracker
objects (subclasses of `GeneralTracker`, ours or HF's); a known tracker whose package is not
installed is skipped with a warning. Each tracker's package is imported only when that tracker
starts. `jsonl` is runtime's own tracker and needs no package: one JSON object per `log` call.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import numbers
import os
import time
import warnings
from typing import Any

logger = logging.getLogger(__name__)


class GeneralTracker:
    """Base class of trackers: `name`, `requires_logging_directory`, `tracker`, and the four
    calls the Accelerator makes (`start`, `store_init_configuration`, `log`, `finish`).
    A blank one (what `get_tracker` returns off the main process) does nothing."""

    main_process_only = True
    name = "blank"
    requires_logging_directory = False

    def __init__(self, _blank: bool = False) -> None:
        self._blank = _blank

    @property
    def tracker(self):
        return None

    def start(self) -> None:
        pass

    def store_init_configuration(self, values: dict) -> None:
        pass

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        pass

    def finish(self) -> None:
        pass


def _plain(value: Any) -> Any:
    """A plain number for one-element tensors and numpy scalars."""
    if hasattr(value, "item") and not isinstance(value, (int, float, str)):
        try:
            value = value.item()
        except (ValueError, RuntimeError):  # more than one element: left as it is
            return value
    return value


class JSONLinesTracker(GeneralTracker):
    """`logging_dir/run_name/metrics.jsonl`: one line per `log` call,
    `{"step": ..., "time": <unix seconds>, "values": {...}}`; the configuration given to
    `init_trackers` goes to `logging_dir/run_name/config.json`."""

    name = "jsonl"
    requires_logging_directory = True

    def __init__(self, run_name: str, logging_dir: str | os.PathLike, **kwargs) -> None:
        super().__init__()
        self.run_name = run_name
        self.logging_dir = os.path.join(logging_dir, run_name)
        self.file = None

    @property
    def tracker(self):
        return self.file

    def start(self) -> None:
        os.makedirs(self.logging_dir, exist_ok=True)
        self.file = open(os.path.join(self.logging_dir, "metrics.jsonl"), "a", encoding="utf-8")  # noqa: SIM115

    def store_init_configuration(self, values: dict) -> None:
        with open(os.path.join(self.logging_dir, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(values, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        values = {key: _plain(value) for key, value in values.items()}
        record = {"step": step, "time": time.time(), "values": values}
        self.file.write(json.dumps(record, default=str) + "\n")
        self.file.flush()

    def finish(self) -> None:
        if self.file is not None:
            self.file.close()


class TensorBoardTracker(GeneralTracker):
    """`torch.utils.tensorboard` (or tensorboardX) writing to `logging_dir/run_name`."""

    name = "tensorboard"
    requires_logging_directory = True

    def __init__(self, run_name: str, logging_dir: str | os.PathLike, **kwargs) -> None:
        super().__init__()
        self.run_name = run_name
        self.logging_dir = os.path.join(logging_dir, run_name)
        self.init_kwargs = kwargs

    @property
    def tracker(self):
        return self.writer

    def start(self) -> None:
        try:
            from torch.utils import tensorboard
        except ModuleNotFoundError:
            import tensorboardX as tensorboard
        self.writer = tensorboard.SummaryWriter(self.logging_dir, **self.init_kwargs)

    def store_init_configuration(self, values: dict) -> None:
        self.writer.add_hparams(values, metric_dict={})
        self.writer.flush()
        if importlib.util.find_spec("yaml") is not None:  # HF also keeps a YAML copy
            import yaml

            folder = os.path.join(self.logging_dir, str(time.time()))
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "hparams.yml"), "w") as handle:
                yaml.dump(values, handle)

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        for key, value in values.items():
            value = _plain(value)
            if isinstance(value, numbers.Number):
                self.writer.add_scalar(key, value, global_step=step, **kwargs)
            elif isinstance(value, str):
                self.writer.add_text(key, value, global_step=step, **kwargs)
            elif isinstance(value, dict):
                self.writer.add_scalars(key, value, global_step=step, **kwargs)
        self.writer.flush()

    def log_images(self, values: dict, step: int | None = None, **kwargs) -> None:
        for key, images in values.items():
            self.writer.add_images(key, images, global_step=step, **kwargs)

    def finish(self) -> None:
        self.writer.close()


class WandBTracker(GeneralTracker):
    """`wandb.init(project=run_name, **init_kwargs)`."""

    name = "wandb"
    requires_logging_directory = False

    def __init__(self, run_name: str, **kwargs) -> None:
        super().__init__()
        self.run_name = run_name
        self.init_kwargs = kwargs

    @property
    def tracker(self):
        return self.run

    def start(self) -> None:
        import wandb

        self.run = wandb.init(project=self.run_name, **self.init_kwargs)

    def store_init_configuration(self, values: dict) -> None:
        import wandb

        wandb.config.update(values, allow_val_change=True)

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        self.run.log(values, step=step, **kwargs)

    def log_images(self, values: dict, step: int | None = None, **kwargs) -> None:
        import wandb

        for key, images in values.items():
            self.log({key: [wandb.Image(image) for image in images]}, step=step, **kwargs)

    def finish(self) -> None:
        self.run.finish()


class MLflowTracker(GeneralTracker):
    """An MLflow run in the experiment named after the project (created if missing)."""

    name = "mlflow"
    requires_logging_directory = False

    def __init__(self, experiment_name: str | None = None, logging_dir=None, **kwargs) -> None:
        super().__init__()
        self.experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", experiment_name)
        self.logging_dir = logging_dir
        self.run_kwargs = kwargs  # run_id, tags, nested (HF: nested_run), run_name, description
        if "nested_run" in self.run_kwargs:
            self.run_kwargs["nested"] = self.run_kwargs.pop("nested_run")

    @property
    def tracker(self):
        return self.active_run

    def start(self) -> None:
        import mlflow

        found = mlflow.search_experiments(filter_string=f"name = '{self.experiment_name}'")
        if found:
            experiment_id = found[0].experiment_id
        else:
            experiment_id = mlflow.create_experiment(
                name=self.experiment_name, artifact_location=self.logging_dir
            )
        self.active_run = mlflow.start_run(experiment_id=experiment_id, **self.run_kwargs)

    def store_init_configuration(self, values: dict) -> None:
        import mlflow

        items = list(values.items())
        for first in range(0, len(items), 100):  # MLflow takes at most 100 params per call
            mlflow.log_params(dict(items[first : first + 100]))

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        import mlflow

        metrics = {key: _plain(value) for key, value in values.items()}
        metrics = {k: v for k, v in metrics.items() if isinstance(v, numbers.Number)}
        mlflow.log_metrics(metrics, step=step, **kwargs)

    def finish(self) -> None:
        import mlflow

        mlflow.end_run()


TRACKERS = {
    tracker.name: tracker
    for tracker in (JSONLinesTracker, TensorBoardTracker, WandBTracker, MLflowTracker)
}
# the packages a tracker needs (any one of them), also for trackers runtime does not implement
PACKAGES = {
    "tensorboard": ("tensorboard", "tensorboardX"),
    "wandb": ("wandb",),
    "mlflow": ("mlflow",),
    "comet_ml": ("comet_ml",),
    "aim": ("aim",),
    "clearml": ("clearml",),
    "dvclive": ("dvclive",),
    "swanlab": ("swanlab",),
    "trackio": ("trackio",),
}


def is_installed(name: str) -> bool:
    if name == "jsonl":
        return True
    return any(importlib.util.find_spec(package) is not None for package in PACKAGES[name])


def _is_tracker_object(entry: Any) -> bool:
    return not isinstance(entry, str) and hasattr(entry, "log") and hasattr(entry, "name")


def resolve(log_with: Any, logging_dir: str | None) -> list:
    """The trackers `log_with` asks for: tracker objects and names, in order, each once."""
    if log_with is None:
        return []
    entries = list(log_with) if isinstance(log_with, (list, tuple)) else [log_with]
    names = [str(getattr(e, "value", e)).lower() for e in entries if not _is_tracker_object(e)]
    if "all" in names:
        entries = [e for e in entries if _is_tracker_object(e)]
        entries += [n for n in TRACKERS if n != "jsonl" and is_installed(n)]
        entries += ["jsonl"] if logging_dir is not None else []
    chosen: list = []
    for entry in entries:
        if _is_tracker_object(entry):
            chosen.append(entry)
            continue
        name = str(getattr(entry, "value", entry)).lower()
        if name in chosen:
            continue
        if name not in TRACKERS and name not in PACKAGES:
            known = ", ".join(["all", *TRACKERS, *sorted(PACKAGES.keys() - TRACKERS.keys())])
            raise ValueError(f"Unsupported logging capability: {name}. Choose between {known}")
        if not is_installed(name):
            logger.debug("log_with=%r: its package is not installed; skipped", name)
            continue
        if name not in TRACKERS:
            raise NotImplementedError(
                f"the {name} tracker is not implemented by runtime; use "
                f"{', '.join(TRACKERS)}, or pass a GeneralTracker object in log_with"
            )
        if TRACKERS[name].requires_logging_directory and logging_dir is None:
            raise ValueError(
                f"Logging with `{name}` requires a `logging_dir`: pass "
                "Accelerator(project_dir=...) or a ProjectConfiguration with logging_dir"
            )
        chosen.append(name)
    if not chosen:
        warnings.warn(
            f"`log_with={log_with}` was passed but no supported trackers are currently installed.",
            stacklevel=3,
        )
    return chosen


def create(entry: Any, project_name: str, logging_dir: str | None, init_kwargs: dict):
    """A tracker for one `resolve` entry (tracker objects are used as they are)."""
    if not isinstance(entry, str):
        return entry
    kind = TRACKERS[entry]
    kwargs = init_kwargs.get(entry, {})
    if kind.requires_logging_directory:
        return kind(project_name, logging_dir, **kwargs)
    if kind is MLflowTracker:
        return kind(project_name, logging_dir, **kwargs)
    return kind(project_name, **kwargs)
