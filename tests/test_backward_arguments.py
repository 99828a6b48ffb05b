"""MIG005 with Tensor.backward's positional arguments (WGAN's `errD.backward(mone)`):
`accelerator.backward(loss, **kwargs)` takes no positional argument after the loss, so each
is passed by its name (`gradient`, `retain_graph`, `create_graph`, `inputs`)."""

from __future__ import annotations

import subprocess
import sys

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

CRITIC = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
critic = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(critic.parameters(), lr=0.1)
one = torch.tensor(1.0)
mone = one * -1
for (x,) in loader:
    opt.zero_grad()
    err_real = critic(x).mean()
    err_real.backward(mone)
    err_fake = critic(-x).mean()
    err_fake.backward(one, None)
    opt.step()
print("bias", round(critic.bias.item(), 6))
"""


def test_positional_backward_arguments_are_passed_by_name():
    output, _ = migrate_text(CRITIC)
    assert output is not None
    assert "    accelerator.backward(err_real, gradient=mone)\n" in output
    assert "    accelerator.backward(err_fake, gradient=one, retain_graph=None)\n" in output


def test_a_backward_with_a_gradient_runs_on_two_processes_as_on_one(tmp_path):
    (tmp_path / "original.py").write_text(CRITIC)
    single = subprocess.run([sys.executable, "original.py"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    output, _ = migrate_text(CRITIC)
    (tmp_path / "critic.py").write_text(output)
    done = launch(tmp_path / "critic.py", tmp_path)
    # d(mean)/d(bias) is 1 for both terms, weighted -1 and +1: the bias never moves
    assert single.stdout.strip() in done.stdout.splitlines()
