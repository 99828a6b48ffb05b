"""GANs and other multi-model scripts (issue 16): which optimizers train which models, so that
one prepare holds every model that gets gradients. The goldens gan_cycle_pairs (an optimizer on
a name holding two generators' parameters, one on a comprehension over two discriminators, a
discriminator stepped twice) and gan_trainer_moved_models cover the shapes that migrate;
test_gan_runs runs them on two processes. test_gan_backward_passes: what DDP cannot run."""

from __future__ import annotations

import textwrap

import pytest

from migrator.engine import migrate_text

PAIR = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
decoder = nn.Linear(2, 4)
critic = nn.Linear(4, 1)
opt_dec = torch.optim.Adam(decoder.parameters())
opt_critic = torch.optim.Adam(critic.parameters())
for (x,) in loader:
{step}
"""


def run(step: str):
    body = textwrap.indent(textwrap.dedent(step).strip(), "    ")
    return migrate_text(PAIR.format(step=body))


def warnings(findings) -> list[str]:
    return [f"{f.line}: {f.code} {f.message}" for f in findings if f.level == "warning"]


def test_optimizer_over_a_comprehension_of_unnamed_models_is_refused_by_name():
    source = PAIR.replace(
        "opt_dec = torch.optim.Adam(decoder.parameters())",
        "nets = [decoder, critic]\nopt_dec = torch.optim.Adam([p for n in nets for p in n.parameters()])",
    ).format(
        step="""\
    opt_dec.zero_grad()
    loss = critic(decoder(torch.randn(8, 2))).mean()
    loss.backward()
    opt_dec.step()
    opt_critic.zero_grad()
    critic(x).mean().backward()
    opt_critic.step()"""
    )
    output, findings = migrate_text(source)
    assert output is None
    assert warnings(findings) == [
        (
            "11: MIG900 could not tell which models the optimizer trains: `opt_dec` (line 9) is "
            "built on the parameters of every `n` in `nets`: prepare needs each model by its own "
            "name; build it on named models (`chain(D_A.parameters(), D_B.parameters())`) or "
            "migrate by hand"
        )
    ]


def test_optimizer_over_a_comprehension_of_named_models_prepares_each():
    source = PAIR.replace(
        "opt_dec = torch.optim.Adam(decoder.parameters())",
        "opt_dec = torch.optim.Adam([p for n in (decoder, critic) for p in n.parameters()])",
    ).format(
        step="""\
    opt_dec.zero_grad()
    loss = critic(decoder(torch.randn(8, 2))).mean()
    loss.backward()
    opt_dec.step()
    opt_critic.zero_grad()
    critic(x).mean().backward()
    opt_critic.step()"""
    )
    output, findings = migrate_text(source)
    assert not warnings(findings)
    assert "critic, decoder, opt_critic, opt_dec, loader = accelerator.prepare(" in output
    assert " n, " not in output  # never the comprehension's variable


HELPER = PAIR.replace(
    "opt_dec = torch.optim.Adam(decoder.parameters())\nopt_critic = torch.optim.Adam(critic.parameters())",
    "{helper}\nopt_dec = make_optimizer(decoder, 1e-3)\nopt_critic = make_optimizer(critic, lr=4e-3)",
)
GAN_STEP = """\
    fake = decoder(torch.randn(8, 2))
    opt_critic.zero_grad()
    (critic(fake.detach()).mean() - critic(x).mean()).backward()
    opt_critic.step()
    opt_dec.zero_grad()
    (-critic(fake).mean()).backward()
    opt_dec.step()"""


def test_optimizers_from_a_helper_of_this_file_pair_with_the_models_handed_to_it():
    helper = """
def make_optimizer(net, lr):
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, net.parameters()), lr=lr)
    return optimizer
"""
    output, findings = migrate_text(HELPER.format(helper=helper, step=GAN_STEP))
    assert not warnings(findings)
    assert "decoder, critic, opt_dec, opt_critic, loader = accelerator.prepare(" in output


def test_optimizer_helper_building_on_something_else_than_its_argument_is_refused():
    helper = """
def make_optimizer(net, lr):
    return torch.optim.Adam(decoder.parameters(), lr=lr)
"""
    output, findings = migrate_text(HELPER.format(helper=helper, step=GAN_STEP))
    assert output is None
    assert [f.code for f in findings if f.level == "warning"] == ["MIG906"]


TRAINER = """\
import torch
import torch.nn as nn


class GanTrainer:
    def __init__(self, gen, dis, opt_gen, {opt_dis}loader):
        self.gen, self.dis = gen, dis
        self.opt_gen = opt_gen
        self.opt_dis = {made}
        self.loader = loader

    def fit(self, epochs):
        for epoch in range(epochs):
            for (real,) in self.loader:
                fake = self.gen(torch.randn(real.size(0), 2))
                self.opt_dis.zero_grad()
                (self.dis(fake.detach()).mean() - self.dis(real).mean()).backward()
                self.opt_dis.step()
                self.opt_gen.zero_grad()
                (-self.dis(fake).mean()).backward()
                self.opt_gen.step()
