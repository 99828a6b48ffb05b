"""Experiment trackers: log_with, init_trackers, log, get_tracker, end_training (1 process)."""

import json

import pytest
import torch

from runtime import Accelerator, GeneralTracker, LoggerType, tracking


class Recorder(GeneralTracker):
    name = "recorder"
    requires_logging_directory = False

    def __init__(self):
        super().__init__()
        self.calls = []

    @property
    def tracker(self):
        return self.calls

    def start(self):
        self.calls.append("start")

    def store_init_configuration(self, values):
        self.calls.append(("config", values))

    def log(self, values, step=None, **kwargs):
        self.calls.append(("log", values, step, kwargs))

    def finish(self):
        self.calls.append("finish")


def test_jsonl_tracker_writes_one_line_per_log_and_the_config(tmp_path):
    accelerator = Accelerator(log_with="jsonl", project_dir=str(tmp_path))
    accelerator.init_trackers("run", config={"lr": 0.1, "epochs": 2})
    accelerator.log({"loss": torch.tensor(0.5), "note": "warm-up"}, step=1)
    accelerator.log({"loss": 0.25}, step=2)
    accelerator.end_training()
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["step"], r["values"]) for r in records] == [
        (1, {"loss": 0.5, "note": "warm-up"}),
        (2, {"loss": 0.25}),
    ]
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == {"lr": 0.1, "epochs": 2}


def test_tensorboard_tracker_writes_scalars_tensorboard_can_read(tmp_path):
    pytest.importorskip("tensorboard")  # in the test extra
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accelerator = Accelerator(log_with=LoggerType.TENSORBOARD, project_dir=str(tmp_path))
    accelerator.init_trackers("tb", config={"lr": 0.1})
    for step in range(3):
        accelerator.log({"train_loss": 1.0 / (step + 1)}, step=step)
    writer = accelerator.get_tracker("tensorboard", unwrap=True)
    assert type(writer).__name__ == "SummaryWriter"
    accelerator.end_training()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    scalars = [(e.step, round(e.value, 4)) for e in events.Scalars("train_loss")]
    assert scalars == [(0, 1.0), (1, 0.5), (2, 0.3333)]


def test_custom_trackers_get_every_call_and_log_kwargs_by_name():
    recorder = Recorder()
    accelerator = Accelerator(log_with=[recorder])
    accelerator.init_trackers("run", config={"a": 1})
    accelerator.log({"x": 1}, step=4, log_kwargs={"recorder": {"commit": False}})
    accelerator.end_training()
    assert recorder.calls == [
        "start",
        ("config", {"a": 1}),
        ("log", {"x": 1}, 4, {"commit": False}),
        "finish",
    ]
    assert accelerator.get_tracker("recorder") is recorder
    assert accelerator.get_tracker("recorder", unwrap=True) is recorder.calls


def test_hf_tracker_objects_and_logger_types_are_accepted(tmp_path):
    hf_tracking = pytest.importorskip("accelerate.tracking")
    hf_utils = pytest.importorskip("accelerate.utils")

    class HFRecorder(hf_tracking.GeneralTracker):
        name = "hf_recorder"
        requires_logging_directory = False
        tracker = None

        def log(self, values, step=None, **kwargs):
            self.logged = (values, step)

    hf_recorder = HFRecorder()
    accelerator = Accelerator(
        log_with=[hf_recorder, hf_utils.LoggerType.TENSORBOARD], project_dir=str(tmp_path)
    )
    accelerator.init_trackers("run")
    accelerator.log({"x": 2}, step=1)
    assert [t.name for t in accelerator.trackers] == ["hf_recorder", "tensorboard"]
    assert hf_recorder.logged == ({"x": 2}, 1)


def test_trackers_that_need_a_directory_refuse_to_start_without_one():
    with pytest.raises(ValueError, match="requires a `logging_dir`"):
        Accelerator(log_with="jsonl")


def test_an_unknown_tracker_name_is_an_error():
    with pytest.raises(ValueError, match="Unsupported logging capability: tensorbored"):
        Accelerator(log_with="tensorbored")


def test_a_tracker_whose_package_is_missing_is_skipped_with_a_warning(monkeypatch):
    monkeypatch.setattr(tracking, "is_installed", lambda name: name != "wandb")
    with pytest.warns(UserWarning, match="no supported trackers are currently installed"):
        accelerator = Accelerator(log_with="wandb")
    accelerator.init_trackers("run")
    assert accelerator.trackers == []


def test_an_installed_tracker_runtime_does_not_implement_names_itself(monkeypatch):
    monkeypatch.setattr(tracking, "is_installed", lambda name: True)
    with pytest.raises(NotImplementedError, match="the aim tracker is not implemented"):
        Accelerator(log_with="aim")


def test_all_means_every_installed_tracker(tmp_path):
    accelerator = Accelerator(log_with="all", project_dir=str(tmp_path))
    assert "jsonl" in accelerator.log_with
    assert ("tensorboard" in accelerator.log_with) == tracking.is_installed("tensorboard")


def test_get_tracker_without_trackers_is_a_blank_one_and_unknown_names_fail():
    accelerator = Accelerator()
    blank = accelerator.get_tracker("wandb")
    assert isinstance(blank, GeneralTracker) and blank.log({"x": 1}) is None
    accelerator = Accelerator(log_with=[Recorder()])
    accelerator.init_trackers("run")
    with pytest.raises(ValueError, match="wandb is not an available tracker"):
        accelerator.get_tracker("wandb")
