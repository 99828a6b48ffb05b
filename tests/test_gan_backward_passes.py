"""GAN and VAE-GAN backward passes DistributedDataParallel cannot run, refused naming the lines
(issue 16): a second backward through a model forward a `backward(retain_graph=True)` already
went through, and a trained model the loop runs only through its own methods, never its forward
(DDP averages gradients only for its forward). Shapes that are fine migrate."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_gan_pairs import run, warnings


def test_second_backward_through_a_retained_forward_is_refused_naming_both_and_the_forward():
    output, findings = run("""
        fake = decoder(torch.randn(8, 2))
        score = critic(fake)
        loss_critic = score.mean() - critic(x).mean()
        opt_critic.zero_grad()
        loss_critic.backward(retain_graph=True)
        opt_critic.step()
        loss_dec = -score.mean()
        opt_dec.zero_grad()
        loss_dec.backward()
        opt_dec.step()
    """)
    assert output is None
    assert warnings(findings) == [
        (
            "19: MIG900 `loss_critic.backward(retain_graph=True)` (line 15) and the backward at "
            "line 19 both pass through one forward of `decoder` (`decoder(torch.randn(8, 2))`, line "
            "11): DistributedDataParallel reduces a model's gradients once per forward, so the "
            "second backward fails or leaves its gradients unaveraged; run that forward again (or "
            "`.detach()` its output) for the second loss, or add the losses and call backward "
            "once; migrate by hand"
        )
    ]


def test_retained_graph_no_later_backward_reaches_migrates_every_backward():
    output, findings = run("""
        fake = decoder(torch.randn(8, 2))
        loss_critic = critic(fake.detach()).mean() - critic(x).mean()
        opt_critic.zero_grad()
        loss_critic.backward(retain_graph=True)
        opt_critic.step()
        loss_dec = -critic(fake).mean()
        opt_dec.zero_grad()
        loss_dec.backward()
        opt_dec.step()
    """)
    assert not warnings(findings)
    assert "\n    accelerator.backward(loss_critic, retain_graph=True)\n" in output
    assert "\n    accelerator.backward(loss_dec)\n" in output
    assert "decoder, critic, opt_dec, opt_critic, loader = accelerator.prepare(" in output


def test_forward_made_before_a_critic_loop_and_backwarded_in_each_turn_is_refused():
    output, findings = run("""
        fake = decoder(torch.randn(8, 2))
        for _ in range(3):
            opt_critic.zero_grad()
            critic(fake).mean().backward(retain_graph=True)
            opt_critic.step()
        opt_dec.zero_grad()
        (-critic(decoder(torch.randn(8, 2))).mean()).backward()
        opt_dec.step()
    """)
    assert output is None
    [message] = warnings(findings)
    assert message.startswith(
        "14: MIG900 `critic(fake).mean().backward(retain_graph=True)` (line 14) and the "
        "backward at line 14 both pass through one forward of `decoder` (`decoder(torch.randn("
        "8, 2))`, line 11)"
    ), message


def test_forward_under_no_grad_is_not_shared_by_the_backward_passes():
    output, findings = run("""
        with torch.no_grad():
            fake = decoder(torch.randn(8, 2))
        loss_real = -critic(x).mean()
        loss_real.backward(retain_graph=True)
        loss_fake = critic(fake).mean()
        loss_fake.backward()
        opt_critic.step()
        opt_dec.zero_grad()
        (-critic(decoder(torch.randn(8, 2))).mean()).backward()
        opt_dec.step()
    """)
    assert not warnings(findings)
    assert "\n    accelerator.backward(loss_real, retain_graph=True)\n" in output


def test_two_losses_of_one_model_forward_backwarded_apart_are_refused():
    output, findings = run("""
        code = decoder(torch.randn(8, 2))
        reconstruction = (code - x).pow(2).mean()
        penalty = code.abs().mean()
        opt_dec.zero_grad()
        reconstruction.backward(retain_graph=True)
        penalty.backward()
        opt_dec.step()
        opt_critic.zero_grad()
        critic(x).mean().backward()
        opt_critic.step()
    """)
    assert output is None
    [message] = warnings(findings)
    assert "`reconstruction.backward(retain_graph=True)` (line 15) and the backward at line 16" \
        in message and "one forward of `decoder`" in message, message  # fmt: skip


SAMPLER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(2, 4)

    def forward(self, z):
        return self.net(z)

    def sample(self, n):
        return self.net(torch.randn(n, 2))


loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
gen = Generator()
critic = nn.Linear(4, 1)
opt_gen = torch.optim.Adam(gen.parameters())
opt_critic = torch.optim.Adam(critic.parameters())
for (x,) in loader:
    fake = {fake}
    opt_critic.zero_grad()
    (critic(fake.detach()).mean() - critic(x).mean()).backward()
    opt_critic.step()
    opt_gen.zero_grad()
    (-critic(fake).mean()).backward()
    opt_gen.step()
"""


def test_a_model_run_only_through_its_own_method_is_refused_naming_the_call():
    output, findings = migrate_text(SAMPLER.format(fake="gen.sample(x.size(0))"))
    assert output is None
    assert warnings(findings) == [
        (
            "24: MIG900 `gen` is trained in the loop but runs there only through `gen.sample(...)` "
            "(line 24), never its forward: DistributedDataParallel averages a model's gradients "
            "only for its forward, so each process would train its own copy; call the model "
            "itself (that code in its `forward`) or migrate by hand"
        )
    ]


def test_a_model_whose_forward_runs_may_also_be_used_through_its_methods():
    output, findings = migrate_text(
        SAMPLER.format(fake="gen(torch.randn(x.size(0), 2)) + 0 * gen.sample(x.size(0))")
    )
    assert not warnings(findings)
    assert "accelerator.unwrap_model(gen).sample(x.size(0))" in output
