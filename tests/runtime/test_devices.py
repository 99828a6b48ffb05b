"""Device choice through torch.accelerator (as HF Accelerate 1.16 does), with fake accelerators."""

import pytest
import torch

from runtime import devices
from runtime.config import DistributedType


@pytest.fixture
def accelerator(monkeypatch):
    """Pretends this machine has `count` accelerators of `kind` (torch.accelerator's answers)."""

    def install(kind: str, count: int):
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
        monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: torch.device(kind))
        monkeypatch.setattr(torch.accelerator, "device_count", lambda: count)

    return install


def test_without_an_accelerator_every_process_uses_the_cpu():
    if torch.accelerator.is_available():
        pytest.skip("this machine has an accelerator")
    assert devices.process_device(False, 3, 4) == torch.device("cpu")


@pytest.mark.parametrize(
    "kind, backend, distributed_type",
    [
        ("cuda", "nccl", DistributedType.MULTI_GPU),
        ("xpu", "xccl", DistributedType.MULTI_XPU),
    ],
)
def test_local_rank_picks_its_accelerator_and_its_backend(
    accelerator, kind, backend, distributed_type
):
    accelerator(kind, 2)
    device = devices.process_device(False, 3, 4)
    assert device == torch.device(kind, 1)  # local rank 3 on 2 devices
    assert devices.default_backend(device) == backend
    assert devices.distributed_type(device) == distributed_type


def test_cpu_true_ignores_the_accelerator(accelerator):
    accelerator("cuda", 2)
    device = devices.process_device(True, 1, 2)
    assert device == torch.device("cpu")
    assert devices.default_backend(device) == "gloo"
    assert devices.distributed_type(device) == DistributedType.MULTI_CPU


def test_mps_runs_one_process_and_refuses_several(accelerator):
    accelerator("mps", 1)
    assert devices.process_device(False, 0, 1) == torch.device("mps")
    with pytest.raises(RuntimeError, match="MPS runs one process"):
        devices.process_device(False, 0, 2)


def test_a_backend_torch_does_not_know_falls_back_to_the_usual_name(monkeypatch):
    def unknown(device):
        raise RuntimeError(f"Default backend not registered for device : {device}")

    monkeypatch.setattr(torch.distributed, "get_default_backend_for_device", unknown)
    assert devices.default_backend(torch.device("hpu", 0)) == "hccl"
    assert devices.default_backend(torch.device("privateuseone", 0)) == "gloo"
