"""A helper class of a program that needs the accelerator (a loss scaler whose `__call__` runs
the backward and the optimizer step, `migrator/program_classes.py`): it gets the accelerator at
construction. The reviewed golden is fixtures/programs/loss_scaler_class (checked by
tests/test_programs.py with the other program fixtures); here: the parts on their own, the
refusals, and the migrated program trained, resumed from its checkpoint and verified."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrator.engine import Options
from migrator.program.classes import reach_in_classes
from migrator.program.files import ProgramError
from migrator.program.unit import migrate_program

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "programs" / "loss_scaler_class"


def _python_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    return env


# -- the class edit on its own ---------------------------------------------------------------
def test_a_class_without_init_gets_one_that_stores_the_accelerator():
    text = (
        "class Scaler:\n"
        "    key = 'amp'\n\n"
        "    def __call__(self, loss):\n"
        "        accelerator.backward(loss)\n"
    )
    edited, classes = reach_in_classes(text, Path("misc.py"), set())
    assert classes == {"Scaler"}
    assert edited == (
        "class Scaler:\n"
        "    key = 'amp'\n\n"
        "    def __init__(self, *, accelerator):\n"
        "        self.accelerator = accelerator\n\n"
        "    def __call__(self, loss):\n"
        "        self.accelerator.backward(loss)\n"
    )


def test_an_existing_init_takes_the_keyword_after_its_docstring():
    text = (
        "class Scaler:\n"
        "    def __init__(this, clip=None):\n"
        '        """Keep the clip value."""\n'
        "        this.clip = clip\n\n"
        "    def __call__(this, loss):\n"
        "        return accelerator.clip_grad_norm_(loss, this.clip)\n"
    )
    with pytest.raises(ProgramError, match="__init__ cannot take it"):
        reach_in_classes(text, Path("misc.py"), set())  # `this` is no `self`: by hand
    text = text.replace("this", "self")
    edited, _ = reach_in_classes(text, Path("misc.py"), set())
    assert edited.splitlines()[1:5] == [
        "    def __init__(self, clip=None, *, accelerator):",
        '        """Keep the clip value."""',
        "        self.accelerator = accelerator",
        "        self.clip = clip",
    ]
    assert "return self.accelerator.clip_grad_norm_(loss, self.clip)" in edited


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (
            "class S:\n    @staticmethod\n    def step(loss):\n        accelerator.backward(loss)\n",
            "has no `self`",
        ),
        (
            "class S(Base):\n    def __call__(self, loss):\n        accelerator.backward(loss)\n",
            "has a base class but no __init__",
        ),
        (
            "class S:\n    device = accelerator.device\n",
            "in the body of",
        ),
        (
            (
                "class S:\n    def __call__(self, loss):\n        self.accelerator = 1\n"
                "        accelerator.backward(loss)\n"
            ),
            "already has an `accelerator` attribute",
        ),
    ],
    ids=["staticmethod", "base-without-init", "class-body", "attribute-taken"],
)
def test_a_class_the_accelerator_cannot_reach_safely_is_refused(text, cause):
    with pytest.raises(ProgramError, match=cause):
        reach_in_classes(text, Path("misc.py"), set())


def test_a_class_another_class_derives_from_is_refused():
    text = "class S:\n    def __call__(self, loss):\n        accelerator.backward(loss)\n"
    with pytest.raises(ProgramError, match="another class derives from"):
        reach_in_classes(text, Path("misc.py"), {"S"})


# -- in a program ----------------------------------------------------------------------------
def test_a_scaler_handed_over_in_a_container_is_not_followed(tmp_path):
    """The instance travels in a dict: its `__call__` is not resolved, so the step is hidden
    and the program stays as it is, with MIG910 in the entry (never half a migration)."""
    shutil.copytree(FIXTURE / "in", tmp_path, dirs_exist_ok=True)
    main = (tmp_path / "main.py").read_text()
    engine = (tmp_path / "engine.py").read_text()
    (tmp_path / "main.py").write_text(
        main.replace("epoch, loss_scaler,", "epoch, {'scaler': loss_scaler},")
    )
    (tmp_path / "engine.py").write_text(
        engine.replace("norm = loss_scaler(", "norm = loss_scaler['scaler'](")
    )
    program = migrate_program(tmp_path / "main.py", Options())
    assert not any(result.changed for result in program.results)
    assert [f.code for f in program.results[0].findings] == ["MIG910", "MIG950"]


def test_a_scaler_built_in_two_places_from_two_classes_is_not_followed(tmp_path):
    shutil.copytree(FIXTURE / "in", tmp_path, dirs_exist_ok=True)
    main = (tmp_path / "main.py").read_text()
    (tmp_path / "main.py").write_text(
        main.replace(
            "    loss_scaler = ScalerWithGradNorm()\n",
            "    loss_scaler = ScalerWithGradNorm()\n"
            "    if args.resume:\n        loss_scaler = torch.cuda.amp.GradScaler()\n",
        )
    )
    program = migrate_program(tmp_path / "main.py", Options())
    assert not any(result.changed for result in program.results)


def test_the_scaler_reaches_the_accelerator_of_an_aliased_import(tmp_path):
    """MAE: `from misc import NativeScalerWithGradNormCount as NativeScaler`."""
    shutil.copytree(FIXTURE / "in", tmp_path, dirs_exist_ok=True)
    main = (tmp_path / "main.py").read_text()
    (tmp_path / "main.py").write_text(
        main.replace("from misc import ScalerWithGradNorm", "from misc import ScalerWithGradNorm as Scaler")
        .replace("loss_scaler = ScalerWithGradNorm()", "loss_scaler = Scaler()")
    )  # fmt: skip
    program = migrate_program(tmp_path / "main.py", Options())
    main_out = program.results[0].migrated.decode()
    assert "loss_scaler = Scaler(accelerator=accelerator)" in main_out
    misc_out = program.results[2].migrated.decode()
    assert "self.accelerator.backward(loss, create_graph=create_graph)" in misc_out


# -- the migrated program runs ---------------------------------------------------------------
def test_the_migrated_scaler_program_resumes_from_its_checkpoint(tmp_path):
    """One process: train two epochs, then resume from the checkpoint, whose "scaler" key the
    scaler's state_dict()/load_state_dict() still fill and read."""
    work = tmp_path / "program"
    shutil.copytree(FIXTURE / "out", work)
    run = [sys.executable, "main.py", "--epochs", "2"]
    first = subprocess.run(run, cwd=work, env=_python_env(), capture_output=True, text=True,
                           timeout=300, check=False)  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    import torch

    checkpoint = torch.load(work / "checkpoint.pth")
    assert sorted(checkpoint) == ["epoch", "model", "optimizer", "scaler"]
    assert checkpoint["scaler"] == {}  # no fp16 without CUDA: as the disabled GradScaler gave
    resumed = subprocess.run([*run[:2], "--resume", "checkpoint.pth", "--epochs", "3"], cwd=work,
                             env=_python_env(), capture_output=True, text=True, timeout=300,
                             check=False)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "epoch 2: train" in resumed.stdout and "epoch 0:" not in resumed.stdout


def test_verify_runs_the_scaler_program_on_two_processes_and_finds_it_equivalent(tmp_path):
    """`migrate verify main.py --nproc 2` trains the original and the migrated program (the
    migrated one on two processes) and compares losses and final weights."""
    work = tmp_path / "program"
    shutil.copytree(FIXTURE / "in", work)
    command = [sys.executable, "-m", "migrator", "verify", "main.py", "--nproc", "2",
               "--format", "json"]  # fmt: skip
    done = subprocess.run(
        command, cwd=work, env={**_python_env(), "TMPDIR": str(tmp_path)}, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["verdict"] == "EQUIVALENT"
    assert (work / "misc.py").read_bytes() == (FIXTURE / "in" / "misc.py").read_bytes()
