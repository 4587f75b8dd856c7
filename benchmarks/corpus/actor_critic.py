"""Actor-critic policy gradient on a toy environment, with a hand-written environment."""

import argparse
from collections import namedtuple
from itertools import count

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class ToyCartPole:
    """A tiny stand-in for gym's CartPole: four state numbers, two actions."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.state = None
        self.steps = 0

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        self.steps = 0
        return self.state

    def step(self, action):
        force = 1.0 if action == 1 else -1.0
        x, x_dot, theta, theta_dot = self.state
        theta_dot = theta_dot + 0.02 * (9.8 * np.sin(theta) - force * np.cos(theta))
        theta = theta + 0.02 * theta_dot
        x_dot = x_dot + 0.02 * force
        x = x + 0.02 * x_dot
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        done = abs(theta) > 0.21 or abs(x) > 2.4 or self.steps >= 500
        return self.state, 1.0, done, {}


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.action_head = nn.Linear(128, 2)
        self.value_head = nn.Linear(128, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


def select_action(model, state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode(model, optimizer, gamma, eps):
    R = 0
    saved_actions = model.saved_actions
    policy_losses = []
    value_losses = []
    returns = []
    for r in model.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]


def main():
    parser = argparse.ArgumentParser(description="PyTorch actor-critic example")
    parser.add_argument("--gamma", type=float, default=0.99, metavar="G")
    parser.add_argument("--seed", type=int, default=543, metavar="N")
    parser.add_argument("--log-interval", type=int, default=10, metavar="N")
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()
    env = ToyCartPole(args.seed)
    torch.manual_seed(args.seed)
    model = Policy()
    optimizer = optim.Adam(model.parameters(), lr=3e-2)
    eps = np.finfo(np.float32).eps.item()
    running_reward = 10
    for i_episode in range(args.episodes):
        state, ep_reward = env.reset(), 0
        for t in count(1):
            action = select_action(model, state)
            state, reward, done, _ = env.step(action)
            model.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        finish_episode(model, optimizer, args.gamma, eps)
        if i_episode % args.log_interval == 0:
            print(f"Episode {i_episode}\tLast reward: {ep_reward:.2f}\tAverage reward: {running_reward:.2f}")


if __name__ == "__main__":
    main()
