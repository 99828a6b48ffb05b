"""Files each process wrote, against the original's: written twice, missing, by pattern."""

from __future__ import annotations

from pathlib import Path

from migrator.verify.files import RunFiles, compare_files, pattern
from migrator.verify.records import RankRecord, RunRecord


def run(*ranks: list[tuple[str, str]]) -> RunFiles:
    records = [
        RankRecord(
            rank,
            "completed",
            [],
            [],
            0,
            [],
            {},
            writes=[{"path": p, "kind": k, "how": "open", "step": 0} for p, k in writes],
        )
        for rank, writes in enumerate(ranks)
    ]
    return RunFiles(RunRecord(records), run_dir=Path("/nonexistent"), sandbox=None)


def compare(original, migrated):
    return compare_files(original, migrated, rtol=1e-5, atol=1e-6, losses=None)


def test_a_file_every_process_writes_is_named_with_its_ranks():
    result = compare(
        run([("model.pt", "file")]), run([("model.pt", "file")], [("model.pt", "file")])
    )
    expected = (
        "model.pt is written by 2 processes (ranks 0, 1), where the original writes it once: "
        "they overwrite or interleave each other's writes"
    )
    assert result.duplicates == [expected]
    assert result.missing == []


def test_per_process_names_of_one_output_count_as_written_twice():
    event = "runs/a/events.out.tfevents.1700000000.host.{}.0"
    result = compare(
        run([(event.format(111), "file")]),
        run([(event.format(222), "file")], [(event.format(333), "file")]),
    )
    assert "each under its own name" in result.duplicates[0]


def test_a_folder_every_process_creates_is_no_problem():
    result = compare(run([("out", "folder")]), run([("out", "folder")], [("out", "folder")]))
    assert result.duplicates == [] and result.missing == []


def test_a_file_no_process_writes_any_more_is_named():
    result = compare(run([("log.csv", "file"), ("figs", "folder")]), run([], []))
    assert result.missing == [
        "figs: the original writes this folder, no process of the migrated run does",
        "log.csv: the original writes this file, no process of the migrated run does",
    ]


def test_files_the_original_does_not_write_are_not_judged():
    # save_state's random_states_<rank>.pkl: one per process by design
    result = compare(
        run([]), run([("ckpt/random_states_0.pkl", "file")], [("ckpt/random_states_1.pkl", "file")])
    )
    assert result.duplicates == [] and result.missing == [] and result.written == 0


def test_numbered_outputs_of_one_process_are_one_pattern():
    assert pattern("ckpt/epoch_12.pt") == pattern("ckpt/epoch_3.pt") == "ckpt/epoch_#.pt"
    result = compare(
        run([("ckpt/epoch_1.pt", "file"), ("ckpt/epoch_2.pt", "file")]),
        run([("ckpt/epoch_1.pt", "file"), ("ckpt/epoch_2.pt", "file")], []),
    )
    assert result.duplicates == [] and result.missing == []
