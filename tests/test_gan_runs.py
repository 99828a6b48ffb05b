"""The migrated GAN fixtures run under one `migrate launch --nproc 2` (a driver runs each in
turn in the same two processes, one process-group start for all): every backward of every
network pair goes through DistributedDataParallel without error, the data is split between
the processes, and only the main process prints and saves. The same launch measures the two DDP
facts the GAN refusals rest on."""

from __future__ import annotations

import textwrap

import pytest

from tests.golden_runs import launch_in_turn

pytestmark = pytest.mark.slow

FIXTURES = [
    "gan_two_optimizers",
    "gan_three_backward_passes",
    "gan_cycle_pairs",
    "gan_trainer_moved_models",
]
# The facts the GAN refusals rest on (retained_graphs.py, bypassed_forwards.py), measured in the
# same two processes: a second backward through one DDP forward, and a model trained through a
# method of its own, not its forward.
DDP_FACTS = textwrap.dedent("""\
    import torch, torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank = dist.get_rank()


    class Coder(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x):
            code = self.enc(x)
            return code, self.dec(code)

        def sample(self, n):
            return self.dec(torch.randn(n, 2))


    def same_on_every_rank(grad):
        grads = [torch.zeros_like(grad) for _ in range(dist.get_world_size())]
        dist.all_gather(grads, grad)
        return all(torch.equal(grads[0], g) for g in grads)


    torch.manual_seed(rank)  # each process its own batch
    coder = DDP(Coder())
    try:
        for _ in range(2):
            code, out = coder(torch.randn(4, 2))
            code.sum().backward(retain_graph=True)
            out.sum().backward()
        twice = "ran"
    except RuntimeError as error:
        twice = "failed" if "ready only once" in str(error) else repr(error)
    coder = DDP(Coder())
    coder.zero_grad()
    coder.module.sample(4).sum().backward()
    method = same_on_every_rank(coder.module.dec.weight.grad)
    coder.zero_grad()
    coder(torch.randn(4, 2))[1].sum().backward()
    forward = same_on_every_rank(coder.module.dec.weight.grad)
    if rank == 0:
        print(f"two backward passes through one forward: {twice}", flush=True)
        print(f"gradients equal across processes: method {method}, forward {forward}", flush=True)
    """)


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gans")
    return folder, launch_in_turn(folder, FIXTURES, {"ddp_facts": DDP_FACTS})


def state_keys(path) -> list[str]:
    import torch

    return sorted(k for k in torch.load(path) if k.startswith("0."))  # no `module.` prefix


def test_gan_with_two_optimizers_runs_sharded(launched):
    _, printed = launched
    # 64 samples, batch 16, two processes: 2 steps, printed by the main process
    assert printed["gan_two_optimizers"].count("d_loss") == 2, printed


def test_gan_with_three_backward_passes_runs_and_saves_the_plain_generator(launched):
    folder, printed = launched
    assert printed["gan_three_backward_passes"].count("loss_d") == 2, printed  # once an epoch
    assert state_keys(folder / "gan_three_backward_passes" / "net_g.pth") == ["0.bias", "0.weight"]


def test_cycle_gan_pairs_with_a_critic_stepped_twice_run_sharded(launched):
    folder, printed = launched
    text = printed["gan_cycle_pairs"]
    # 64 samples, batch 8, two processes: 4 steps an epoch (8 on one process), main process only
    assert text.count("steps 4 loss_g") == 2 and "steps 8" not in text, text
    assert state_keys(folder / "gan_cycle_pairs" / "g_ab.pth") == ["0.bias", "0.weight"]


def test_trainer_keeping_moved_networks_trains_the_prepared_ones(launched):
    folder, printed = launched
    text = printed["gan_trainer_moved_models"]
    # 64 samples, batch 8, two processes: 4 steps an epoch each, printed by the main process
    assert text.count("steps 4 loss_dis") == 2 and "steps 8" not in text, text
    assert state_keys(folder / "gan_trainer_moved_models" / "gen.pth") == ["0.bias", "0.weight"]


def test_ddp_runs_no_second_backward_through_one_forward_nor_syncs_a_method_path(launched):
    _, printed = launched
    text = printed["ddp_facts"]
    assert "two backward passes through one forward: failed" in text, text
    assert "gradients equal across processes: method False, forward True" in text, text
