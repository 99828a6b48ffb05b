"""[tool.migrate] in the nearest pyproject.toml upwards; command-line flags override it."""

from __future__ import annotations

import json

import pytest
from bulk_support import TRAIN_SCRIPT, run_migrate

from migrator.config import ConfigError, find_pyproject, load_config


def test_nearest_pyproject_with_a_migrate_table_wins(tree):
    root = tree(
        {
            "pyproject.toml": '[tool.migrate]\ntarget = "accelerate"\n',
            "pkg/pyproject.toml": '[project]\nname = "inner"\n',  # no [tool.migrate]: skipped
            "pkg/sub/train.py": TRAIN_SCRIPT,
        }
    )
    assert find_pyproject([str(root / "pkg" / "sub" / "train.py")]) == root / "pyproject.toml"
    assert load_config([str(root / "pkg")]).target == "accelerate"


def test_config_target_is_used_and_the_flag_overrides_it(tree):
    root = tree(
        {"pyproject.toml": '[tool.migrate]\ntarget = "accelerate"\n', "train.py": TRAIN_SCRIPT}
    )
    done = run_migrate("--diff", "train.py", cwd=root)
    assert b"+from accelerate import Accelerator" in done.stdout
    done = run_migrate("--diff", "--target", "runtime", "train.py", cwd=root)
    assert b"+from runtime import Accelerator" in done.stdout


def test_config_select_and_ignore(tree):
    root = tree(
        {"pyproject.toml": '[tool.migrate]\nignore = ["MIG005"]\n', "train.py": TRAIN_SCRIPT}
    )
    done = run_migrate("--diff", "train.py", cwd=root)
    assert b"+            accelerator.backward(loss)" not in done.stdout
    done = run_migrate("--diff", "--ignore", "MIG002", "train.py", cwd=root)
    assert b"+            accelerator.backward(loss)" in done.stdout


def test_config_extend_exclude_is_relative_to_the_pyproject(tree):
    root = tree(
        {
            "pyproject.toml": '[tool.migrate]\nextend-exclude = ["legacy/"]\n',
            "legacy/train.py": TRAIN_SCRIPT,
            "src/train.py": TRAIN_SCRIPT,
        }
    )
    done = run_migrate("--check", "--format", "json", ".", cwd=root)
    paths = [f["path"] for f in json.loads(done.stdout)["files"]]
    assert paths == ["src/train.py"]


def test_unknown_key_is_an_error_naming_the_file(tree):
    root = tree({"pyproject.toml": "[tool.migrate]\ntraget = 'runtime'\n", "a.py": "x = 1\n"})
    with pytest.raises(ConfigError, match="traget"):
        load_config([str(root)])
    done = run_migrate("--check", "a.py", cwd=root)
    assert done.returncode == 2
    assert b"pyproject.toml: error: unknown key(s) in [tool.migrate]: traget" in done.stderr


def test_unparsable_pyproject_is_exit_2(tree):
    root = tree({"pyproject.toml": "[tool.migrate\n", "a.py": "x = 1\n"})
    done = run_migrate("--check", "a.py", cwd=root)
    assert done.returncode == 2 and b"pyproject.toml: error:" in done.stderr


def test_bad_values_are_errors(tree):
    root = tree({"pyproject.toml": '[tool.migrate]\ntarget = "tpu"\njobs = 0\n'})
    with pytest.raises(ConfigError, match="target must be one of"):
        load_config([str(root)])
