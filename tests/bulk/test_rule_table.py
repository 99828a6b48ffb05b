"""The rule table read from the rule modules' source agrees with the rule classes, and no run
imports LibCST or torch: not one the prefilter decides, not one that migrates a training
script."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bulk_support import REPO, TRAIN_SCRIPT

from migrator import rule_table
from migrator.rules import ALL_RULES
from migrator.rules.catalogue import RULE_CODES


def test_static_table_equals_the_rule_classes():
    static = rule_table.read_statically()
    assert static == {rule.code: tuple(rule.triggers) for rule in ALL_RULES}
    assert set(rule_table.rule_codes()) == set(RULE_CODES)


def test_a_rule_without_its_own_triggers_inherits_the_base_default(tmp_path):
    (tmp_path / "base.py").write_text("class Rule:\n    triggers: tuple = ('backward',)\n")
    (tmp_path / "mig050_new.py").write_text(
        "from base import Rule\n\nclass New(Rule):\n    code = 'MIG050'\n"
    )
    (tmp_path / "mig051_ddp.py").write_text(
        "class Ddp(Rule):\n    code = 'MIG051'\n    triggers = ('DistributedDataParallel',)\n"
    )
    assert rule_table.read_statically(tmp_path) == {
        "MIG050": ("backward",),
        "MIG051": ("DistributedDataParallel",),
    }


def test_anything_unreadable_falls_back_to_importing(tmp_path):
    (tmp_path / "mig052_dynamic.py").write_text(
        "class Dyn(Rule):\n    code = 'MIG052'\n    triggers = tuple(['a'])\n"
    )
    assert rule_table.read_statically(tmp_path) is None


_PROBE = """
import json, sys
from migrator.cli import main
sys.argv = ["migrate", "--check", "--no-cache", sys.argv[1]]
try:
    main()
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "libcst": "libcst" in sys.modules, "torch": "torch" in sys.modules}))
"""


def _probe(path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_prefilter_rejected_file_imports_neither_libcst_nor_torch(tmp_path):
    path = tmp_path / "util.py"
    path.write_text("def add(a, b):\n    return a + b\n")
    assert _probe(path) == {"code": 0, "libcst": False, "torch": False}


def test_training_script_imports_neither_libcst_nor_torch(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN_SCRIPT)
    assert _probe(path) == {"code": 1, "libcst": False, "torch": False}
