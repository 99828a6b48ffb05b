"""The same migrated script on our runtime and on HF Accelerate gives the same per-step losses."""

import pytest
import torch
from conftest import check, read_json, run_python, run_torchrun

pytest.importorskip("accelerate")  # in the `test` extra; absent only in a runtime-only install
pytestmark = pytest.mark.slow


def run_on(runtime: str, nproc: int, out) -> dict:
    env = {"CROSSCHECK_RUNTIME": runtime}
    if nproc == 1:
        check(run_python("crosscheck.py", str(out), env=env))
    else:
        check(run_torchrun("crosscheck.py", str(out), nproc=nproc, env=env))
    return read_json(out)


@pytest.mark.parametrize("nproc", [1, 2])
def test_losses_and_weights_match_hf_accelerate(tmp_path, nproc):
    ours = run_on("runtime", nproc, tmp_path / "ours.json")
    theirs = run_on("accelerate", nproc, tmp_path / "theirs.json")
    assert len(ours["losses"]) == len(theirs["losses"]) == 10
    torch.testing.assert_close(
        torch.tensor(ours["losses"]), torch.tensor(theirs["losses"]), rtol=0, atol=1e-6
    )
    assert ours["lrs"] == theirs["lrs"]
    for mine, hf in zip(ours["weights"], theirs["weights"]):
        torch.testing.assert_close(torch.tensor(mine), torch.tensor(hf), rtol=0, atol=1e-6)
