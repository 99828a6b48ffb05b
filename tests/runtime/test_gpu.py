"""GPU paths under torchrun: one process per GPU (nccl when several), fp16 and bf16."""

import pytest
import torch
from conftest import check, read_json, run_torchrun

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def gpu_processes() -> int:
    return min(2, torch.cuda.device_count())


@pytest.mark.parametrize("precision", ["no", "fp16", "bf16"])
def test_training_on_gpus_places_everything_and_learns(tmp_path, precision):
    nproc = gpu_processes()
    check(run_torchrun("gpu_check.py", str(tmp_path), precision, nproc=nproc))
    for rank in range(nproc):
        facts = read_json(tmp_path / f"rank{rank}.json")
        assert facts["device"] == f"cuda:{facts['local_rank']}" == facts["batch_device"]
        assert facts["backend"] == ("nccl" if nproc > 1 else None)
        assert facts["scaler"] == (precision == "fp16")
        assert facts["output_dtype"] == "torch.float32"
        assert facts["last_loss"] < facts["first_loss"]
        assert facts["gathered"] == list(range(70))
