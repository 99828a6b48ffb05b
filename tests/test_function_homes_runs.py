"""The migrated module/function-split fixtures (fixtures/golden/module_*, function_homes.py)
run under one `migrate launch --nproc 2`: a driver runs each in turn in the same two processes
(one process-group start for all). Each shows its data split between the processes, only the
main process printing and saving, and the objects prepared at module level and in the
function training together."""

from __future__ import annotations

import pytest

from tests.golden_runs import launch_in_turn

pytestmark = pytest.mark.slow

FIXTURES = [
    "module_loaders_function_model",
    "module_model_function_loader",
    "module_model_function_optimizer",
]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("function_homes")
    return folder, launch_in_turn(folder, FIXTURES)


def test_module_loaders_with_the_network_made_in_train(launched):
    folder, printed = launched
    out = printed["module_loaders_function_model"]
    # loaders prepared at module level, the network and optimizer in train(): 64 samples,
    # batch 8, two processes: 32 samples each, summed over the processes (64, not 128 as two
    # unsplit copies would count) and printed once an epoch (the main process)
    assert out.count("samples 64 ") == 2 and "samples 128" not in out, out
    import torch

    saved = torch.load(folder / "module_loaders_function_model" / "regressor.pt")
    assert sorted(k for k in saved["weights"] if k.startswith("0.")) == ["0.bias", "0.weight"]
    # module code after train() loads the saved weights into a plain network, once every
    # process is past the main process's save
    assert out.count("reloaded 85 weights") == 1, out


def test_module_network_and_warmup_with_the_loader_made_in_fit(launched):
    folder, printed = launched
    out = printed["module_model_function_loader"]
    # network, optimizer and per-batch warm-up at module level, the loader made in fit():
    # 128 samples, batch 16, two processes: 4 steps an epoch
    assert out.count("steps 4 ") == 2 and "steps 8" not in out, out
    assert (folder / "module_model_function_loader" / "classifier.pt").exists()


def test_module_network_with_the_optimizer_prepared_alone_in_train(launched):
    _, printed = launched
    out = printed["module_model_function_optimizer"]
    # the network prepared with the loader at module level, the optimizer alone in train():
    # 64 samples, batch 8, two processes: 4 batches an epoch, and it learns
    assert out.count("batches 4 ") == 3, out
    losses = [float(line.split()[-1]) for line in out.splitlines() if "batches" in line]
    assert losses[-1] < losses[0], out
