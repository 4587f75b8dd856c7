"""Reductions behind the `check` fields of corpus/dev/notebooks.toml and corpus/dev/pypi2.toml.

Our own minimal programs (torch 2.13 CPU), one per labelled shape, in the style of measure.py:

    python corpus/reductions/nb.py             # run every reduction, print what happened
    python corpus/reductions/nb.py sac_critic_step_then_policy_backward
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from measure import _outcome
from measure import main as run_reductions
from torch import nn

REDUCTIONS: dict[str, Callable[[], str]] = {}


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


def _actor_critic_losses() -> tuple[torch.Tensor, torch.Tensor, torch.optim.Optimizer, torch.optim.Optimizer]:
    """A critic loss on stored actions and a policy loss through the critic, both built up front (the
    RL update shape), with one Adam per network: (q_loss, policy_loss, opt_critic, opt_actor)."""
    torch.manual_seed(0)
    actor, critic = nn.Linear(3, 2), nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
    state, action = torch.randn(4, 3), torch.randn(4, 2)
    q_loss = (critic(torch.cat([state, action], -1)) - 1.0).pow(2).mean()
    policy_loss = -critic(torch.cat([state, actor(state)], -1)).mean()
    return q_loss, policy_loss, torch.optim.Adam(critic.parameters()), torch.optim.Adam(actor.parameters())


# TL007: an optimizer step between two backwards through the same module ------------------------
@reduction
def sac_critic_step_then_policy_backward() -> str:
    """SAC shape: both losses built first, critic stepped, then the policy loss backpropagated through the critic."""
    q_loss, policy_loss, opt_critic, opt_actor = _actor_critic_losses()

    def body() -> str:
        opt_critic.zero_grad()
        q_loss.backward()
        opt_critic.step()
        opt_actor.zero_grad()
        policy_loss.backward()
        opt_actor.step()
        return "ran"
    return _outcome(body)


@reduction
def ddpg_actor_step_then_critic_backward_ok() -> str:
    """Both losses built first, the actor stepped, then the critic loss (which never used the actor) backpropagated."""
    q_loss, policy_loss, opt_critic, opt_actor = _actor_critic_losses()
    opt_actor.zero_grad()
    policy_loss.backward()
    opt_actor.step()
    opt_critic.zero_grad()
    return _outcome(lambda: (q_loss.backward(), opt_critic.step(), "ran")[2])


# TL006 -----------------------------------------------------------------------------------------
@reduction
def full_int_fill_requires_grad() -> str:
    return "torch.full((2, 1), 1, requires_grad=True) -> " + \
        _outcome(lambda: torch.full((2, 1), 1, requires_grad=True).dtype)


# TL003 -----------------------------------------------------------------------------------------
@reduction
def nonleaf_collocation_autograd_grad_ok() -> str:
    """PINN shape: a converted copy of a leaf, used only as `inputs` of torch.autograd.grad."""
    r = torch.tensor(np.linspace(0.0, 1.0, 5), requires_grad=True).float().reshape(-1, 1)
    net = nn.Sequential(nn.Linear(1, 4), nn.Tanh(), nn.Linear(4, 1))
    y = net(r)
    dy = torch.autograd.grad(y, r, grad_outputs=torch.ones_like(y), create_graph=True)[0]
    return f"r.is_leaf={r.is_leaf}; autograd.grad(y, r) shape={tuple(dy.shape)}; (dy**2).mean().backward() -> " + \
        _outcome(lambda: ((dy ** 2).mean().backward(), "ran")[1])


# TL015 -----------------------------------------------------------------------------------------
@reduction
def td_error_numpy_of_prediction() -> str:
    """Prioritised replay: |q_current - q_target.detach()| of a model output, straight to numpy."""
    model = nn.Linear(3, 2)
    q_current = model(torch.randn(4, 3)).gather(1, torch.zeros(4, 1, dtype=torch.long)).squeeze()
    q_target = torch.randn(4)
    return "(q_current - q_target.detach()).abs().cpu().numpy() -> " + \
        _outcome(lambda: (q_current - q_target.detach()).abs().cpu().numpy().shape)



@reduction
def numpy_under_no_grad_ok() -> str:
    model = nn.Linear(3, 1)

    @torch.no_grad()
    def predict(x: torch.Tensor) -> np.ndarray:
        return model(x).cpu().numpy()
    with torch.no_grad():
        inline = model(torch.rand(2, 3)).cpu().numpy()
    return f"@torch.no_grad() predict(): shape {predict(torch.rand(2, 3)).shape}; with torch.no_grad(): shape {inline.shape}"



# TL009 -----------------------------------------------------------------------------------------
@reduction
def loss_history_plotted() -> str:
    """A Keras-like fit(): each epoch's loss tensor appended, the list plotted afterwards.

    matplotlib is not installed here; plt.plot turns its y data into an array with np.asarray, so that
    conversion is what is measured."""
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(model(x), y)
        losses.append(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return f"losses[0].grad_fn={type(losses[0].grad_fn).__name__}; np.asarray(losses) -> " + \
        _outcome(lambda: np.asarray(losses).shape)[:100]



@reduction
def moved_accumulator_start_ok() -> str:
    """A regulariser sum started from torch.tensor(0., requires_grad=True).to(dev): a non-leaf start value,
    never read for .grad nor optimized; the parameters still get their gradients."""
    model = nn.Linear(3, 2)
    reg = torch.tensor(0.0, requires_grad=True).to(torch.float64)  # .to(device) on a GPU; a dtype move here
    for p in model.parameters():
        reg = reg + torch.norm(p)
    reg.backward()
    return f"start.is_leaf={torch.tensor(0.0, requires_grad=True).to(torch.float64).is_leaf}; " \
           f"weight.grad is None: {model.weight.grad is None}"


if __name__ == "__main__":
    sys.exit(run_reductions(sys.argv[1:], REDUCTIONS))
