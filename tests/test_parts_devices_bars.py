"""A part of a prepared model is never prepared beside it; a device read from a tensor is no
device setting; a progress bar written `disable=False` becomes the main process's (the held-out
review of 2026-11-27: soft-intro-vae's nested prepare and `device = mu.device`, GPT-2
fine-tuning's bars)."""

from __future__ import annotations

import textwrap

import pytest

from migrator.engine import migrate_text

PART_RUN_ALONE = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 2)
        self.decoder = nn.Linear(2, 4)

    def forward(self, x):
        return self.decoder(self.encoder(x))


vae = AutoEncoder()
optimizer = torch.optim.Adam(vae.parameters(), lr=0.01)
decoder_optimizer = torch.optim.SGD(vae.decoder.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
for (x,) in loader:
    loss = nn.functional.mse_loss(vae(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    {decoder_step}
    decoder_loss = nn.functional.mse_loss(fake, x)
    decoder_optimizer.zero_grad()
    decoder_loss.backward()
    decoder_optimizer.step()
"""


@pytest.mark.parametrize(
    "decoder_step",
    [
        "fake = vae.decoder(vae.encoder(x).detach())",
        "fake = vae.decoder.forward(torch.randn(x.size(0), 2))",
    ],
)
def test_a_part_trained_by_its_own_forward_is_refused(decoder_step):
    # prepared with `vae`, `vae.decoder(...)` runs outside the wrapper: measured on 2
    # processes, the decoder's weights differ across ranks after one epoch
    source = PART_RUN_ALONE.format(decoder_step=decoder_step)
    output, findings = migrate_text(source)
    assert output is None
    refusal = [f for f in findings if f.needs_human]
    assert [f.code for f in refusal] == ["MIG900"]
    assert "`vae.decoder` has an optimizer of its own" in refusal[0].message
    assert "prepared as part of `vae`" in refusal[0].message


def test_a_part_sampled_without_gradients_is_prepared_with_its_model():
    source = PART_RUN_ALONE.format(decoder_step="fake = x").replace(
        "    optimizer.step()\n",
        "    optimizer.step()\n    with torch.no_grad():\n"
        "        sample = vae.decoder(torch.zeros(1, 2))\n",
    )
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "accelerator.prepare(\n    vae, decoder_optimizer, optimizer, loader\n)" in output
    assert "vae.decoder, " not in output
    assert "sample = accelerator.unwrap_model(vae).decoder(torch.zeros(1, 2))" in output


def test_two_parts_of_an_unprepared_whole_are_each_prepared():
    # `gan` itself is never run: its parts are the models, and no DDP holds another
    source = textwrap.dedent("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        gan = nn.ModuleDict({"gen": nn.Linear(2, 4), "disc": nn.Linear(4, 1)})
        gen, disc = gan["gen"], gan["disc"]
        g_opt = torch.optim.Adam(gen.parameters(), lr=0.01)
        d_opt = torch.optim.Adam(disc.parameters(), lr=0.01)
        loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
        for (real,) in loader:
            d_loss = disc(real).mean() - disc(gen(torch.randn(4, 2)).detach()).mean()
            d_opt.zero_grad()
            d_loss.backward()
            d_opt.step()
            g_loss = -disc(gen(torch.randn(4, 2))).mean()
            g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
        """)
    output, findings = migrate_text(source)
    assert output is not None, findings
    prepare = output[output.index("accelerator.prepare(") :].split(")")[0]
    assert "gen" in prepare and "disc" in prepare and "gan" not in prepare


DEVICES = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def helper(value, args):
    {line}
    return {use}


def main(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x) + 0 * helper(y, args).sum(), y)
        loss = loss + 0 * torch.randn(1, device=device).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("line", "use"),
    [
        ("device = value.device", "torch.zeros(value.shape, device=device) + value * 2"),
        ("dev = value.device", "torch.ones_like(value).to(dev) - value"),
        ("device = value.device", "value.detach() + torch.zeros(2).to(device)"),
        ("my_device = value.device", "torch.exp(value).to(my_device)"),
    ],
)
def test_a_device_read_from_a_tensor_stays(line, use):
    output, findings = migrate_text(DEVICES.format(line=line, use=use))
    assert output is not None, findings
    assert f"    {line}\n    return {use}\n" in output


@pytest.mark.parametrize(
    "line",
    ["device = args.device", "device = choose_device(args)", 'device = cfg["device"]'],
)
def test_a_device_the_script_chose_still_becomes_the_accelerators(line):
    source = (
        DEVICES.format(line="cfg = vars(args)", use="value")
        .replace(
            '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
            f"    cfg = vars(args)\n    {line}\n",
        )
        .replace("def helper(", "def choose_device(args):\n    return args.device\n\n\ndef helper(")
    )
    output, findings = migrate_text(source)
    assert output is not None, findings
    assert "    device = accelerator.device\n" in output


BARS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
{imports}

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
for x, y in {bar}:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("imports", "bar", "expected"),
    [
        ("from tqdm import tqdm", "tqdm(loader, disable=False)",
         "tqdm(loader, disable=not accelerator.is_local_main_process)"),
        ("import tqdm", "tqdm.tqdm(loader, leave=False, disable=0)",
         "tqdm.tqdm(loader, leave=False, disable=not accelerator.is_local_main_process)"),
        ("from tqdm.auto import tqdm", "tqdm(loader, disable=False, desc='train')",
         "tqdm(loader, disable=not accelerator.is_local_main_process, desc='train')"),
        ("from tqdm import tqdm", "tqdm(loader, disable=True)", "tqdm(loader, disable=True)"),
        ("from tqdm import tqdm\nQUIET = False", "tqdm(loader, disable=QUIET)",
         "tqdm(loader, disable=QUIET)"),
        ("from tqdm import tqdm", "tqdm(loader, disable=None)", "tqdm(loader, disable=None)"),
    ],
)  # fmt: skip
def test_a_bar_shown_on_purpose_is_shown_once(imports, bar, expected):
    output, findings = migrate_text(BARS.format(imports=imports, bar=bar))
    assert output is not None, findings
    assert f"for x, y in {expected}:\n" in output


@pytest.mark.parametrize(
    ("imports", "bar"),
    [
        ("from tqdm import tqdm_notebook", "tqdm_notebook(loader)"),
        ("from tqdm.notebook import tqdm_notebook as bar", "bar(loader, total=4)"),
        ("from tqdm.autonotebook import tqdm", "tqdm(loader)"),
        ("import tqdm.std", "tqdm.std.tqdm(loader)"),
        ("import tqdm", "tqdm.tqdm_notebook(loader, leave=False)"),
    ],
)
def test_every_spelling_of_the_bar_passes_the_loader_through(imports, bar):
    """`tqdm_notebook(loader)` (the legacy notebook spelling, h8 koBERT) iterates the loader:
    it is prepared and the bar shows once; read as an unknown iterable, the loader stayed
    plain and every process trained on the whole set."""
    output, findings = migrate_text(BARS.format(imports=imports, bar=bar))
    assert output is not None, findings
    assert "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)" in output
    assert "disable=not accelerator.is_local_main_process" in output
    assert not [f for f in findings if f.code == "MIG905"]
