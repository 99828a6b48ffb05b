"""Accelerate API cases where runtime once differed from HF Accelerate; run on both runtimes.

Usage (under torchrun / migrate launch, 2 processes): hf_parity.py OUT_DIR
PARITY_RUNTIME=runtime|accelerate picks the import; each rank writes OUT_DIR/rank{r}.json:
for every case, what this rank saw (its batches, gathered values, gradients, errors).
"""

import json
import os
import sys
from pathlib import Path

import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, TensorDataset

if os.environ.get("PARITY_RUNTIME") == "accelerate":
    from accelerate import (
        Accelerator,
        DataLoaderConfiguration,
        DDPCommunicationHookType,
        PartialState,
    )
    from accelerate.data_loader import SeedableRandomSampler, prepare_data_loader
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedDataParallelKwargs, synchronize_rng_states
    from accelerate.utils.operations import (
        DistributedOperationException,
        broadcast,
        copy_tensor_to_devices,
        reduce,
    )
else:
    from runtime import Accelerator, DataLoaderConfiguration, DDPCommunicationHookType, PartialState
    from runtime.data_loader import SeedableRandomSampler, prepare_data_loader
    from runtime.state import AcceleratorState
    from runtime.utils import (
        DistributedDataParallelKwargs,
        DistributedOperationException,
        broadcast,
        copy_tensor_to_devices,
        reduce,
        synchronize_rng_states,
    )

out_dir = Path(sys.argv[1])
out_dir.mkdir(parents=True, exist_ok=True)
record: dict = {}


class Numbers(IterableDataset):
    """0 .. count-1 as a stream (with a length unless `sized` is False)."""

    def __init__(self, count: int, sized: bool = True):
        self.count, self.sized = count, sized

    def __iter__(self):
        yield from range(self.count)

    def __len__(self):
        if not self.sized:
            raise TypeError("a stream without a length")
        return self.count


