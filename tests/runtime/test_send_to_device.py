"""What a prepared loader moves to the device: the same as HF Accelerate's `send_to_device`
(tensors; objects with their own `.to`, such as DETR's NestedTensor or a batch class; lists,
tuples, namedtuples and mappings of those), checked on the meta device so that a move shows
on a CPU-only machine."""

from collections import namedtuple

import pytest
import torch
from torch.utils.data import DataLoader

from runtime import Accelerator
from runtime.data import send_to_device

META = torch.device("meta")
Pair = namedtuple("Pair", "x y")


class Padded:
    """A batch element with its own `.to(device)` (no non_blocking=), like DETR's NestedTensor."""

    def __init__(self, tensors, mask, placed=None):
        self.tensors, self.mask, self.placed = tensors, mask, placed

    def to(self, device):
        return Padded(self.tensors.to(device), self.mask.to(device), placed=device)


class Fields:
    """A plain object holding tensors, without `.to`: neither runtime moves its tensors."""

    def __init__(self, x):
        self.x = x


def devices(data):
    """The device type of every tensor in `data`, walked the way a reader would."""
    if isinstance(data, torch.Tensor):
        return [data.device.type]
    if isinstance(data, (Padded,)):
        return devices(data.tensors) + devices(data.mask)
    if isinstance(data, Fields):
        return devices(data.x)
    if isinstance(data, dict):
        return [d for value in data.values() for d in devices(value)]
    if isinstance(data, (list, tuple)):
        return [d for item in data for d in devices(item)]
    return []


def batches():
    return {
        "object with .to": Padded(torch.ones(2), torch.zeros(2, dtype=torch.bool)),
        "tuple of object and list of dicts": (
            Padded(torch.ones(2), torch.zeros(2)),
            [{"boxes": torch.ones(1, 4)}, {"boxes": torch.ones(2, 4)}],
        ),
        "namedtuple": Pair(torch.ones(1), [torch.zeros(1), "label"]),
        "object without .to": Fields(torch.ones(1)),
        "strings and numbers": ["a", 3, torch.ones(1)],
    }


@pytest.mark.parametrize("name", list(batches()))
def test_batches_move_as_hf_accelerate_moves_them(name):
    operations = pytest.importorskip("accelerate.utils.operations")
    ours = send_to_device(batches()[name], META)
    theirs = operations.send_to_device(batches()[name], META)
    assert type(ours) is type(theirs)
    assert devices(ours) == devices(theirs)


def test_an_object_with_its_own_to_is_moved_and_kept_whole():
    moved = send_to_device((Padded(torch.ones(2), torch.zeros(2)), [torch.ones(1)]), META)
    assert isinstance(moved[0], Padded)
    assert devices(moved) == ["meta", "meta", "meta"]
    assert devices(send_to_device(Fields(torch.ones(1)), META)) == ["cpu"]


def test_a_prepared_loader_with_a_collate_of_its_own_places_its_objects():
    def collate(items):
        return Padded(torch.stack(items), torch.zeros(len(items))), [len(items)]

    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(DataLoader([torch.ones(3)] * 4, batch_size=2, collate_fn=collate))
    placed = []
    for padded, sizes in loader:
        assert isinstance(padded, Padded) and sizes == [2]
        placed.append(padded.placed)
    assert placed == [accelerator.device] * 2  # its own `.to` ran, with the loader's device
