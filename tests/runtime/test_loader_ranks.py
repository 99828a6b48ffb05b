"""Prepared loaders seen from each of 2 ranks, in one process (no process group needed)."""

from types import SimpleNamespace

import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from runtime.data import skip_first_batches
from runtime.loader_sharding import prepare_data_loader
from runtime.state import GradientState


def rank_state(rank, processes=2):
    return SimpleNamespace(num_processes=processes, process_index=rank, device=torch.device("cpu"))


def prepared(loader, rank, *, split=False, even=True, gradient_state=None, dispatch=None):
    return prepare_data_loader(
        loader,
        state=rank_state(rank),
        gradient_state=gradient_state or GradientState(),
        split_batches=split,
        even_batches=even,
        device_placement=True,
        dispatch_batches=dispatch,
    )


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(10))


def flat(loader):
    """Each batch as a list of sample indices (TensorDataset batches are 1-tuples)."""
    return [[int(i) for i in (b[0] if isinstance(b, (list, tuple)) else b)] for b in loader]


def undispatched_stream(rank, **options):
    return prepared(
        DataLoader(Stream(), batch_size=options.pop("batch_size", 2)),
        rank,
        dispatch=False,
        **options,
    )


def test_undispatched_iterable_dataset_gives_each_rank_a_slice_of_every_global_batch():
    loaders = [undispatched_stream(rank) for rank in (0, 1)]
    assert flat(loaders[0]) == [[0, 1], [4, 5], [8, 9]]
    assert flat(loaders[1]) == [[2, 3], [6, 7], [0, 1]]  # padded from the start, as HF does


def test_undispatched_iterable_dataset_pads_even_with_even_batches_off():
    # HF's IterableDatasetShard has no uneven mode: only drop_last shortens the stream
    assert flat(undispatched_stream(1, even=False)) == [[2, 3], [6, 7], [0, 1]]


def test_undispatched_iterable_dataset_split_slices_each_batch():
    loaders = [undispatched_stream(rank, batch_size=4, split=True) for rank in (0, 1)]
    assert flat(loaders[0]) == [[0, 1], [4, 5], [8, 9]]
    assert flat(loaders[1]) == [[2, 3], [6, 7], [0, 1]]


def test_undispatched_iterable_dataset_keeps_hf_length_and_no_remainder():
    class SizedStream(Stream):
        def __len__(self):
            return 10

    loader = prepared(DataLoader(SizedStream(), batch_size=2), 0, dispatch=False)
    assert len(loader) == 3  # ceil(10 / 4) global batches
    assert loader.remainder == 0  # HF keeps the padding in gather_for_metrics here


def test_remainder_counts_real_samples_of_the_last_global_batch():
    data = TensorDataset(torch.arange(70))
    assert prepared(DataLoader(data, batch_size=16), 0).remainder == 70 % 32
    assert prepared(DataLoader(data, batch_size=16), 0, split=True).remainder == 70 % 16
    assert prepared(DataLoader(data, batch_size=16, drop_last=True), 0).remainder == -1


def test_per_process_batch_size_and_total_batch_size():
    loader = DataLoader(TensorDataset(torch.arange(64)), batch_size=16)
    unsplit, split = prepared(loader, 0), prepared(loader, 0, split=True)
    assert (unsplit.batch_size, unsplit.total_batch_size) == (16, 32)
    assert (split.batch_size, split.total_batch_size) == (8, 16)
    assert unsplit.dataset is loader.dataset and unsplit.sampler is loader.sampler


def test_unseeded_shuffle_gives_both_ranks_the_original_global_order():
    data = TensorDataset(torch.arange(32))
    torch.manual_seed(3)
    original = flat(DataLoader(data, batch_size=4, shuffle=True))
    shares = []
    for rank in (0, 1):
        torch.manual_seed(3)
        shares.append(flat(prepared(DataLoader(data, batch_size=4, shuffle=True), rank)))
    assert [b for pair in zip(*shares) for b in pair] == original


def interrupted_epoch(data):
    """(the whole epoch, the batches consumed before a checkpoint, the saved position)"""
    torch.manual_seed(4)
    whole = flat(prepared(DataLoader(data, batch_size=4, shuffle=True), 1))
    torch.manual_seed(4)
    loader = prepared(DataLoader(data, batch_size=4, shuffle=True), 1)
    iterator = iter(loader)
    consumed = [[int(i) for i in next(iterator)[0]] for _ in range(2)]
    position = loader.position()
    torch.rand(5)  # training moves the RNG on before the checkpoint
    return whole, consumed, position


def test_restored_position_replays_the_interrupted_epochs_shuffle():
    data = TensorDataset(torch.arange(32))
    whole, _, position = interrupted_epoch(data)
    resumed = prepared(DataLoader(data, batch_size=4, shuffle=True), 1)
    resumed.resume_from = position
    assert flat(resumed) == whole  # HF semantics: the script skips what it had consumed
    assert resumed.position() is None  # the epoch is over


def test_skip_first_batches_after_a_restored_position_continues_the_epoch():
    data = TensorDataset(torch.arange(32))
    whole, consumed, position = interrupted_epoch(data)
    resumed = prepared(DataLoader(data, batch_size=4, shuffle=True), 1)
    resumed.resume_from = position
    rest = skip_first_batches(resumed, len(consumed))
    assert consumed + flat(rest) == whole
    assert resumed.resume_from is None  # the replay moved to the skipping loader
    assert len(rest) == len(resumed) - len(consumed)


def test_skip_first_batches_of_a_plain_loader():
    loader = DataLoader(TensorDataset(torch.arange(10)), batch_size=4)
    assert flat(skip_first_batches(loader, 1)) == [[4, 5, 6, 7], [8, 9]]
    assert flat(skip_first_batches(DataLoader(Stream(), batch_size=4), 2)) == [[8, 9]]


def test_gradient_state_tracks_the_innermost_loader():
    gradient_state = GradientState()
    outer = prepared(
        DataLoader(TensorDataset(torch.arange(10)), batch_size=2), 0, gradient_state=gradient_state
    )
    inner = prepared(
        DataLoader(TensorDataset(torch.arange(2)), batch_size=2), 0, gradient_state=gradient_state
    )
    seen = []
    for _ in outer:
        seen.append((gradient_state.end_of_dataloader, gradient_state.remainder))
        for _ in inner:
            seen.append(("inner", gradient_state.end_of_dataloader, gradient_state.remainder))
    # rank 0 of 2: 3 of the 5 batches (the tail of 10 % 4 = 2 real samples is padded)
    assert seen == [(False, 2), ("inner", True, 2)] * 2 + [(True, 2), ("inner", True, 2)]
    assert gradient_state.active_loaders == []
