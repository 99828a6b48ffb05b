"""MIG030 on a download run on import (`nltk.download("punkt")` at module level) in a program
whose Accelerator takes arguments a function computes (`gradient_accumulation_steps=
args.accum` from `main()`): the download runs first on the main process through the
process-wide state, `PartialState().main_process_first()`, so the Accelerator stays in the
function where its arguments are. Before, the module-level need pulled the Accelerator out
and the program was refused (MIG900)."""

from __future__ import annotations

from migrator.engine import migrate_text

DOWNLOADED = """\
import argparse

import nltk
import torch
from torch.utils.data import DataLoader, TensorDataset

nltk.download("punkt")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum", type=int, default=2)
    args = parser.parse_args()
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / {accum}
        loss.backward()
        if (step + 1) % {accum} == 0:
            optimizer.step()
            optimizer.zero_grad()


main()
"""


def test_a_download_on_import_leaves_the_accelerator_with_its_arguments():
    output, findings = migrate_text(DOWNLOADED.format(accum="args.accum"))
    assert output is not None, [f.message for f in findings]
    assert 'with PartialState().main_process_first():\n    nltk.download("punkt")\n' in output
    assert "    accelerator = Accelerator(gradient_accumulation_steps=args.accum)\n" in output


def test_an_accelerator_without_such_arguments_guards_the_download_itself():
    output, _ = migrate_text(DOWNLOADED.format(accum="2"))
    assert 'with accelerator.main_process_first():\n    nltk.download("punkt")\n' in output
