"""A loop over a name bound by a flag to a progress bar around the Trainer's loader or to the
loader itself (`if use_tqdm: it = tqdm(self.loader)` / `else: it = self.loader`) draws from
that loader: it is prepared, and the Accelerator of a Trainer whose `__init__` starts with
`super().__init__()` is made after that call."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm


class Trainer(object):
    def __init__(self, model, optimizer, loader):
        super(Trainer, self).__init__()
        self.model = model
        self.optimizer = optimizer
        self.loader = loader

    def train_epoch(self, use_tqdm=True):
        self.model.train()
        if use_tqdm:
            batches = tqdm(self.loader)
            batches.set_description("train")
        else:
            batches = self.loader
        steps = 0
        for x, y in batches:
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            steps += 1
        return steps


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), DataLoader(data, 4))
    print("steps", trainer.train_epoch(), trainer.train_epoch(use_tqdm=False))
"""


def test_the_loader_behind_the_flagged_bar_is_prepared_after_super_init():
    output, findings = migrate_text(SCRIPT)
    assert output is not None, [f.message for f in findings]
    assert (
        "        super(Trainer, self).__init__()\n"
        "        self.accelerator = Accelerator()\n"
        "        self.model = model\n"
    ) in output
    assert (
        "        self.model, self.optimizer, self.loader = self.accelerator.prepare(\n"
        "            self.model, self.optimizer, self.loader\n"
        "        )\n"
    ) in output
    assert "            batches = self.loader\n" in output
    assert "self.accelerator.backward(loss)" in output and ".backward()" not in output


def test_both_branches_draw_this_process_shard_on_two_processes(tmp_path):
    script = tmp_path / "flagged.py"
    output = migrate_text(SCRIPT)[0]
    # the guard cannot see the Trainer's accelerator: the process-wide state prints
    shown = 'PartialState().print("steps", trainer.train_epoch(), trainer.train_epoch(use_tqdm=False))\n'
    assert shown in output
    # each process writes its own counts (two processes printing to one pipe interleave)
    each = 'open(f"steps{os.environ[\'RANK\']}.txt", "w").write(str((trainer.train_epoch(), trainer.train_epoch(use_tqdm=False))))\n'
    script.write_text("import os\n" + output.replace(shown, each))
    launch(script, tmp_path)
    # 32 samples in batches of 4 over two processes: 4 batches each, bar or not
    assert [(tmp_path / f"steps{rank}.txt").read_text() for rank in range(2)] == ["(4, 4)"] * 2


CONDITIONAL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm


def train_epoch(model, train_loader, optimizer, progress=True):
    loop = {bound}
    total = 0.0
    for x, y in loop:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(train_loader)


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        print(epoch, train_epoch(model, loader, optimizer))


main()
"""


@pytest.mark.parametrize(
    "bound",
    [
        'tqdm(train_loader, desc="train") if progress else train_loader',
        "train_loader if not progress else tqdm(train_loader)",
        "enumerate(train_loader) if False else train_loader",
    ],
)
def test_a_bar_chosen_by_a_flag_in_one_expression_draws_from_the_loader(bound):
    """`loop = tqdm(loader) if progress else loader` (h8 emotion_analyse): both sides yield
    the loader's batches; read as an unknown iterable the loop refused, naming `loop` as the
    loader."""
    if bound.startswith("enumerate"):  # a side yielding something else: not the loader's items
        output, findings = migrate_text(CONDITIONAL.format(bound=bound))
        assert output is None or "accelerator.prepare(model, optimizer, loader)" not in output
        return
    output, findings = migrate_text(CONDITIONAL.format(bound=bound))
    assert output is not None, [f.message for f in findings]
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output
    # the loop's sum over this process's batches, averaged over them: the mean
    assert 'total = accelerator.reduce(torch.tensor(total, device=accelerator.device), "mean")' in (
        output
    )
