"""Logs and trackers read back as lines of numbers."""

from __future__ import annotations

import json

import pytest

from migrator.verify.trackers import is_tracker, read_tracker


def test_a_csv_log_compares_its_numbers_and_never_its_time_column(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("epoch,loss,seconds\n0,0.693,1.52\n1,0.512,1.49\n")
    lines = read_tracker(path)
    assert [line.numbers for line in lines] == [[0, 0.693, 1.52], [1, 0.512, 1.49]]
    assert lines[0].volatile == [False, False, True]
    assert lines[0].template == "{},{},{}"


def test_json_numbers_are_read_by_their_path(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps(
            {"test": {"accuracy": 0.9, "loss": [0.5, 0.4]}, "name": "x", "elapsed_time": 3.0}
        )
    )
    assert [line.text for line in read_tracker(path)] == [
        "test.accuracy: 0.9",
        "test.loss[0]: 0.5",
        "test.loss[1]: 0.4",
        "elapsed_time: 3.0",
    ]
    assert read_tracker(path)[-1].volatile == [True]


def test_a_file_that_does_not_parse_is_left_out(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert read_tracker(path) is None
    assert read_tracker(tmp_path / "absent.csv") is None


def test_which_files_are_trackers():
    assert is_tracker("runs/x/events.out.tfevents.1.host.2.0")
    assert is_tracker("metrics.jsonl") and is_tracker("train.log")
    assert not is_tracker("model.pt") and not is_tracker("figure.png")


def test_tensorboard_scalars_are_read_from_the_event_file(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    for step, value in enumerate([0.5, 0.25, 0.125], start=1):
        writer.add_scalar("train/loss", value, step)
    writer.add_scalar("lr", 0.01, 3)
    writer.close()
    [events] = tmp_path.glob("events.out.tfevents.*")
    lines = read_tracker(events)
    assert [line.text for line in lines] == [
        "train/loss step 1: 0.5",
        "train/loss step 2: 0.25",
        "train/loss step 3: 0.125",
        f"lr step 3: {float.fromhex('0x1.47ae14p-7')!r}",  # 0.01 as float32
    ]