"""


def test_optimizers_and_models_all_handed_in_are_prepared_together_with_a_note():
    output, findings = migrate_text(TRAINER.format(opt_dis="opt_dis, ", made="opt_dis"))
    assert not warnings(findings)
    assert [f"{f.line}: {f.code} {f.message}" for f in findings if f.code == "MIG906"] == [
        (
            "14: MIG906 the optimizers `self.opt_gen`, `self.opt_dis` come from the callers: "
            "prepared with the models the loop runs (`self.dis`, `self.gen`), which must be every "
            "model they train"
        )
    ]
    assert (
        "        self.dis, self.gen, self.opt_gen, self.opt_dis, self.loader = "
        "self.accelerator.prepare(\n"
        "            self.dis, self.gen, self.opt_gen, self.opt_dis, self.loader\n"
        "        )\n"
    ) in output


def test_one_optimizer_handed_in_and_one_built_here_is_not_paired():
    source = TRAINER.format(opt_dis="", made="torch.optim.Adam(dis.parameters())")
    output, findings = migrate_text(source)
    assert output is None
    assert [f.code for f in findings if f.level == "warning"] == ["MIG906"]


def test_optimizers_a_helper_returns_as_a_tuple_pair_with_the_models_handed_to_it():
    helper = """
def make_optimizers(gen, dis, lr):
    return torch.optim.Adam(gen.parameters(), lr=lr), torch.optim.RMSprop(dis.parameters(), lr=lr)
"""
    source = PAIR.replace(
        "opt_dec = torch.optim.Adam(decoder.parameters())\n"
        "opt_critic = torch.optim.Adam(critic.parameters())",
        f"{helper}\nopt_dec, opt_critic = make_optimizers(decoder, critic, 1e-3)",
    ).format(step=GAN_STEP)
    output, findings = migrate_text(source)
    assert not warnings(findings)
    assert "critic, decoder, opt_dec, opt_critic, loader = accelerator.prepare(" in output


def test_optimizer_chosen_by_a_conditional_expression_pairs_with_its_model():
    source = PAIR.replace(
        "opt_critic = torch.optim.Adam(critic.parameters())",
        "use_adam = True\nopt_critic = (\n    torch.optim.Adam(critic.parameters())\n"
        "    if use_adam\n    else torch.optim.RMSprop(critic.parameters(), lr=5e-5)\n)",
    ).format(step=GAN_STEP)
    output, findings = migrate_text(source)
    assert not warnings(findings)
    assert "decoder, critic, opt_dec, opt_critic, loader = accelerator.prepare(" in output


def test_models_and_optimizers_handed_in_dicts_are_prepared_together():
    source = TRAINER.format(opt_dis="opt_dis, ", made="opt_dis").replace(
        "        self.gen, self.dis = gen, dis\n",
        '        self.gen, self.dis = gen["net"], dis["net"]\n',
    )
    output, findings = migrate_text(source)
    assert not warnings(findings)
    assert "self.dis, self.gen, self.opt_gen, self.opt_dis, self.loader = " in output


def test_optimizer_class_taken_as_a_parameter_with_an_optimizer_default_pairs_with_its_model():
    source = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train_wgan(generator, critic, data, optim=torch.optim.RMSprop, lr=5e-5):
    loader = DataLoader(data, batch_size=8, shuffle=True)
    opt_g = optim(generator.parameters(), lr=lr)
    opt_c = optim(critic.parameters(), lr=lr)
    for (x,) in loader:
        fake = generator(torch.randn(x.size(0), 2))
        opt_c.zero_grad()
        (critic(fake.detach()).mean() - critic(x).mean()).backward()
        opt_c.step()
        opt_g.zero_grad()
        (-critic(fake).mean()).backward()
        opt_g.step()
"""
    output, findings = migrate_text(source)
    assert not warnings(findings)
    assert "generator, critic, opt_g, opt_c, loader = accelerator.prepare(" in output
    no_default = source.replace("optim=torch.optim.RMSprop", "optim=None")
    output, findings = migrate_text(no_default)
    assert output is None
    assert [f.code for f in findings if f.level == "warning"] == ["MIG906"]


FACTORY = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from training_utils import build_optimizers

