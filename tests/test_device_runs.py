"""The migrated placement/device fixtures run under one `migrate launch --nproc 2` (CPU, gloo):
a driver runs each in turn in the same two processes. Each shows what its rule is for on a
real distributed run: the model's own class behind the DistributedDataParallel wrapper."""

from __future__ import annotations

import json

import pytest

from tests.golden_runs import launch_in_turn

pytestmark = pytest.mark.slow

FIXTURES = [
    "model_class_name_unwrapped",
    "trainer_model_class_name",
]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("devices")
    return folder, launch_in_turn(folder, FIXTURES)


def test_names_built_from_the_model_class_read_the_model_not_the_wrapper(launched):
    _, printed = launched
    out = printed["model_class_name_unwrapped"]
    # on 2 processes the prepared model is a DistributedDataParallel: named through it, the
    # run folder would be runs/DistributedDataParallel and the isinstance test False
    assert "epoch 1 of TinyRegressor_h6_lr0.01 in runs/TinyRegressor" in out, out
    assert "DistributedDataParallel" not in out


def test_a_trainer_logs_under_its_model_class(launched):
    folder, _ = launched
    logs = folder / "trainer_model_class_name" / "logs"
    assert [p.name for p in logs.iterdir()] == ["classifier"]
    summary = json.loads((logs / "classifier" / "epoch1.json").read_text())
    assert summary == {"model": "Classifier", "classes": 3}
