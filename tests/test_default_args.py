"""The default command read without typer (migrator/default_args.py) gives exactly the request
the typer app gives, and leaves everything else to the app."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.main import get_command
from typer.testing import CliRunner

from migrator import default_args
from migrator.app import app
from migrator.default_args import read_default_args
from tests.fixtures import GOLDEN

TRAINING = (GOLDEN / "seed002_mnist_plain.in.py").read_text()
OPTIONS = [*default_args.FLAGS, *default_args.VALUES]
VALUES = ["runtime", "accelerate", "json", "text", "bogus", "0", "3", "+4", " 2", "MIG00,MIG002"]
TOKENS = [*OPTIONS, *VALUES, "train.py", "src/", "-", "--", "", "fix", "rules", "--nope", "-qj2"]


def typer_request(argv: list[str], monkeypatch):
    """The request the typer app hands to the work, or None when it refuses the arguments."""
    seen = []

    def capture(request):
        seen.append(request)
        return 0

    monkeypatch.setattr(default_args, "run_request", capture)
    done = CliRunner().invoke(app, argv)
    return seen[0] if seen else None, done


@pytest.mark.parametrize(
    "argv",
    [
        ["--check", "--force-exclude", "a.py", "b.py"],  # the pre-commit hook
        ["--write", "--force-exclude", "a.py"],
        ["a.py"],
        ["--diff", "src/", "--target", "accelerate"],
        ["--target=accelerate", "--select", "MIG00", "--ignore=MIG002", "a.py"],
        ["--exclude", "legacy/,gen/", "--exclude", "old/", "--extend-exclude", "x/", "."],
        ["-q", "-j", "2", "--jobs=3", "--no-cache", "--cache-dir", "/tmp/c", "a.py"],
        ["--format", "json", "--check", "a.py"],
        ["-", "--stdin-filename", "train.py"],
        ["fix", "--check", "a.py"],
        ["--check", "--", "--odd-name.py", "-"],
        ["a.py", "--select", "--check"],  # click takes the next token as the value, whatever it is
    ],
)
def test_plain_invocations_are_read_as_typer_reads_them(argv, monkeypatch):
    fast = read_default_args(argv)
    assert fast is not None
    typed, done = typer_request(argv, monkeypatch)
    assert done.exit_code == 0, done.output
    assert fast == typed


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--help"],
        ["-h", "a.py"],
        ["--version"],
        ["rules"],
        ["verify", "train.py"],
        ["launch", "train.py"],
        ["--check", "--write", "a.py"],  # typer's "mutually exclusive" error
        ["--target", "Runtime", "a.py"],
        ["--format", "yaml", "a.py"],
        ["-j", "0", "a.py"],
        ["-j", "+4", "a.py"],
        ["-qj2", "a.py"],
        ["-j=2", "a.py"],
        ["--check=yes", "a.py"],
        ["--nope", "a.py"],
        ["a.py", "--target"],  # a value missing
    ],
)
def test_everything_else_goes_to_typer(argv):
    assert read_default_args(argv) is None


def test_shell_completion_goes_to_typer(monkeypatch):
    monkeypatch.setenv("_MIGRATE_COMPLETE", "bash_complete")
    assert read_default_args(["--check", "a.py"]) is None


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.one_of(st.sampled_from(TOKENS), st.sampled_from(OPTIONS).map(lambda o: o + "=3")),
        max_size=7,
    )
)
def test_any_arguments_read_without_typer_are_read_as_typer_reads_them(argv):
    fast = read_default_args(argv)
    if fast is None:
        return
    with pytest.MonkeyPatch.context() as monkeypatch:
        typed, done = typer_request(argv, monkeypatch)
    assert done.exit_code == 0, (argv, done.output)
    assert fast == typed, argv


def test_the_option_tables_are_the_typer_commands_options():
    command = get_command(app).commands["fix"]
    declared = {}
    for parameter in command.params:
        for option in [*parameter.opts, *parameter.secondary_opts]:
            if option.startswith("-"):
                declared[option] = (parameter.name, parameter.is_flag, parameter.multiple)
    ours = {option: (name, True, False) for option, name in default_args.FLAGS.items()}
    ours.update(
        (option, (name, False, name in default_args.REPEATABLE))
        for option, name in default_args.VALUES.items()
    )
    assert ours == declared


def _probe(*args: str, cwd) -> tuple[int, list[str]]:
    code = (
        "import sys\n"
        "from migrator.cli import main\n"
        f"sys.argv = ['migrate', *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    code = done.code\n"
        "print(code, 'typer' in sys.modules, 'torch' in sys.modules)\n"
    )
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )
    exit_code, typer, torch = done.stdout.splitlines()[-1].split()
    return int(exit_code), [
        name for name, flag in (("typer", typer), ("torch", torch)) if flag == "True"
    ]


def test_the_hooks_run_does_not_import_typer(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nprint(torch.ones(1))\n")
    assert _probe("--check", "--force-exclude", "train.py", cwd=tmp_path) == (0, [])


def test_help_still_comes_from_typer(tmp_path):
    assert _probe("--check", "--help", cwd=tmp_path) == (0, ["typer"])


def _entry(code: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe buffers
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )


def test_the_entry_exits_with_mains_code_and_all_its_output(tmp_path):
    (tmp_path / "train.py").write_text(TRAINING)
    done = _entry(
        "import sys\nfrom migrator.cli import run\n"
        "sys.argv = ['migrate', 'nope.py', 'train.py']\nrun()\n",
        tmp_path,
    )
    assert done.returncode == 2  # nope.py does not exist
    assert done.stdout.startswith("--- train.py\n+++ train.py\n")
    assert done.stdout.endswith(TRAINING.splitlines(keepends=True)[-1])
    assert done.stderr.startswith("nope.py: error: no such file or directory\n")


def test_the_entry_leaves_registered_exit_work_to_the_interpreter(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nprint(torch.ones(1))\n")
    done = _entry(
        "import atexit, sys\nfrom migrator.cli import run\n"
        "atexit.register(print, 'exit work done')\n"
        "sys.argv = ['migrate', '--check', 'train.py']\nrun()\n",
        tmp_path,
    )
    assert done.returncode == 0
    assert done.stdout == "exit work done\n"
