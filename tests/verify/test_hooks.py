"""The recorder's patches, in this process (torch imported; patched classes restored)."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset, TensorDataset

from migrator.verify import hooks


def functional_namespace():
    functional = torch.nn.functional
    return types.SimpleNamespace(dropout=functional.dropout, batch_norm=functional.batch_norm)


def test_dropout_in_training_is_counted_and_can_be_turned_off():
    observed = hooks.Observations()
    functional = functional_namespace()
    hooks.watch_functional(functional, observed, no_dropout=True)
    x = torch.ones(4, 8)
    assert torch.equal(functional.dropout(x, 0.5, True), x)
    functional.dropout(x, 0.5, False)  # evaluation: not counted
    functional.dropout(x, p=0.0)
    assert observed.dropout_calls == 1


def test_batch_norm_counts_only_training_mode():
    observed = hooks.Observations()
    functional = functional_namespace()
    hooks.watch_functional(functional, observed, no_dropout=False)
    x, stats = torch.randn(6, 3), (torch.zeros(3), torch.ones(3))
    functional.batch_norm(x, *stats, None, None, True)
    functional.batch_norm(x, *stats, training=False)
    assert observed.batchnorm_training_calls == 1


class AugmentedDataset(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, index):
        return torch.tensor([float(index)]) + torch.rand(1)  # random augmentation


@pytest.fixture
def restored_loader(monkeypatch):
    monkeypatch.setattr(DataLoader, "__iter__", DataLoader.__iter__)
    monkeypatch.setattr(DataLoader, "__init__", DataLoader.__init__)


def test_loader_facts_and_random_draws_while_fetching(restored_loader):
    observed = hooks.Observations()
    hooks.watch_loaders(observed, seed_shuffle=False, seed=0)
    plain = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=4, shuffle=True)
    augmented = DataLoader(AugmentedDataset(), batch_size=3)
    list(plain)
    list(augmented)
    facts = {f["index"]: f for f in observed.as_dict()["loaders"]}
    assert facts[0]["batch_size"] == 4 and facts[0]["dataset_length"] == 10
    assert facts[0]["shuffle"] and not facts[0]["seeded"]
    assert not facts[0]["random_draws_in_fetch"]
    assert facts[1]["random_draws_in_fetch"]


def test_seed_shuffle_gives_unseeded_shuffling_loaders_numbered_generators(restored_loader):
    observed = hooks.Observations()
    hooks.watch_loaders(observed, seed_shuffle=True, seed=3)
    data = TensorDataset(torch.arange(16))
    first = DataLoader(data, batch_size=4, shuffle=True)
    second = DataLoader(data, batch_size=4, shuffle=True)
    own = torch.Generator().manual_seed(99)
    explicit = DataLoader(data, batch_size=4, shuffle=True, generator=own)
    in_order = DataLoader(data, batch_size=4)
    assert [first.generator.initial_seed(), second.generator.initial_seed()] == [3, 4]
    assert explicit.generator is own
    assert in_order.generator is None


def test_backward_after_a_fetch_marks_the_loader_as_training(restored_loader):
    observed = hooks.Observations()
    hooks.watch_loaders(observed, seed_shuffle=False, seed=0)
    train = DataLoader(TensorDataset(torch.ones(4)), batch_size=2)
    evaluation = DataLoader(TensorDataset(torch.ones(4)), batch_size=2)
    for _ in train:
        observed.note_backward()
    list(evaluation)
    assert [f["training"] for f in observed.as_dict()["loaders"]] == [True, False]
