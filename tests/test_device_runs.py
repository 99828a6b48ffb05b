"""The migrated placement/device fixtures run under one `migrate launch --nproc 2` (CPU, gloo):
a driver runs each in turn in the same two processes, with the command lines a user would
give, and records the `cpu=` each script's Accelerator is made with. On a CPU-only machine the
Accelerator's device is the CPU either way, so what the CPU flags change is read from that
record; the rest shows each rule at work on a real distributed run: the model's own class
behind the DistributedDataParallel wrapper, helpers fed prepared and plain batches, batch
objects of a collate function of the script's own, plain tensors a model places itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT

pytestmark = pytest.mark.slow

RUNS = {  # run name -> (fixture, command line)
    "model_class_name_unwrapped": ("model_class_name_unwrapped", []),
    "trainer_model_class_name": ("trainer_model_class_name", []),
    "no_cuda_given": ("cpu_flag_no_cuda", ["--no-cuda"]),
    "no_cuda_absent": ("cpu_flag_no_cuda", []),
    "device_cpu": ("cpu_flag_device_string", ["--device", "cpu"]),
    "device_cuda": ("cpu_flag_device_string", ["--device", "cuda"]),
    "disable_cuda": ("cpu_flag_disable_cuda_attribute", ["--disable-cuda"]),
    "enable_cuda": ("cpu_flag_disable_cuda_attribute", []),
    "no_gpus": ("cpu_flag_gpu_count", ["--num-gpus", "0"]),
    "one_gpu": ("cpu_flag_gpu_count", ["--num-gpus", "1"]),
    "trainer_cpu": ("cpu_flag_trainer_option", ["--cpu"]),
    "trainer_gpu": ("cpu_flag_trainer_option", []),
    "helper_cpu": ("cpu_flag_device_helper", ["--device", "cpu"]),
    "helper_auto": ("cpu_flag_device_helper", []),
    "batch_helper": ("batch_helper_shared_with_plain_loader", []),
    "step_helper": ("batch_step_helper_checked_by_hand", []),
    "collate_objects": ("collate_object_batches", []),
    "model_tensors": ("model_plain_tensor_attributes", []),
    "trainer_made_model": ("model_tensors_trainer_made_model", []),
}

DRIVER = textwrap.dedent("""\
    import json, os, runpy, sys
    import runtime

    made = []  # the cpu= of each Accelerator the current script makes
    plain_init = runtime.Accelerator.__init__

    def recording_init(self, *args, **kwargs):
        made.append(bool(kwargs.get("cpu", False)))
        plain_init(self, *args, **kwargs)

    runtime.Accelerator.__init__ = recording_init
    here = os.path.dirname(os.path.abspath(__file__))
    for name, (script, argv) in json.load(open(os.path.join(here, "runs.json"))).items():
        os.chdir(os.path.join(here, name))
        sys.argv = [script + ".py", *argv]
        made.clear()
        if os.environ["RANK"] == "0":
            print(f"=== {name}", flush=True)
        runpy.run_path(script + ".py", run_name="__main__")
        if os.environ["RANK"] == "0":
            print(f"made cpu={made}", flush=True)
    """)


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("devices")
    for name, (fixture, _argv) in RUNS.items():
        output = (GOLDEN / f"{fixture}.out.py").read_text()
        assert migrate_text((GOLDEN / f"{fixture}.in.py").read_text())[0] == output
        (folder / name).mkdir()
        (folder / name / f"{fixture}.py").write_text(output)
    (folder / "runs.json").write_text(json.dumps(RUNS))
    (folder / "driver.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "driver.py"]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    parts = done.stdout.split("=== ")
    return folder, {name: next(p for p in parts if p.startswith(name + "\n")) for name in RUNS}


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


@pytest.mark.parametrize(
    ("run", "cpu"),
    [
        ("no_cuda_given", True), ("no_cuda_absent", False),
        ("device_cpu", True), ("device_cuda", False),
        ("disable_cuda", True), ("enable_cuda", False),
        ("no_gpus", True), ("one_gpu", False),
        ("trainer_cpu", True), ("trainer_gpu", False),
        ("helper_cpu", True), ("helper_auto", False),
    ],
)  # fmt: skip
def test_a_cpu_request_on_the_command_line_reaches_the_accelerator(launched, run, cpu):
    _, printed = launched
    out = printed[run]
    assert f"made cpu={[cpu]}" in out, out
    assert "epoch 1" in out or "final loss" in out  # and it trained, on both processes


def test_helpers_fed_prepared_and_plain_batches_place_both(launched):
    _, printed = launched
    batch = printed["batch_helper"]
    assert "sanity 0.0" in batch and "report 2 True" in batch, batch  # plain loader: 16/8
    step = printed["step_helper"]
    # 48 samples in batches of 12 on 2 processes: 2 steps each, after the hand-made one
    assert "smoke test True" in step and "epoch 1: 2 steps" in step, step


def test_objects_of_a_collate_of_its_own_and_model_tensors_train(launched):
    _, printed = launched
    assert "epoch 1 loss" in printed["collate_objects"]
    assert "on cpu" in printed["collate_objects"]
    assert "epoch 1 loss" in printed["model_tensors"]
    assert "epoch 1 kernel on cpu" in printed["trainer_made_model"]
