"""save_model, save_state / load_state with hooks and registered objects, HF's checkpoint layout."""

import json

import pytest
import torch
from safetensors.torch import load_file

from runtime import Accelerator, ProjectConfiguration
from runtime.serialization import parse_size


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def test_save_model_writes_one_safetensors_file_of_the_unwrapped_weights(tmp_path):
    accelerator = Accelerator()
    model = accelerator.prepare(small_model())
    accelerator.save_model(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]
    saved = load_file(tmp_path / "model.safetensors")
    assert saved.keys() == model.state_dict().keys()
    assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items())


def test_save_model_shards_by_size_with_an_index(tmp_path):
    accelerator = Accelerator()
    # 512 + 64 bytes fit in 600; the second layer's 64 + 4 bytes start a new shard
    accelerator.save_model(small_model(), tmp_path, max_shard_size="0.6KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    first, second = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    assert index == {
        "metadata": {"total_size": 644},
        "weight_map": {"0.weight": first, "0.bias": first, "2.weight": second, "2.bias": second},
    }
    assert set(load_file(tmp_path / second)) == {"2.weight", "2.bias"}


def test_a_tensor_larger_than_the_shard_size_gets_a_shard_of_its_own(tmp_path):
    Accelerator().save_model(small_model(), tmp_path, max_shard_size=100, safe_serialization=False)
    index = json.loads((tmp_path / "pytorch_model.bin.index.json").read_text())
    shards = index["weight_map"]  # [0.weight] [0.bias] [2.weight 2.bias]: 64 + 64 > 100
    assert shards["0.weight"] == "pytorch_model-00001-of-00003.bin"
    assert shards["0.bias"] == "pytorch_model-00002-of-00003.bin"
    assert shards["2.weight"] == shards["2.bias"] == "pytorch_model-00003-of-00003.bin"


def test_saving_again_removes_stale_shards(tmp_path):
    accelerator = Accelerator()
    accelerator.save_model(small_model(), tmp_path, max_shard_size="0.6KB")
    accelerator.save_model(small_model(), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.safetensors",
        "model.safetensors.index.json",  # HF leaves the old index too
    ]


def test_tied_weights_are_written_once(tmp_path):
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False)
    )
    model[1].weight = model[0].weight
    Accelerator().save_model(model, tmp_path)
    assert list(load_file(tmp_path / "model.safetensors")) == ["0.weight"]


def test_save_model_refuses_a_file_and_bad_sizes(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        Accelerator().save_model(small_model(), tmp_path / "file")
    with pytest.raises(ValueError, match="unit"):
        parse_size("10GiB")
    assert parse_size("10GB") == 10**10 and parse_size(7) == 7


def trained(accelerator):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    accelerator.backward(model(torch.randn(4, 8)).pow(2).mean())
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler


def test_save_state_writes_hf_file_names(tmp_path):
    accelerator = Accelerator()
    trained(accelerator)
    accelerator.save_state(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.safetensors",
        "optimizer.bin",
        "random_states_0.pkl",
        "scheduler.bin",
    ]
    states = torch.load(tmp_path / "random_states_0.pkl", weights_only=False)
    assert {"step", "random_state", "numpy_random_seed", "torch_manual_seed"} <= states.keys()


def test_hf_accelerate_loads_a_runtime_checkpoint_and_back(tmp_path):
    hf = pytest.importorskip("accelerate")
    ours = Accelerator()
    model, _, _ = trained(ours)
    ours.save_state(tmp_path / "ours")
    theirs = hf.Accelerator(cpu=True)
    hf_model, hf_optimizer, hf_scheduler = theirs.prepare(
        small_model(), torch.optim.SGD(small_model().parameters(), lr=0.1, momentum=0.9), None
    )
    hf_scheduler = torch.optim.lr_scheduler.StepLR(hf_optimizer.optimizer, step_size=1, gamma=0.5)
    hf_scheduler = theirs.prepare(hf_scheduler)
    theirs.load_state(tmp_path / "ours")
    assert all(torch.equal(a, b) for a, b in zip(hf_model.parameters(), model.parameters()))
    assert hf_scheduler.get_last_lr() == [0.05]
    with torch.no_grad():
        hf_model[0].bias.fill_(3.0)
    theirs.save_state(tmp_path / "theirs")
    ours.load_state(tmp_path / "theirs")
    assert torch.equal(model[0].bias, torch.full((16,), 3.0))


def test_hooks_get_hf_arguments_and_popping_skips_the_model(tmp_path):
    accelerator = Accelerator()
    model, _, _ = trained(accelerator)
    seen = {}

    def save_hook(models, weights, output_dir):
        seen["save"] = (models, len(weights), output_dir)
        torch.save(models[0].state_dict(), f"{output_dir}/own.pt")
        weights.pop()

    def load_hook(models, input_dir):
        seen["load"] = input_dir
        models.pop().load_state_dict(torch.load(f"{input_dir}/own.pt"))

    save_handle = accelerator.register_save_state_pre_hook(save_hook)
    accelerator.register_load_state_pre_hook(load_hook)
    accelerator.save_state(tmp_path)
    assert seen["save"] == ([model], 1, str(tmp_path))
    assert not (tmp_path / "model.safetensors").exists() and (tmp_path / "own.pt").exists()
    saved = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        model[0].weight.zero_()
    accelerator.load_state(tmp_path)  # no model.safetensors: the hook loaded it
    assert seen["load"] == str(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), saved))
    save_handle.remove()
    accelerator.save_state(tmp_path / "again")
    assert (tmp_path / "again" / "model.safetensors").exists()


class Counter:
    def __init__(self):
        self.count = 0

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = state["count"]


def test_registered_objects_are_saved_and_restored(tmp_path):
    accelerator = Accelerator()
    counter = Counter()
    accelerator.register_for_checkpointing(counter)
    counter.count = 7
    accelerator.save_state(tmp_path)
    counter.count = 0
    accelerator.load_state(tmp_path)
    assert counter.count == 7 and (tmp_path / "custom_checkpoint_0.pkl").exists()
    accelerator.register_for_checkpointing(Counter())
    with pytest.raises(RuntimeError, match="1 custom checkpoints, but 2 objects"):
        accelerator.load_state(tmp_path)
    with pytest.raises(ValueError, match="state_dict"):
        accelerator.register_for_checkpointing(object())


def test_automatic_checkpoint_naming_keeps_the_last_total_limit(tmp_path):
    project = ProjectConfiguration(
        project_dir=str(tmp_path), automatic_checkpoint_naming=True, total_limit=2
    )
    accelerator = Accelerator(project_config=project)
    counter = Counter()
    accelerator.register_for_checkpointing(counter)
    for count in range(3):
        counter.count = count
        accelerator.save_state()
    folders = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert folders == ["checkpoint_1", "checkpoint_2"] and accelerator.save_iteration == 3
    accelerator.load_state()
    assert counter.count == 2


def test_load_state_of_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="folder does not exist"):
        Accelerator().load_state(tmp_path / "nowhere")
