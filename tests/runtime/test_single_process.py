"""The Accelerator in one process (a plain `python script.py` run): API semantics."""

import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, set_seed
from runtime.data import PreparedDataLoader
from runtime.wrappers import PreparedOptimizer, PreparedScheduler


def make_objects(samples=64, batch_size=16):
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(samples, 4), torch.randn(samples, 1))
    loader = DataLoader(data, batch_size=batch_size)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    return model, optimizer, loader, scheduler


def test_plain_python_is_one_process():
    accelerator = Accelerator()
    assert accelerator.num_processes == 1
    assert accelerator.process_index == 0 and accelerator.local_process_index == 0
    assert accelerator.is_main_process and accelerator.is_local_main_process
    assert accelerator.device == torch.device("cpu") or accelerator.device.type == "cuda"


def test_prepare_keeps_order_and_wraps_by_type():
    accelerator = Accelerator()
    model, optimizer, loader, scheduler = make_objects()
    marker = object()
    out = accelerator.prepare(scheduler, marker, loader, optimizer, model)
    assert out[1] is marker
    assert isinstance(out[0], PreparedScheduler)
    assert isinstance(out[2], PreparedDataLoader) and isinstance(out[2], DataLoader)
    assert isinstance(out[3], PreparedOptimizer) and isinstance(out[3], torch.optim.Optimizer)
    assert out[4] is model  # no DDP on one process


def test_prepare_single_object_comes_back_bare():
    accelerator = Accelerator()
    _, _, loader, _ = make_objects()
    assert isinstance(accelerator.prepare(loader), PreparedDataLoader)


def test_nothing_is_wrapped_twice():
    accelerator = Accelerator()
    model, optimizer, loader, scheduler = make_objects()
    first = accelerator.prepare(model, optimizer, loader, scheduler)
    second = accelerator.prepare(*first)
    assert all(a is b for a, b in zip(first, second))
    assert len(accelerator._optimizers) == 1 and len(accelerator._dataloaders) == 1


def test_plain_objects_prepared_again_come_back_as_the_first_prepare_made_them():
    # a training function called once per fold prepares the plain objects its caller passes
    model, optimizer, loader, scheduler = make_objects()
    first = Accelerator().prepare(model, optimizer, loader, scheduler)
    again = Accelerator()
    second = again.prepare(model, optimizer, loader, scheduler)
    assert all(a is b for a, b in zip(first, second))
    assert second[1] is not optimizer and second[2] is not loader
    assert len(again._optimizers) == 1 and len(again._dataloaders) == 1


def test_prepared_scheduler_drives_the_prepared_optimizer():
    accelerator = Accelerator()
    _, optimizer, _, scheduler = make_objects()
    optimizer, scheduler = accelerator.prepare(optimizer, scheduler)
    assert scheduler.optimizers == [optimizer]
    scheduler.step()
    assert scheduler.get_last_lr() == [0.05]


def test_loader_length_and_batches_unchanged_on_one_process():
    accelerator = Accelerator()
    _, _, loader, _ = make_objects(samples=70)
    prepared = accelerator.prepare(loader)
    assert len(prepared) == len(loader) == 5
    assert [b[0].shape[0] for b in prepared] == [16, 16, 16, 16, 6]


def test_loader_flags_the_last_batch_while_it_is_processed():
    accelerator = Accelerator()
    _, _, loader, _ = make_objects(samples=48)
    prepared = accelerator.prepare(loader)
    flags = [accelerator.gradient_state.end_of_dataloader for _ in prepared]
    assert flags == [False, False, True]
    assert accelerator.gradient_state.active_loaders == []


def test_loader_set_epoch_reaches_the_sampler():
    class EpochSampler(torch.utils.data.Sampler):
        def __init__(self):
            self.epoch = None

        def __iter__(self):
            return iter(range(8))

        def __len__(self):
            return 8

        def set_epoch(self, epoch):
            self.epoch = epoch

    sampler = EpochSampler()
    loader = DataLoader(TensorDataset(torch.arange(8)), batch_size=4, sampler=sampler)
    prepared = Accelerator().prepare(loader)
    prepared.set_epoch(3)
    assert sampler.epoch == 3


def test_batches_are_moved_to_the_device():
    accelerator = Accelerator()
    loader = DataLoader([{"x": torch.ones(2)}] * 4, batch_size=2)
    batch = next(iter(accelerator.prepare(loader)))
    assert batch["x"].device.type == accelerator.device.type


def test_optimizer_steps_only_on_sync_steps_under_accumulation():
    accelerator = Accelerator(gradient_accumulation_steps=2)
    model, optimizer, loader, _ = make_objects()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    syncs = []
    for x, y in loader:
        with accelerator.accumulate(model):
            before = model.weight.detach().clone()
            accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
            optimizer.step()
            optimizer.zero_grad()
            syncs.append((accelerator.sync_gradients, not torch.equal(before, model.weight)))
    assert syncs == [(False, False), (True, True), (False, False), (True, True)]


