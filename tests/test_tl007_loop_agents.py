"""TL007 on a graph built before a loop through modules the loop steps or loads into
(tests/fixtures/TL007/loop_agents.py: the multi-agent actor-critic shape), checked against
torch 2.13: each ``# %% case`` section is run as a whole program and linted alone; a positive
raises M4 at the next iteration's backward (the step or load changed weights the graph built
before the loop saved), a look-alike trains."""

from __future__ import annotations

import pytest
from test_tl007_call_effects import fixture_cases
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

CASES = fixture_cases("loop_agents.py")


def test_every_section_is_a_case() -> None:
    assert (len(CASES), sum(raises for _, raises in CASES.values())) == (10, 5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_loop_agents_agree_with_torch(name: str) -> None:
    _check(*CASES[name])


RETURNED = fixture_cases("returned_losses.py")


def test_every_returned_losses_section_is_a_case() -> None:
    assert (len(RETURNED), sum(raises for _, raises in RETURNED.values())) == (3, 1)


@pytest.mark.parametrize("name", sorted(RETURNED))
def test_returned_losses_agree_with_torch(name: str) -> None:
    _check(*RETURNED[name])


# A method of a class of a sibling file that loads state into a network it keeps (the MADDPG
# target update in agent.py, called from maddpg.py's loop over the agents).
AGENT_FILE = """\
import torch
import torch.nn as nn


def mlp(inputs, outputs):
    return nn.Sequential(nn.Linear(inputs, 16), nn.ReLU(), nn.Linear(16, outputs))


class Agent:
    def __init__(self, n_agents):
        self.target_actor = mlp(4, 2)
        self.actor = mlp(4, 2)
        self.critic = mlp(4 + 2 * n_agents, 1)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

    def update_network_parameters(self, tau=0.01):
        self._copy(tau)

    def _copy(self, tau):
        mixed = {k: tau * v + (1 - tau) * t for (k, v), t in
                 zip(self.actor.state_dict().items(), self.target_actor.state_dict().values())}
        self.target_actor.load_state_dict(mixed)

    def soft_update(self, tau=0.01):
        for t, p in zip(self.target_actor.parameters(), self.actor.parameters()):
            t.data.copy_(tau * p.data + (1 - tau) * t.data)
"""

LEARNER_FILE = """\
import torch
from agent import Agent


class Learner:
    def __init__(self, n_agents):
        self.agents = []
        for _ in range(n_agents):
            self.agents.append(Agent(n_agents))

    def learn(self, states, rewards):
        new_pis = []
        for agent in self.agents:
            new_pis.append(agent.target_actor.forward(states))
        new_actions = torch.cat(new_pis, dim=1)
        for agent_idx, agent in enumerate(self.agents):
            target = rewards + 0.99 * agent.critic(torch.cat([states, new_actions], dim=1))
            loss = (agent.critic(torch.cat([states, new_actions.detach()], dim=1)) - target).pow(2).mean()
            agent.critic_optimizer.zero_grad()
            loss.backward(retain_graph=True)
            agent.critic_optimizer.step()
            agent.{update}()


Learner(2).learn(torch.randn(8, 4), torch.randn(8, 1))
"""


@pytest.mark.parametrize(("update", "raises"), [("update_network_parameters", True), ("soft_update", False)])
def test_a_sibling_file_method_that_loads_state(tmp_path, update: str, raises: bool) -> None:
    import subprocess
    import sys

    from torchlint.runner import check_file
    from torchlint.settings import Settings, resolve_rules

    (tmp_path / "agent.py").write_text(AGENT_FILE)
    (tmp_path / "maddpg.py").write_text(LEARNER_FILE.format(update=update))
    run = subprocess.run([sys.executable, "maddpg.py"], cwd=tmp_path, capture_output=True, text=True)
    assert ("modified by an inplace operation" in run.stderr) is raises, run.stderr
    assert raises or run.returncode == 0, run.stderr
    settings = Settings(select=("TL007",))
    report = check_file(str(tmp_path / "maddpg.py"), resolve_rules(settings), settings)
    assert report.error is None, report.error
    assert [f.line for f in report.findings] == ([22] if raises else [])  # `agent.{update}()`
