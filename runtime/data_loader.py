"""HF Accelerate's `accelerate.data_loader` names at the same path: `from runtime.data_loader
import prepare_data_loader, skip_first_batches, SeedableRandomSampler, DataLoaderDispatcher`.

`prepare_data_loader` takes HF's arguments and delegates to `runtime.loader_sharding`; the objects it
returns are runtime's prepared loaders (`DataLoaderShard` is their class).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import DataLoader

from runtime.data import PreparedDataLoader, send_to_device, skip_first_batches
from runtime.dispatching import DataLoaderDispatcher
from runtime.loader_sharding import prepare_data_loader as _prepare
from runtime.sampling import BatchShard, IterableShard, SeedableRandomSampler
from runtime.state import GradientState, PartialState

DataLoaderShard = PreparedDataLoader
BatchSamplerShard = BatchShard
IterableDatasetShard = IterableShard

__all__ = [
    "BatchSamplerShard",
    "DataLoaderDispatcher",
    "DataLoaderShard",
    "IterableDatasetShard",
    "SeedableRandomSampler",
    "prepare_data_loader",
    "send_to_device",
    "skip_first_batches",
]


def prepare_data_loader(
    dataloader: DataLoader,
    device: torch.device | None = None,
    num_processes: int | None = None,
    process_index: int | None = None,
    split_batches: bool = False,
    put_on_device: bool = False,
    rng_types: list | None = None,
    dispatch_batches: bool | None = None,
    even_batches: bool = True,
    slice_fn_for_dispatch: Callable | None = None,
    use_seedable_sampler: bool = False,
    data_seed: int | None = None,
    non_blocking: bool = False,
    use_stateful_dataloader: bool = False,
    torch_device_mesh=None,
) -> DataLoader:
    """`dataloader` sharded for process `process_index` of `num_processes` (HF's signature and
    defaults: the process facts of `PartialState()`, batches left where they are unless
    `put_on_device`, then placed on the process's device). `rng_types` is accepted: runtime
    keeps one global sampling order by its own means (docs/runtime.md)."""
    if use_stateful_dataloader:
        raise NotImplementedError(
            "use_stateful_dataloader=True needs torchdata's StatefulDataLoader, which runtime "
            "does not support"
        )
    if torch_device_mesh is not None:
        raise NotImplementedError(
            "torch_device_mesh (tensor / context parallelism) is not supported by runtime "
            "(it runs DDP on torch.distributed)"
        )
    return _prepare(
        dataloader,
        state=PartialState(),
        gradient_state=GradientState(),
        split_batches=split_batches,
        even_batches=even_batches,
        device_placement=put_on_device,
        dispatch_batches=dispatch_batches,
        use_seedable_sampler=use_seedable_sampler,
        data_seed=data_seed,
        non_blocking=non_blocking,
        num_processes=num_processes,
        process_index=process_index,
        slice_fn=slice_fn_for_dispatch,
    )
