"""How a run ended, in a sentence: it finished; it crashed (where, in the user's code); it hung
(where each rank waits, and which ranks did not arrive); or it ran out of time.

Read in the parent, without torch, from the ranks' records (the traceback that ended the
script), their step logs and, for a hung run, the stacks each rank dumped on request
(faulthandler's format: "Thread 0x... (most recent call first):" then `File "...", line N
in function` lines).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from migrator.verify.records import RunRecord, stack_file
from migrator.verify.runs import RunResult

FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>.+)$')
THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+")
OWN_PACKAGES = tuple(
    str(Path(__file__).resolve().parents[2] / name) for name in ("migrator", "runtime")
)
LIBRARY_MARKERS = ("site-packages", "dist-packages", "<frozen")
FINISHED_WAIT = "wait_for_other_ranks"


@dataclass
class Ending:
    kind: str  # finished | crashed | exited | hung | timed-out | failed
    message: str = ""  # what happened, for a run that did not finish
    steps: int = 0  # optimizer steps the main process made
    ranks: list[int] = field(default_factory=list)  # the ranks that failed or did not arrive

    @property
    def finished(self) -> bool:
        return self.kind == "finished"


def is_library(path: str) -> bool:
    if any(marker in path for marker in LIBRARY_MARKERS) or path.startswith(OWN_PACKAGES):
        return True
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return any(path.startswith(str(Path(p) / "lib")) for p in prefixes)


def where(frame: dict) -> str:
    """`train.py:57 in main: scheduler.step()` (the file's name, not its temporary folder)."""
    text = f"{Path(frame['file']).name}:{frame['line']} in {frame['function']}"
    code = frame.get("code")
    return f"{text}: {code.strip()}" if code else text


def user_frame(frames: list[dict]) -> dict | None:
    """The innermost frame in the script's own code (frames innermost last)."""
    return next((f for f in reversed(frames) if not is_library(f["file"])), None)


def describe(result: RunResult, record: RunRecord | None, nproc: int) -> Ending:
    steps = len(record.ranks[0].step_losses) if record and record.ranks else 0
    if record is not None and result.returncode == 0 and all(r.finished for r in record.ranks):
        return Ending("finished", steps=steps)
    if result.hung:
        return _hung(result, record, nproc, steps)
    if result.timed_out:
        return Ending(
            "timed-out",
            f"did not finish within the time limit (--timeout), after {steps} optimizer steps",
            steps,
        )
    failed = [r for r in (record.ranks if record else []) if r.status in ("crashed", "exited")]
    if not failed:
        return Ending(
            "failed",
            f"failed (exit code {result.returncode}) after {steps} optimizer steps, "
            "leaving no record of why",
            steps,
        )
    rank = failed[0]
    on_rank = f" on rank {rank.rank}" if nproc > 1 else ""
    after = f"after {len(rank.step_losses)} optimizer steps"
    if rank.status == "exited":
        return Ending("exited", f"exited{on_rank} {after} with {rank.error}", steps, [rank.rank])
    inner = user_frame(rank.frames)
    last = rank.frames[-1] if rank.frames else None
    text = f"crashed{on_rank} {after}: {rank.error}"
    if inner is not None:
        text += f", at {where(inner)}"
    if last is not None and last is not inner:
        text += f" (raised in {_short(last['file'])}:{last['line']} in {last['function']})"
    return Ending("crashed", text, steps, [r.rank for r in failed])


def _short(path: str) -> str:
    parts = Path(path).parts
    for anchor in ("site-packages", "dist-packages"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + 1 :])
    return Path(path).name


# ---- a hung run: where each rank waits ---------------------------------------------------


def read_stacks(text: str) -> list[list[dict]]:
    """The threads of a faulthandler dump, each as frames innermost last."""
    threads, current = [], None
    for line in text.splitlines():
        if THREAD.match(line):
            current = []
            threads.append(current)
            continue
        match = FRAME.match(line)
        if match and current is not None:
            current.insert(0, {**match.groupdict(), "line": int(match["line"])})
    return [thread for thread in threads if thread]


def main_thread(threads: list[list[dict]]) -> list[dict] | None:
    """The thread that runs the script: its outermost frame is the recorder's bootstrap."""
    for thread in threads:
        if any(frame["function"] == "run_script" for frame in thread[:4]):
            return thread
    return threads[0] if threads else None


@dataclass
class Place:
    rank: int
    finished: bool = False
    collective: str | None = None  # the torch.distributed function it waits in
    at: dict | None = None  # its innermost frame in the script
    steps: int = 0

    def key(self) -> tuple:
        return (self.finished, self.collective, self.at and (self.at["file"], self.at["line"]))

    def text(self) -> str:
        if self.finished:
            return "it finished the script"
        what = f"waits in {self.collective}" if self.collective else "is"
        at = f" at {where(self.at)}" if self.at else ""
        return f"{what}{at} (after step {self.steps})"


def place_of(rank: int, text: str, steps: int) -> Place:
    thread = main_thread(read_stacks(text)) or []
    place = Place(rank, steps=steps)
    if any(frame["function"] == FINISHED_WAIT for frame in thread):
        place.finished = True
        return place
    for frame in reversed(thread):
        if frame["file"].endswith("distributed_c10d.py"):
            place.collective = frame["function"]
            break
        if "/torch/autograd/" in frame["file"] and frame["function"] in (
            "backward",
            "_engine_run_backward",
        ):
            place.collective = "backward (DistributedDataParallel's gradient all-reduce)"
            break
    place.at = user_frame([{**f, "code": ""} for f in thread])
    return place


def _hung(result: RunResult, record: RunRecord | None, nproc: int, steps: int) -> Ending:
    stalled = f"timed out: no progress for {result.stall_s:.0f} s (a hang)"
    places = []
    for rank in range(nproc):
        try:
            text = stack_file(result.run_dir, rank).read_text(errors="replace")
        except OSError:
            text = ""
        rank_steps = (
            len(record.ranks[rank].step_losses) if record and rank < len(record.ranks) else 0
        )
        places.append(place_of(rank, text, rank_steps))
    if not any(p.finished or p.at or p.collective for p in places):
        return Ending("hung", f"{stalled}; where it waits could not be read", steps)
    if nproc == 1:
        return Ending("hung", f"{stalled}: the process {places[0].text()}", steps, [])
    waiting = next((p for p in places if p.collective and not p.finished), places[0])
    arrived = [p for p in places if p.key() == waiting.key()]
    missing = [p for p in places if p.key() != waiting.key()]
    names = ", ".join(str(p.rank) for p in arrived)
    text = f"{stalled}: rank{'s' if len(arrived) > 1 else ''} {names} {waiting.text()}"
    if missing:
        text += "; " + "; ".join(f"rank {p.rank} did not arrive: {p.text()}" for p in missing)
    return Ending("hung", text, steps, [p.rank for p in missing])
