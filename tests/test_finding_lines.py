"""Every finding is one line, `path:line:col: CODE message`, even where its message quotes
source that spans lines (a parenthesised f-string, CRLF line endings)."""

from __future__ import annotations

from migrator.engine import migrate_text
from migrator.findings import Finding

SHOWN = (
    "import torch\r\nfrom torch.utils.data import DataLoader, TensorDataset\r\n\r\n"
    "loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)\r\n"
    "model = torch.nn.Linear(4, 1)\r\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\r\n"
    "for x, y in loader:\r\n    out = model(x)\r\n"
    "    loss = torch.nn.functional.mse_loss(out, y)\r\n    optimizer.zero_grad()\r\n"
    "    loss.backward()\r\n    optimizer.step()\r\n"
    '    print(f"mean {out.mean().item():.3f}"\r\n          f" max {out.max().item():.3f}")\r\n'
)


def test_a_finding_quoting_several_lines_renders_on_one():
    _output, findings = migrate_text(SHOWN)
    quoted = [f for f in findings if f.code == "MIG953"]
    assert quoted, [f.message for f in findings]
    for finding in findings:
        rendered = finding.render("train.py")
        assert "\n" not in rendered and "\r" not in rendered
    assert '`f"mean {out.mean().item():.3f}" f" max' in quoted[0].message


def test_a_message_made_of_lines_is_joined_on_single_spaces():
    assert Finding(code="MIG900", message="a\r\n    b\n c").message == "a b c"
