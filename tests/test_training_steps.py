"""The soundness check's fourth obligation (MIG954): every optimizer a migrated program steps is
prepared. A second model's step the rules did not reach would train that model on each
process apart (its gradients never averaged) while the rest trains one model, so the file is
left as it was. Also: the methods of a class
that no running code here calls (a Trainer driven from another file) run where their class
does - on every process - so their writes are guarded, and their training steps checked."""

from __future__ import annotations

from migrator.engine import migrate_text
from migrator.soundness import check_output

TRAINER = """\
import matplotlib.pyplot as plt
import torch
from torch.optim import Adam


def latents(n):
    return torch.randn(n, 2)


class Trainer:
    def __init__(self, gen, disc, n_disc):
        self.gen = gen
        self.disc = disc
        self.n_disc = n_disc
        self.gen_opt = Adam(self.gen.parameters(), lr=1e-3)
        self.disc_opt = Adam(self.disc.parameters(), lr=1e-3)
        self.losses = []

    def train(self, steps):
        for step in range(steps):
            self._train_step()
        self._plot()

    def _train_step(self):
        for _ in range(self.n_disc):
            self.disc.train()
            self.disc_opt.zero_grad()
            real = torch.randn(8, 2) + 3
            loss = self.disc(self.gen(latents(8)).detach()).mean() - self.disc(real).mean()
            loss.backward()
            self.disc_opt.step()
        {gen_step}

    def _gen_step(self):
        self.gen.train()
        self.gen_opt.zero_grad()
        gen_loss = -self.disc(self.gen(latents(8))).mean()
        gen_loss.backward()
        self.gen_opt.step()
        self.losses.append(gen_loss.item())

    def _plot(self):
        plt.plot(self.losses)
        plt.savefig("losses.png")
"""


def test_a_step_the_rules_did_not_reach_leaves_the_file_as_it_was():
    output, findings = migrate_text(TRAINER.format(gen_step="self._gen_step()"))
    assert output is None
    [escaped] = [f for f in findings if f.code == "MIG954"]
    assert escaped.line == 39 and "`self.gen_opt.step()`" in escaped.message
    assert "each process would train its model apart" in escaped.message


def test_methods_no_code_here_calls_run_on_every_process():
    """Without the generator's step the Trainer migrates: `train()` is called from another
    file, and its `_plot()` writes the figure on the main process only."""
    source = TRAINER.format(gen_step="pass")
    start = source.index("    def _gen_step(self):")
    source = source[:start] + source[source.index("    def _plot(self):") :]
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    assert (
        '        if self.accelerator.is_main_process:\n            plt.savefig("losses.png")\n'
    ) in output


MIGRATED = """\
import torch
from runtime import Accelerator

accelerator = Accelerator()
model = torch.nn.Linear(2, 1)
critic = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
critic_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
for step in range(4):
    loss = model(torch.randn(4, 2)).pow(2).mean()
    optimizer.zero_grad()
    accelerator.backward(loss)
    optimizer.step()
    {critic_step}
"""


def test_the_obligation_reads_the_output():
    left = (
        "critic_loss = critic(torch.randn(4, 1)).mean()\n    critic_loss.backward()\n"
        "    critic_opt.step()"
    )
    found = [f for f in check_output(MIGRATED.format(critic_step=left)) if f.code == "MIG954"]
    assert len(found) == 1 and "steps `critic_opt`, which is not prepared" in found[0].message
    # prepared with the model: a plain `loss.backward()` on it is DDP's, and sound
    both = MIGRATED.format(critic_step=left).replace(
        "model, optimizer = accelerator.prepare(model, optimizer)",
        "model, optimizer, critic, critic_opt = accelerator.prepare(\n"
        "    model, optimizer, critic, critic_opt\n)",
    )
    assert not [f for f in check_output(both) if f.code == "MIG954"]
    unmigrated_module = MIGRATED.format(critic_step=left).replace(
        "model, optimizer = accelerator.prepare(model, optimizer)\n", ""
    )
    assert not [f for f in check_output(unmigrated_module) if f.code == "MIG954"]
    scheduled = MIGRATED.format(
        critic_step="scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)\n"
        "    scheduler.step()"
    )
    assert not [f for f in check_output(scheduled) if f.code == "MIG954"]
