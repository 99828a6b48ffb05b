"""How a run ended: crash frames in the user's code, where each rank of a hung run waits."""

from __future__ import annotations

import faulthandler
from pathlib import Path

from migrator.verify.ending import describe, place_of, read_stacks
from migrator.verify.records import RankRecord, RunRecord, stack_file
from migrator.verify.runs import RunResult

DUMP = """Thread 0x00007f0000000002 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/venv/site-packages/tqdm/_monitor.py", line 60 in run

Current thread 0x00007f0000000001 (most recent call first):
  File "/venv/site-packages/torch/distributed/distributed_c10d.py", line 3100 in all_gather
  File "/venv/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper
  File "/home/me/project/train.py", line 22 in evaluate
  File "/home/me/project/train.py", line 48 in <module>
  File "/repo/migrator/verify/recorder.py", line 250 in run_script
  File "/repo/migrator/verify/recorder.py", line 300 in main
  File "/tmp/boot_migrated.py", line 2 in <module>
"""
FINISHED = """Current thread 0x00007f0000000001 (most recent call first):
  File "/repo/migrator/verify/liveness.py", line 120 in wait_for_other_ranks
  File "/repo/migrator/verify/recorder.py", line 280 in _finish
  File "/repo/migrator/verify/recorder.py", line 250 in run_script
  File "/tmp/boot_migrated.py", line 2 in <module>
"""


def test_a_dump_reads_as_threads_of_frames_innermost_last():
    threads = read_stacks(DUMP)
    assert len(threads) == 2
    assert threads[1][-1]["function"] == "all_gather" and threads[1][0]["line"] == 2


def test_a_rank_waiting_in_a_collective_is_placed_in_the_users_code():
    place = place_of(0, DUMP, steps=10)
    assert place.collective == "all_gather"
    assert place.text() == "waits in all_gather at train.py:22 in evaluate (after step 10)"
    assert place_of(1, FINISHED, steps=10).text() == "it finished the script"


def test_a_real_faulthandler_dump_is_read(tmp_path):
    path = tmp_path / "dump.txt"
    with open(path, "w") as handle:
        faulthandler.dump_traceback(handle, all_threads=True)
    threads = read_stacks(path.read_text())
    assert any(
        frame["function"] == "test_a_real_faulthandler_dump_is_read"
        for thread in threads
        for frame in thread
    )


def result(run_dir: Path, returncode, hung=False) -> RunResult:
    return RunResult("migrated", returncode, 30.0, run_dir, "", hung=hung, stall_s=20.0)


def test_a_hung_run_names_where_ranks_wait_and_which_did_not_arrive(tmp_path):
    stack_file(tmp_path, 0).write_text(DUMP)
    stack_file(tmp_path, 1).write_text(FINISHED)
    record = RunRecord(
        [
            RankRecord(0, "killed", [1.0] * 10, [], 0, [], {}),
            RankRecord(1, "completed", [1.0] * 10, [], 0, [], {}),
        ]
    )
    ending = describe(result(tmp_path, None, hung=True), record, 2)
    assert ending.kind == "hung" and ending.ranks == [1]
    assert ending.message == (
        "timed out: no progress for 20 s (a hang): rank 0 waits in all_gather at train.py:22 "
        "in evaluate (after step 10); rank 1 did not arrive: it finished the script"
    )


def test_a_crash_names_the_users_line_and_where_it_was_raised(tmp_path):
    frames = [
        {"file": "/p/train.py", "line": 40, "function": "<module>", "code": "train()"},
        {"file": "/p/train.py", "line": 31, "function": "train", "code": "scheduler.step()"},
        {
            "file": "/venv/site-packages/torch/optim/lr_scheduler.py",
            "line": 200,
            "function": "step",
            "code": "values = self.get_lr()",
        },
    ]
    record = RunRecord(
        [
            RankRecord(0, "completed", [1.0] * 5, [], 0, [], {}),
            RankRecord(
                1,
                "crashed",
                [1.0] * 4,
                [],
                0,
                [],
                {},
                error="IndexError: list index out of range",
                frames=frames,
            ),
        ]
    )
    ending = describe(result(tmp_path, 1), record, 2)
    assert ending.kind == "crashed" and ending.ranks == [1]
    assert ending.message == (
        "crashed on rank 1 after 4 optimizer steps: IndexError: list index out of range, at "
        "train.py:31 in train: scheduler.step() (raised in torch/optim/lr_scheduler.py:200 "
        "in step)"
    )


def test_a_finished_run_is_finished(tmp_path):
    record = RunRecord([RankRecord(0, "stopped", [1.0], [], 0, [], {})])
    assert describe(result(tmp_path, 0), record, 1).finished