def test_accumulation_equals_the_manual_loss_over_k_loop():
    set_seed(1)
    model, optimizer, loader, scheduler = make_objects(samples=64, batch_size=8)
    reference = torch.nn.Linear(4, 1)
    reference.load_state_dict(model.state_dict())
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    ref_scheduler = torch.optim.lr_scheduler.StepLR(ref_optimizer, step_size=1, gamma=0.5)
    for i, (x, y) in enumerate(loader):
        (torch.nn.functional.mse_loss(reference(x), y) / 4).backward()
        if (i + 1) % 4 == 0:
            ref_optimizer.step()
            ref_scheduler.step()
            ref_optimizer.zero_grad()
    accelerator = Accelerator(gradient_accumulation_steps=4)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    torch.testing.assert_close(model.weight, reference.weight, rtol=0, atol=1e-7)
    assert scheduler.get_last_lr() == ref_scheduler.get_last_lr()


def test_backward_outside_accumulate_warns_once_about_the_division():
    accelerator = Accelerator(gradient_accumulation_steps=2)
    model = accelerator.prepare(torch.nn.Linear(2, 1))
    with pytest.warns(UserWarning, match="outside"):
        accelerator.backward(model(torch.ones(1, 2)).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        accelerator.backward(model(torch.ones(1, 2)).sum())
    torch.testing.assert_close(model.weight.grad, torch.ones(1, 2))  # 2 x (1/2)


def test_scheduler_with_step_scheduler_with_optimizer_false_steps_every_call():
    accelerator = Accelerator(gradient_accumulation_steps=2, step_scheduler_with_optimizer=False)
    _, optimizer, _, scheduler = make_objects()
    optimizer, scheduler = accelerator.prepare(optimizer, scheduler)
    accelerator.gradient_state.sync_gradients = False
    scheduler.step()
    assert scheduler.get_last_lr() == [0.05]


def test_split_and_even_batches_can_be_forced_from_the_environment(monkeypatch):
    monkeypatch.setenv("MIGRATE_SPLIT_BATCHES", "1")
    monkeypatch.setenv("MIGRATE_EVEN_BATCHES", "0")
    accelerator = Accelerator(split_batches=False, even_batches=True)
    assert accelerator.split_batches is True and accelerator.even_batches is False
    monkeypatch.setenv("MIGRATE_SPLIT_BATCHES", "no")
    assert Accelerator(split_batches=True).split_batches is False


def test_bad_environment_flag_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("MIGRATE_SPLIT_BATCHES", "maybe")
    with pytest.raises(ValueError, match="MIGRATE_SPLIT_BATCHES"):
        Accelerator()


def test_split_batches_argument_is_honoured():
    assert Accelerator(split_batches=True).split_batches is True


def test_fp16_on_cpu_is_a_clear_error():
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        Accelerator(mixed_precision="fp16", cpu=True)


def test_bf16_on_cpu_autocasts_and_returns_fp32_outputs():
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    model = accelerator.prepare(torch.nn.Linear(4, 4))
    with accelerator.autocast():
        inner = torch.nn.functional.linear(torch.ones(2, 4), torch.ones(4, 4))
    assert inner.dtype == torch.bfloat16
    output = model(torch.ones(2, 4))
    assert output.dtype == torch.float32
    accelerator.backward(output.sum())
    assert model.weight.grad is not None
    assert accelerator.unwrap_model(model, keep_fp32_wrapper=False).forward.__self__ is model


def test_clip_grad_norm_clips_like_torch():
    accelerator = Accelerator()
    model = accelerator.prepare(torch.nn.Linear(4, 1))
    accelerator.backward(model(torch.full((1, 4), 10.0)).sum())
    norm = accelerator.clip_grad_norm_(model.parameters(), 1.0)
    assert norm > 1.0
    total = torch.cat([p.grad.flatten() for p in model.parameters()]).norm()
    assert total == pytest.approx(1.0, rel=1e-5)
    accelerator.clip_grad_value_(model.parameters(), 0.1)
    assert max(p.grad.abs().max() for p in model.parameters()) <= 0.1


def test_collectives_are_identities_on_one_process():
    accelerator = Accelerator()
    tensor = torch.arange(3.0)
    assert torch.equal(accelerator.gather(tensor), tensor)
    assert torch.equal(accelerator.reduce(tensor, "mean"), tensor)
    assert torch.equal(accelerator.pad_across_processes(tensor), tensor)
    assert accelerator.gather_for_metrics(["a", "b"]) == ["a", "b"]


def test_print_and_main_process_first_on_one_process(capsys):
    accelerator = Accelerator()
    with accelerator.main_process_first():
        accelerator.print("once")
    accelerator.wait_for_everyone()
    assert capsys.readouterr().out == "once\n"


def test_save_writes_on_the_main_process(tmp_path):
    accelerator = Accelerator()
    accelerator.save({"w": torch.ones(2)}, tmp_path / "w.pt")
    assert torch.equal(torch.load(tmp_path / "w.pt")["w"], torch.ones(2))


def test_save_state_without_a_directory_is_a_clear_error():
    with pytest.raises(ValueError, match="output_dir"):
        Accelerator().save_state()


def test_save_and_load_state_restore_weights_optimizer_scheduler_and_rng(tmp_path):
    accelerator = Accelerator()
    model, optimizer, loader, scheduler = accelerator.prepare(*make_objects())
    for x, y in loader:
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    accelerator.save_state(tmp_path / "ckpt")
    expected_draw = torch.rand(3)
    saved_weight = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.zero_()
    scheduler.step()
    accelerator.load_state(tmp_path / "ckpt")
    assert torch.equal(model.weight, saved_weight)
    assert scheduler.get_last_lr() == [0.1 * 0.5**4]
    assert torch.equal(torch.rand(3), expected_draw)


def test_free_memory_drops_references():
    accelerator = Accelerator()
    model = accelerator.prepare(torch.nn.Linear(2, 2))
    assert accelerator.free_memory(model) == [None]
    assert accelerator._models == []


def test_set_seed_makes_draws_repeatable():
    set_seed(7)
    first = torch.rand(2)
    set_seed(7)
    assert torch.equal(torch.rand(2), first)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fp16_on_cuda_uses_a_grad_scaler_and_steps():
    accelerator = Accelerator(mixed_precision="fp16")
    assert accelerator.scaler is not None
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    assert next(model.parameters()).device.type == "cuda"
    before = model.weight.detach().clone()
    output = model(torch.ones(2, 4, device=accelerator.device))
    assert output.dtype == torch.float32
    accelerator.backward(output.sum())
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    assert not torch.equal(before, model.weight) or accelerator.optimizer_step_was_skipped


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bf16_on_cuda_autocasts():
    accelerator = Accelerator(mixed_precision="bf16")
    assert accelerator.device.type == "cuda"
    with accelerator.autocast():
        product = torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
    assert product.dtype == torch.bfloat16


def test_scheduler_built_on_the_prepared_optimizer_is_prepared_against_it():
    accelerator = Accelerator()
    model = torch.nn.Linear(2, 1)
    model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=1.0))
    scheduler = accelerator.prepare(torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.1))
    assert scheduler.optimizers == [optimizer]
    accelerator.backward(model(torch.ones(1, 2)).sum())
    optimizer.step()
    scheduler.step()
    assert scheduler.get_last_lr() == pytest.approx([0.1])
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1)


