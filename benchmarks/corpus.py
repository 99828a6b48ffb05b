"""What `migrate` does to a corpus of real training scripts: a measurement, not a test.

    python benchmarks/corpus.py /work/corpus                  # every set found there
    python benchmarks/corpus.py /work/corpus --set famous --set small --verbose
    python benchmarks/corpus.py /work/corpus --json > corpus.json

The corpus is a folder of sets (famous/, small/, small2/, heldout/, accelerate/, programs/,
notebooks/), rebuilt from benchmarks/corpus/manifest.json as benchmarks/corpus_fetch.md says.
Every file goes through `migrator.runner.migrate_file`, the function the CLI runs on each file
after the same discovery (a notebook's code cells as one program), in a process pool. Per set it
prints:

  files      .py/.ipynb files in the set
  training   files with a `.backward(` and a `.step(` in their text
  changed    migrate rewrote the file
  refused    unchanged, with a finding that needs a human (exit 1)
  noted      unchanged, with notes only
  silent     unchanged, no finding at all, though the file is a training script not yet on
             the target (code that already uses HF Accelerate's or our Accelerator and is left
             alone counts as untouched, which is right for it)
  untouched  unchanged, no finding, and not a training script (or already on the target)
  skipped    not looked at (the CLI's discovery skips it)
  crashed    an error: unparsable or undecodable input, or an internal error (internal: the
             latter alone, always a bug)
  not-idem   changed files whose output `migrate` changes again (must be 0)
  no-parse   changed files whose output does not parse (must be 0)

then the findings by code (files with the code / occurrences). For accelerate/ (code already on
the target) a changed file is a bug, and the `accelerator.<name>` attributes those files use
are checked against our runtime's `Accelerator`. Exit status 0 always.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing
sys.path.insert(0, str(HERE))  # its sibling corpus_api.py, however corpus.py is run

from corpus_api import accelerator_attributes, print_api_coverage

SET_ORDER = (
    "famous",
    "small",
    "small2",
    "small3",
    "heldout",
    "accelerate",
    "programs",
    "notebooks",
    "gans",
)
SUFFIXES = (".py", ".ipynb")
COLUMNS = (
    "files", "training", "changed", "refused", "noted", "silent", "untouched", "skipped",
    "crashed", "internal", "not-idem", "no-parse",
)  # fmt: skip


@dataclass
class FileOutcome:
    set: str
    name: str  # path relative to the set folder
    outcome: str  # changed refused noted silent untouched skipped crashed
    training: bool
    findings: list[dict] = field(default_factory=list)  # code, level, line, message
    error: str | None = None
    idempotent: bool | None = None  # None: nothing changed, nothing to re-run
    parses: bool | None = None
    accelerator_names: list[str] = field(default_factory=list)
    program: str | None = None  # the entry of the program this file was migrated with


ON_TARGET = re.compile(
    rb"from\s+(accelerate|runtime)\s+import\s[^\n]*\bAccelerator\b|accelerate\.Accelerator\("
)


def is_training(data: bytes) -> bool:
    return b".backward(" in data and b".step(" in data


def measure(job: tuple[str, str, str]) -> FileOutcome:
    """One file, as the CLI would see it (top level: a pool worker pickles it by name)."""
    from migrator.discovery import discover
    from migrator.engine import Options
    from migrator.runner import migrate_file

    set_name, root, name = job
    path = Path(root) / name
    try:
        data = path.read_bytes()
    except OSError as error:
        return FileOutcome(set_name, name, "crashed", False, error=f"cannot read: {error}")
    outcome = FileOutcome(set=set_name, name=name, outcome="untouched", training=is_training(data))
    if set_name == "accelerate":
        outcome.accelerator_names = accelerator_attributes(data)
    found = discover([str(path)])
    if not found.files:
        outcome.outcome = "skipped"
        outcome.error = "; ".join(note for _, note in found.notes + found.problems) or None
        return outcome
    result = migrate_file(data, str(path), Options())
    outcome.findings = [
        {"code": f.code, "level": f.level, "line": f.line, "message": f.message}
        for f in result.findings
    ]
    if result.error is not None:
        outcome.outcome, outcome.error = "crashed", result.error
    elif result.changed:
        outcome.outcome = "changed"
        outcome.parses = _parses(result.migrated, notebook=path.suffix == ".ipynb")
        again = migrate_file(result.migrated, str(path), Options())
        outcome.idempotent = again.error is None and not again.changed
    elif any(f.needs_human for f in result.findings):
        outcome.outcome = "refused"
    elif result.findings:
        outcome.outcome = "noted"
    elif outcome.training and not ON_TARGET.search(data):
        outcome.outcome = "silent"
    return outcome


def _parses(data: bytes, notebook: bool = False) -> bool:
    """Python that parses; for a notebook, JSON with nbformat (the engine checks each changed
    cell parses, magics aside)."""
    try:
        if notebook:
            return "nbformat" in json.loads(data)
        ast.parse(data)
    except (SyntaxError, ValueError):
        return False
    return True


def collect(root: Path, sets: list[str]) -> list[tuple[str, str, str]]:
    jobs = []
    for set_name in sets:
        folder = root / set_name
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and not path.is_symlink():
                jobs.append((set_name, str(folder), path.relative_to(folder).as_posix()))
    return jobs


def run(root: Path, sets: list[str], jobs: int) -> list[FileOutcome]:
    work = collect(root, sets)
    work.sort(key=lambda job: -(Path(job[1]) / job[2]).stat().st_size)  # largest first
    if jobs <= 1 or len(work) <= 1:
        results = [measure(job) for job in work]
    else:
        import multiprocessing

        method = "fork" if sys.platform.startswith("linux") else "spawn"
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(method)) as pool:
            futures = [(job, pool.submit(measure, job)) for job in work]
            results = [_result(job, future) for job, future in futures]
    results = program_pass(root, results)
    order = {name: index for index, name in enumerate(sets)}
    return sorted(results, key=lambda r: (order[r.set], r.name))


def program_pass(root: Path, results: list[FileOutcome]) -> list[FileOutcome]:
    """As the CLI does in bulk (`migrator/program/runs.py`): every file whose training step
    hides in another module (MIG910), and every unchanged file with no backward of its own
    whose program it drives (an entry by the import graph), is migrated again with its helper
    modules as one program, whose outcomes replace its files' (idempotence: the migrated
    program, in a copy, migrated again changes nothing)."""
    from migrator.engine import Options
    from migrator.program.unit import migrate_program

    by_path = {(root / r.set / r.name).resolve(): r for r in results}
    programs = []
    for entry in [r for r in results if _hidden(r) or _may_drive(root, r)]:
        program = migrate_program(root / entry.set / entry.name, Options())
        if program is not None and (_hidden(entry) or program.drives):
            programs.append((entry, program))
    helpers = {Path(r.path).resolve() for _, program in programs for r in program.results[1:]}
    for entry, program in programs:
        path = root / entry.set / entry.name
        if not _hidden(entry) and path.resolve() in helpers:
            continue  # a module another entry imports is that program's helper
        stable = _program_stable(path, program) if any(r.changed for r in program.results) else None
        for result in program.results:
            old = by_path.get(Path(result.path).resolve())
            if old is None:
                continue
            old.findings = [
                {"code": f.code, "level": f.level, "line": f.line, "message": f.message}
                for f in result.findings
            ]
            old.program = entry.name
            if result.changed:
                old.outcome, old.idempotent = "changed", stable
                old.parses = _parses(result.migrated)
            elif any(f.needs_human for f in result.findings):
                old.outcome = "refused"
            elif result.findings:
                old.outcome = "noted"
            elif old.training:
                old.outcome = "silent"
            else:
                old.outcome = "untouched"
    return results


def _hidden(result: FileOutcome) -> bool:
    return any(f["code"] == "MIG910" for f in result.findings)


def _may_drive(root: Path, result: FileOutcome) -> bool:
    """`migrator.program.runs.may_drive` for a measured file: a .py file left unchanged on
    its own, with no backward of its own, that imports something."""
    if not result.name.endswith(".py") or result.outcome in ("changed", "crashed", "skipped"):
        return False
    data = (root / result.set / result.name).read_bytes()
    return b"import" in data and b".backward(" not in data


def _program_stable(entry: Path, program) -> bool:
    """The migrated program, in a temporary copy of its project, migrates to itself."""
    import tempfile

    from migrator.engine import Options
    from migrator.program.imports import project_root
    from migrator.program.unit import migrate_program
    from migrator.verify.program_copy import copy_python_files

    paths = [Path(r.path).resolve() for r in program.results]
    base = Path(os.path.commonpath([project_root(entry), *(p.parent for p in paths)]))
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder)
        copy_python_files(base, copy)
        for result, path in zip(program.results, paths):
            if result.changed:
                (copy / path.relative_to(base)).write_bytes(result.migrated)
        again = migrate_program(copy / entry.resolve().relative_to(base), Options())
        return again is not None and not any(r.changed for r in again.results)


def _result(job: tuple[str, str, str], future) -> FileOutcome:
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - a dead worker must not end the measurement
        set_name, _, name = job
        outcome = FileOutcome(set_name, name, "crashed", training=False)
        outcome.error = f"internal error: worker failed ({type(error).__name__}: {error})"
        return outcome


def summarise(results: list[FileOutcome]) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for r in results:
        row = summary.setdefault(r.set, {"counts": Counter(), "codes": {}, "errors": Counter()})
        counts = row["counts"]
        counts["files"] += 1
        counts["training"] += r.training
        counts[r.outcome] += 1
        if r.outcome == "crashed":
            counts["internal"] += r.error.startswith("internal error")
            row["errors"][_error_kind(r.error)] += 1
        counts["not-idem"] += r.idempotent is False
        counts["no-parse"] += r.parses is False
        for code, number in Counter(f["code"] for f in r.findings).items():
            files, total = row["codes"].get(code, (0, 0))
            row["codes"][code] = (files + 1, total + number)
    return summary


def _error_kind(error: str) -> str:
    """`internal error: TypeName`, `cannot parse`, `cannot decode...`: errors grouped by cause."""
    if error.startswith("internal error: "):
        return "internal error: " + error.removeprefix("internal error: ").split(":")[0]
    return error.split(":")[0][:60]


def print_report(results: list[FileOutcome], sets: list[str], verbose: bool) -> None:
    summary = summarise(results)
    width = max([len(s) for s in sets] + [5])
    print(f"{'set':<{width}} " + " ".join(f"{c:>8}" for c in COLUMNS))
    for set_name in sets:
        counts = summary.get(set_name, {"counts": Counter()})["counts"]
        print(f"{set_name:<{width}} " + " ".join(f"{counts[c]:>8}" for c in COLUMNS))
    for set_name in sets:
        row = summary.get(set_name)
        if row is None:
            continue
        print(f"\n{set_name}: findings by code (files / occurrences)")
        for code, (files, total) in sorted(row["codes"].items()):
            print(f"  {code:<8} {files:>4} / {total}")
        if not row["codes"]:
            print("  (none)")
        for kind, number in sorted(row["errors"].items()):
            print(f"  error    {number:>4}   {kind}")
        if set_name == "programs":
            folders = {r.name.split("/")[0] for r in results if r.set == "programs"}
            print(f"  programs: {len(folders)} folders")
        units = {(r.set, r.program) for r in results if r.set == set_name and r.program}
        if units:
            members = sum(1 for r in results if r.set == set_name and r.program)
            print(f"  migrated as programs: {len(units)} ({members} files)")
    if "accelerate" in summary:
        print_api_coverage([r for r in results if r.set == "accelerate"])
    if verbose:
        print()
        for r in results:
            print(verbose_line(r))


def verbose_line(r: FileOutcome) -> str:
    extra = []
    if r.error:
        extra.append(r.error)
    if r.idempotent is False:
        extra.append("NOT IDEMPOTENT")
    if r.parses is False:
        extra.append("OUTPUT DOES NOT PARSE")
    for f in r.findings:
        note = "" if f["level"] == "warning" else " (note)"
        extra.append(f"{f['code']}{note}:{f['line']} {f['message']}")
    training = " training" if r.training else ""
    return f"{r.set}/{r.name}: {r.outcome}{training}" + ("".join(f"\n    {e}" for e in extra))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="the corpus folder (holding famous/, small/...)")
    parser.add_argument("--set", action="append", dest="sets", metavar="NAME", help="repeatable")
    parser.add_argument("--verbose", action="store_true", help="one line per file")
    parser.add_argument("--json", action="store_true", help="summary and files as JSON")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    present = [p.name for p in args.root.iterdir() if p.is_dir()] if args.root.is_dir() else []
    if args.sets:
        sets = args.sets
    else:
        sets = [s for s in SET_ORDER if s in present] + sorted(set(present) - set(SET_ORDER))
    missing = [s for s in sets if s not in present]
    if missing:
        print(f"corpus.py: no such set in {args.root}: {', '.join(missing)}", file=sys.stderr)
        sets = [s for s in sets if s in present]
    results = run(args.root, sets, args.jobs)
    if args.json:
        summary = summarise(results)
        document = {
            "sets": {
                name: {
                    "counts": {c: row["counts"][c] for c in COLUMNS},
                    "codes": {
                        code: {"files": f, "occurrences": n}
                        for code, (f, n) in row["codes"].items()
                    },
                    "errors": dict(row["errors"]),
                }
                for name, row in summary.items()
            },
            "files": [asdict(r) for r in results],
        }
        json.dump(document, sys.stdout, indent=1)
        print()
    else:
        print_report(results, sets, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
