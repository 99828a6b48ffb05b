"""A scheduler is what the program steps: a value built by a function whose name reads like a
scheduler factory (`get_beta_schedule(...)`, a diffusion model's noise schedule, a tensor) is
never reported as a scheduler left unprepared."""

from __future__ import annotations

from migrator.engine import migrate_text

DIFFUSION = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def get_beta_schedule(timesteps):
    return torch.linspace(1e-4, 0.02, timesteps)


betas = get_beta_schedule(100)
alphas = torch.cumprod(1.0 - betas, dim=0)
loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
{scheduler}
for epoch in range(2):
    for (x,) in loader:
        t = torch.randint(0, 100, (x.size(0),))
        noise = torch.randn_like(x)
        noisy = alphas[t].sqrt()[:, None] * x + (1 - alphas[t]).sqrt()[:, None] * noise
        loss = torch.nn.functional.mse_loss(model(noisy), noise)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    {step}
"""


def test_a_noise_schedule_is_no_scheduler():
    output, findings = migrate_text(DIFFUSION.format(scheduler="", step="pass"))
    assert output is not None, [f.message for f in findings]
    assert not [f.message for f in findings if "scheduler" in f.message]


def test_a_scheduler_the_program_steps_is_still_one():
    output, findings = migrate_text(
        DIFFUSION.format(
            scheduler="lr_schedule = torch.optim.lr_scheduler.StepLR(optimizer, 1)",
            step="lr_schedule.step()",
        )
    )
    assert output is not None
    assert any("scheduler `lr_schedule`" in f.message for f in findings)
