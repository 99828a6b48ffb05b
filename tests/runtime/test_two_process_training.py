"""2-process training against the 1-process original, accumulation, and checkpoint resume."""

import pytest
import torch
from conftest import check, read_json, run_migrate_launch, run_python, run_torchrun

pytestmark = pytest.mark.slow


def assert_same_run(expected: dict, actual: dict, atol: float = 1e-6) -> None:
    assert len(actual["losses"]) == len(expected["losses"])
    torch.testing.assert_close(
        torch.tensor(actual["losses"]), torch.tensor(expected["losses"]), rtol=0, atol=atol
    )
    for got, want in zip(actual["weights"], expected["weights"]):
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=atol)
    assert actual["lr"] == pytest.approx(expected["lr"])


@pytest.mark.parametrize("accum", [1, 2])
def test_two_processes_with_split_batches_equal_the_original(tmp_path, accum):
    check(
        run_python("train_plain.py", "--out", str(tmp_path / "plain.json"), "--accum", str(accum))
    )
    check(
        run_torchrun(
            "train_migrated.py",
            "--out",
            str(tmp_path / "migrated.json"),
            "--accum",
            str(accum),
            env={"MIGRATE_SPLIT_BATCHES": "1"},
        )
    )
    assert_same_run(read_json(tmp_path / "plain.json"), read_json(tmp_path / "migrated.json"))


def test_migrated_script_under_plain_python_equals_the_original(tmp_path):
    check(run_python("train_plain.py", "--out", str(tmp_path / "plain.json")))
    check(run_python("train_migrated.py", "--out", str(tmp_path / "migrated.json")))
    assert_same_run(read_json(tmp_path / "plain.json"), read_json(tmp_path / "migrated.json"))


def test_save_state_then_load_state_continues_like_an_uninterrupted_run(tmp_path):
    common = ["--dropout", "0.3", "--samples", "128", "--epochs", "2"]
    check(run_migrate_launch("train_migrated.py", *common, "--out", str(tmp_path / "whole.json")))
    checkpoint = str(tmp_path / "checkpoint")
    check(
        run_migrate_launch(
            "train_migrated.py",
            *common,
            "--out",
            str(tmp_path / "first.json"),
            "--save-at",
            "6",
            "--checkpoint",
            checkpoint,
        )
    )
    check(
        run_migrate_launch(
            "train_migrated.py",
            *common,
            "--out",
            str(tmp_path / "rest.json"),
            "--resume",
            checkpoint,
        )
    )
    whole, first, rest = (read_json(tmp_path / f"{n}.json") for n in ("whole", "first", "rest"))
    assert len(first["losses"]) == 6  # stopped in the middle of the second epoch
    assert first["losses"] + rest["losses"] == whole["losses"]
    assert rest["weights"] == whole["weights"]


def test_seed_shaped_script_gives_the_same_output_on_one_and_two_processes():
    single = check(run_python("seed_shaped.py"))
    double = check(run_torchrun("seed_shaped.py", env={"MIGRATE_SPLIT_BATCHES": "1"}))
    lines = single.stdout.splitlines()
    assert len(lines) == 4 and all("seen 70 " in line for line in lines[:3])
    assert double.stdout.splitlines() == lines
