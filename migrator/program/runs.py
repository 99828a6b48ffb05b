"""Grouping a run's files into programs (`migrator/program.py`), for the CLI and the corpus
runner.

After every file went through the engine on its own, the entries of programs are migrated
again as units: a file named on the command line alone (`migrate main.py`), and in a bulk run
every file whose training step hides in another module (MIG910) or that has no backward of its
own but imports project modules with one (an entry by the import graph: `trainer =
Trainer(...); trainer.train_step(...)`, `from utils import train; train(...)`), which counts
as an entry when its program says it drives their step. A program's results replace
the per-file results of all its files; a helper module the run did not name is added, and
counted as included. A module that two entries share must come out the same from both, or
neither program is migrated (a finding in each entry says why). Writing a program is all or
nothing: every file is checked unchanged on disk first, and a file that fails to be written
puts back the files of the program written before it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from migrator.engine import FileResult, Options
from migrator.findings import Finding, left_as_it_is

ENTRY_CODES = frozenset({"MIG910"})


@dataclass
class ProgramRun:
    results: list[FileResult]
    programs: list[list[str]] = field(default_factory=list)  # the paths of each program
    included: list[str] = field(default_factory=list)  # program files outside the given paths

    def program_of(self, path: str) -> list[str] | None:
        return next((paths for paths in self.programs if path in paths), None)


def group_programs(results: list[FileResult], options: Options, single: bool) -> ProgramRun:
    """`results` with programs migrated as units. `single`: the run named one file."""
    from migrator.program.unit import migrate_program, refuse_for_outsiders

    by_path = {_key(r.path): r for r in results}
    entries = [r for r in results if _is_entry(r, single) or may_drive(r, single)]
    programs = []
    for entry in sorted(entries, key=lambda r: r.path):
        try:
            program = migrate_program(Path(entry.path), options)
        except Exception as error:  # noqa: BLE001 - a bug must not stop the run or write half
            entry.error = f"internal error: program: {type(error).__name__}: {error}"
            continue
        if program is not None and takes_program(entry, program, single):
            programs.append(program)
    helpers = {Path(r.path).resolve() for program in programs for r in program.results[1:]}
    programs = [  # a module another entry imports is that program's helper, not an entry
        program for program in programs
        if Path(program.entry).resolve() not in helpers
        or not may_drive(by_path[_key(program.results[0].path)], single)
    ]  # fmt: skip
    entry_paths = {Path(program.entry).resolve() for program in programs}
    for program in programs:  # a script outside calling a changed helper would break
        refuse_for_outsiders(program, entry_paths - {Path(program.entry).resolve()})
    outcome: dict[str, FileResult] = {}
    owners: dict[str, int] = {}
    conflicts: set[int] = set()
    for number, program in enumerate(programs):
        for result in program.results:
            key = _key(result.path)
            previous = outcome.get(key)
            if previous is not None and previous.migrated != result.migrated:
                conflicts.update({number, owners[key]})
            outcome.setdefault(key, result)
            owners.setdefault(key, number)
    run = ProgramRun(results=[])
    replaced: dict[str, FileResult] = {}
    for number, program in enumerate(programs):
        paths = [_display(Path(r.path), by_path) for r in program.results]
        if len(paths) < 2:
            continue
        if number in conflicts:
            entry = by_path[_key(program.results[0].path)]
            entry.findings.append(_shared_module_finding(program, programs, conflicts))
            entry.findings = left_as_it_is(entry.findings, f"the program of {paths[0]}")
            entry.migrated = None  # the entry alone would be half of its program
            for result, path in zip(program.results[1:], paths[1:]):
                kept = by_path.get(_key(path))
                if kept is not None and kept.changed:  # nor is a helper migrated alone
                    kept.migrated = None  # its notes told of its own rewrite, not written
                    kept.findings = [f for f in kept.findings if f.needs_human or f.by_hand]
                    kept.findings.append(_left_alone(paths[0]))
            continue
        run.programs.append(paths)
        for result, path in zip(program.results, paths):
            result.path, result.program = path, paths[0]
            replaced[_key(path)] = result
            if _key(path) not in by_path:
                run.included.append(path)
    run.results = [replaced.pop(_key(r.path), r) for r in results] + list(replaced.values())
    _refuse_for_callers(run)
    return run


def _refuse_for_callers(run: ProgramRun) -> None:
    """A changed file whose definitions now prepare what their callers pass in is left as it
    is (with its program) when a project file outside it calls them (`program/callers.py`)."""
    from migrator.program.callers import Callers

    callers = Callers([Path(r.path) for r in run.results])
    by_key = {_key(r.path): r for r in run.results}
    for result in run.results:
        names = {f.prepares_for for f in result.findings if f.prepares_for}
        if not result.changed or not names or not result.path.endswith(".py"):
            continue
        paths = run.program_of(result.path) or [result.path]
        members = {Path(_key(path)) for path in paths}
        found = callers.first_call(Path(result.path), names, members)
        if found is None:
            continue
        caller, line, name = found
        finding = Finding(
            code="MIG910",
            message=(
                f"`{name}` now prepares what its callers pass in, but {_display(caller, by_key)} "
                f"(line {line}) calls it and is not migrated with this file: its objects "
                "would be prepared on top of its own set-up (a DistributedSampler's share "
                "split again, a DDP model wrapped again) or the helper's prepared objects "
                "handed back to code that does not expect them; migrate the caller and this "
                "file together by hand"
            ),
        )
        finding.line, finding.col = _definition_line(result, name)
        what = f"the program of {paths[0]}" if len(paths) > 1 else "this file"
        for path in paths:
            member = by_key.get(_key(path))
            if member is None:
                continue
            member.migrated = None
            kept = [f for f in member.findings if f.needs_human or f.by_hand]
            if member is result:
                kept.append(finding)
            member.findings = left_as_it_is(kept, what) if member is result else kept


def _definition_line(result: FileResult, name: str) -> tuple[int, int]:
    """Where MIG006's note on `name` points (the definition), else the file's first line."""
    for finding in result.findings:
        if finding.prepares_for == name and finding.line:
            return finding.line, finding.col
    return 1, 1


def may_drive(result: FileResult, single: bool) -> bool:
    """In a bulk run, a file that may be a program's entry by what it imports: unchanged on
    its own, with no backward of its own (`trainer.train_step(...)`, `from utils import
    train; train(...)`); its program says whether it drives a step (`ProgramResult.drives`)."""
    if (
        single
        or result.error is not None
        or not result.path.endswith(".py")
        or result.changed
        or any(f.code in ENTRY_CODES for f in result.findings)
    ):
        return False
    text = result.source or _read(result.path)  # a run keeps no text of unchanged files
    return b"import" in text and b".backward(" not in text


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def takes_program(entry: FileResult, program, single: bool) -> bool:
    """Whether the program's results replace its files' own: the entry's step hides in a
    helper (MIG910), the program changes a helper, or the entry drives a step of the program
    and changed nothing on its own (then the program's refusal, if it is one, is what the
    entry and its helpers report: no helper is migrated alone while its entry is refused)."""
    hidden = any(f.code in ENTRY_CODES for f in entry.findings)
    if may_drive(entry, single) and not program.drives:
        return False  # imports a helper without running its step (an eval script)
    helpers = any(r.changed for r in program.results[1:])
    own = not entry.changed and (program.results[0].changed or program.drives)
    return hidden or helpers or own


def _is_entry(result: FileResult, single: bool) -> bool:
    """A file named alone, or one whose step hides in another module. (A file named alone
    whose program changes no helper, and which had no MIG910, keeps its own result: its
    helpers need nothing, and a program refused for a reason of its own must not undo it.)"""
    if result.error is not None or not result.path.endswith(".py"):
        return False
    if single:
        return True
    return any(f.code in ENTRY_CODES for f in result.findings)


def _shared_module_finding(program, programs, conflicts) -> Finding:
    others = sorted(
        str(programs[n].entry) for n in conflicts if programs[n] is not program
    )  # fmt: skip
    finding = Finding(
        code="MIG910",
        message=(
            "a module of this program is shared with "
            + ", ".join(others)
            + ", which would migrate it differently; migrate these programs by hand"
        ),
    )
    finding.line, finding.col = 1, 1
    return finding


def _left_alone(entry: str) -> Finding:
    finding = Finding(
        code="MIG910",
        level="note",
        message=f"part of the program of {entry}, which is not migrated; left as it is",
    )
    finding.line, finding.col = 1, 1
    return finding


def _key(path: str) -> str:
    return os.path.realpath(path)


def _display(path: Path, by_path: dict[str, FileResult]) -> str:
    """The path as the run named it, else relative to the working folder when inside it."""
    known = by_path.get(_key(str(path)))
    if known is not None:
        return known.path
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return str(path) if relative.startswith("..") else relative


def write_program(results: list[FileResult]) -> dict[str, str]:
    """Write the changed files of one program, all or none: {path: error} for the files that
    could not be written (every changed file gets the cause when one fails)."""
    from migrator.writer import WriteError, write_atomically

    changed = [r for r in results if r.changed]
    for result in changed:
        try:
            if Path(result.path).read_bytes() != result.source:
                cause = f"cannot write: {result.path} changed while the program was migrated"
                return {r.path: cause for r in changed}
        except OSError as error:
            cause = f"cannot write: {result.path}: {error.strerror or error}"
            return {r.path: cause for r in changed}
    written: list[FileResult] = []
    for result in changed:
        try:
            write_atomically(Path(result.path), result.migrated, expected=result.source)
        except WriteError as error:
            for done in written:  # put the program back as it was
                write_atomically(Path(done.path), done.source)
            cause = f"{error} ({result.path}); no file of the program was written"
            return {r.path: cause for r in changed}
        written.append(result)
    return {}
