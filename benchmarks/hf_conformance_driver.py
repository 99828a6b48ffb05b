"""Runs the tests of one HF Accelerate test script inside each process (see hf_conformance.py).

Copied next to the script under test in a temporary folder and started there by torchrun (or
plainly, for scripts that launch their own processes). It imports the script as a module,
runs the plan's setup, then each test from `--from-test` on, and appends one JSON line per test
to `<results>/rank<R>.jsonl`. After each test the processes wait for each other's results
(through those files, not the process group) and go on when they all passed; a failure
ends this launch (some process may be stuck in a collective, or the failed test may have
left the state half-built) and the next tests run in a fresh one, except in plans whose
tests are independent (`continue_after_failure`), where processes that all failed go on.
A watchdog turns a hang into a recorded timeout.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path


def _stand_in(package: str) -> types.ModuleType:
    """An empty module for an optional package the script imports at its top; only the
    tests that use it fail (with ModuleNotFoundError)."""
    module = types.ModuleType(package)

    def missing(name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise ModuleNotFoundError(f"{package} is not installed (needed for {package}.{name})")

        return unavailable

    module.__getattr__ = missing
    return module


def import_script(name: str, stand_ins: list[str]):
    absent = [package for package in stand_ins if importlib.util.find_spec(package) is None]
    sys.modules.update({package: _stand_in(package) for package in absent})
    try:
        return importlib.import_module(name)
    finally:
        for package in absent:  # library checks (find_spec) must still see them absent
            sys.modules.pop(package, None)


def _record(results: Path, entry: dict) -> None:
    rank = os.environ.get("RANK", "0")
    with open(results / f"rank{rank}.jsonl", "a") as handle:
        handle.write(json.dumps(entry) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _error_text(error: BaseException) -> str:
    lines = traceback.format_exception_only(type(error), error)
    return "".join(lines).strip()[-1500:]


def _fail_and_leave(results: Path, entry: dict) -> None:
    _record(results, entry)
    _leave()


def _leave() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)  # skip exit hooks: a peer may be stuck in a collective


def _everyone_agrees(results: Path, index: int, limit: float, failures_too: bool) -> bool:
    """Waits for every process's result of test `index`: True when all passed (or, with
    `failures_too`, all failed)."""
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        outcomes = []
        for rank in range(ranks):
            path = results / f"rank{rank}.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            found = [json.loads(line) for line in lines if json.loads(line)["index"] == index]
            outcomes.append(found[0]["ok"] if found else None)
        if None not in outcomes:
            return set(outcomes) == {True} or (failures_too and set(outcomes) == {False})
        time.sleep(0.05)
    return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--module", required=True)
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--from-test", type=int, default=0)
    parser.add_argument("--results", required=True, type=Path)
    args = parser.parse_args()
    plan = json.loads(args.plan.read_text())
    namespace: dict = {}
    try:
        namespace["m"] = import_script(args.module, plan["stand_ins"])
        exec(plan["setup"], namespace)  # noqa: S102 - the plan is ours
    except BaseException as error:  # noqa: BLE001 - reported, not handled
        traceback.print_exc()
        _fail_and_leave(args.results, {"index": -1, "ok": False, "error": _error_text(error)})
    for index, test in enumerate(plan["tests"]):
        if index < args.from_test:
            continue
        limit = test.get("timeout", plan["timeout"])
        watchdog = threading.Timer(
            limit,
            _fail_and_leave,
            (args.results, {"index": index, "ok": False, "error": f"no result in {limit} s"}),
        )
        watchdog.daemon = True
        watchdog.start()
        try:
            exec(test["code"], namespace)  # noqa: S102 - the plan is ours
            entry = {"index": index, "ok": True}
        except BaseException as error:  # noqa: BLE001 - the test's failure is the result
            traceback.print_exc()
            entry = {"index": index, "ok": False, "error": _error_text(error)}
        watchdog.cancel()
        _record(args.results, entry)
        if not _everyone_agrees(args.results, index, limit, plan["continue_after_failure"]):
            _leave()
    exec(plan["teardown"], namespace)  # noqa: S102 - the plan is ours


if __name__ == "__main__":
    main()
