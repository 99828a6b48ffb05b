"""MIG007 on the module API DDP answers about itself: a prepared model is the wrapper on N
processes, whose one child is the model and whose paths start with `module.`, so
`model.children()` / `named_children()` / `get_submodule(...)` (and what adds to or registers
on the model) go through `accelerator.unwrap_model(model)`; the API DDP passes through
(`parameters()`, `train()`, `modules()`) is left."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

STRUCTURE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.eval()
features = torch.nn.Sequential(*list(model.children())[:-1])
names = [name for name, _ in model.named_children()]
print("features", tuple(features(torch.ones(1, 4)).shape), names,
      tuple(model.get_submodule("2").weight.shape), sum(1 for _ in model.modules()))
"""


def test_the_models_own_structure_is_read_through_unwrap_model():
    output, findings = migrate_text(STRUCTURE)
    assert output is not None, [f.message for f in findings]
    unwrapped = "accelerator.unwrap_model(model)"
    assert f"list({unwrapped}.children())[:-1]" in output
    assert f"{unwrapped}.named_children()" in output
    assert f'{unwrapped}.get_submodule("2")' in output
    assert "sum(1 for _ in model.modules())" in output  # DDP passes its modules through
    assert "model.eval()\n" in output


def test_two_processes_see_the_models_children(tmp_path):
    script = tmp_path / "migrated.py"
    script.write_text(migrate_text(STRUCTURE)[0])
    done = launch(script, tmp_path)
    assert "features (1, 8) ['0', '1', '2'] (1, 8)" in done.stdout, done.stdout
