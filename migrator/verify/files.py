"""Files and folders each process wrote (`writes.py`), compared with the original's.

A path is compared by its pattern (every run of digits as `#`): TensorBoard event files and
other names carrying a time or a process id differ between any two runs, and numbered
checkpoints are one output. Named, by an example path:

* a file the original wrote that more than one process of the migrated run writes (every
  process saving the checkpoint, appending to the CSV log, drawing the figure);
* a file or folder the original wrote that no process writes any more;

and for the files the original wrote that the migrated main process writes too: what
`torch.save` saved there (`checkpoints.py`) and, for logs and trackers, their numbers
(`trackers.py`, compared as outputs are).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from migrator.verify.checkpoints import compare_saved, read_saved
from migrator.verify.outputs import Losses, StreamComparison, compare_stream
from migrator.verify.records import RunRecord
from migrator.verify.trackers import is_tracker, read_tracker

DIGITS = re.compile(r"\d+")


def pattern(path: str) -> str:
    return DIGITS.sub("#", path)


@dataclass
class FileComparison:
    written: int = 0  # files and folders the original wrote
    duplicates: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)  # differences of what was saved
    trackers: list[StreamComparison] = field(default_factory=list)


@dataclass
class RunFiles:
    """One run as the file checks need it."""

    record: RunRecord
    run_dir: Path
    sandbox: Path | None


def compare_files(
    original: RunFiles, migrated: RunFiles, *, rtol: float, atol: float, losses: Losses | None
) -> FileComparison:
    result = FileComparison()
    ours = _by_pattern(original.record)
    theirs = _by_pattern(migrated.record)
    result.written = len(ours)
    for key, (kind, writers) in sorted(ours.items()):
        example = writers[0][1]
        other = theirs.get(key)
        if other is None:
            if kind == "folder" and any(k.startswith(key + "/") for k in theirs):
                continue  # the folder's files are written: it is created, by another path
            what = "folder" if kind == "folder" else "file"
            result.missing.append(
                f"{example}: the original writes this {what}, no process of the migrated run does"
            )
            continue
        ranks = sorted({rank for rank, _ in other[1]})
        if kind == "file" and len(ranks) > 1:
            result.duplicates.append(_written_twice(example, other[1], ranks))
    _compare_contents(original, migrated, ours, theirs, result, rtol, atol, losses)
    return result


def _written_twice(example: str, writers: list[tuple[int, str]], ranks: list[int]) -> str:
    paths = sorted({path for _, path in writers})
    who = f"{len(ranks)} processes (ranks {', '.join(map(str, ranks))})"
    if len(paths) == 1:
        return (
            f"{paths[0]} is written by {who}, where the original writes it once: they "
            "overwrite or interleave each other's writes"
        )
    return (
        f"{example} (the original's) is written by {who}, each under its own name "
        f"({', '.join(paths[:3])}): N copies where the original writes one"
    )


def _by_pattern(record: RunRecord) -> dict[str, tuple[str, list[tuple[int, str]]]]:
    """pattern -> (file | folder, [(rank, path)] in rank order)."""
    found: dict[str, tuple[str, list[tuple[int, str]]]] = {}
    for rank in record.ranks:
        for entry in rank.writes:
            key = pattern(entry["path"])
            kind, writers = found.setdefault(key, (entry["kind"], []))
            if entry["kind"] == "file" and kind == "folder":
                found[key] = ("file", writers)
            writers.append((rank.rank, entry["path"]))
    return found


def _compare_contents(original, migrated, ours, theirs, result, rtol, atol, losses) -> None:
    saved_o = read_saved(original.run_dir, 0)
    saved_m: dict[int, dict] = {}
    for key, (kind, writers) in sorted(ours.items()):
        if kind != "file" or key not in theirs:
            continue
        path_o = writers[0][1]
        rank, path_m = theirs[key][1][0]
        if len({r for r, _ in theirs[key][1]}) > 1:
            continue  # written by several processes (named): its content is theirs mixed
        if path_o in saved_o:
            saves = saved_m.setdefault(rank, read_saved(migrated.run_dir, rank))
            if path_m in saves:
                result.checkpoints.extend(
                    compare_saved(saved_o[path_o], saves[path_m], rtol=rtol, atol=atol)
                )
            continue
        if not is_tracker(path_o) or original.sandbox is None or migrated.sandbox is None:
            continue
        if Path(path_o).is_absolute() or Path(path_m).is_absolute():
            continue  # outside the working folder: both runs may have written the one file
        lines_o = read_tracker(original.sandbox / path_o)
        lines_m = read_tracker(migrated.sandbox / path_m)
        if lines_o is None or lines_m is None:
            continue
        for line in lines_o + lines_m:
            line.step = -1  # when it was written is not known
        result.trackers.append(
            compare_stream(path_o, lines_o, lines_m, rtol=rtol, atol=atol, losses=losses)
        )
