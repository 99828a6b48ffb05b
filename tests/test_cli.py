"""The `migrate` command as a user runs it: exit codes, stdout vs stderr, files touched or not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import GOLDEN, NOOP

TRAINING = (GOLDEN / "seed002_mnist_plain.in.py").read_text()
TRAINING_OUT = (GOLDEN / "seed002_mnist_plain.out.py").read_text()
NOOP_SOURCE = (NOOP / "inference_only.py").read_text()


def migrate(*args: str, stdin: str | None = None, cwd: Path | None = None):
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAINING)
    return path


def test_default_mode_prints_diff_on_stdout_and_exits_one(script):
    done = migrate(str(script))
    assert done.returncode == 1
    assert done.stdout.startswith(f"--- {script}\n+++ {script}\n")
    assert "+    accelerator.backward(loss)" in done.stdout
    assert "-    loss.backward()" in done.stdout
    assert "would migrate 1" in done.stderr
    assert script.read_text() == TRAINING


def test_diff_is_plain_text_when_piped(script):
    done = migrate("--diff", str(script))
    assert "\x1b[" not in done.stdout


def test_check_writes_nothing_and_lists_the_file_on_stderr(script):
    done = migrate("--check", str(script))
    assert done.returncode == 1
    assert done.stdout == ""
    assert f"would migrate {script}" in done.stderr
    assert script.read_text() == TRAINING


def test_write_rewrites_in_place_then_check_passes(script):
    script.chmod(0o754)
    done = migrate("--write", str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert script.read_text() == TRAINING_OUT
    assert script.stat().st_mode & 0o777 == 0o754
    assert not [p for p in script.parent.iterdir() if p.name != "train.py"]
    again = migrate("--check", str(script))
    assert again.returncode == 0


def test_stdin_writes_the_migrated_source_to_stdout():
    done = migrate("-", stdin=TRAINING)
    assert done.returncode == 0
    assert done.stdout == TRAINING_OUT


def test_stdin_with_diff_prints_a_diff_and_exits_one():
    done = migrate("--diff", "-", stdin=TRAINING)
    assert done.returncode == 1
    assert "+    accelerator.backward(loss)" in done.stdout


def test_stdin_with_check_prints_nothing_and_exits_one():
    done = migrate("--check", "-", stdin=TRAINING)
    assert done.returncode == 1
    assert done.stdout == ""


def test_stdin_unchanged_source_is_echoed_byte_for_byte():
    done = migrate("-", stdin=NOOP_SOURCE)
    assert done.returncode == 0
    assert done.stdout == NOOP_SOURCE


@pytest.mark.parametrize("mode", ["--diff", "--check", "--write"])
def test_noop_file_exits_zero_with_clean_stdout_in_every_mode(tmp_path, mode):
    path = tmp_path / "infer.py"
    path.write_text(NOOP_SOURCE)
    done = migrate(mode, str(path))
    assert done.returncode == 0
    assert done.stdout == ""
    assert path.read_text() == NOOP_SOURCE


def test_syntax_error_is_one_line_exit_two_and_other_files_still_processed(tmp_path, script):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nfor x in loader\n    loss.backward()\n")
    done = migrate("--write", str(broken), str(script))
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert errors == [f"{broken}: error: " + errors[0].split(": error: ", 1)[1]]
    assert "cannot parse" in errors[0]
    assert broken.read_text() == "import torch\nfor x in loader\n    loss.backward()\n"
    assert script.read_text() == TRAINING_OUT


def test_undecodable_bytes_are_an_error_for_that_file(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# caf\xe9\nloss.backward()\n")
    done = migrate("--check", str(path))
    assert done.returncode == 2
    assert f"{path}: error: cannot decode" in done.stderr


def test_syntax_error_on_stdin_exits_two_and_prints_nothing():
    done = migrate("-", stdin="for x in y\n    loss.backward()\n")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "<stdin>: error: cannot parse" in done.stderr


def test_missing_path_is_an_error(tmp_path):
    done = migrate("--check", str(tmp_path / "nope.py"))
    assert done.returncode == 2
    assert "no such file" in done.stderr


def test_directory_without_python_files_exits_zero(tmp_path):
    done = migrate("--check", str(tmp_path))
    assert done.returncode == 0


def test_findings_are_reported_with_position_and_exit_one(tmp_path):
    path = tmp_path / "gan.py"
    path.write_text((NOOP / "gan_optimizer_from_factory.py").read_text())
    done = migrate("--check", str(path))
    assert done.returncode == 1
    assert f"{path}:17:1: MIG906 several optimizers" in done.stderr
    assert done.stdout == ""


def test_target_accelerate_imports_hf_accelerate(script):
    done = migrate("--target", "accelerate", "-", stdin=TRAINING)
    assert "from accelerate import Accelerator\n" in done.stdout
    assert "runtime" not in done.stdout
    assert done.stdout.replace("from accelerate import", "from runtime import") == TRAINING_OUT


def test_select_backward_only_keeps_placement_and_still_creates_accelerator():
    done = migrate("--select", "MIG005", "-", stdin=TRAINING)
    assert done.returncode == 0
    assert "accelerator.backward(loss)" in done.stdout
    assert "accelerator = Accelerator()" in done.stdout
    assert ".to(device)" in done.stdout
    assert "prepare(" not in done.stdout


def test_ignore_prefix_skips_rules():
    done = migrate("--ignore", "MIG005", "-", stdin=TRAINING)
    assert "loss.backward()" in done.stdout
    assert "accelerator.prepare(" in done.stdout


def test_unknown_rule_code_is_a_usage_error():
    done = migrate("--select", "XYZ1", "-", stdin=TRAINING)
    assert done.returncode == 2
    assert "unknown rule code" in done.stderr


def test_mode_flags_are_mutually_exclusive(script):
    done = migrate("--check", "--write", str(script))
    assert done.returncode == 2


def test_rules_lists_every_rule_code():
    done = migrate("rules")
    assert done.returncode == 0
    for code in ("MIG001", "MIG002", "MIG003", "MIG004", "MIG005", "MIG006"):
        assert code in done.stdout


def test_cli_import_does_not_import_torch():
    code = "import sys, migrator.cli; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "False"


def test_migrating_a_file_does_not_import_torch(script):
    code = (
        f"import sys; from migrator.cli import main; sys.argv=['migrate','--check',{str(script)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip().splitlines()[-1] == "False"