def error_of(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the error is what is compared
        return type(error).__name__
    return None


def fresh_accelerator(**config):
    AcceleratorState._reset_state()
    return Accelerator(dataloader_config=DataLoaderConfiguration(**config))


def epoch_seen(accelerator, loader):
    """This rank's batches, their gather and gather_for_metrics, and the loader's length."""
    mine, gathered, for_metrics = [], [], []
    for batch in loader:
        values = batch[0] if isinstance(batch, (list, tuple)) else batch
        mine.append(values.tolist())
        gathered += accelerator.gather(values).tolist()
        for_metrics += accelerator.gather_for_metrics(values).tolist()
    length = error_of(lambda: len(loader)) or len(loader)
    return {"mine": mine, "gather": gathered, "gather_for_metrics": for_metrics, "len": length}


# 1. IterableDataset loaders whose last batch is short: what each rank and gather see
for count in (30, 29):
    for split in (False, True):
        for dispatch in (None, False):
            for drop_last in (False, True):
                for sized in (True, False):
                    accelerator = fresh_accelerator(split_batches=split, dispatch_batches=dispatch)
                    loader = accelerator.prepare(
                        DataLoader(Numbers(count, sized), batch_size=4, drop_last=drop_last)
                    )
                    key = f"iterable n={count} split={split} dispatch={dispatch} drop={drop_last}"
                    record[f"{key} sized={sized}"] = epoch_seen(accelerator, loader)


# 1a. a stream of (features, label) pairs: nested batches are sliced and gathered alike
class Pairs(Numbers):
    def __iter__(self):
        for value in range(self.count):
            yield torch.tensor([float(value), -float(value)]), value % 3


for dispatch in (None, False):
    accelerator = fresh_accelerator(dispatch_batches=dispatch)
    loader = accelerator.prepare(DataLoader(Pairs(29), batch_size=4))
    seen = [accelerator.gather_for_metrics((x, y)) for x, y in loader]
    record[f"iterable pairs dispatch={dispatch}"] = [[x.tolist(), y.tolist()] for x, y in seen]

# 1b. map-style loaders dispatched from process 0
for count in (30, 29):
    for split in (False, True):
        accelerator = fresh_accelerator(split_batches=split, dispatch_batches=True)
        data = TensorDataset(torch.arange(count))
        loader = accelerator.prepare(DataLoader(data, batch_size=4))
        record[f"dispatched map-style n={count} split={split}"] = epoch_seen(accelerator, loader)


def reversed_slice(batch, where, process_index=None, num_processes=None):
    """A custom `slice_fn_for_dispatch`: each process's slice counted from the end."""
    return [tensor.flip(0)[where] for tensor in batch]


accelerator = fresh_accelerator(dispatch_batches=True)
loader = accelerator.prepare_data_loader(
    DataLoader(TensorDataset(torch.arange(16)), batch_size=4), slice_fn_for_dispatch=reversed_slice
)
record["dispatched with a slice function"] = epoch_seen(accelerator, loader)

# 2. a BatchSampler given as the sampler, batch_size=None
accelerator = fresh_accelerator()
data = TensorDataset(torch.arange(22))
torch.manual_seed(0)
sampler = BatchSampler(RandomSampler(data, generator=torch.Generator().manual_seed(1)), 4, False)
loader = accelerator.prepare(DataLoader(data, sampler=sampler, batch_size=None))
record["batch sampler as sampler"] = epoch_seen(accelerator, loader)

# 3. DDP communication hooks: gradients after two steps
for hook, wrapper, option in [
    ("NO", "NO", {}),
    ("FP16", "NO", {}),
    ("POWER_SGD", "NO", {}),
    ("POWER_SGD", "FP16", {"matrix_approximation_rank": 2}),
    ("BATCHED_POWER_SGD", "NO", {}),
    ("BF16", "NO", {}),
]:
    AcceleratorState._reset_state()
    handler = DistributedDataParallelKwargs(
        comm_hook=DDPCommunicationHookType[hook],
        comm_wrapper=DDPCommunicationHookType[wrapper],
        comm_state_option=option,
    )
    accelerator = Accelerator(kwargs_handlers=[handler])
    torch.manual_seed(0)
    grads, failure = [], None
    try:
        model = accelerator.prepare(torch.nn.Linear(16, 8))
        for step in range(2):
            torch.manual_seed(10 + step + accelerator.process_index)
            model(torch.randn(4, 16)).pow(2).mean().backward()
            grads.append(model.module.weight.grad.flatten()[:12].tolist())
    except Exception as error:  # noqa: BLE001 - compared
        failure = type(error).__name__
    record[f"comm hook {hook}+{wrapper} {option}"] = {"grads": grads, "error": failure}

# 4. operations: broadcast, reduce max, copy_tensor_to_devices, RNG synchronisation
AcceleratorState._reset_state()
accelerator = Accelerator()
rank = accelerator.process_index
record["broadcast"] = broadcast(torch.arange(3.0) + 10 * rank).tolist()
record["broadcast nested"] = broadcast({"a": torch.tensor([rank]), "b": [torch.ones(2) * rank]})[
    "b"
][0].tolist()
record["reduce max"] = reduce(torch.tensor([1.0 + rank, 5.0 - rank]), "max").tolist()
record["reduce default"] = reduce(torch.tensor([1.0 + rank])).tolist()  # HF: mean
record["accelerator reduce default"] = accelerator.reduce(torch.tensor([1.0 + rank])).tolist()
record["accelerator reduce max"] = accelerator.reduce(torch.tensor([3.0 * rank]), "max").tolist()
held = torch.tensor([7, 8, 9], dtype=torch.int32) if rank == 0 else None
record["copy_tensor_to_devices"] = copy_tensor_to_devices(held).tolist()
torch.manual_seed(100 + rank)
generator = torch.Generator().manual_seed(200 + rank)
synchronize_rng_states(["torch", "generator"], generator=generator)
record["synchronized draws"] = [torch.rand(2).tolist(), torch.rand(2, generator=generator).tolist()]

# 5. debug mode: shape mismatches are a DistributedOperationException on every rank
PartialState().debug = True
mismatched = torch.ones(2 + rank)
record["debug gather"] = error_of(lambda: accelerator.gather(mismatched))
record["debug reduce"] = error_of(lambda: reduce(mismatched))
record["debug broadcast"] = error_of(lambda: broadcast(mismatched))
record["debug exception class"] = DistributedOperationException.__name__
PartialState().debug = False

# 6. the seedable sampler: same order on both runtimes, replayed by set_epoch
accelerator = fresh_accelerator(use_seedable_sampler=True, data_seed=7)
loader = accelerator.prepare(
    DataLoader(TensorDataset(torch.arange(24)), batch_size=3, shuffle=True)
)
epochs = [[b[0].tolist() for b in loader] for _ in range(2)]
loader.set_epoch(0)
record["seedable sampler"] = {"epochs": epochs, "replayed": [b[0].tolist() for b in loader]}
record["seedable sampler class"] = type(loader.batch_sampler.batch_sampler.sampler).__name__ == (
    SeedableRandomSampler.__name__
)

# 7. prepare_data_loader with HF's positional signature
state = accelerator.state
plain = DataLoader(list(range(20)), batch_size=4)
for split in (False, True):
    prepared = prepare_data_loader(
        plain, state.device, state.num_processes, state.process_index, split, True
    )
    record[f"prepare_data_loader split={split}"] = [b.tolist() for b in prepared]

# 8. dataloader_config set after construction applies to the next prepare
accelerator = fresh_accelerator()
accelerator.dataloader_config = DataLoaderConfiguration(split_batches=True)
loader = accelerator.prepare(DataLoader(TensorDataset(torch.arange(16)), batch_size=4))
record["dataloader_config set later"] = [b[0].tolist() for b in loader]

(out_dir / f"rank{rank}.json").write_text(json.dumps(record))
accelerator.wait_for_everyone()
