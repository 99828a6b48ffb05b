"""`migrate verify` over a corpus of real training scripts: one verdict per script.

    python benchmarks/verify_corpus.py [--corpus /work/corpus] [--set famous --set small]
                                       [--nproc 2] [--max-steps 20] [--timeout 300]
                                       [--only SUBSTRING] [--no-remedy] [--json OUT]

For every `*.py` of the corpus sets that `migrate` changes, runs
`migrate verify SCRIPT --nproc N --max-steps K --format json` in a temporary working folder
(files the script writes land there), with benchmarks/standins/ first on the runs'
PYTHONPATH: a torchvision stand-in with synthetic MNIST/CIFAR-shaped datasets, so tutorial
scripts run on the CPU without downloads (the corpus files are never changed). When the run
DIVERGED with a cause that a verify option answers (--no-dropout, --nproc 1, --max-steps
before a padded last batch), it runs again with that option, and with the next cause's on
top while one is named (dropout and BatchNorm together): EQUIVALENT then confirms that the
named causes were the only differences. Prints a table (script, verdict, step, cause, with
the remedy) and the counts. Scripts that cannot run here (missing sibling modules, CUDA-only,
data files, what the stand-in lacks) are listed as COULD NOT RUN with the first error line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDINS = Path(__file__).resolve().parent / "standins"
DEFAULT_CORPUS = Path("/work/corpus")
DEFAULT_SETS = ("famous", "small")  # never heldout/
NPROC_1_CAUSES = {"batchnorm", "summed-loss", "random-draws", "augmentation", "repeated-backward"}


def migrated_scripts(corpus: Path, sets: list[str], only: str | None) -> tuple[list[Path], int]:
    """The scripts migrate changes, and how many it left alone or could not read."""
    sys.path.insert(0, str(ROOT))
    from migrator.engine import MigrationError, Options, migrate_text

    changed, others = [], 0
    for name in sets:
        for script in sorted((corpus / name).glob("*.py")):
            if only and only not in script.name:
                continue
            try:
                text, _ = migrate_text(script.read_text(encoding="utf-8"), Options())
            except (MigrationError, OSError, UnicodeDecodeError, SyntaxError, ValueError):
                text = None
            if text is None:
                others += 1
            else:
                changed.append(script)
    return changed, others


def run_verify(script: Path, options: list[str], timeout: float) -> dict:
    env = dict(os.environ)
    env.pop("WORLD_SIZE", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(STANDINS), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    command = [sys.executable, "-m", "migrator", "verify", str(script), "--format", "json"]
    command += [*options, "--timeout", str(timeout)]
    with tempfile.TemporaryDirectory(prefix="verify-corpus-") as work:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            check=False,
            timeout=timeout + 60,
        )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"verdict": "ERROR", "reason": (done.stderr or done.stdout).strip()[-300:]}


def first_error(report: dict) -> str:
    """The error line of a failed run: the last `SomethingError: ...` of its stderr."""
    for run in ("original", "migrated"):
        tail = report.get("runs", {}).get(run, {}).get("stderr_tail", "")
        errors = [line for line in tail.splitlines() if re.match(r"^\w*(Error|Exception)\b", line)]
        if errors:
            return errors[-1][:110]
    return report.get("reason", "")[:110]


def remedy_options(report: dict, options: list[str]) -> tuple[list[str], str] | None:
    """verify options that answer the first named cause (and what they change), or None."""
    causes = report.get("causes") or []
    if report.get("verdict") != "DIVERGED" or not causes:
        return None
    code, remedy = causes[0]["code"], causes[0]["remedy"]
    if code == "dropout":
        return [*options, "--no-dropout"], "--no-dropout"
    if code in NPROC_1_CAUSES:
        return [*_without(options, "--nproc"), "--nproc", "1"], "--nproc 1"
    steps = re.search(r"--max-steps (\d+)", remedy)
    if code == "partial-batch" and steps:
        changed = ["--max-steps", steps.group(1)]
        return [*_without(options, "--max-steps"), *changed], " ".join(changed)
    return None


def apply_remedies(script: Path, report: dict, options: list[str], timeout: float) -> str:
    """Runs again with each named cause's remedy in turn (a script can have dropout and
    BatchNorm): the last verdict and the options that led to it, or "" when none applies."""
    applied, current = [], report
    for _ in range(3):
        again = remedy_options(current, options)
        if again is None or again[1] in applied:
            break
        options, label = again
        applied.append(label)
        current = run_verify(script, options, timeout)
        report.setdefault("remedy_runs", []).append(current)
    return f"{current.get('verdict')} with {' '.join(applied)}" if applied else ""


def _without(options: list[str], flag: str) -> list[str]:
    kept, skip = [], False
    for option in options:
        if skip:
            skip = False
        elif option == flag:
            skip = True
        else:
            kept.append(option)
    return kept


def describe(report: dict) -> tuple[str, str]:
    """(step, cause) cells for the table."""
    verdict = report.get("verdict")
    if verdict == "DIVERGED":
        causes = report.get("causes") or []
        named = ", ".join(cause["code"] for cause in causes)
        return str(report.get("step")), named or "(none named) " + report.get("reason", "")[:80]
    if verdict in ("COULD NOT RUN", "ERROR"):
        return "", first_error(report)
    if verdict == "NOT COMPARABLE":
        return "", report.get("reason", "")[:110]
    notes = report.get("notes") or []
    return "", ("note: " + notes[0][:100]) if notes else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--set", dest="sets", action="append", default=None)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--only", help="only scripts whose file name contains this")
    parser.add_argument("--no-remedy", action="store_true", help="no second run with a remedy")
    parser.add_argument("--json", type=Path, help="also write every report here")
    args = parser.parse_args()
    sets = args.sets or list(DEFAULT_SETS)
    if "heldout" in sets:
        sys.exit("the heldout set is not for development runs")
    started = time.monotonic()
    scripts, others = migrated_scripts(args.corpus, sets, args.only)
    print(
        f"{len(scripts)} scripts migrate ({others} unchanged or not migratable) in "
        f"{', '.join(sets)}; verify --nproc {args.nproc} --max-steps {args.max_steps}",
        flush=True,
    )
    options = ["--nproc", str(args.nproc), "--max-steps", str(args.max_steps)]
    rows, reports = [], {}
    for script in scripts:
        began = time.monotonic()
        report = run_verify(script, options, args.timeout)
        step, cause = describe(report)
        remedied = "" if args.no_remedy else apply_remedies(script, report, options, args.timeout)
        reports[script.name] = report
        row = (script.parent.name, script.stem, report.get("verdict", "?"), step, cause, remedied)
        rows.append(row)
        print(f"  {time.monotonic() - began:6.1f}s  {row[1][:70]}: {row[2]} {row[4]}", flush=True)
    print_table(rows)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[2]] = counts.get(row[2], 0) + 1
    print(", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items())))
    print(f"{time.monotonic() - started:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2))


def print_table(rows: list[tuple]) -> None:
    print()
    print("| set | script | verdict | step | cause | with the remedy |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")


if __name__ == "__main__":
    main()
