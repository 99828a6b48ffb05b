"""Findings name the true cause (SPEC §3b.8; h11 review: four refusals whose reasons were
false): loops over no loader say so instead of "found ;"; an environment's `env.step(...)` is
rollouts, not an optimizer whose model cannot be told; a closure that `optimizer.step(closure)`
runs is called, by the optimizer; a rank's CUDA_VISIBLE_DEVICES pinning after CUDA started
changes nothing and is a note, not a refusal."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_mig010 import script

TWO_AGENTS = """\
import torch


class Reinforce:
    def __init__(self):
        self.policy = torch.nn.Linear(4, 2)
        self.optimizer = torch.optim.Adam(self.policy.parameters())

    def train(self, episodes):
        for episode in range(episodes):
            logits = self.policy(torch.randn(8, 4))
            loss = -logits.log_softmax(1)[:, 0].mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


class Critic:
    def __init__(self):
        self.value = torch.nn.Linear(4, 1)
        self.optimizer = torch.optim.SGD(self.value.parameters(), lr=0.1)

    def train(self, episodes):
        for episode in range(episodes):
            loss = self.value(torch.randn(8, 4)).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


Reinforce().train(10)
Critic().train(10)
"""


def test_trainers_over_no_loader_say_they_draw_from_none():
    out, findings = migrate_text(TWO_AGENTS)
    refused = [f for f in findings if f.code in ("MIG900", "MIG905") and f.level != "note"]
    assert out is None and refused, findings
    assert "found ;" not in refused[0].message
    assert "draw from no DataLoader" in refused[0].message
    assert "N replicas" in refused[0].message


AGENT = """\
import torch


class Board:
    def reset(self):
        return torch.zeros(4)

    def step(self, action):
        return torch.randn(4), 1.0, False


class Agent:
    def __init__(self):
        self.q = torch.nn.Linear(4, 2)
        self.optim = torch.optim.Adam(self.q.parameters())

    def act(self, state):
        return int(self.q(state).argmax())

    def learn(self, state, reward):
        loss = (self.q(state).max() - reward) ** 2
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()


env = Board()
agent = Agent()
for episode in range(5):
    state = env.reset()
    for t in range(20):
        action = agent.act(state)
        state, reward, done = env.step(action)
        agent.learn(state, reward)
"""


def test_an_environments_step_is_rollouts_not_an_optimizer():
    out, findings = migrate_text(AGENT)
    assert out is None
    messages = [f.message for f in findings if f.level != "note"]
    assert messages and "rolls out in an environment" in messages[0], messages
    assert not any("could not tell which model the optimizer trains" in m for m in messages)


CLOSURE = """\
import torch

x, y = torch.randn(64, 4), torch.randn(64, 1)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5)
for step in range(5):

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    optimizer.step(closure)
"""


def test_a_closure_the_optimizer_runs_is_called_by_its_step():
    out, findings = migrate_text(CLOSURE)
    notes = [f.message for f in findings if f.code == "MIG905"]
    assert notes and "which `optimizer.step(closure)` (line 14) runs" in notes[0], findings
    assert not any("which nothing in this file calls" in m for m in notes)
    assert out is None


PINNED = """\
    def train():
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl")
        torch.cuda.set_device(local_rank)
        data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
        model = DDP(torch.nn.Linear(4, 1).cuda(), device_ids=[local_rank])
        os.environ["CUDA_VISIBLE_DEVICES"] = @VALUE@
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_ranks_pinning_after_cuda_started_is_a_note():
    out, findings = migrate_text(script(PINNED.replace("@VALUE@", "str(local_rank)")))
    pinned = [f for f in findings if f.code == "MIG902"]
    assert out is not None, findings
    assert pinned and pinned[0].level == "note" and "it can go" in pinned[0].message
    out, findings = migrate_text(script(PINNED.replace("@VALUE@", '"0,1"')))
    chosen = [f for f in findings if f.code == "MIG902"]
    assert out is None and chosen and chosen[0].level != "note", findings
