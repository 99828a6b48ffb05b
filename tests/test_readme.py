"""The README is the contract with a new user: its commands and its diff excerpt stay true."""

import re
import subprocess
import sys

from tests.fixtures import ROOT

README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command_verbatim():
    commands = re.findall(r"^(python3 -m venv .*)$", README, re.MULTILINE)
    assert len(commands) == 2
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_readme_diff_excerpt_is_real_output():
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "examples/train.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1
    excerpt = README.split("```diff\n", 1)[1].split("```", 1)[0]
    output_lines = done.stdout.splitlines()
    for line in excerpt.splitlines():
        if line.startswith(("+", "-", " ")):
            assert line in output_lines, line
    assert "examples/train.py:71:5: MIG006 (note)" in done.stderr


def test_readme_rule_table_lists_every_rule():
    from migrator.rules import ALL_RULES

    for rule in ALL_RULES:
        assert f"| {rule.code} | {rule.name} |" in README


def test_readme_rule_table_lists_every_finding_code():
    from migrator.rules.catalogue import FINDING_CODES

    for code in FINDING_CODES:
        assert f"| {code} | finding" in README
