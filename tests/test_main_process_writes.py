"""MIG030's file writes and trackers (issue 14, item 2): what goes under the main process and
what is left."""

from __future__ import annotations

from migrator.engine import migrate_text

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
        '        f = open("done.txt", "w")\n'
        '        f.write("finished")\n'
        "        f.close()\n"
    ) in output
    assert "    with open(path) as f:\n        return yaml.safe_load(f)\n" in output  # a read


def test_a_writer_passed_to_a_helper_is_left_with_a_note():
    output, findings = migrate_text(SCRIPT)
    assert "    writer = SummaryWriter()\n    for x in loader:" in output.replace(
        "\n    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n", ""
    )
    assert [(f.code, f.level) for f in findings] == [("MIG030", "note")]
    assert "`writer`" in findings[0].message
