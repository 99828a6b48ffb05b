"""MIG030: a checkpoint the main process alone now writes (`accelerator.save`) and that the
file loads back on every process (an evaluation function called after training) is followed
by `accelerator.wait_for_everyone()`, or the other processes read a missing or half-written
file."""

from __future__ import annotations

from migrator.engine import migrate_text

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

PATH = "final.pt"
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
torch.save(model.state_dict(), PATH)
print("saved")


def evaluate_saved():
    fresh = torch.nn.Linear(4, 1)
    fresh.load_state_dict(torch.load(PATH))
    return fresh.weight.sum().item()


print(evaluate_saved())
"""


def test_a_save_loaded_back_later_is_waited_for():
    output, _ = migrate_text(SCRIPT)
    assert output is not None
    assert (
        "accelerator.save(accelerator.unwrap_model(model).state_dict(), PATH)\n"
        "accelerator.wait_for_everyone()\n"
    ) in output


def test_a_save_nothing_loads_is_not_waited_for():
    output, _ = migrate_text(SCRIPT.replace("torch.load(PATH)", 'torch.load("other.pt")'))
    assert output is not None
    assert "accelerator.save(accelerator.unwrap_model(model).state_dict(), PATH)\n" in output
    assert "wait_for_everyone" not in output


def test_a_save_followed_by_its_own_barrier_gets_no_second_one():
    text = SCRIPT.replace(
        "torch.save(model.state_dict(), PATH)\n",
        "torch.save(model.state_dict(), PATH)\ntorch.distributed.barrier()\n",
    )
    output, _ = migrate_text(text)
    assert output is not None
    assert output.count("wait_for_everyone") + output.count("barrier(") == 1


WAITED_READ = (
    "    fresh = torch.nn.Linear(4, 1)\n"
    "    accelerator.wait_for_everyone()\n"
    "    fresh.load_state_dict(torch.load(PATH))\n"
)


def test_a_save_under_a_branch_is_waited_for_before_the_read():
    """A wait inside a branch that one process skips would hang the others: it goes before
    the read, which every process runs (shared_files.py)."""
    text = SCRIPT.replace(
        "torch.save(model.state_dict(), PATH)\n",
        "if loss.item() < 10:\n    torch.save(model.state_dict(), PATH)\n",
    )
    output, _ = migrate_text(text)
    assert output is not None
    assert output.count("wait_for_everyone") == 1
    assert WAITED_READ in output


def test_a_save_in_a_helper_that_trains_nothing_is_waited_for_before_the_read():
    """A helper may be called on some processes only (`if acc > best: keep(model)`): the
    wait goes before the read, not after the save."""
    text = SCRIPT.replace(
        "torch.save(model.state_dict(), PATH)\n",
        "\n\ndef keep(net):\n    torch.save(net.state_dict(), PATH)\n\n\nkeep(model)\n",
    )
    output, _ = migrate_text(text)
    assert output is not None
    assert output.count("wait_for_everyone") == 1
    assert WAITED_READ in output


IMAGE_READ_BACK = """\
import torch
from PIL import Image
from torch.utils.data import DataLoader, TensorDataset
from torchvision.utils import save_image

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 4)), batch_size=4)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    grid = model(torch.ones(1, 4)).detach().view(1, 1, 2, 2)
    save_image(grid, "samples.png")
    {read}
    print(picture.size)
"""


def test_an_image_the_main_process_writes_and_every_process_reads_back_is_waited_for():
    for read in ('picture = Image.open("samples.png")', 'picture = imread("samples.png")'):
        source = IMAGE_READ_BACK.format(read=read)
        if "imread" in read:
            source = source.replace(
                "from PIL import Image\n", "from matplotlib.pyplot import imread\n"
            )
        output, findings = migrate_text(source)
        assert output is not None, [f.message for f in findings]
        assert f"    accelerator.wait_for_everyone()\n    {read}\n" in output, output
