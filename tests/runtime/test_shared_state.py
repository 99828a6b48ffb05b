"""Several Accelerators in one process (issue 11): what they share and what each keeps."""

import warnings

import pytest
import torch

from runtime import Accelerator, AcceleratorState, GradientState, PartialState, state


def test_a_second_accelerator_shares_process_precision_and_gradient_state():
    first = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=2)
    second = Accelerator()
    assert second.state is first.state and second.gradient_state is first.gradient_state
    assert second.device == first.device and second.num_processes == first.num_processes
    assert second.mixed_precision == "bf16"  # inherited, not the default "no"
    assert second.gradient_accumulation_steps == 2  # HF would reset it to 1 here


def test_an_explicit_accumulation_setting_applies_to_every_accelerator():
    first = Accelerator(gradient_accumulation_steps=2)
    Accelerator(gradient_accumulation_steps=3)
    assert first.gradient_accumulation_steps == 3


def test_prepared_objects_and_step_belong_to_each_accelerator():
    first, second = Accelerator(gradient_accumulation_steps=2), Accelerator()
    model = first.prepare(torch.nn.Linear(2, 1))
    with first.accumulate(model):
        assert not second.sync_gradients  # the micro-step is process-wide
    assert (first.step, second.step) == (1, 0)
    assert len(first._models) == 1 and second._models == []


def test_backward_through_another_accelerator_inside_accumulate_divides_without_warning():
    first, second = Accelerator(gradient_accumulation_steps=2), Accelerator()
    model = first.prepare(torch.nn.Linear(1, 1, bias=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with first.accumulate(model):
            second.backward(model(torch.ones(1, 1)).sum())
    assert model.weight.grad.item() == pytest.approx(0.5)


def test_a_conflicting_mixed_precision_raises_like_hf():
    Accelerator(cpu=True, mixed_precision="bf16")
    with pytest.raises(ValueError, match="already been initialized"):
        Accelerator(mixed_precision="no")
    assert Accelerator(mixed_precision="bf16").mixed_precision == "bf16"


def test_one_grad_scaler_serves_every_accelerator():
    first, second = Accelerator(), Accelerator()
    sentinel = object()
    first.scaler = sentinel
    assert second.scaler is sentinel


def test_accelerator_state_from_anywhere_needs_an_accelerator_first():
    with pytest.raises(ValueError, match="create `accelerator = Accelerator\\(\\)` first"):
        AcceleratorState()
    assert not state.is_initialized()
    accelerator = Accelerator()
    assert AcceleratorState() is accelerator.state and state.is_initialized()
    assert AcceleratorState().mixed_precision == "no"


def test_partial_state_works_without_an_accelerator_and_is_the_one_it_uses():
    partial = PartialState()
    assert partial.num_processes == 1 and partial.is_main_process and partial.is_last_process
    assert Accelerator().state.partial_state is partial is PartialState()


def test_gradient_state_is_the_shared_one():
    accelerator = Accelerator()
    assert GradientState() is accelerator.gradient_state
    assert GradientState().sync_gradients and GradientState().active_dataloader is None


def test_state_reads_like_hf_state():
    accelerator = Accelerator()
    assert repr(accelerator.state).splitlines() == [
        "Distributed environment: DistributedType.NO",
        "Num processes: 1",
        "Process index: 0",
        "Local process index: 0",
        f"Device: {accelerator.device}",
        "",
        "Mixed precision type: no",
    ]
    assert accelerator.state.deepspeed_plugin is None
    assert getattr(accelerator.state, "fsdp_plugin", None) is None


def test_a_refused_first_accelerator_leaves_no_state_behind():
    with pytest.raises(ValueError, match="fp16"):
        Accelerator(mixed_precision="fp16", cpu=True)
    assert not state.is_initialized()
    assert Accelerator(cpu=True).mixed_precision == "no"
