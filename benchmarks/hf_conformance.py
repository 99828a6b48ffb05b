"""Conformance with HF Accelerate's own distributed test scripts.

Runs the *installed* HF Accelerate's `accelerate/test_utils/scripts/` (test_ops, test_script,
test_sync, test_distributed_data_loop, test_ddp_comm_hook, test_notebook, and the offline
tests of external_deps/test_metrics) on 2 CPU processes (gloo, torchrun on loopback) twice:
as they are, on HF Accelerate, and with only their import lines pointed at `runtime`. The
scripts are copied into a temporary folder at run time and never into this repository.

Each test function of a script is called as the script's `main()` calls it (plans in
hf_conformance_plans.py); a failing test ends its launch and the next tests continue in a
fresh one (setup run again), so one failure cannot hide or poison the others. Prints, per test: passes on HF /
passes on runtime / the documented by-design difference.

Usage: python benchmarks/hf_conformance.py [--scripts test_ops,test_sync] [--side both|hf|runtime]
       [--hf-path DIR] [--json OUT]
`--hf-path DIR` takes HF Accelerate (and its test scripts, for both sides) from DIR, a folder
holding another release: `pip install --no-deps --target DIR accelerate==1.16.0`. Exit code 1 when a test HF passes fails on runtime without
its documented by-design error.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from hf_conformance_plans import PLANS, Plan

HERE = Path(__file__).parent
REPO = HERE.parent
SUPPORT = "hf_conformance_support"
DEFAULT_TIMEOUT_S = 90.0

# accelerate module -> runtime module holding the same public names
RUNTIME_MODULES = {
    "accelerate": "runtime",
    "accelerate.accelerator": "runtime.accelerator",
    "accelerate.state": "runtime.state",
    "accelerate.data_loader": "runtime.data_loader",
    "accelerate.logging": "runtime.logging",
    "accelerate.launchers": "runtime.launch",
    "accelerate.utils": "runtime.utils",
}


@dataclass
class Outcome:
    ok: bool | None  # None: not run
    error: str = ""


def _python_path(*first: str | None) -> str:
    return os.pathsep.join(filter(None, [*first, os.environ.get("PYTHONPATH")]))


def _ask_accelerate(hf_path: str | None, expression: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", f"import accelerate, os; print({expression})"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": _python_path(hf_path)},
    )
    return done.stdout.strip()


def scripts_folder(hf_path: str | None) -> Path:
    """Where the HF Accelerate in use keeps test_utils/scripts (found without importing it)."""
    if hf_path is None:
        package = importlib.util.find_spec("accelerate").submodule_search_locations[0]
    else:
        package = _ask_accelerate(hf_path, "os.path.dirname(accelerate.__file__)")
    return Path(package) / "test_utils" / "scripts"


def accelerate_version(hf_path: str | None) -> str:
    if hf_path is None:
        return importlib.metadata.version("accelerate")
    return _ask_accelerate(hf_path, "accelerate.__version__")


def _runtime_module(module: str) -> str:
    if module in RUNTIME_MODULES:
        return RUNTIME_MODULES[module]
    if module.startswith("accelerate.utils."):
        return "runtime.utils"  # accelerate.utils.operations, .dataclasses, ...
    raise ValueError(f"no runtime counterpart for `{module}`")


def _target(module: str, name: str) -> str:
    """Test helpers and environment predicates stay HF's (hf_conformance_support)."""
    if module.startswith("accelerate.test_utils") or re.fullmatch(r"is_\w+_available", name):
        return SUPPORT
    return _runtime_module(module)


def point_imports_at_runtime(source: str) -> str:
    """`source` with every `from accelerate... import` pointed at runtime; nothing else
    changes, line numbers included (each rewritten import keeps its lines)."""
    lines = source.splitlines(keepends=True)
    for node in reversed(ast.parse(source).body):
        if isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] == "accelerate" for alias in node.names
        ):
            raise ValueError(f"line {node.lineno}: `import accelerate...` is not rewritten")
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accelerate")):
            continue
        by_module: dict[str, list[str]] = {}
        for alias in node.names:
            spelt = alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
            by_module.setdefault(_target(node.module, alias.name), []).append(spelt)
        statement = "; ".join(
            f"from {module} import {', '.join(names)}" for module, names in by_module.items()
        )
        span = node.end_lineno - node.lineno + 1
        lines[node.lineno - 1 : node.end_lineno] = [statement + "\n"] + ["\n"] * (span - 1)
    return "".join(lines)


