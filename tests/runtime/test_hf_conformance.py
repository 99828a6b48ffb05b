"""HF Accelerate's own distributed test scripts, their imports pointed at runtime.

benchmarks/hf_conformance.py (the core used here) copies the installed
accelerate/test_utils/scripts into a temporary folder, rewrites only their import lines and
calls each test on 2 CPU processes. Every test passes, fails with its documented by-design
error, or fails for the reason HF's own test fails on CPU (the benchmark runs the HF side
too and shows it: `python benchmarks/hf_conformance.py`).
"""

import ast
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import hf_conformance
from hf_conformance_plans import PLANS


def hf_script(name: str) -> str:
    return (hf_conformance.scripts_folder(None) / PLANS[name].path).read_text()


def test_only_import_lines_change_and_lines_keep_their_numbers():
    original = hf_script("test_script")
    rewritten = hf_conformance.point_imports_at_runtime(original)
    before, after = original.splitlines(), rewritten.splitlines()
    assert len(before) == len(after)
    changed = [number for number, (a, b) in enumerate(zip(before, after)) if a != b]
    imports = {
        line
        for node in ast.parse(original).body
        if isinstance(node, ast.ImportFrom) and node.module.startswith("accelerate")
        for line in range(node.lineno - 1, node.end_lineno)
    }
    assert changed and set(changed) <= imports
    assert "accelerate" not in "".join(after[i] for i in changed).replace("hf_conformance", "")


def test_api_names_come_from_runtime_and_test_helpers_stay_hf():
    rewritten = hf_conformance.point_imports_at_runtime(hf_script("test_script"))
    assert "from runtime.data_loader import SeedableRandomSampler, prepare_data_loader" in rewritten
    assert "from runtime.utils import DataLoaderConfiguration, DistributedType" in rewritten
    helpers = "from hf_conformance_support import RegressionDataset, RegressionModel"
    assert helpers in rewritten
    assert "from hf_conformance_support import is_bf16_available" in rewritten


@pytest.mark.slow
@pytest.mark.parametrize("script", list(PLANS))
def test_hf_test_script_passes_on_runtime(script, tmp_path):
    plan = PLANS[script]
    scripts = hf_conformance.scripts_folder(None)
    outcomes = hf_conformance.run_plan(
        plan, hf_conformance.prepare_workdir(tmp_path, "runtime", plan, scripts)
    )
    unexpected = {}
    for test, outcome in zip(plan.tests, outcomes, strict=True):
        allowed = {"pass"}
        allowed |= {"by design"} if test.by_design else set()
        allowed |= {"fails as HF"} if test.fails_on_cpu else set()
        if hf_conformance.verdict(test, outcome) not in allowed:
            unexpected[test.label] = outcome.error
    assert not unexpected, unexpected
