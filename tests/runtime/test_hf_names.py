"""Names HF Accelerate's test scripts and real code import, in one process (their semantics
across processes: test_hf_parity.py and test_hf_conformance.py)."""

import warnings

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

from runtime import Accelerator, DataLoaderConfiguration, DDPCommunicationHookType, launch
from runtime.config import DistributedDataParallelKwargs, DistributedType
from runtime.data_loader import SeedableRandomSampler, prepare_data_loader
from runtime.state import AcceleratorState
from runtime.utils import (
    DistributedOperationException,
    broadcast,
    copy_tensor_to_devices,
    reduce,
    synchronize_rng_states,
)


def indices(loader) -> list[list[int]]:
    return [batch[0].tolist() for batch in loader]


def test_comm_hook_options_are_not_ddp_arguments():
    handler = DistributedDataParallelKwargs(
        comm_hook=DDPCommunicationHookType.POWER_SGD,
        comm_state_option={"matrix_approximation_rank": 2},
        find_unused_parameters=True,
    )
    assert handler.to_kwargs() == {"find_unused_parameters": True}
    assert handler.comm_state_option == {"matrix_approximation_rank": 2}


def test_comm_hook_accepts_hf_members_and_values():
    accelerate = pytest.importorskip("accelerate")
    handler = DistributedDataParallelKwargs(
        comm_hook=accelerate.DDPCommunicationHookType.FP16, comm_wrapper="bf16"
    )
    assert handler.comm_hook == DDPCommunicationHookType.FP16
    assert handler.comm_wrapper == DDPCommunicationHookType.BF16


def test_comm_wrapper_must_be_a_compression():
    with pytest.raises(ValueError, match="comm_wrapper"):
        DistributedDataParallelKwargs(comm_wrapper=DDPCommunicationHookType.POWER_SGD)


def test_dataloader_config_set_later_applies_to_the_next_prepare():
    accelerator = Accelerator()
    accelerator.dataloader_config = DataLoaderConfiguration(even_batches=False, data_seed=3)
    assert not accelerator.even_batches and accelerator.dataloader_config.data_seed == 3


def test_a_stateful_dataloader_config_fails_where_it_is_set():
    accelerator = Accelerator()
    with pytest.raises(NotImplementedError, match="use_stateful_dataloader"):
        accelerator.dataloader_config = DataLoaderConfiguration(use_stateful_dataloader=True)
    with pytest.raises(NotImplementedError, match="use_stateful_dataloader"):
        Accelerator(dataloader_config=DataLoaderConfiguration(use_stateful_dataloader=True))


def test_seedable_sampler_order_follows_seed_and_epoch():
    data = TensorDataset(torch.arange(12))
    loader = prepare_data_loader(
        DataLoader(data, batch_size=4, shuffle=True), use_seedable_sampler=True, data_seed=5
    )
    sampler = loader.sampler
    assert isinstance(sampler, SeedableRandomSampler) and sampler.initial_seed == 5
    first, second = indices(loader), indices(loader)
    expected = torch.randperm(12, generator=torch.Generator().manual_seed(5)).tolist()
    assert [i for batch in first for i in batch] == expected and first != second
    loader.set_epoch(0)
    assert indices(loader) == first


def test_seedable_sampler_leaves_the_users_loader_alone():
    original = DataLoader(TensorDataset(torch.arange(8)), batch_size=2, shuffle=True)
    prepare_data_loader(original, use_seedable_sampler=True)
    assert type(original.sampler) is RandomSampler


def test_a_batch_sampler_given_as_the_sampler_is_prepared():
    data = TensorDataset(torch.arange(10))
    sampler = BatchSampler(
        RandomSampler(data, generator=torch.Generator().manual_seed(0)), 4, False
    )
    loader = Accelerator().prepare(DataLoader(data, sampler=sampler, batch_size=None))
    batches = indices(loader)
    assert [len(batch) for batch in batches] == [4, 4, 2]
    assert sorted(i for batch in batches for i in batch) == list(range(10))


def test_operations_on_one_process_return_their_input():
    tensor = torch.arange(3.0)
    assert broadcast(tensor) is tensor
    assert reduce(tensor, "max").tolist() == [0.0, 1.0, 2.0]
    assert reduce(tensor, "none").tolist() == [0.0, 1.0, 2.0]  # HF: "none" sums
    assert copy_tensor_to_devices(tensor) is tensor
    state = torch.get_rng_state()
    synchronize_rng_states(["torch"])
    assert torch.equal(torch.get_rng_state(), state)
    assert issubclass(DistributedOperationException, Exception)


def test_broadcast_takes_tensors_only():
    with pytest.raises(TypeError, match="broadcast takes tensors"):
        broadcast({"a": torch.ones(1), "b": "text"})


def test_an_accelerator_used_after_a_state_reset_says_why():
    accelerator = Accelerator()
    AcceleratorState._reset_state()
    with pytest.raises(
        AttributeError, match=r"This happens if `AcceleratorState._reset_state\(\)`"
    ):
        accelerator.prepare(torch.nn.Linear(1, 1))


def test_join_warns_for_a_distributed_type_without_ddp():
    accelerator = Accelerator()
    accelerator.state.distributed_type = DistributedType.FSDP
    assert accelerator.distributed_type == DistributedType.FSDP
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accelerator.join_uneven_inputs([torch.nn.Linear(1, 1)]):
            pass
    assert "only supported for multi-GPU" in str(caught[-1].message)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"node_rank": 2, "num_nodes": 2}, "node_rank"),
        ({"rdzv_backend": "zookeeper"}, "rdzv_backend"),
        ({"num_nodes": 2, "num_processes": 1}, "rdzv_endpoint"),
    ],
)
def test_launch_refuses_bad_rendezvous_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        launch(print, **arguments)


def test_prepare_data_loader_takes_hfs_slice_function_argument():
    accelerator = Accelerator()
    loader = DataLoader(TensorDataset(torch.arange(6)), batch_size=3)
    prepared = accelerator.prepare_data_loader(
        loader, device_placement=True, slice_fn_for_dispatch=None
    )
    assert indices(prepared) == [[0, 1, 2], [3, 4, 5]]