lr = 2e-4
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
decoder = nn.Linear(2, 4).to("cpu")
critic = nn.Linear(4, 1).to("cpu")
{made}
for (x,) in loader:
{step}
"""


def test_optimizers_from_a_factory_of_another_module_handed_the_models_are_prepared_with_a_note():
    made = "opt_dec, opt_critic = build_optimizers(decoder, critic, lr, betas=(0.5, 0.999))"
    output, findings = migrate_text(FACTORY.format(made=made, step=GAN_STEP))
    assert not warnings(findings)
    assert [f.message for f in findings if f.code == "MIG906"] == [
        (
            "the optimizers `opt_dec`, `opt_critic` are made by factories of other modules "
            "(`build_optimizers()` is handed `decoder`, `critic`): prepared with the models the "
            "loop runs, which must be every model they train"
        )
    ]
    assert "critic, decoder, opt_dec, opt_critic, loader = accelerator.prepare(" in output


def test_factory_handed_something_that_could_be_another_model_is_refused():
    made = (
        "mapper = nn.Linear(2, 2)\nopt_dec, opt_critic = build_optimizers(decoder, critic, mapper)"
    )
    output, findings = migrate_text(FACTORY.format(made=made, step=GAN_STEP))
    assert output is None
    assert [f.code for f in findings if f.level == "warning"] == ["MIG906"]


def test_factory_handed_a_part_of_a_model_is_refused():
    made = "opt_dec, opt_critic = build_optimizers(decoder.weight, critic)"
    output, findings = migrate_text(FACTORY.format(made=made, step=GAN_STEP))
    assert output is None
    assert [f.code for f in findings if f.level == "warning"] == ["MIG906"]


def test_trainer_keeping_a_moved_model_prepares_the_attribute_the_loop_trains():
    """`self.model = model.to(device)` with the optimizer on `model.parameters()`: the loop
    trains `self.model`, so prepare rebinds it (preparing `model` left it plain)."""
    source = """\
import torch


class Trainer:
    def __init__(self, model, loader, device):
        self.model = model.to(device)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.loader = loader
        self.device = device

    def fit(self):
        for x, y in self.loader:
            loss = torch.nn.functional.mse_loss(self.model(x.to(self.device)), y.to(self.device))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""
    output, findings = migrate_text(source)
    assert not warnings(findings)
    assert (
        "        self.model, self.optimizer, self.loader = self.accelerator.prepare(\n"
        "            self.model, self.optimizer, self.loader\n"
        "        )\n"
    ) in output


def test_scheduler_built_on_the_first_networks_optimizer_before_the_second_network_is_made():
    """Each network made with its optimizer and per-epoch scheduler in turn: the scheduler
    built on `self.opt_c` before `self.gen` exists is a set-up use (it holds the optimizer
    prepare wraps), so one prepare after the last training object holds them all."""
    source = """\
import torch
import torch.nn as nn


class WganTrainer:
    def __init__(self, epochs):
        self.critic = nn.Linear(4, 1)
        self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=1e-4)
        self.sched_c = torch.optim.lr_scheduler.StepLR(self.opt_c, step_size=5)
        self.gen = nn.Linear(2, 4)
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=1e-4)
        self.sched_g = torch.optim.lr_scheduler.StepLR(self.opt_g, step_size=5)
        self.epochs = epochs

    def train(self, loader):
        for epoch in range(self.epochs):
            for (x,) in loader:
                fake = self.gen(torch.randn(x.size(0), 2))
                self.opt_c.zero_grad()
                (self.critic(fake.detach()).mean() - self.critic(x).mean()).backward()
                self.opt_c.step()
                self.opt_g.zero_grad()
                (-self.critic(fake).mean()).backward()
                self.opt_g.step()
            self.sched_c.step()
            self.sched_g.step()
"""
    output, findings = migrate_text(source)
    assert not warnings(findings)
    assert (
        "        self.sched_c = torch.optim.lr_scheduler.StepLR(self.opt_c, step_size=5)\n"
        "        self.gen = nn.Linear(2, 4)\n"
        "        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=1e-4)\n"
        "\n"
        "        self.gen, self.critic, self.opt_g, self.opt_c = self.accelerator.prepare(\n"
        "            self.gen, self.critic, self.opt_g, self.opt_c\n"
        "        )\n"
        "        self.sched_g = torch.optim.lr_scheduler.StepLR(self.opt_g, step_size=5)\n"
    ) in output


ONE_MODULE = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Linear(2, 4)
        self.critic = nn.Linear(4, 1)


pair = Pair()
{optimizers}
loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
for (real,) in loader:
    fake = pair.generator(torch.randn(4, 2))
    c_loss = pair.critic(fake.detach()).mean() - pair.critic(real).mean()
    c_opt.zero_grad()
    c_loss.backward()
    c_opt.step()
    g_loss = -pair.critic(fake).mean()
    g_opt.zero_grad()
    g_loss.backward()
    g_opt.step()
"""


@pytest.mark.parametrize(
    "optimizers",
    [
        (
            "c_opt = torch.optim.Adam(pair.critic.parameters())\n"
            "g_opt = torch.optim.Adam(pair.generator.parameters())"
        ),
        (
            "c_opt = torch.optim.Adam(params=pair.critic.parameters(), lr=1e-4)\n"
            "g_opt = torch.optim.RMSprop(params=pair.generator.parameters(), lr=1e-4)"
        ),
    ],
)
def test_optimizers_over_parts_of_one_module_are_named_as_such(optimizers):
    """The refusal names what it is (h12 review: "not every one is built on a model's
    parameters" was false for a WGAN-GP module holding both networks)."""
    output, findings = migrate_text(ONE_MODULE.format(optimizers=optimizers))
    assert output is None
    [refusal] = [f for f in findings if f.code == "MIG906"]
    assert "a part of one module (`pair." in refusal.message
    assert "`pair.critic`" in refusal.message and "`pair.generator`" in refusal.message
    assert "not every one is built" not in refusal.message
