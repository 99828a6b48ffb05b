"""The Accelerate names scripts use beyond prepare/backward, on one process (plain python)."""

import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, DistributedType, ProfileKwargs
from runtime.splitting import split_share
from runtime.unsupported import UNSUPPORTED_ATTRIBUTES


def test_distributed_type_is_an_enum_that_compares_like_hf():
    hf = pytest.importorskip("accelerate.utils")
    accelerator = Accelerator()
    assert accelerator.distributed_type is DistributedType.NO
    assert accelerator.distributed_type == hf.DistributedType.NO == "NO"
    assert accelerator.distributed_type != hf.DistributedType.MULTI_GPU
    assert accelerator.distributed_type in (hf.DistributedType.MULTI_CPU, hf.DistributedType.NO)


def test_runtime_utils_gives_the_accelerate_utils_import_path():
    from runtime.utils import DistributedType as from_utils
    from runtime.utils import ProjectConfiguration, set_seed

    assert from_utils is DistributedType and callable(set_seed)
    assert ProjectConfiguration(project_dir="p").logging_dir == "p"


@pytest.mark.parametrize(("precision", "native"), [("no", False), ("bf16", True)])
def test_native_amp_says_whether_autocast_runs(precision, native):
    accelerator = Accelerator(mixed_precision=precision, cpu=True)
    assert accelerator.native_amp is native and accelerator.scaler is None


def test_dataloader_config_reflects_the_arguments():
    accelerator = Accelerator(split_batches=True)
    assert accelerator.dataloader_config.split_batches and accelerator.even_batches
    accelerator.even_batches = False
    assert accelerator.dataloader_config.even_batches is False


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_ATTRIBUTES))
def test_backend_only_attributes_raise_not_implemented(name):
    with pytest.raises(NotImplementedError, match="runtime does not support"):
        getattr(Accelerator(), name)


def test_an_unknown_attribute_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="deepspeed_pluginn"):
        Accelerator().deepspeed_pluginn  # noqa: B018


@pytest.mark.parametrize(
    ("arguments", "backend"),
    [
        ({"deepspeed_plugin": object()}, "DeepSpeed"),
        ({"fsdp_plugin": object()}, "FSDP"),
        ({"megatron_lm_plugin": object()}, "Megatron-LM"),
        ({"parallelism_config": object()}, "ParallelismConfig"),
        ({"mixed_precision": "fp8"}, "fp8"),
        ({"dynamo_backend": "inductor"}, "torch.compile"),
    ],
)
def test_asking_for_a_missing_backend_names_it(arguments, backend):
    with pytest.raises(NotImplementedError, match=backend):
        Accelerator(**arguments)


def test_a_backend_environment_variable_names_it(monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(NotImplementedError, match="ACCELERATE_USE_FSDP asks for FSDP"):
        Accelerator()


def test_deepspeed_plugin_selection_on_the_state_names_deepspeed():
    with pytest.raises(NotImplementedError, match="DeepSpeed"):
        Accelerator().state.select_deepspeed_plugin("training")


def test_split_between_processes_on_one_process_gives_everything():
    with Accelerator().split_between_processes([1, 2, 3], apply_padding=True) as share:
        assert share == [1, 2, 3]


def test_split_shares_are_contiguous_and_padded_with_the_inputs_last_item():
    items = ["a", "b", "c", "d"]
    assert [split_share(items, 3, r, False) for r in range(3)] == [["a", "b"], ["c"], ["d"]]
    assert [split_share(items, 3, r, True) for r in range(3)] == [
        ["a", "b"],
        ["c", "d"],
        ["d", "d"],
    ]
    tensors = [split_share(torch.arange(5), 2, r, True).tolist() for r in range(2)]
    assert tensors == [[0, 1, 2], [3, 4, 4]]
    assert split_share({"x": [1, 2], "y": (3, 4)}, 2, 1, False) == {"x": [2], "y": (4,)}
    with pytest.raises(ValueError, match="one length"):
        split_share({"x": [1, 2], "y": [3]}, 2, 0, False)


def test_process_decorators_run_everything_on_one_process():
    accelerator = Accelerator()
    ran = []

    @accelerator.on_main_process
    def on_main():
        ran.append("main")
        return "main"

    @accelerator.on_process(process_index=3)
    def on_three():
        ran.append(3)

    assert on_main() == "main" and on_three() is None
    assert ran == ["main", 3] and on_main.__name__ == "on_main"


def test_trigger_is_seen_once():
    accelerator = Accelerator()
    assert accelerator.check_trigger() is False
    accelerator.set_trigger()
    assert [accelerator.check_trigger(), accelerator.check_trigger()] == [True, False]


def test_profile_yields_the_profiler_and_writes_a_trace(tmp_path):
    accelerator = Accelerator(kwargs_handlers=[ProfileKwargs(output_trace_dir=str(tmp_path))])
    with accelerator.profile() as profiler:
        torch.ones(4, 4) @ torch.ones(4, 4)
    assert any("mm" in event.key for event in profiler.key_averages())
    assert (tmp_path / "profile_0.json").stat().st_size > 0


def test_join_uneven_inputs_on_one_process_is_a_plain_block():
    accelerator = Accelerator()
    model = accelerator.prepare(torch.nn.Linear(2, 1))
    with accelerator.join_uneven_inputs([model], even_batches=False):
        model(torch.ones(1, 2)).sum().backward()
    assert model.weight.grad is not None


def test_skip_first_batches_of_a_prepared_loader():
    accelerator = Accelerator()
    loader = accelerator.prepare(DataLoader(TensorDataset(torch.arange(10)), batch_size=4))
    rest = accelerator.skip_first_batches(loader, 2)
    assert [batch.tolist() for (batch,) in rest] == [[8, 9]] and len(rest) == 1
    assert [accelerator.gradient_state.end_of_dataloader for _ in rest] == [True]
    assert len(loader) == 3  # the original is untouched


def test_importing_runtime_loads_no_tracker_or_safetensors():
    code = (
        "import sys, runtime; from runtime import Accelerator; Accelerator(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('safetensors', 'tensorboard', 'wandb', 'mlflow', 'yaml') "
        "or m in ('runtime.tracking', 'torch.utils.tensorboard')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_get_logger_prefixes_the_rank_and_logs_on_the_main_process(caplog):
    from runtime.logging import get_logger

    Accelerator()
    logger = get_logger("compat.test", log_level="INFO")
    with caplog.at_level("INFO", logger="compat.test"):
        logger.info("hello")
        logger.info("everywhere", main_process_only=False)
        logger.warning_once("once")
        logger.warning_once("once")
    assert [r.getMessage() for r in caplog.records] == [
        "[RANK 0] hello",
        "[RANK 0] everywhere",
        "[RANK 0] once",
    ]
