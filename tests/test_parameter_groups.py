"""An optimizer built on parameter groups of lists filled in a loop over a model's parameters
(Barlow Twins' weight/bias split, the usual weight-decay split) trains that model: it is
prepared with the optimizer, where it was "could not tell which model the optimizer trains"."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch_each_writing

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
decay = []
no_decay = []
for name, param in model.named_parameters():
    if param.ndim == 1:
        no_decay.append(param)
    else:
        decay.append(param)
groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
optimizer = torch.optim.AdamW(groups, lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=4)
steps = 0
for x, y in loader:
    steps += 1
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print("weights", steps, round(sum(p.sum().item() for p in model.parameters()), 6))
"""


def test_the_model_whose_parameters_fill_the_groups_is_prepared_with_the_optimizer():
    output, findings = migrate_text(SCRIPT)
    assert output is not None, [f.message for f in findings]
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n" in output
    assert "accelerator.backward(loss)\n" in output and ".backward()" not in output
    assert "optimizer = torch.optim.AdamW(groups, lr=0.01)\n" in output


def test_a_list_grown_another_way_too_is_not_taken_for_the_models_parameters():
    source = SCRIPT.replace(
        "groups = [", "decay.extend(torch.nn.Linear(2, 2).parameters())\ngroups = ["
    )
    output, findings = migrate_text(source)
    assert output is None
    assert any("could not tell which model the optimizer trains" in f.message for f in findings)


def test_a_loop_over_part_of_a_model_is_not_the_whole_model():
    source = SCRIPT.replace("in model.named_parameters()", "in model[0].named_parameters()")
    output, findings = migrate_text(source)
    assert output is None
    assert any(f.code == "MIG900" for f in findings)


def test_grouped_parameters_train_in_step_on_two_processes(tmp_path):
    printed = launch_each_writing(migrate_text(SCRIPT)[0], '"weights"', tmp_path)
    # each process drew its own 4 batches; DDP averaged their gradients, so the weights agree
    assert printed[0] == printed[1] and printed[0].startswith("(4, "), printed