def _launch(plan: Plan, workdir: Path, hf_path: str | None, start: int, results: Path) -> None:
    driver = [
        "hf_conformance_driver.py",
        "--module",
        Path(plan.path).stem,
        "--plan",
        "plan.json",
        "--from-test",
        str(start),
        "--results",
        str(results),
    ]
    if plan.processes == 1:
        command = [sys.executable, *driver]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={plan.processes}",
            "--",
            *driver,
        ]
    env = dict(os.environ)
    env.pop("WORLD_SIZE", None)
    env.update(OMP_NUM_THREADS="1", ACCELERATE_USE_CPU="1", **plan.env)
    env["PYTHONPATH"] = _python_path(hf_path, str(REPO))
    limit = (len(plan.tests) - start) * DEFAULT_TIMEOUT_S + 120
    with open(workdir / "launches.log", "a") as log:
        log.write(f"\n===== from test {start}: {' '.join(command)}\n")
        log.flush()
        try:
            subprocess.run(
                command, cwd=workdir, env=env, stdout=log, stderr=log, timeout=limit, check=False
            )
        except subprocess.TimeoutExpired:
            log.write(f"===== launch killed after {limit} s\n")


def _read_results(results: Path, processes: int) -> list[dict[int, dict]]:
    ranks = []
    for rank in range(processes):
        path = results / f"rank{rank}.jsonl"
        entries = (
            [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        )
        ranks.append({entry["index"]: entry for entry in entries})
    return ranks


def run_plan(plan: Plan, workdir: Path, hf_path: str | None = None) -> list[Outcome]:
    """Runs every test of `plan` (the script and driver already in `workdir`)."""
    plan_file = {
        "setup": plan.setup,
        "teardown": plan.teardown,
        "timeout": DEFAULT_TIMEOUT_S,
        "stand_ins": plan.stand_ins,
        "continue_after_failure": plan.continue_after_failure,
        "tests": [
            {"code": test.code, **({"timeout": test.timeout} if test.timeout else {})}
            for test in plan.tests
        ],
    }
    (workdir / "plan.json").write_text(json.dumps(plan_file))
    outcomes: list[Outcome] = []
    while len(outcomes) < len(plan.tests):
        start = len(outcomes)
        results = Path(tempfile.mkdtemp(prefix=f"results{start}_", dir=workdir))
        _launch(plan, workdir, hf_path, start, results)
        ranks = _read_results(results, plan.processes)
        setup_failure = next((r[-1]["error"] for r in ranks if -1 in r), None)
        if setup_failure is None and not any(ranks):
            setup_failure = "the launch recorded nothing (see launches.log)"
        if setup_failure is not None:
            failed = Outcome(False, f"setup: {setup_failure}")
            outcomes += [failed] * (len(plan.tests) - start)
            break
        for index in range(start, len(plan.tests)):
            entries = [rank.get(index) for rank in ranks]
            if all(entry is not None and entry["ok"] for entry in entries):
                outcomes.append(Outcome(True))
                continue
            errors = [
                f"rank {rank}: " + (entry["error"] if entry else "no result (killed or hung)")
                for rank, entry in enumerate(entries)
                if not (entry and entry["ok"])
            ]
            # a rank's own error says more than a peer that was stopped because of it
            errors.sort(key=lambda text: "no result" in text)
            outcomes.append(Outcome(False, errors[0]))
            all_failed = all(entry is not None and not entry["ok"] for entry in entries)
            if not (plan.continue_after_failure and all_failed):
                break  # the launch ended here: the next tests run in a fresh one
    return outcomes


def prepare_workdir(root: Path, side: str, plan: Plan, scripts: Path) -> Path:
    workdir = root / side / Path(plan.path).stem
    workdir.mkdir(parents=True)
    source = (scripts / plan.path).read_text()
    if side == "runtime":
        source = point_imports_at_runtime(source)
        shutil.copy(HERE / f"{SUPPORT}.py", workdir)
    (workdir / Path(plan.path).name).write_text(source)
    shutil.copy(HERE / "hf_conformance_driver.py", workdir)
    return workdir


def verdict(test, ours: Outcome) -> str:
    """pass / by design / fails as HF (the test cannot pass on CPU) / FAIL."""
    if ours.ok:
        return "pass"
    if test.by_design and test.by_design[0] in ours.error:
        return "by design"
    if test.fails_on_cpu and test.fails_on_cpu[0] in ours.error:
        return "fails as HF"
    return "FAIL"


def render(report: dict) -> str:
    rows = [("script", "test", "HF", "runtime", "note")]
    for name, entry in report["scripts"].items():
        for test in entry["tests"]:
            hf = {True: "pass", False: "FAIL", None: "-"}[test["hf"]]
            note = {"by design": test["by_design"], "fails as HF": test["fails_on_cpu"]}.get(
                test["verdict"], test["gated"] or ""
            )
            rows.append((name, test["label"], hf, test["verdict"], note))
        for label, why in entry["not_run"]:
            rows.append((name, label, "not run", "not run", why))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4]
        for row in rows
    ]
    lines.insert(1, "-" * (sum(widths) + 8 + 4))
    details = [
        f"  {name} / {test['label']} on {side}: {test[side + '_error'].splitlines()[-1][:300]}"
        for name, entry in report["scripts"].items()
        for test in entry["tests"]
        for side in ("hf", "runtime")
        if test[side + "_error"]
    ]
    return "\n".join(lines + ["", "Failures (last line of the error):", *details])


