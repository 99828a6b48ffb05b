"""MIG030's file writes and trackers (issue 14, item 2): what goes under the main process and
what is left."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.fixtures import without_batch_note

SCRIPT = """\
import torch
import yaml
from torch.utils.tensorboard import SummaryWriter


def read_config(path):
    with open(path) as f:
        return yaml.safe_load(f)


def log_weights(writer, model):
    writer.add_histogram("weight", model.weight)


def main():
    config = read_config("config.yml")
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=2)
    writer = SummaryWriter()
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    log_weights(writer, model)
    f = open("done.txt", "w")
    f.write("finished")
    f.close()
"""


def test_a_log_file_and_its_writes_are_guarded_whatever_other_functions_call_f():
    output, _ = migrate_text(SCRIPT)
    assert (
        "    if accelerator.is_main_process:\n"
        "        log_weights(writer, model)\n"
        '        f = open("done.txt", "w")\n'
        '        f.write("finished")\n'
        "        f.close()\n"
    ) in output
    assert "    with open(path) as f:\n        return yaml.safe_load(f)\n" in output  # a read


def test_a_writer_handed_to_a_helper_is_made_and_handed_on_the_main_process():
    output, findings = migrate_text(SCRIPT)
    assert "    if accelerator.is_main_process:\n        writer = SummaryWriter()\n" in output
    assert "    if accelerator.is_main_process:\n        log_weights(writer, model)\n" in output
    assert without_batch_note(findings) == []


def test_a_writer_used_beyond_calls_is_left_and_the_program_refused():
    """`summaries.append(writer)`: neither a method call nor a helper's argument; guarding
    its making would leave the other processes without it, and leaving it writes on every
    process: MIG030's note, then the soundness check's refusal."""
    script = SCRIPT.replace("    log_weights(writer, model)\n", "    summaries = [writer]\n")
    output, findings = migrate_text(script)
    assert output is None
    assert [(f.code, f.level) for f in findings][:2] == [("MIG030", "note"), ("MIG952", "warning")]


def test_the_log_files_golden_writes_its_file_from_the_main_process_only(tmp_path):
    """On 2 processes each runs 2 of the 4 batches: the main process alone writes its 2 loss
    lines and logs its 2 steps to the log files (both would append 4)."""
    import os
    import subprocess
    import sys

    from tests.fixtures import GOLDEN, ROOT

    script = tmp_path / "train.py"
    script.write_text((GOLDEN / "main_process_log_files.out.py").read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (tmp_path / "losses.txt").read_text().splitlines()
    assert len(lines) == 2 and all(float(line) == float(line) for line in lines)
    # appended by every process that configured it: the main process's 2 steps, not 4
    assert (tmp_path / "train.log").read_text().count("step") == 2
    assert (tmp_path / "debug.log").read_text().count("step") == 2
