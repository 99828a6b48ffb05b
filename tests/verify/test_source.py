"""Where a script's source sums its loss over the batch (migrator/verify/source.py)."""

from __future__ import annotations

from migrator.verify.source import prepared_epoch_schedulers, summed_losses

VAE_LOSS = """
import torch
import torch.nn.functional as F


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD
"""


def test_a_vae_loss_is_found_on_both_lines():
    assert summed_losses(VAE_LOSS) == [
        "line 7: binary_cross_entropy(reduction='sum')",
        "line 8: KLD = ... sum(...)",
    ]


def test_loss_modules_with_a_sum_reduction_old_and_new_spelling():
    text = 'crit = nn.MSELoss(reduction="sum")\nold = nn.NLLLoss(size_average=False)\n'
    assert summed_losses(text) == [
        "line 1: MSELoss(reduction='sum')",
        "line 2: NLLLoss(size_average=False)",
    ]


def test_a_per_sample_loss_summed_by_hand():
    text = "loss = F.cross_entropy(out, y, reduction='none').sum()\n"
    assert summed_losses(text) == ["line 1: loss = ... sum(...)"]


def test_means_counts_and_other_reductions_are_not_sums():
    text = (
        "loss = criterion(out, y).sum() / len(y)\n"
        "correct = (pred == y).sum()\n"
        "loss = nn.MSELoss(reduction='mean')(out, y)\n"
        "total = values.sum()\n"
        "loss = F.mse_loss(out, y, reduction=reduction)\n"
    )
    assert summed_losses(text) == []


def test_a_file_that_does_not_parse_shows_nothing():
    assert summed_losses("def broken(:\n") == []


def test_evaluation_sums_are_not_the_trained_loss():
    text = (
        "with torch.no_grad():\n"
        "    for data, target in test_loader:\n"
        "        test_loss += F.nll_loss(model(data), target, reduction='sum').item()\n"
        "total_loss += F.mse_loss(out, y, reduction='sum').item()\n"
        "with torch.inference_mode():\n"
        "    val_loss = criterion(out, y).sum()\n"
    )
    assert summed_losses(text) == []


PREPARED_EPOCH_SCHEDULER = """
from runtime import Accelerator
accelerator = Accelerator()
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
warmup = get_linear_schedule_with_warmup(optimizer, 10, 100)
model, optimizer, loader, scheduler, warmup = accelerator.prepare(
    model, optimizer, loader, scheduler, warmup
)
for epoch in range(3):
    for x, y in loader:
        accelerator.backward(model(x))
        optimizer.step()
        warmup.step()
        optimizer.zero_grad()
    scheduler.step()
"""


def test_a_prepared_scheduler_stepped_per_epoch_is_reported_not_a_per_step_one():
    assert prepared_epoch_schedulers(PREPARED_EPOCH_SCHEDULER) == ["line 15: scheduler"]


def test_an_unprepared_epoch_scheduler_or_one_the_accelerator_steps_as_called_is_not():
    unprepared = PREPARED_EPOCH_SCHEDULER.replace("loader, scheduler, warmup\n", "loader, warmup\n")
    unprepared = unprepared.replace("scheduler, warmup = ", "warmup = ")
    assert prepared_epoch_schedulers(unprepared) == []
    for argument in ("step_scheduler_with_optimizer=False", "split_batches=True"):
        text = PREPARED_EPOCH_SCHEDULER.replace("Accelerator()", f"Accelerator({argument})")
        assert prepared_epoch_schedulers(text) == []
