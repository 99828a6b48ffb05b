"""A training script written the way diffusers' scripts and Accelerate's examples use the API.

Only the imports differ between the two runs: COMPAT_RUNTIME=accelerate runs it on HF
Accelerate, anything else on runtime. Each rank writes OUT/rank{r}.json with what it saw
(facts, losses, learning rates, tracker calls, what save_state / save_model wrote, ...), so
tests/runtime/test_compat_accelerate.py can compare the two runtimes on 1 and 2 processes.

Usage: compat_scenario.py OUT   (python, or migrate launch --nproc 2; HF needs ACCELERATE_USE_CPU=1)
"""

import json
import os
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

if os.environ.get("COMPAT_RUNTIME") == "accelerate":
    from accelerate import Accelerator, PartialState
    from accelerate.logging import get_logger
    from accelerate.state import AcceleratorState
    from accelerate.tracking import GeneralTracker
    from accelerate.utils import (
        DataLoaderConfiguration,
        DistributedType,
        ProjectConfiguration,
        set_seed,
    )
else:
    from runtime import Accelerator, PartialState
    from runtime.logging import get_logger
    from runtime.state import AcceleratorState
    from runtime.tracking import GeneralTracker
    from runtime.utils import (
        DataLoaderConfiguration,
        DistributedType,
        ProjectConfiguration,
        set_seed,
    )

out = Path(sys.argv[1])
logger = get_logger(__name__)


class Recorder(GeneralTracker):
    """A custom tracker (HF's documented extension point) that remembers every call."""

    name = "recorder"
    requires_logging_directory = False

    def __init__(self):
        super().__init__()
        self.calls = []

    @property
    def tracker(self):
        return self.calls

    def start(self):
        self.calls.append(["start"])

    def store_init_configuration(self, values):
        self.calls.append(["config", values])

    def log(self, values, step=None, **kwargs):
        self.calls.append(["log", step, values])

    def finish(self):
        self.calls.append(["finish"])


class Counter:
    """An object registered for checkpointing."""

    def __init__(self):
        self.count = 0

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = state["count"]


recorder = Recorder()
accelerator = Accelerator(
    gradient_accumulation_steps=2,
    mixed_precision="no",
    log_with=[recorder, "tensorboard"],
    project_config=ProjectConfiguration(project_dir=str(out / "project"), logging_dir=str(out)),
    dataloader_config=DataLoaderConfiguration(split_batches=True),
)
logger.info(accelerator.state, main_process_only=False)
rank = accelerator.process_index
facts = {
    "num_processes": accelerator.num_processes,
    "process_index": rank,
    "is_main_process": accelerator.is_main_process,
    "is_last_process": accelerator.is_last_process,
    "distributed_type": str(accelerator.distributed_type.value),
    "multi_cpu": accelerator.distributed_type in (DistributedType.MULTI_CPU, DistributedType.NO),
    "mixed_precision": accelerator.mixed_precision,
    "native_amp": accelerator.native_amp,
    "scaler_is_none": accelerator.scaler is None,
    "state": {
        "num_processes": accelerator.state.num_processes,
        "process_index": accelerator.state.process_index,
        "local_process_index": accelerator.state.local_process_index,
        "device": str(accelerator.state.device),
        "distributed_type": str(accelerator.state.distributed_type.value),
        "mixed_precision": accelerator.state.mixed_precision,
        "deepspeed_plugin_is_none": accelerator.state.deepspeed_plugin is None,
        "fsdp_plugin_is_none": getattr(accelerator.state, "fsdp_plugin", None) is None,
        "from_anywhere": AcceleratorState().mixed_precision,
        "partial_process_index": PartialState().process_index,
    },
    "dataloader_config": [
        accelerator.dataloader_config.split_batches,
        accelerator.dataloader_config.even_batches,
    ],
}

# diffusers: the weights' dtype follows the mixed precision
weight_dtype = torch.float32
if accelerator.mixed_precision == "fp16":
    weight_dtype = torch.float16
elif accelerator.mixed_precision == "bf16":
    weight_dtype = torch.bfloat16
facts["weight_dtype"] = str(weight_dtype)

set_seed(42)
inputs = torch.randn(72, 8)
targets = torch.sin(inputs.sum(dim=1, keepdim=True))
sample_ids = torch.arange(72, dtype=torch.float32).unsqueeze(1)
loader = DataLoader(
    TensorDataset(inputs, targets, sample_ids),
    batch_size=16,
    shuffle=True,
    generator=torch.Generator().manual_seed(42),
)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
facts["unwrapped"] = type(accelerator.unwrap_model(model)).__name__

counter = Counter()
accelerator.register_for_checkpointing(counter)


def save_model_hook(models, weights, output_dir):  # diffusers' custom saving
    if accelerator.is_main_process:
        for saved in models:
            torch.save(saved.state_dict(), os.path.join(output_dir, "net.pt"))
            weights.pop()  # save_state must not write this model again


