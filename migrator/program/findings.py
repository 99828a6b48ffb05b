"""The findings of a program (`migrator/program.py`): the analysis sees the joined module, so
each finding is moved to the file and line it belongs to, the lines its message names are
counted in their own files, and the files of a refused program without a finding of their
own get a note pointing at the file that holds the refusal.
"""

from __future__ import annotations

import re

from migrator.engine import FileResult
from migrator.findings import Finding, left_as_it_is
from migrator.program.files import ProgramFile

CODE = "MIG910"  # a program that cannot be migrated as a unit is a hidden step still
LINE_REFERENCE = re.compile(r"\b(lines?|line\(s\)) (\d+(?:(?:, | and |-)\d+)*)")


def finding_at(file: ProgramFile, line: int, message: str) -> Finding:
    finding = Finding(code=CODE, message=message)
    finding.line, finding.col = line, 1
    return finding


def in_program(findings: list[Finding], files: list[ProgramFile]) -> list[Finding]:
    """MIG910 says a step hides in another module; analysed with it, say so."""
    names = ", ".join(file.path.name for file in files[1:])
    for finding in findings:
        if finding.code == CODE and "migrate both files by hand" in finding.message:
            finding.message = finding.message.replace(
                "migrate both files by hand",
                f"analysed as one program with {names}, where no training loop was recognised; "
                "migrate these files by hand",
            )
    return findings


def assign(files: list[ProgramFile], findings: list[Finding]) -> list[list[Finding]]:
    """Each finding moved to its file, its line counted in that file, and the lines its
    message names ("used at line 774") counted in their own files."""
    per_file: list[list[Finding]] = [[] for _ in files]
    for finding in findings:
        owner = _owner_of(files, finding.line)
        if finding.line:
            finding.line -= files[owner].start_line - 1
        finding.message = lines_in_files(finding.message, files, owner)
        per_file[owner].append(finding)
    return per_file


def _owner_of(files: list[ProgramFile], line: int) -> int:
    owner = 0
    for number, file in enumerate(files):
        if file.start_line <= line < file.start_line + file.lines + 1:
            owner = number
    return owner


def lines_in_files(message: str, files: list[ProgramFile], owner: int) -> str:
    """`line 774` of the joined module -> `line 52` of the finding's own file, or `line 12 of
    misc.py` in another file of the program."""

    def one(number: str) -> str:
        joined = int(number)
        where = _owner_of(files, joined)
        local = joined - (files[where].start_line - 1)
        return str(local) if where == owner else f"{local} of {files[where].path.name}"

    def numbers(match: re.Match) -> str:
        listed = re.sub(r"\d+", lambda m: one(m.group()), match.group(2))
        return f"{match.group(1)} {listed}"

    return LINE_REFERENCE.sub(numbers, message)


def unchanged(files: list[ProgramFile], findings: list[list[Finding]]) -> list[FileResult]:
    """Results of a program left as it is. Where a warning blocks it, each file keeps its
    warnings (notes about the rewrite not written go: `abandoned`), the file of the first
    one says once that the program is left as it is (MIG950), and a file without a finding
    of its own (the entry too) gets a note pointing at the file whose finding says why: no
    training file of a refused program is silent."""
    results = []
    findings = list(findings) + [[] for _ in range(len(files) - len(findings))]
    if any(f.needs_human for found in findings for f in found):
        findings = [[f for f in found if f.needs_human or f.by_hand] for found in findings]
        blocking = next(n for n, found in enumerate(findings) if any(f.needs_human for f in found))
        names = ", ".join(file.path.name for file in files)
        what = f"the program of {files[0].path.name} ({names})"
        findings[blocking] = left_as_it_is(findings[blocking], what)
    refusing = [
        files[number].path.name
        for number, found in enumerate(findings[: len(files)])
        if any(f.needs_human for f in found)
    ]
    where = "there" if refusing == [files[0].path.name] else "in " + ", ".join(refusing)
    for number, file in enumerate(files):
        found = findings[number] if number < len(findings) else []
        if refusing and not found:
            note = finding_at(file, 1, (
                f"part of the program of {files[0].path.name}, which is not migrated (see the "
                f"finding {where}); this file is left as it is"))  # fmt: skip
            note.level = "note"
            found = [note]
        results.append(FileResult(path=str(file.path), source=file.data, findings=found))
    return results
