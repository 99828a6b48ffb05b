"""What the main process shows, compared with what the original showed: stdout and `logging`.

The lines are aligned on their templates (text without numbers, `numbers.py`), in order, and
the numbers of aligned lines compared with the losses' tolerances: "epoch 3: test accuracy …:
original 0.734, migrated 1.468". A number that differs is still no difference of the
training when it is the main process's own share of a per-process value:

* the mean over processes of what each would print (`accelerator.print` is recorded on every
  rank, `capture.py`) agrees with the original: a local loss or accuracy, each process its
  slice of the batch;
* it is the main process's own loss: the original's number is the mean (or sum) of its
  losses over the last w steps and the migrated number the same over the main process's
  (a running loss printed every w steps, the last batch's loss).

Lines other processes show are duplicates (each printed N times in a real run).
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from migrator.verify.numbers import Line, agree, parse_line, show
from migrator.verify.records import capture_file

MAX_LINES = 5000  # per stream compared (alignment is quadratic at worst)
MAX_WINDOW = 5000  # steps a printed running loss may average over
UNKNOWN_STEP_WORK = 200_000  # windows tried for a number written at an unknown step
PROBE_FACTOR = 10  # as probe.py: a difference within 10x the probe's is rounding's


@dataclass
class Difference:
    stream: str  # stdout | log | a file's path
    line: int  # 1-based, in the original's stream
    label: str  # the line, the number left out
    original: str
    migrated: str

    def sentence(self) -> str:
        return (
            f"{self.label} — original {self.original}, migrated {self.migrated} "
            f"({self.stream} line {self.line})"
        )


@dataclass
class StreamComparison:
    stream: str
    compared: int = 0  # numbers compared
    differences: list[Difference] = field(default_factory=list)
    per_process: list[str] = field(default_factory=list)  # explained differences
    missing: list[str] = field(default_factory=list)  # original lines the main does not show
    duplicates: dict[int, list[str]] = field(default_factory=dict)  # rank -> its lines


@dataclass
class Losses:
    """What explains a per-process number: each run's per-step losses (main process)."""

    original: list[float]
    migrated: list[float]


def read_capture(run_dir: Path, stream: str, rank: int) -> list[Line]:
    try:
        text = capture_file(run_dir, stream, rank).read_text(encoding="utf-8")
    except OSError:
        return []
    lines = []
    for raw in text.splitlines()[:MAX_LINES]:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if entry["text"].strip():
            lines.append(parse_line(entry["text"], entry.get("step", 0)))
    return lines


def compare_stream(
    stream: str,
    original: list[Line],
    main: list[Line],
    *,
    rtol: float,
    atol: float,
    losses: Losses | None = None,
    would_print: list[list[Line]] | None = None,
    probe: list[Line] | None = None,
) -> StreamComparison:
    """`would_print`: each migrated rank's `accelerator.print` lines (rank 0 first)."""
    result = StreamComparison(stream)
    matcher = difflib.SequenceMatcher(
        None, [line.template for line in original], [line.template for line in main], False
    )
    probe_of = _aligned(original, probe) if probe else {}
    shares = _shares(main, would_print) if would_print else {}
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            result.missing.extend(line.text for line in original[i1:i2])
            continue
        for offset in range(i2 - i1):
            i, j = i1 + offset, j1 + offset
            a, b = original[i], main[j]
            for k, (x, y) in enumerate(zip(a.numbers, b.numbers)):
                if a.volatile[k] or b.volatile[k]:
                    continue
                result.compared += 1
                printed = (a.printed[k], b.printed[k])
                if agree(x, y, printed, rtol, atol):
                    continue
                p = probe_of.get(i)
                if p is not None and k < len(p.numbers) and _within_probe(x, y, p.numbers[k]):
                    continue
                why = _per_process(x, y, printed, a, b, k, shares.get(j), losses, rtol, atol)
                label = show(a, k)
                if why:
                    result.per_process.append(
                        f"{label} (original {a.printed[k]}, main process {b.printed[k]}): {why}"
                    )
                else:
                    result.differences.append(
                        Difference(stream, i + 1, label, a.printed[k], b.printed[k])
                    )
    return result


def duplicates(per_rank: list[list[Line]]) -> dict[int, list[str]]:
    """Lines shown by processes other than the main one (rank -> lines)."""
    return {
        rank: [line.text for line in lines] for rank, lines in enumerate(per_rank) if rank and lines
    }


def _aligned(original: list[Line], other: list[Line]) -> dict[int, Line]:
    matcher = difflib.SequenceMatcher(
        None, [line.template for line in original], [line.template for line in other], False
    )
    pairs = {}
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            pairs.update({i1 + k: other[j1 + k] for k in range(i2 - i1)})
    return pairs


def _within_probe(original: float, migrated: float, probe: float) -> bool:
    return abs(migrated - original) <= PROBE_FACTOR * abs(probe - original)


def _shares(main: list[Line], would_print: list[list[Line]]) -> dict[int, list[Line]]:
    """main line index -> the same `accelerator.print` on every rank (in order of ranks)."""
    own = would_print[0] if would_print else []
    found, position = {}, 0
    for index, line in enumerate(main):
        if position < len(own) and own[position].text == line.text:
            same = [lines[position] for lines in would_print if position < len(lines)]
            if len(same) == len(would_print) and all(s.template == line.template for s in same):
                found[index] = same
            position += 1
    return found


def _per_process(x, y, printed, a: Line, b: Line, k, shares, losses, rtol, atol) -> str | None:
    if shares:
        mean = sum(line.numbers[k] for line in shares) / len(shares)
        if agree(x, mean, (printed[0], printed[1]), rtol, atol):
            return (
                f"each process prints its own value; their mean over the {len(shares)} "
                f"processes, {mean:.6g}, agrees with the original"
            )
    if losses is None or a.step != b.step:
        return None
    window = _loss_window(x, y, printed, a.step, losses, rtol, atol)
    if window is None:
        return None
    how, steps = window
    return (
        f"the {how} loss of the main process's own share over its last {steps} step"
        f"{'s' if steps > 1 else ''}, as the original's is of its batches (a per-process "
        "value: each process trains on its slice of the batch)"
    )


def _loss_window(x, y, printed, step, losses: Losses, rtol, atol):
    """(mean|sum, w) when x is the original's loss over the w steps up to `step` (or the step
    under way) and y the main process's over the same steps. A line written at an unknown
    step (-1: a log file read back) is tried at every step, over shorter windows."""
    a, b = losses.original, losses.migrated
    steps = min(len(a), len(b))
    ends, longest = (step, step + 1), MAX_WINDOW
    if step < 0:
        ends, longest = range(1, steps + 1), max(1, UNKNOWN_STEP_WORK // max(steps, 1))
    for end in ends:
        if end < 1 or end > steps:
            continue
        sum_a = sum_b = 0.0
        for w in range(1, min(end, longest) + 1):
            sum_a += a[end - w]
            sum_b += b[end - w]
            if not (math.isfinite(sum_a) and math.isfinite(sum_b)):
                break
            for how, va, vb in (("mean", sum_a / w, sum_b / w), ("summed", sum_a, sum_b)):
                if agree(va, x, printed, rtol, atol) and agree(vb, y, printed[::-1], rtol, atol):
                    return how, w
    return None
