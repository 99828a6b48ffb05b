"""Cases where runtime once differed from HF Accelerate, run on both on 2 processes.

scripts/hf_parity.py runs under `migrate launch --nproc 2` once on runtime and once on HF
Accelerate; every rank's record of every case must be equal: IterableDataset loaders with
a short last batch (dispatched by default, and per-sample shards with
dispatch_batches=False), map-style loaders dispatched from process 0, a BatchSampler given
as the sampler, DDP communication hooks, broadcast / reduce("max") / copy_tensor_to_devices /
synchronize_rng_states, the debug-mode shape check, the seedable sampler,
prepare_data_loader's signature and a dataloader_config set after construction.
"""

import pytest
import torch
from conftest import check, read_json, run_migrate_launch

pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow


def records(runtime: str, out) -> list[dict]:
    env = {"PARITY_RUNTIME": runtime, "ACCELERATE_USE_CPU": "1"}  # HF needs it for gloo on CPU
    check(run_migrate_launch("hf_parity.py", str(out), env=env, timeout=400))
    return [read_json(out / f"rank{rank}.json") for rank in (0, 1)]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    ours = records("runtime", tmp_path_factory.mktemp("runtime"))
    theirs = records("accelerate", tmp_path_factory.mktemp("accelerate"))
    return ours, theirs


def same_case(both, case: str) -> None:
    ours, theirs = both
    for rank in (0, 1):
        assert ours[rank][case] == theirs[rank][case], f"rank {rank}, {case}"


def test_every_case_is_recorded_on_both(both):
    ours, theirs = both
    for rank in (0, 1):
        assert sorted(ours[rank]) == sorted(theirs[rank])
    assert len(ours[0]) == 63


@pytest.mark.parametrize("count", [30, 29])
def test_iterable_loader_with_a_short_tail_gathers_what_hf_gathers(both, count):
    ours, theirs = both
    keys = [key for key in theirs[0] if key.startswith(f"iterable n={count} ")]
    assert len(keys) == 16
    for key in keys:
        for rank in (0, 1):
            assert ours[rank][key] == theirs[rank][key], f"rank {rank}, {key}"
    # the case: rank 1 used to abort in gloo and rank 0 got zero padding
    default = ours[0][f"iterable n={count} split=False dispatch=None drop=False sized=True"]
    assert sorted(default["gather_for_metrics"]) == list(range(count))


def test_iterable_loader_of_pairs_matches_hf(both):
    same_case(both, "iterable pairs dispatch=None")
    same_case(both, "iterable pairs dispatch=False")
    labels = [y for _, ys in both[0][0]["iterable pairs dispatch=None"] for y in ys]
    assert len(labels) == 29


def test_dispatched_map_style_loader_matches_hf(both):
    for key in [k for k in both[1][0] if k.startswith("dispatched map-style")]:
        same_case(both, key)
    same_case(both, "dispatched with a slice function")
    assert both[0][0]["dispatched with a slice function"]["mine"][0] == [7, 6, 5, 4]


def test_batch_sampler_given_as_the_sampler_matches_hf(both):
    same_case(both, "batch sampler as sampler")
    seen = both[0][0]["batch sampler as sampler"]["gather_for_metrics"]
    assert sorted(seen) == list(range(22))


def test_ddp_communication_hooks_give_hf_gradients(both):
    ours, theirs = both
    keys = [key for key in theirs[0] if key.startswith("comm hook")]
    assert len(keys) == 6
    for key in keys:
        for rank in (0, 1):
            mine, hf = ours[rank][key], theirs[rank][key]
            assert mine["error"] == hf["error"], key
            assert len(mine["grads"]) == len(hf["grads"]), key
            if hf["grads"]:
                torch.testing.assert_close(torch.tensor(mine["grads"]), torch.tensor(hf["grads"]))
    assert ours[0]["comm hook BF16+NO {}"]["error"] == "TypeError"  # bf16 needs NCCL, on both


@pytest.mark.parametrize(
    "case",
    [
        "broadcast",
        "broadcast nested",
        "reduce max",
        "reduce default",
        "accelerator reduce default",
        "accelerator reduce max",
        "copy_tensor_to_devices",
        "synchronized draws",
        "debug gather",
        "debug reduce",
        "debug broadcast",
        "debug exception class",
        "seedable sampler",
        "seedable sampler class",
        "prepare_data_loader split=False",
        "prepare_data_loader split=True",
        "dataloader_config set later",
    ],
)
def test_operation_matches_hf(both, case):
    same_case(both, case)


def test_operations_did_what_they_say(both):
    rank0, rank1 = both[0]
    assert rank1["broadcast"] == [0.0, 1.0, 2.0]
    assert rank0["reduce max"] == rank1["reduce max"] == [2.0, 5.0]
    assert rank0["reduce default"] == [1.5] and rank0["accelerator reduce default"] == [3.0]
    assert rank1["copy_tensor_to_devices"] == [7, 8, 9]
    assert rank0["synchronized draws"] == rank1["synchronized draws"]
    assert rank0["debug gather"] == rank1["debug reduce"] == "DistributedOperationException"
    epochs = rank0["seedable sampler"]["epochs"]
    assert epochs[0] != epochs[1] and rank0["seedable sampler"]["replayed"] == epochs[0]
