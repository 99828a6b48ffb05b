"""Bulk output: results in path order whatever the parallelism, stdout clean for diffs and
JSON, the summary on stderr, --quiet, --format json."""

from __future__ import annotations

import json
import re

from bulk_support import TRAIN_SCRIPT, run_migrate

from migrator.engine import Options
from migrator.runner import Candidate, _chunks, run_files

NOT_TRAINING = "def add(a, b):\n    return a + b\n"


def _repo(tree, count: int = 12):
    files = {f"pkg{i % 3}/train_{i:02d}.py": TRAIN_SCRIPT for i in range(count)}
    files.update({f"pkg{i % 3}/util_{i:02d}.py": NOT_TRAINING for i in range(count)})
    return tree(files)


def test_pool_results_equal_serial_results(tree):
    root = _repo(tree)
    paths = sorted(root.rglob("*.py"))
    serial = run_files(paths, Options(), jobs=1).results
    pooled = run_files(paths, Options(), jobs=2).results
    key = lambda r: r.path
    assert [(r.path, r.migrated, r.skipped) for r in sorted(serial, key=key)] == [
        (r.path, r.migrated, r.skipped) for r in sorted(pooled, key=key)
    ]


def test_check_lists_files_in_path_order_with_a_pool(tree):
    root = _repo(tree)
    done = run_migrate("--check", "-j", "2", ".", cwd=root)
    assert done.returncode == 1
    listed = [
        line.split(" ", 2)[2]
        for line in done.stderr.decode().splitlines()
        if line.startswith("would migrate pkg")
    ]
    assert listed == sorted(f"pkg{i % 3}/train_{i:02d}.py" for i in range(12))
    assert done.stdout == b""


def test_diffs_on_stdout_in_path_order(tree):
    root = _repo(tree, count=6)
    done = run_migrate("-j", "2", ".", cwd=root)
    headers = [line for line in done.stdout.decode().splitlines() if line.startswith("--- ")]
    assert headers == sorted(headers) and len(headers) == 6


def test_summary_counts_on_stderr(tree):
    root = _repo(tree, count=3)
    (root / "broken.py").write_text(TRAIN_SCRIPT.replace("def main():", "def main(:"))
    done = run_migrate("--check", ".", cwd=root)
    summary = done.stderr.decode().splitlines()[-1]
    assert summary.startswith("7 files scanned, 3 skipped by prefilter, would migrate 3")
    assert "1 error in " in summary and summary.endswith("s")


def test_quiet_prints_only_errors_and_findings(tree):
    root = _repo(tree, count=3)
    done = run_migrate("--check", "--quiet", ".", cwd=root)
    assert done.returncode == 1 and done.stdout == b""
    # the findings only: each migrated script's global batch note, no progress, no summary
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 3, lines
    assert all(re.match(r"pkg\d/train_\d\d\.py:\d+:\d+: MIG006 \(note\) .* global batch", line)
               for line in lines), lines  # fmt: skip


def test_json_has_per_file_results_findings_and_summary(tree):
    root = _repo(tree, count=2)
    (root / "broken.py").write_text(TRAIN_SCRIPT.replace("def main():", "def main(:"))
    (root / "fragment.py").write_text("loss = model(x).sum()\nloss.backward()\noptimizer.step()\n")
    done = run_migrate("--check", "--format", "json", ".", cwd=root)
    payload = json.loads(done.stdout)  # stdout is exactly one JSON document
    by_path = {entry["path"]: entry for entry in payload["files"]}
    assert by_path["pkg0/train_00.py"]["status"] == "would-migrate"
    assert by_path["pkg0/util_00.py"]["status"] == "skipped"
    assert by_path["broken.py"]["status"] == "error"
    assert by_path["broken.py"]["error"].startswith("cannot parse")
    (finding,) = by_path["fragment.py"]["findings"]
    assert finding["code"] == "MIG905" and finding["line"] == 2
    summary = payload["summary"]
    assert summary["scanned"] == 6 and summary["changed"] == 2 and summary["errors"] == 1
    assert summary["findings"] == {"MIG905": 1, "MIG006": 2}  # + each script's batch note
    assert [entry["path"] for entry in payload["files"]] == sorted(by_path)


def test_json_diff_mode_carries_the_diff(tree):
    root = tree({"train.py": TRAIN_SCRIPT})
    payload = json.loads(run_migrate("--format", "json", "train.py", cwd=root).stdout)
    assert "+            accelerator.backward(loss)" in payload["files"][0]["diff"]


def test_small_files_share_chunks_and_big_ones_go_first():
    sizes = [10, 400_000, 20, 300_000, 30]
    candidates = sorted(
        (Candidate(f"f{i}.py", b"x" * n) for i, n in enumerate(sizes)),
        key=lambda c: len(c.data),
        reverse=True,
    )
    chunks = _chunks(candidates)
    assert [[c.path for c in chunk] for chunk in chunks] == [
        ["f1.py"],
        ["f3.py"],
        ["f4.py", "f2.py", "f0.py"],
    ]


def test_no_pool_for_zero_files(tmp_path, monkeypatch):
    import concurrent.futures

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started")

    # the runner imports the pool where it starts one (one file must not pay for the import)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    assert run_files([], Options(), jobs=4).results == []
    (tmp_path / "util.py").write_text(NOT_TRAINING)
    assert run_files([tmp_path / "util.py"], Options(), jobs=4).results[0].skipped


def _die(chunk, options):
    import os

    os._exit(3)


def test_a_dead_worker_is_an_error_for_its_files_not_a_crash(tree, monkeypatch):
    from migrator import runner

    root = _repo(tree, count=4)
    monkeypatch.setattr(runner, "CHUNK_BYTES", 1)  # one file per chunk: a pool of 2 starts
    monkeypatch.setattr(runner, "migrate_chunk", _die)  # forked workers inherit the patch
    outcome = run_files(sorted(root.rglob("*.py")), Options(), jobs=2)
    errors = [r for r in outcome.results if r.error is not None]
    assert errors and all("worker process failed" in r.error for r in errors)
    assert len(outcome.results) == 8
