"""Training that learns from episodes rolled out in an environment is not data-parallel
training of a data set: each process would act and learn on its own. The loop is refused
(MIG905) wherever the environment is stepped - in the training loop, in a helper it calls, or
in the function that calls the learning step (a DQN agent's `train()` stepping the
environment and calling `learn()`, whose loop samples the replay memory)."""

from __future__ import annotations

import textwrap

import pytest

from migrator.engine import migrate_text

NET = """\
import random

import gymnasium as gym
import torch

policy = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
memory = []
"""

IN_LOOP = """\
env = gym.make("CartPole-v1")
for episode in range(10):
    state, _ = env.reset()
    done = False
    while not done:
        logits = policy(torch.as_tensor(state))
        action = int(logits.argmax())
        state, reward, done, _, _ = env.step(action)
        loss = -logits[action] * reward
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

CALLER_STEPS = """\
def learn(iterations):
    for _ in range(iterations):
        states, targets = zip(*random.sample(memory, 8))
        loss = torch.nn.functional.mse_loss(policy(torch.stack(states)), torch.stack(targets))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def train(episodes):
    env = gym.make("CartPole-v1")
    for episode in range(episodes):
        state, _ = env.reset()
        for t in range(200):
            state_tensor = torch.as_tensor(state, dtype=torch.float32)
            state, reward, done, _, _ = env.step(int(policy(state_tensor).argmax()))
            memory.append((state_tensor, torch.full((2,), float(reward))))
            if done:
                break
        if len(memory) >= 8:
            learn(4)


train(5)
"""

AGENT = """\
class Agent:
    def __init__(self, environment):
        self.env = environment
        self.net = torch.nn.Linear(4, 2)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.01)
        self.memory = []

    def learn(self, steps):
        for _ in range(steps):
            batch = random.sample(self.memory, 4)
            states = torch.stack([s for s, _ in batch])
            loss = self.net(states).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def play(self):
        observation = self.env.reset()
        done = False
        count = 0
        while not done:
            observation, reward, done, info = self.env.step(0)
            self.memory.append((torch.as_tensor(observation, dtype=torch.float32), reward))
            count += 1
        return count

    def train(self, episodes):
        for _ in range(episodes):
            self.learn(self.play())


Agent(gym.make("CartPole-v0")).train(3)
"""


@pytest.mark.parametrize("body", [IN_LOOP, CALLER_STEPS, AGENT], ids=["loop", "caller", "agent"])
def test_learning_from_rolled_out_episodes_is_refused(body):
    output, findings = migrate_text(NET + "\n" + textwrap.dedent(body))
    assert output is None
    refusals = [f for f in findings if f.code == "MIG905" and f.level != "note"]
    assert refusals and "rolls out in an environment" in refusals[0].message


def test_a_loader_less_loop_that_steps_no_environment_is_not_called_a_rollout():
    body = """\
    def learn(iterations):
        for _ in range(iterations):
            x = torch.randn(8, 4)
            loss = policy(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    def train(rounds):
        for r in range(rounds):
            learn(4)
            print("round", r)


    train(3)
    """
    output, findings = migrate_text(
        NET.replace("import gymnasium as gym\n", "") + textwrap.dedent(body)
    )
    assert output is not None  # migrated, with the loader-less note
    assert not any("rolls out" in f.message for f in findings)
    assert "MIG905" in [f.code for f in findings]
