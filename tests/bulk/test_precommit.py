"""The hooks of .pre-commit-hooks.yaml, run by pre-commit for real in a fresh git repository.

pre-commit cannot reach the network here, so the hooks are installed as a `repo: local` with
`language: system` (the `migrate` of this environment on PATH) instead of `language: python`,
which would pip-install this checkout into a new virtualenv. Everything else (id, entry,
types_or, require_serial) is read from this checkout's .pre-commit-hooks.yaml, so the test
exercises the published hook definitions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bulk_support import REPO, TRAIN_SCRIPT

yaml = pytest.importorskip("yaml")
pytest.importorskip("pre_commit")
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _env(home: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # where this environment's `migrate` lives
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PRE_COMMIT_HOME": str(home / ".pre-commit-home"),
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "PYTHONPATH": str(REPO),
    }  # fmt: skip


def _git(repo: Path, env, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _pre_commit(repo: Path, env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def repo(tmp_path):
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert {hook["id"] for hook in hooks} == {"migrate-check", "migrate"}
    for hook in hooks:
        hook["language"] = "system"  # offline: use the installed `migrate`
    root = tmp_path / "project"
    root.mkdir()
    env = _env(tmp_path)
    _git(root, env, "init", "-q")
    config = {"repos": [{"repo": "local", "hooks": hooks}]}
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (root / "README.md").write_text("a project\n")
    (root / "train.py").write_text(TRAIN_SCRIPT)
    (root / "nb.ipynb").write_text(
        '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    )
    _git(root, env, "add", ".")
    return root, env


def test_published_hooks_declare_what_pre_commit_needs():
    hooks = {
        hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    }
    assert hooks["migrate-check"]["entry"] == "migrate --check --force-exclude"
    assert hooks["migrate"]["entry"] == "migrate --write --force-exclude"
    for hook in hooks.values():
        assert hook["types_or"] == ["python", "jupyter"] and hook["require_serial"] is True


def test_check_hook_fails_on_an_unmigrated_script_and_passes_after_write(repo):
    root, env = repo
    done = _pre_commit(root, env, "run", "migrate-check", "--all-files")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "would migrate train.py" in done.stdout
    written = _pre_commit(root, env, "run", "migrate", "--all-files")
    assert written.returncode == 1  # pre-commit fails a hook that modified files
    assert "accelerator.backward(loss)" in (root / "train.py").read_text()
    _git(root, env, "add", ".")
    done = _pre_commit(root, env, "run", "migrate-check", "--all-files")
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_hook_with_no_python_files_passes(repo):
    root, env = repo
    done = _pre_commit(root, env, "run", "migrate-check", "--files", "README.md")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no files to check" in done.stdout.lower()


def test_the_hook_checks_notebooks(repo):
    root, env = repo
    done = _pre_commit(root, env, "run", "migrate-check", "--verbose", "--files", "nb.ipynb")
    assert done.returncode == 0, done.stdout + done.stderr  # no code cells: nothing to do
    assert "1 file scanned" in done.stdout
    (root / "nb.ipynb").write_text(_notebook(TRAIN_SCRIPT))
    done = _pre_commit(root, env, "run", "migrate-check", "--files", "nb.ipynb")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "would migrate nb.ipynb" in done.stdout


def _notebook(code: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
    cell["source"] = code.splitlines(keepends=True)
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_force_exclude_keeps_excluded_files_out_of_the_hook(repo):
    root, env = repo
    (root / "pyproject.toml").write_text('[tool.migrate]\nextend-exclude = ["train.py"]\n')
    done = _pre_commit(root, env, "run", "migrate-check", "--files", "train.py")
    assert done.returncode == 0, done.stdout + done.stderr
