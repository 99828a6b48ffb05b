"""Exercises the Accelerator API on N processes; each rank writes OUT_DIR/rank{r}.json.

Usage: features.py OUT_DIR          (under migrate launch / torchrun)
       features.py OUT_DIR --reference   (plain python: the un-migrated loader order)
"""

import json
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

out_dir = Path(sys.argv[1])
out_dir.mkdir(parents=True, exist_ok=True)


def shuffled_order(loader, epochs=2):
    return [[int(i) for (batch,) in loader for i in batch] for _ in range(epochs)]


def indices_loader(length, batch_size, **kwargs):
    return DataLoader(TensorDataset(torch.arange(length)), batch_size=batch_size, **kwargs)


if "--reference" in sys.argv:
    torch.manual_seed(5)
    plain = shuffled_order(indices_loader(64, 8, shuffle=True))
    seeded = indices_loader(64, 8, shuffle=True, generator=torch.Generator().manual_seed(11))
    reference = {"order": plain, "order_generator": shuffled_order(seeded, epochs=1)}
    (out_dir / "reference.json").write_text(json.dumps(reference))
    sys.exit(0)

from runtime import Accelerator, set_seed

accelerator = Accelerator()
rank = accelerator.process_index
facts = {
    "num_processes": accelerator.num_processes,
    "process_index": rank,
    "local_process_index": accelerator.local_process_index,
    "is_main_process": accelerator.is_main_process,
    "device": str(accelerator.device),
}

# prepare: order, types, pass-through
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
loader = indices_loader(64, 8)
marker = {"not": "prepared"}
prepared = accelerator.prepare(model, optimizer, marker, loader, scheduler)
facts["prepared_types"] = [type(obj).__name__ for obj in prepared]
facts["passthrough_kept"] = prepared[2] is marker
facts["unwrapped_is_original"] = accelerator.unwrap_model(prepared[0]) is model
facts["reprepare_is_identity"] = all(
    a is b for a, b in zip(prepared, accelerator.prepare(*prepared))
)
facts["ddp_weights_equal_rank0"] = (
    accelerator.gather(model.weight.detach()[None]).unique(dim=0).shape[0] == 1
)

# loader sharding: every (split, even, length) combination
facts["loaders"] = {}
for split in (False, True):
    for even in (True, False):
        sharding = Accelerator(split_batches=split, even_batches=even)
        for length in (64, 70):
            sharded = sharding.prepare(indices_loader(length, 16))
            batches = [[int(i) for i in batch] for (batch,) in sharded]
            facts["loaders"][f"split={split},even={even},n={length}"] = {
                "len": len(sharded),
                "batches": batches,
            }

# shuffle order: unseeded-generator shuffle (global seed) and device-specific seeds
torch.manual_seed(5)
facts["order_global_seed"] = shuffled_order(
    accelerator.prepare(indices_loader(64, 8, shuffle=True))
)
set_seed(5, device_specific=True)
own_state = torch.get_rng_state()
facts["order_device_seed"] = shuffled_order(
    accelerator.prepare(indices_loader(64, 8, shuffle=True)), epochs=1
)
# off rank 0 the sampler borrowed rank 0's RNG: this rank's own stream only moved by the
# DataLoader's one base-seed draw
own = torch.Generator()
own.set_state(own_state)
torch.empty((), dtype=torch.int64).random_(generator=own)
facts["own_rng_moved_only_by_base_seed"] = torch.equal(own.get_state(), torch.get_rng_state())
generator = torch.Generator().manual_seed(11 + rank)  # ranks disagree; rank 0 must win
facts["order_generator"] = shuffled_order(
    accelerator.prepare(indices_loader(64, 8, shuffle=True, generator=generator)), epochs=1
)

# gather_for_metrics: 70 samples, batch 16 (unsplit and split), tensors and objects
for split in (False, True):
    metrics = Accelerator(split_batches=split)
    eval_loader = metrics.prepare(indices_loader(70, 16))
    exact, raw, objects, arrays, pairs = [], [], [], [], []
    for (batch,) in eval_loader:
        exact.append(metrics.gather_for_metrics(batch))
        raw.append(metrics.gather(batch))
        objects.extend(metrics.gather_for_metrics([f"s{int(i)}" for i in batch]))
        # not tensors, gathered as objects: flattened per sample, as HF's gather_object
        arrays.extend(metrics.gather_for_metrics(batch.numpy()))
        pairs.extend(metrics.gather_for_metrics(tuple(f"t{int(i)}" for i in batch)))
    facts[f"gather_for_metrics_split={split}"] = sorted(int(i) for i in torch.cat(exact))
    facts[f"gather_count_split={split}"] = int(torch.cat(raw).numel())
    facts[f"gather_objects_split={split}"] = sorted(objects)
    facts[f"gather_arrays_split={split}"] = sorted(int(i) for i in arrays)
    facts[f"gather_tuples_split={split}"] = sorted(pairs)

# reduce, pad, gather of a scalar
facts["reduce_sum"] = accelerator.reduce(torch.tensor([rank + 1.0])).tolist()
facts["reduce_mean"] = accelerator.reduce(torch.tensor([rank + 1.0]), "mean").tolist()
ragged = torch.full((rank + 1, 2), rank + 1)
padded = accelerator.pad_across_processes(ragged, dim=0, pad_index=-1)
facts["padded_gather"] = accelerator.gather(padded).tolist()
facts["scalar_gather"] = accelerator.gather(torch.tensor(float(rank))).tolist()

# printing and ordering
accelerator.print("PRINTED-ONCE")
flag = out_dir / "main_first.flag"
with accelerator.main_process_first():
    if accelerator.is_main_process:
        flag.write_text("main was here")
    facts["saw_main_first"] = flag.exists()
accelerator.save({"rank": rank}, out_dir / "saved.pt")
accelerator.wait_for_everyone()
facts["saved_by"] = torch.load(out_dir / "saved.pt")["rank"]

# join_uneven_inputs: 40 samples in batches of 8, uneven: rank 0 gets 3 batches, rank 1 gets 2;
# without Join, rank 0's third backward would wait forever for rank 1's all-reduce
uneven = Accelerator(even_batches=False)
net = torch.nn.Linear(1, 1)
net_optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
net, net_optimizer, uneven_loader = uneven.prepare(net, net_optimizer, indices_loader(40, 8))
joined_steps = 0
with uneven.join_uneven_inputs([net]):
    for (batch,) in uneven_loader:
        uneven.backward(net(batch.float()[:, None]).mean())
        net_optimizer.step()
        net_optimizer.zero_grad()
        joined_steps += 1
facts["joined_steps"] = joined_steps
facts["joined_weights_equal"] = uneven.gather(net.module.weight.detach()).unique().numel() == 1

(out_dir / f"rank{rank}.json").write_text(json.dumps(facts))
