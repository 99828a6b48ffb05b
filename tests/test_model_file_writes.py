"""MIG030 guards the writes of a model's own files in training code, as it does `np.save`:
`save_pretrained(...)` of a model or a tokenizer and `torch.onnx.export(...)` run on the main
process only (every process would write the same files at once)."""

from __future__ import annotations

from migrator.engine import migrate_text

SCRIPT = """\
import json

import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.linear(x)

    def save_pretrained(self, folder):
        torch.save(self.state_dict(), f"{folder}/weights.pt")


model = Regressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained("out")
    torch.onnx.export(model, torch.randn(1, 4), "out/model.onnx")
"""


def test_save_pretrained_and_onnx_export_run_on_the_main_process():
    output, _ = migrate_text(SCRIPT)
    assert output is not None
    assert (
        "    if accelerator.is_main_process:\n"
        '        accelerator.unwrap_model(model).save_pretrained("out")\n'
        "        torch.onnx.export(accelerator.unwrap_model(model), torch.randn(1, 4), "
        '"out/model.onnx")\n'
    ) in output