def test_mixed_precision_defaults_to_the_accelerate_environment_variable(monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert Accelerator(cpu=True).mixed_precision == "bf16"


def test_mixed_precision_argument_wins_over_the_environment_variable(monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert Accelerator(cpu=True, mixed_precision="no").mixed_precision == "no"


def test_device_placement_false_leaves_batches_where_they_are():
    accelerator = Accelerator(device_placement=False)
    loader = accelerator.prepare(DataLoader(TensorDataset(torch.ones(4, 2)), batch_size=2))
    assert len(list(loader)) == 2 and loader.device is None


def test_prepared_objects_pickle_and_come_back_whole(tmp_path):
    """As HF's wrappers do: `accelerator.save(optimizer.state_dict, path)` (the bound method,
    not its result) pickles the prepared optimizer, and the file loads back; so do the other
    wrappers."""
    import pickle

    accelerator = Accelerator()
    _model, optimizer, loader, scheduler = accelerator.prepare(*make_objects())
    accelerator.save(optimizer.state_dict, tmp_path / "bound.pt")
    method = torch.load(tmp_path / "bound.pt", weights_only=False)
    assert method()["param_groups"][0]["lr"] == 0.1
    for prepared in (optimizer, scheduler, loader):
        back = pickle.loads(pickle.dumps(prepared))
        assert type(back) is type(prepared)
    assert pickle.loads(pickle.dumps(optimizer)).state_dict() == optimizer.state_dict()


def test_a_users_grad_scaler_skips_the_fused_optimizers_inf_step():
    """`scaler.step(optimizer)` on a prepared fused AdamW (h8 ShakespeareGPT): a step with inf
    gradients is skipped, as on the bare optimizer."""
    model = torch.nn.Linear(3, 1)
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.full((2, 3), float("inf"))).sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert scaler.get_scale() == 1.0  # the inf step halved the scale
    optimizer.zero_grad()
    scaler.scale(model(torch.ones(2, 3)).sum()).backward()
    scaler.step(optimizer)
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
