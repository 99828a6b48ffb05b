"""One script written against the Accelerate API, run unchanged on HF Accelerate and on runtime.

scripts/compat_scenario.py (diffusers / Accelerate-examples style: trackers, save/load hooks,
registered objects, accumulation with a prepared scheduler and an uneven tail, save_model,
skip_first_batches, process control, a second Accelerator) runs four times: on each runtime,
as `python` (1 process) and under `migrate launch --nproc 2`. Every rank's record and the
printed output must match, except the documented deviations checked at the end.
"""

import pytest
from conftest import check, read_json, run_migrate_launch, run_python

pytest.importorskip("accelerate")  # in the `test` extra; absent only in a runtime-only install
pytestmark = pytest.mark.slow

# runtime differs here on purpose (docs/runtime.md, "Where it deliberately differs")
DEVIATIONS = {"resumed_ids", "second"}


def run_scenario(runtime: str, nproc: int, out) -> tuple[list[dict], str]:
    env = {"COMPAT_RUNTIME": runtime}
    if runtime == "accelerate":
        env["ACCELERATE_USE_CPU"] = "1"  # HF needs it for gloo on CPU
    if nproc == 1:
        done = check(run_python("compat_scenario.py", str(out), env=env))
    else:
        done = check(run_migrate_launch("compat_scenario.py", str(out), nproc=nproc, env=env))
    return [read_json(out / f"rank{rank}.json") for rank in range(nproc)], done.stdout


@pytest.fixture(scope="module", params=[1, 2], ids=["1-process", "2-processes"])
def runs(request, tmp_path_factory):
    nproc = request.param
    ours = run_scenario("runtime", nproc, tmp_path_factory.mktemp("runtime"))
    theirs = run_scenario("accelerate", nproc, tmp_path_factory.mktemp("accelerate"))
    return nproc, ours, theirs


def normalise(value):
    """HF names the CPU device of a MULTI_CPU run "cpu:0"; runtime says "cpu"."""
    if isinstance(value, dict):
        return {key: normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalise(item) for item in value]
    return "cpu" if value == "cpu:0" else value


def assert_same(ours, theirs, where="record"):
    if isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=0, abs=1e-6), where
    elif isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), where
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), where
        for index, (mine, hf) in enumerate(zip(ours, theirs)):
            assert_same(mine, hf, f"{where}[{index}]")
    else:
        assert ours == theirs, where


def test_every_rank_records_the_same_as_on_hf_accelerate(runs):
    _, (ours, _), (theirs, _) = runs
    for mine, hf in zip(ours, theirs):
        shared = {key: value for key, value in normalise(hf).items() if key not in DEVIATIONS}
        assert_same({key: mine[key] for key in shared}, shared)
        assert sorted(mine) == sorted(hf)


def test_prints_the_same_lines_once(runs):
    _, (_, our_output), (_, their_output) = runs
    assert our_output.splitlines() == their_output.splitlines()
    assert our_output.splitlines() == ["epoch 0 done, 3 optimizer steps"] + [
        "epoch 1 done, 6 optimizer steps"
    ]


def test_the_scenario_exercised_what_it_compares(runs):
    """Guards the comparison against both runtimes skipping the same thing."""
    nproc, (ours, _), _ = runs
    main = ours[0]
    assert main["distributed_type"] == ("MULTI_CPU" if nproc == 2 else "NO")
    assert len(main["losses"]) == 10 and main["syncs"].count(True) == 6
    assert main["checkpoint_files"] == sorted(
        ["custom_checkpoint_0.pkl", "net.pt", "optimizer.bin", "scheduler.bin"]
        + [f"random_states_{rank}.pkl" for rank in range(nproc)]
    )  # the save hook wrote the model itself (net.pt) and popped it from the weights
    assert main["restored"] and main["restored_counter"] == 2
    assert main["sharded_files"] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]
    assert main["model_files"] == ["model.safetensors"]
    assert [call[0] for call in main["recorded"]] == ["start", "config"] + ["log"] * 6 + ["finish"]
    assert main["trackers"] == ["recorder", "tensorboard"] and main["writer"] == "SummaryWriter"
    assert main["trigger"] == [True, False] and main["profiled"]
    if nproc == 2:
        assert ours[1]["trackers"] == [] and ours[1]["recorded"] == []
        assert ours[1]["blank_tracker"] == "GeneralTracker"
        assert [r["split_list"] for r in ours] == [["a", "b"], ["c", "c"]]
        assert [r["decorated"] for r in ours] == [["main", "local main", None], [None, None, "one"]]


def test_resuming_with_skip_first_batches_continues_the_interrupted_epoch(runs):
    """runtime replays the interrupted epoch's shuffle; HF draws a new one."""
    _, (ours, _), (theirs, _) = runs
    for mine, hf in zip(ours, theirs):
        assert mine["resumed_ids"] == mine["first_epoch_rest"]
        assert len(hf["resumed_ids"]) == len(mine["resumed_ids"]) == mine["resumed_len"]


def test_a_second_accelerator_shares_the_process_but_keeps_accumulation(runs):
    """HF's second Accelerator() resets gradient accumulation to 1 for every Accelerator."""
    nproc, (ours, _), (theirs, _) = runs
    for rank, (mine, hf) in enumerate(zip(ours, theirs)):
        assert mine["second"]["num_processes"] == hf["second"]["num_processes"] == nproc
        assert mine["second"]["process_index"] == rank
        assert mine["second"]["gradient_accumulation_steps"] == 2
        assert hf["second"]["gradient_accumulation_steps"] == 1
        assert mine["conflicting_precision_raises"] and hf["conflicting_precision_raises"]