def load_model_hook(models, input_dir):
    while models:
        loaded = models.pop()  # load_state must not load it again
        loaded.load_state_dict(torch.load(os.path.join(input_dir, "net.pt")))


accelerator.register_save_state_pre_hook(save_model_hook)
accelerator.register_load_state_pre_hook(load_model_hook)
accelerator.init_trackers("compat", config={"lr": 0.05, "batch_size": 16})

losses, lrs, syncs, ends, seen = [], [], [], [], []
global_step = 0
checkpoint = out / "checkpoint-2"
for epoch in range(2):
    for x, y, ids in loader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(x), y)
            avg_loss = accelerator.gather(loss.repeat(x.shape[0])).mean()
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        losses.append(avg_loss.item())
        lrs.append(scheduler.get_last_lr()[0])
        syncs.append(accelerator.sync_gradients)
        ends.append(accelerator.gradient_state.end_of_dataloader)
        seen.append(ids.flatten().tolist())
        if accelerator.sync_gradients:
            global_step += 1
            counter.count += 1
            accelerator.log({"train_loss": avg_loss.item()}, step=global_step)
            if global_step == 2:
                accelerator.save_state(checkpoint)
                saved_weights = [p.detach().clone() for p in model.parameters()]
                saved_batches = len(seen) - epoch * len(loader)
    accelerator.print(f"epoch {epoch} done, {global_step} optimizer steps")
facts.update(losses=losses, lrs=lrs, syncs=syncs, ends=ends, seen=seen)
facts["final_weights"] = [p.detach().flatten().tolist() for p in model.parameters()]
if accelerator.is_main_process:
    facts["checkpoint_files"] = sorted(os.listdir(checkpoint))
    facts["hook_saved_keys"] = sorted(torch.load(checkpoint / "net.pt"))

# resume the way Accelerate's examples do: load_state, then skip the batches already seen
accelerator.load_state(checkpoint)
facts["restored"] = all(torch.equal(a, b) for a, b in zip(model.parameters(), saved_weights))
facts["restored_counter"] = counter.count
facts["restored_step"] = accelerator.step
resumed = accelerator.skip_first_batches(loader, saved_batches)
facts["resumed_len"] = len(resumed)
facts["resumed_ids"] = [ids.flatten().tolist() for _, _, ids in resumed]
facts["first_epoch_rest"] = seen[saved_batches : len(loader)]

# save_model: one safetensors file, or shards plus an index
accelerator.save_model(model, out / "model")
accelerator.save_model(model, out / "sharded", max_shard_size="0.6KB")
accelerator.wait_for_everyone()
if accelerator.is_main_process:
    facts["model_files"] = sorted(os.listdir(out / "model"))
    facts["sharded_files"] = sorted(os.listdir(out / "sharded"))
    facts["shard_index"] = json.loads(
        (out / "sharded" / "model.safetensors.index.json").read_text()
    )

# process control
with accelerator.split_between_processes(["a", "b", "c"], apply_padding=True) as share:
    facts["split_list"] = share
with accelerator.split_between_processes(torch.arange(5), apply_padding=True) as share:
    facts["split_tensor"] = share.tolist()
with accelerator.split_between_processes({"p": [1, 2, 3], "q": [4, 5, 6]}) as share:
    facts["split_dict"] = share


@accelerator.on_main_process
def on_main():
    return "main"


@accelerator.on_local_main_process
def on_local_main():
    return "local main"


@accelerator.on_process(process_index=1)
def on_one():
    return "one"


facts["decorated"] = [on_main(), on_local_main(), on_one()]
if accelerator.is_last_process:
    accelerator.set_trigger()
facts["trigger"] = [accelerator.check_trigger(), accelerator.check_trigger()]
with accelerator.main_process_first():
    facts["main_first"] = True
with accelerator.join_uneven_inputs([model]):
    model(torch.randn(2, 8))
with accelerator.profile() as profiler:
    model(torch.randn(2, 8))
facts["profiled"] = len(profiler.key_averages()) > 0

# trackers live on the main process only
facts["trackers"] = [tracker.name for tracker in accelerator.trackers]
facts["blank_tracker"] = type(accelerator.get_tracker("recorder")).__name__
if accelerator.is_main_process:
    facts["writer"] = type(accelerator.get_tracker("tensorboard", unwrap=True)).__name__

# another module creating its own Accelerator shares the process state
helper = Accelerator()
facts["second"] = {
    "num_processes": helper.num_processes,
    "process_index": helper.process_index,
    "device": str(helper.device),
    "mixed_precision": helper.mixed_precision,
    "sync_gradients": helper.sync_gradients,
    "gradient_accumulation_steps": helper.gradient_accumulation_steps,
    "step": helper.step,
    "prepared_models": len(helper._models),
}
try:
    Accelerator(mixed_precision="bf16")
    facts["conflicting_precision_raises"] = False
except ValueError:
    facts["conflicting_precision_raises"] = True

accelerator.wait_for_everyone()
accelerator.end_training()
facts["recorded"] = recorder.calls
(out / f"rank{rank}.json").write_text(json.dumps(facts, indent=1))