def conformance(names: list[str], sides: list[str], hf_path: str | None, root: Path) -> dict:
    """Runs the plans named; the report that `render` prints (and --json writes)."""
    scripts = scripts_folder(hf_path)
    report = {"hf_version": accelerate_version(hf_path), "scripts": {}}
    for name in names:
        plan = PLANS[name]
        results = {}
        for side in ("hf", "runtime"):
            if side not in sides:
                results[side] = [Outcome(None)] * len(plan.tests)
                continue
            started = time.monotonic()
            workdir = prepare_workdir(root, side, plan, scripts)
            results[side] = run_plan(plan, workdir, hf_path if side == "hf" else None)
            print(f"{name} on {side}: {time.monotonic() - started:.0f} s", file=sys.stderr)
        tests = []
        for index, test in enumerate(plan.tests):
            hf, ours = results["hf"][index], results["runtime"][index]
            tests.append(
                {
                    "label": test.label,
                    "hf": hf.ok,
                    "runtime": ours.ok,
                    "verdict": verdict(test, ours) if ours.ok is not None else "-",
                    "gated": test.gated,
                    "by_design": test.by_design[1] if test.by_design else None,
                    "fails_on_cpu": test.fails_on_cpu[1] if test.fails_on_cpu else None,
                    "hf_error": hf.error,
                    "runtime_error": ours.error,
                }
            )
        report["scripts"][name] = {"tests": tests, "not_run": plan.not_run}
    return report


def regressions(report: dict) -> list[str]:
    """Tests HF passes that runtime fails without their documented by-design error."""
    return [
        f"{name} / {test['label']}"
        for name, entry in report["scripts"].items()
        for test in entry["tests"]
        if test["hf"]
        and test["runtime"] is not None
        and test["verdict"] not in ("pass", "by design")
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scripts", default=",".join(PLANS), help="comma-separated plan names")
    parser.add_argument("--side", choices=["both", "hf", "runtime"], default="both")
    parser.add_argument("--hf-path", help="a folder holding another HF Accelerate release")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = parser.parse_args()
    names = args.scripts.split(",")
    unknown = [name for name in names if name not in PLANS]
    if unknown:
        parser.error(f"unknown scripts {unknown}; known: {', '.join(PLANS)}")
    sides = ["hf", "runtime"] if args.side == "both" else [args.side]
    root = Path(tempfile.mkdtemp(prefix="hf_conformance_"))
    try:
        report = conformance(names, sides, args.hf_path, root)
    finally:
        if args.keep:
            print(f"launch logs kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"HF Accelerate {report['hf_version']}, 2 CPU processes (gloo)\n")
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=asdict))
    failing = regressions(report)
    if failing:
        print(f"\n{len(failing)} test(s) HF passes fail on runtime: {', '.join(failing)}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
