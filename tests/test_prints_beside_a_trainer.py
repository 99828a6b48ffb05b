"""A print on every process where no accelerator can be seen - module code and functions
beside a Trainer class that owns the Accelerator (`self.accelerator`) - prints once, through
the process-wide state: `PartialState().print(...)` (h12 review: a forecasting script's
`main()` printed its test metrics once per process). Where the Accelerator is made with
`cpu=`, a state made first would pick the GPU that Accelerator refuses: the print stays."""

from __future__ import annotations

import pytest

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

TRAINER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Forecaster:
    def __init__(self, use_cpu):
        self.device = torch.device("cpu" if use_cpu else "cuda")
        self.model = torch.nn.Linear(4, 1).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def train_model(self, data):
        loader = DataLoader(data, batch_size=4)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(self.model(x.to(self.device)), y.to(self.device))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


{before}def main():
    print("loading data")
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    forecaster = Forecaster({use_cpu})
    last = forecaster.train_model(data)
    print(f"metrics: {{last:.3f}}")
    for name in ("mse", "mae"):
        print(name)


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("before", ["", "print('module code')\n\n\n"])
def test_prints_outside_the_trainer_print_once_through_the_state(before):
    output, findings = migrate_text(TRAINER.format(before=before, use_cpu="False"))
    assert output is not None, [f.message for f in findings]
    assert "self.accelerator = Accelerator(" in output
    assert "from runtime import Accelerator, PartialState" in output
    for printed in ('("loading data")', '(f"metrics: {last:.3f}")', "(name)"):
        assert f"    PartialState().print{printed}" in output
    assert "    print(" not in output
    # module code runs again in every DataLoader worker started by spawn: no state there
    assert ("\nprint('module code')\n" in output) == bool(before)


def test_a_print_stays_where_the_accelerator_is_made_for_the_cpu():
    output, findings = migrate_text(TRAINER.format(before="", use_cpu="True"))
    assert output is not None, [f.message for f in findings]
    assert "self.accelerator = Accelerator(cpu=True)" in output
    assert "PartialState" not in output and '    print("loading data")' in output


@pytest.mark.slow
def test_on_two_processes_the_driver_prints_each_line_once(tmp_path):
    output, _findings = migrate_text(TRAINER.format(before="", use_cpu="False"))
    script = tmp_path / "train.py"
    script.write_text(output)
    done = launch(script, tmp_path)
    assert done.stdout.count("loading data") == 1, done.stdout
    assert done.stdout.count("metrics:") == 1 and done.stdout.count("mae") == 1
