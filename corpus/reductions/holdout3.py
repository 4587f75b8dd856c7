"""Reductions behind the `check` fields of corpus/holdout/round3.toml (our own code, torch 2.13 CPU).

    python corpus/reductions/holdout3.py                     # run every reduction, print what happened
    python corpus/reductions/holdout3.py r3_tl019_softmax_then_ce_or_nll
    python corpus/reductions/holdout3.py --json /tmp/r3.json # the same, also as {name: result}

Same style as holdout.py and holdout2.py: each reduction is the smallest program with the shape of a
labelled line and prints the observed outcome. There is no GPU here: a move to the `meta` device
stands in for `.cuda()`. matplotlib is not installed: `plt.plot(ys)` turns its data into an array
with `np.asarray`, which is what is called.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from holdout import (  # the same seeded data and model as rounds 1 and 2
    _mlp,
    _regression,
)
from measure import _outcome
from measure import main as run_reductions
from torch import nn
from torch.autograd import Variable

REDUCTIONS: dict[str, Callable[[], str]] = {}
DEVICE = "meta"  # stands in for a GPU


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


def _graph_size(tensor: torch.Tensor) -> int:
    """How many distinct autograd nodes `tensor` keeps alive."""
    seen, todo = set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


def _classification(classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    return x, (x[:, :classes]).argmax(1)


def _train_classifier(head: Callable[[torch.Tensor], torch.Tensor], loss_fn: Callable, steps: int = 300) -> tuple[float, float]:
    """Train nn.Linear(6, 4) with `loss_fn(head(logits), y)`; return (final cross-entropy of the logits, accuracy)."""
    x, y = _classification()
    torch.manual_seed(1)
    model = nn.Linear(6, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(steps):
        loss = loss_fn(head(model(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = model(x)
        return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


# TL009 / TL015: sums and histories ---------------------------------------------------------------
@reduction
def r3_tl009_epoch_sum_kept() -> str:
    """`total += loss` per batch, each loss backpropagated and stepped on its own; the sum is only printed."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    total, sizes = 0, []
    for _ in range(3):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss
        sizes.append(_graph_size(total))
    return (f"total.requires_grad={total.requires_grad}, grad_fn={type(total.grad_fn).__name__}; autograd nodes kept "
            f"after 1/2/3 batches: {sizes}; `total += float(loss)` instead keeps a float")


@reduction
def r3_tl009_eval_sum_keeps_graph() -> str:
    """Validation under model.eval() only (grad mode): `val_losses += val_loss` keeps every batch's graph."""
    x, y = _regression()
    model = _mlp()
    model.eval()
    kept, floats = 0, 0.0
    sizes = []
    for _ in range(3):
        val_loss = F.mse_loss(model(x), y)
        kept += val_loss
        floats += val_loss.item()
        sizes.append(_graph_size(kept))
    return (f"model.eval() without no_grad: val_loss.requires_grad={val_loss.requires_grad}; autograd nodes kept by the sum "
            f"after 1/2/3 batches: {sizes}; a sum of val_loss.item() is a {type(floats).__name__}")


@reduction
def r3_tl009_accuracy_sum_ok() -> str:
    """`score = torch.mean(torch.eq(out.argmax(1), label).float())` summed over the test batches."""
    torch.manual_seed(0)
    model = nn.Linear(6, 4)
    x, y = _classification()
    total = 0
    for _ in range(2):
        score = torch.mean(torch.eq(model(x).argmax(1), y).float())
        total += score
    return f"score.requires_grad={score.requires_grad}, sum.requires_grad={total.requires_grad}"


@reduction
def r3_tl009_sum_is_the_loss_ok() -> str:
    """`loss += criterion(output, target)` over a sequence with a fresh hidden state, one backward after the loop."""
    torch.manual_seed(0)
    rnn = nn.RNNCell(3, 5)
    head = nn.Linear(5, 3)
    hidden = torch.zeros(1, 5)
    loss = 0
    for _ in range(4):
        hidden = rnn(torch.randn(1, 3), hidden)
        loss += F.cross_entropy(head(hidden), torch.tensor([2]))
    result = _outcome(loss.backward)
    return f"backward of the summed loss: {result}; rnn.weight_hh.grad set: {rnn.weight_hh.grad is not None}; loss.item()={loss.item():.3f}"


@reduction
def r3_tl009_data_read_ok() -> str:
    """Reading the loss through `.data`: `.data[0]` (torch 0.3 idiom), `.data.cpu().numpy()`, a sum of `.data`."""
    x, y = _regression()
    model = _mlp()
    loss = F.mse_loss(model(x), y)
    total = 0
    total += loss.data
    return (f"loss.data.requires_grad={loss.data.requires_grad}; sum of .data: requires_grad={total.requires_grad}; "
            f"loss.data[0]: {_outcome(lambda: loss.data[0])}; loss.data.cpu().numpy(): {_outcome(lambda: loss.data.cpu().numpy().shape)}; "
            f"np.asarray([loss.data]): {_outcome(lambda: np.asarray([loss.data]).shape)}")


@reduction
def r3_tl009_item_history_ok() -> str:
    """`.item()` / `.detach().cpu().numpy()` histories of backpropagated losses, then turned into an array."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    floats, total = [], 0
    for _ in range(3):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        floats.append(loss.item())
        total += loss.detach().cpu().numpy()
    return f"types {type(floats[0]).__name__} / {type(total).__name__}; np.asarray(history): {_outcome(lambda: np.asarray(floats).shape)}"


@reduction
def r3_tl015_detach_before_numpy_ok() -> str:
    """`.detach().numpy()` / `.data.cpu().numpy()` in grad mode, `.numpy()` under no_grad, and the bare `.numpy()` for contrast."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    out = model(torch.randn(2, 4))
    with torch.no_grad():
        quiet = model(torch.randn(2, 4))
    return (f"detach: {_outcome(lambda: out.detach().numpy().shape)}; .data: {_outcome(lambda: out.data.cpu().numpy().shape)}; "
            f"under no_grad: {_outcome(lambda: quiet.numpy().shape)}; bare .numpy() in grad mode: {_outcome(lambda: out.numpy())}")


@reduction
def r3_tl015_plot_list_of_grad_tensors() -> str:
    """`rate.append(-outputs.mean())` in grad mode (model.eval() only), then `plt.plot(xs, rate)` -> np.asarray(rate)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
    model.eval()
    rate = []
    for snr in range(3):
        y = model(torch.randn(8, 4) * (snr + 1)).mean()
        rate.append(-y)
    return f"rate[0].grad_fn={type(rate[0].grad_fn).__name__}; np.asarray(rate): {_outcome(lambda: np.asarray(rate))}"


@reduction
def r3_tl015_max_indices_numpy_ok() -> str:
    """`output = F.softmax(model(x), dim=1)` in grad mode, then `torch.max(output, 1)[1].cpu().numpy()`."""
    torch.manual_seed(0)
    output = F.softmax(nn.Linear(4, 3)(torch.randn(5, 4)), dim=1)
    indices = torch.max(output, 1)[1]
    return (f"output.requires_grad={output.requires_grad}; indices dtype {indices.dtype}, requires_grad={indices.requires_grad}; "
            f".cpu().numpy(): {_outcome(lambda: indices.cpu().numpy().tolist())}; values torch.max(output, 1)[0].numpy(): "
            f"{_outcome(lambda: torch.max(output, 1)[0].numpy())}")


# TL002 / TL005 / TL016 / TL008 / TL003 / TL018 --------------------------------------------------------
@reduction
def r3_tl002_update_under_no_grad_ok() -> str:
    """Manual SGD: `with torch.no_grad(): w -= lr * w.grad; w.grad.zero_()` every iteration."""
    x, y = _regression()
    w = torch.zeros(2, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    losses = []
    for _ in range(50):
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
            w.grad.zero_()
            b.grad.zero_()
        losses.append(loss.item())
    return f"w.is_leaf={w.is_leaf}, loss {losses[0]:.2f} -> {losses[-1]:.4f}"


@reduction
def r3_tl016_zero_after_backward_ok() -> str:
    """`w.grad.zero_()` after the backward of the same iteration (the first iteration included)."""
    w = torch.tensor([1.0, -2.0], requires_grad=True)
    first = _outcome(lambda: ((w ** 2).sum().backward(), w.grad.clone(), w.grad.zero_())[1].tolist())
    return f"first iteration backward then zero_: grad before zeroing {first}, after {w.grad.tolist()}"


@reduction
def r3_tl008_zero_each_step_ok() -> str:
    """zero_grad once per iteration (before backward, or after step): each step sees only its own batch's gradient."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    matches = []
    for i in range(3):
        xb, yb = x[i::3], y[i::3]
        loss = F.mse_loss(model(xb), yb)
        expected = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
        opt.zero_grad()
        loss.backward()
        matches.append(all(torch.allclose(p.grad, g) for p, g in zip(model.parameters(), expected)))
        opt.step()
    return f".grad equals the batch's own gradient at every step: {matches}"


@reduction
def r3_tl003_factory_device_ok() -> str:
    """`torch.randn(1, requires_grad=True, device=d)` and `Variable(t.cuda(), requires_grad=True)`: leaves on the device."""
    a = torch.randn(1, requires_grad=True, dtype=torch.float, device=DEVICE)
    temp = torch.ones(2, 3).to(DEVICE)
    prior = Variable(temp, requires_grad=True)
    return (f"factory: is_leaf={a.is_leaf}, device={a.device}; Variable(moved, requires_grad=True): is_leaf={prior.is_leaf}; "
            f"optimizer over them: {_outcome(lambda: type(torch.optim.SGD([a, prior], lr=0.1)).__name__)}")


@reduction
def r3_tl002_data_update_ok() -> str:
    """`p.data -= lr * p.grad.data`, `m.weight.data.normal_(0, 0.02)`, `nn.init.kaiming_normal_(m.weight)`."""
    x, y = _regression()
    model = nn.Linear(2, 1)
    before = model.weight.detach().clone()
    F.mse_loss(model(x), y).backward()
    for p in model.parameters():
        p.data -= 0.1 * p.grad.data
    changed = not torch.equal(before, model.weight.detach())
    init = _outcome(lambda: (model.weight.data.normal_(0.0, 0.02), nn.init.kaiming_normal_(model.weight, mode="fan_out"))[1].shape)
    return f"update through .data ran, weight changed={changed}, is_leaf={model.weight.is_leaf}; in-place inits: {init}"


@reduction
def r3_tl005_freeze_parameters_ok() -> str:
    """`for p in net.parameters(): p.requires_grad = False`, and a conv weight toggled True/False."""
    net = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    frozen = _outcome(lambda: [setattr(p, "requires_grad", False) for p in net.parameters()] and "ran")
    conv = nn.Conv2d(2, 2, 3)
    toggled = _outcome(lambda: (setattr(conv.weight, "requires_grad", False), setattr(conv.weight, "requires_grad", True)) and "ran")
    return f"freeze: {frozen}, any requires_grad left: {any(p.requires_grad for p in net.parameters())}; toggle conv.weight: {toggled}"


@reduction
def r3_tl018_as_tensor_keeps_graph_ok() -> str:
    """`torch.as_tensor(1 + k * torch.pow(torch.abs(h), 2), dtype=torch.float32)` with `h` a Linear output."""
    torch.manual_seed(0)
    lin32, lin64 = nn.Linear(3, 2), nn.Linear(3, 2).double()
    out = []
    for lin, x in ((lin32, torch.randn(4, 3)), (lin64, torch.randn(4, 3, dtype=torch.float64))):
        t = torch.as_tensor(1 + 0.5 * torch.pow(torch.abs(lin(x)), 2), dtype=torch.float32)
        t.sum().backward()
        out.append(f"from {x.dtype}: grad_fn={type(t.grad_fn).__name__}, weight.grad set {lin.weight.grad is not None}")
    return "; ".join(out)


@reduction
def r3_tl018_numpy_roundtrip_cuts_graph() -> str:
    """`Variable(torch.from_numpy(out.cpu().data.numpy()[idx]))` fed to a triplet loss added to a CE loss with a graph."""
    torch.manual_seed(0)
    embed, head = nn.Linear(4, 3), nn.Linear(4, 2)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 0, 1, 0, 1])
    idx = np.where(np.array([1, 0, 1, 1, 0, 1]) == 1)
    out = embed(x)
    selected = Variable(torch.from_numpy(out.cpu().data.numpy()[idx]))
    triplet = torch.clamp(0.5 + selected[:2].norm(dim=1) - selected[2:4].norm(dim=1), min=0).mean()
    loss = F.cross_entropy(head(x), y) + triplet
    loss.backward()
    kept = out[idx]
    return (f"selected.requires_grad={selected.requires_grad}, triplet.requires_grad={triplet.requires_grad}; "
            f"after loss.backward() the embedding layer's grad is {embed.weight.grad}; indexing out[idx] instead: "
            f"requires_grad={kept.requires_grad}")


@reduction
def r3_tl012_module_requires_grad_attribute() -> str:
    """`self.model.outc.requires_grad = False` on a submodule, then Adam over model.parameters()."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 1), nn.ReLU(), nn.Conv2d(4, 3, 1))
    outc = model[2]
    outc.requires_grad = False
    before = outc.weight.detach().clone()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(2, 2, 3, 3)).pow(2).mean().backward()
    opt.step()
    frozen = nn.Conv2d(4, 3, 1).requires_grad_(False)
    return (f"outc.weight.requires_grad={outc.weight.requires_grad}, weight changed by the step: "
            f"{not torch.equal(before, outc.weight.detach())}; outc.requires_grad_(False) instead: "
            f"weight.requires_grad={frozen.weight.requires_grad}")


@reduction
def r3_tl014_detached_target_keeps_prediction_graph_ok() -> str:
    """`qf1_loss = 0.5 * torch.mean((q1_pred - q_target.detach())**2)`: only the target is detached."""
    torch.manual_seed(0)
    qf1, target_vf = nn.Linear(3, 1), nn.Linear(3, 1)
    q_target = 1.0 + 0.99 * target_vf(torch.randn(4, 3))
    qf1_loss = 0.5 * torch.mean((qf1(torch.randn(4, 3)) - q_target.detach()) ** 2)
    return (f"qf1_loss.requires_grad={qf1_loss.requires_grad}; backward: {_outcome(qf1_loss.backward)}; "
            f"qf1.weight.grad set {qf1.weight.grad is not None}, target_vf.weight.grad {target_vf.weight.grad}")


# TL019 ------------------------------------------------------------------------------------------
@reduction
def r3_tl019_softmax_then_ce_or_nll() -> str:
    """CrossEntropyLoss / NLLLoss on softmax probabilities against the right inputs."""
    torch.manual_seed(0)
    z = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    nll_probs = F.nll_loss(F.softmax(z, dim=1), y).item()
    same = torch.allclose(F.nll_loss(F.log_softmax(z, dim=1), y), F.cross_entropy(z, y))
    ce_probs = _train_classifier(lambda s: torch.softmax(s, dim=1), nn.CrossEntropyLoss())
    nll_trained = _train_classifier(lambda s: torch.softmax(s, dim=1), nn.NLLLoss())
    ce_logits = _train_classifier(lambda s: s, nn.CrossEntropyLoss())
    return (f"NLL(softmax(z)) = {nll_probs:.3f} (minus a mean probability); NLL(log_softmax(z)) == CE(z): {same}; "
            f"300 SGD steps, logit cross-entropy / accuracy: CE(softmax) {ce_probs[0]:.3f}/{ce_probs[1]:.2f}, "
            f"NLL(softmax) {nll_trained[0]:.3f}/{nll_trained[1]:.2f}, CE(logits) {ce_logits[0]:.3f}/{ce_logits[1]:.2f}")


# TL007 ------------------------------------------------------------------------------------------
def _net(inputs: int, outputs: int) -> nn.Module:
    """fc1 -> relu -> fc2, as the actor and critic networks of the RL files (a single Linear saves no weight for its input)."""
    return nn.Sequential(nn.Linear(inputs, 8), nn.ReLU(), nn.Linear(8, outputs))


def _maddpg(step_actor: bool, update_targets: bool, step_critic: bool = True) -> str:
    """MADDPG.learn with two agents: new_actions and mu built from all agents before the per-agent loop."""
    torch.manual_seed(0)
    n, obs, act = 2, 3, 2

    class Agent:
        def __init__(self) -> None:
            self.actor, self.target_actor = _net(obs, act), _net(obs, act)
            self.critic, self.target_critic = _net(n * (obs + act), 1), _net(n * (obs + act), 1)
            self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=0.01)
            self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=0.01)

        def update_network_parameters(self, tau: float = 0.01) -> None:
            params = {k: tau * v.clone() + (1 - tau) * self.target_actor.state_dict()[k].clone() for k, v in self.actor.state_dict().items()}
            self.target_actor.load_state_dict(params)

    agents = [Agent() for _ in range(n)]
    states, states_ = [torch.randn(8, obs) for _ in range(n)], [torch.randn(8, obs) for _ in range(n)]
    old_actions = torch.cat([torch.randn(8, act) for _ in range(n)], dim=1)
    s, s_ = torch.cat(states, dim=1), torch.cat(states_, dim=1)
    new_actions = torch.cat([a.target_actor(st) for a, st in zip(agents, states_)], dim=1)
    mu = torch.cat([a.actor(st) for a, st in zip(agents, states)], dim=1)
    for i, agent in enumerate(agents):
        critic_value_ = agent.target_critic(torch.cat([s_, new_actions], dim=1)).flatten()
        critic_value = agent.critic(torch.cat([s, old_actions], dim=1)).flatten()
        target = torch.randn(8) + 0.95 * critic_value_
        critic_loss = F.mse_loss(target, critic_value)
        agent.critic_opt.zero_grad()
        failed = _outcome(lambda loss=critic_loss: loss.backward(retain_graph=True))
        if failed != "None":
            return f"agent {i} critic_loss.backward: {failed}"
        if step_critic:
            agent.critic_opt.step()
        actor_loss = -agent.critic(torch.cat([s, mu], dim=1)).flatten().mean()
        agent.actor_opt.zero_grad()
        failed = _outcome(lambda loss=actor_loss: loss.backward(retain_graph=True))
        if failed != "None":
            return f"agent {i} actor_loss.backward: {failed}"
        if step_actor:
            agent.actor_opt.step()
        if update_targets:
            agent.update_network_parameters()
    return "both agents' backwards ran"


@reduction
def r3_tl007_maddpg_shared_graph_between_agents() -> str:
    """As written (critic step, actor step, target update per agent), and with one or both in-place updates removed."""
    return (f"as written: {_maddpg(True, True)} | without the target update: {_maddpg(True, False)} | "
            f"without the actor step: {_maddpg(False, True)} | critic steps only: {_maddpg(False, False)}")


@reduction
def r3_tl007_load_state_dict_before_backward() -> str:
    """PPO: `old = model_old(x)` in the loss, then `model_old.load_state_dict(model.state_dict())`, then backward."""
    results = []
    for load_between in (True, False):
        torch.manual_seed(0)
        model, model_old = _net(3, 2), _net(3, 2)
        model_old.load_state_dict(model.state_dict())  # before any forward
        x = torch.randn(6, 3)
        ratio = model(x) / (1e-10 + model_old(x.detach()).abs())
        total_loss = -ratio.mean()
        if load_between:
            model_old.load_state_dict(model.state_dict())
        results.append(f"{'load between loss and backward' if load_between else 'load before the forward only'}: "
                       f"{_outcome(lambda loss=total_loss: loss.backward(retain_graph=True))}")
    old_keyword = _outcome(lambda: (model(x).sum()).backward(retain_variables=True))
    return "; ".join(results) + f"; backward(retain_variables=True): {old_keyword}"


@reduction
def r3_tl007_indexed_accumulate_into_buffer_ok() -> str:
    """labelmodels: `cll = torch.zeros(m, k); cll -= z.sum(); cll[i, j] += logp` in a loop, then
    `loss = -1 * torch.mean(ll); loss += reg` and backward."""
    torch.manual_seed(0)
    accuracy, propensity = nn.Parameter(torch.randn(3, 2)), nn.Parameter(torch.zeros(3))
    z_acc = torch.logsumexp(torch.stack((accuracy, -accuracy), dim=2), dim=2)
    cll = torch.zeros(4, 2)
    cll -= torch.sum(torch.logsumexp(torch.stack((propensity, torch.zeros(3)), dim=1), dim=1))
    for i, j, k in ((0, 0, 1), (1, 2, 0), (3, 1, 1), (0, 2, 0)):
        cll[i, k] += propensity[j] + accuracy[j, k] - z_acc[j, k]
    loss = -1 * torch.mean(torch.logsumexp(cll, dim=1))
    loss += 0.1 * torch.norm(accuracy - 0.5)
    result = _outcome(loss.backward)
    return f"backward: {result}; accuracy.grad set: {accuracy.grad is not None}, propensity.grad set: {propensity.grad is not None}"


@reduction
def r3_tl007_critic_step_before_policy_backward() -> str:
    """SAC learn(): q1_loss and policy_loss (through critic(states, sampled_action)) built first, then
    update_params(q1_optim, ...) (zero_grad, backward, step), then update_params(policy_optim, ..., policy_loss)."""

    def update_params(optim: torch.optim.Optimizer, loss: torch.Tensor) -> None:
        optim.zero_grad()
        loss.backward()
        optim.step()

    results = []
    for policy_first in (False, True):
        torch.manual_seed(0)
        policy, q1 = _net(3, 2), _net(5, 1)
        q1_optim, policy_optim = torch.optim.Adam(q1.parameters(), lr=3e-4), torch.optim.Adam(policy.parameters(), lr=3e-4)
        states, actions = torch.randn(8, 3), torch.randn(8, 2)
        q1_loss = (q1(torch.cat([states, actions], 1)) - torch.randn(8, 1)).pow(2).mean()
        policy_loss = -q1(torch.cat([states, torch.tanh(policy(states))], 1)).mean()
        order = [(q1_optim, q1_loss), (policy_optim, policy_loss)]
        if policy_first:
            order.reverse()
        outcome = "ran"
        for optim, loss in order:
            outcome = _outcome(lambda o=optim, val=loss: update_params(o, val))
            if outcome != "None":
                break
        results.append(f"{'policy update first' if policy_first else 'as written (Q1 step, then policy backward)'}: {outcome}")
    return "; ".join(results)


@reduction
def r3_tl007_write_into_linear_output_ok() -> str:
    """`v_ = target(s_).view(-1); v_[done] = 0.0; target = r + gamma * v_`, and the DQN `Qtarget = Qpred; Qtarget[:, a] = ...`."""
    torch.manual_seed(0)
    target_net, net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)), nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    s, s_ = torch.randn(6, 3), torch.randn(6, 3)
    done = torch.tensor([True, False, False, True, False, False])
    value_ = target_net(s_).view(-1)
    value_[done] = 0.0
    loss = F.mse_loss(torch.randn(6) + 0.99 * value_, net(s)[:, 0])
    first = _outcome(loss.backward)
    q_pred = net(s)
    q_next = target_net(s_)
    q_target = q_pred
    q_target[:, 1] = torch.randn(6) + 0.99 * torch.max(q_next[1])
    dqn = F.mse_loss(q_target, q_pred)
    second = _outcome(dqn.backward)
    return (f"critic backward after the masked write: {first}, target_net grad set {target_net[2].weight.grad is not None}; "
            f"DQN alias: backward {second}, loss={dqn.item():.1f}, q_target is q_pred: {q_target is q_pred}")


@reduction
def r3_tl007_ge_step_before_d_backward() -> str:
    """`ge_loss.backward(retain_graph=True); opt_GE.step(); d_loss.backward()` with d_loss on the undetached fake."""
    results = []
    for detach in (False, True):
        torch.manual_seed(0)
        gen, disc = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
        opt_ge, opt_d = torch.optim.Adam(gen.parameters(), lr=0.01), torch.optim.Adam(disc.parameters(), lr=0.01)
        fake = gen(torch.randn(5, 3))
        d_fake = disc(fake)
        ge_loss = -d_fake.mean()
        opt_ge.zero_grad()
        ge_loss.backward(retain_graph=True)
        opt_ge.step()
        d_loss = disc(torch.randn(5, 4)).mean() - (disc(fake.detach()) if detach else d_fake).mean()
        opt_d.zero_grad()
        results.append(f"{'fake.detach()' if detach else 'undetached fake'}: {_outcome(d_loss.backward)}")
    return "d_loss.backward() after the G step, " + "; ".join(results)


@reduction
def r3_tl007_shared_encoder_step_before_backward() -> str:
    """D_optimizer over FE + D; `real_intm = FE(x)` reused in G_loss (through Q) after the D step."""
    results = []
    for detach in (False, True):
        torch.manual_seed(0)
        fe, d, q, g = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)), nn.Linear(4, 1), nn.Linear(4, 2), nn.Linear(2, 4)
        d_opt = torch.optim.Adam(list(fe.parameters()) + list(d.parameters()), lr=0.01)
        g_opt = torch.optim.Adam(list(g.parameters()) + list(q.parameters()), lr=0.01)
        real_intm = torch.tanh(fe(torch.randn(5, 4)))
        fake = g(torch.randn(5, 2))
        d_loss = d(real_intm).mean() - d(torch.tanh(fe(fake.detach()))).mean()
        d_opt.zero_grad()
        d_loss.backward(retain_graph=True)
        d_opt.step()
        used = real_intm.detach() if detach else real_intm
        g_loss = -d(torch.tanh(fe(fake))).mean() + q(used).pow(2).mean()
        g_opt.zero_grad()
        results.append(f"{'real_intm.detach()' if detach else 'real_intm'}: {_outcome(g_loss.backward)}")
    return "G_loss.backward() after the D step, " + "; ".join(results)


@reduction
def r3_tl007_g_step_then_d_on_detached_ok() -> str:
    """G step first, then the D losses on real images and on gen_imgs.detach()."""
    torch.manual_seed(0)
    gen, disc = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=0.01)
    gen_imgs = gen(torch.randn(5, 3))
    g_loss = -disc(gen_imgs).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    d_loss = (disc(torch.randn(5, 4)).mean() - disc(gen_imgs.detach()).mean()) / 2
    return f"d_loss.backward() after the G step: {_outcome(d_loss.backward)}"


@reduction
def r3_tl007_sac_steps_before_other_backwards_ok() -> str:
    """SAC learn(): value step, actor step, then the critic loss on stored actions and the *target* value network."""
    torch.manual_seed(0)
    value, target_value = nn.Linear(3, 1), nn.Linear(3, 1)
    actor, critic = nn.Linear(3, 2), nn.Linear(5, 1)
    v_opt, a_opt, c_opt = (torch.optim.Adam(m.parameters(), lr=0.01) for m in (value, actor, critic))
    state, state_, action, reward = torch.randn(6, 3), torch.randn(6, 3), torch.randn(6, 2), torch.randn(6)
    value_ = target_value(state_).view(-1)
    sampled = torch.tanh(actor(state))
    log_probs = -sampled.pow(2).sum(1)
    critic_value = critic(torch.cat([state, sampled], 1)).view(-1)
    value_loss = 0.5 * F.mse_loss(value(state).view(-1), critic_value - log_probs)
    v_opt.zero_grad()
    value_loss.backward(retain_graph=True)
    v_opt.step()
    sampled = torch.tanh(actor(state))
    actor_loss = (-sampled.pow(2).sum(1) - critic(torch.cat([state, sampled], 1)).view(-1)).mean()
    a_opt.zero_grad()
    actor_loss.backward(retain_graph=True)
    a_opt.step()
    q_hat = 2.0 * reward + 0.99 * value_
    critic_loss = 0.5 * F.mse_loss(critic(torch.cat([state, action], 1)).view(-1), q_hat)
    c_opt.zero_grad()
    return f"critic_loss.backward() after the value and actor steps: {_outcome(critic_loss.backward)}"


@reduction
def r3_tl007_sac_learn_as_stored_ok() -> str:
    """SAC learn() with the stored networks' shapes (256-unit layers, one action, tanh squashing, `value_[done] = 0.0`)."""
    torch.manual_seed(0)

    def mlp(inputs: int, outputs: int) -> nn.Module:
        return nn.Sequential(nn.Linear(inputs, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, outputs))

    actor, critic_1, critic_2, value, target_value = mlp(4, 2), mlp(5, 1), mlp(5, 1), mlp(4, 1), mlp(4, 1)
    opts = {m: torch.optim.Adam(m.parameters(), lr=1e-3) for m in (actor, critic_1, critic_2, value)}

    def sample_normal(state: torch.Tensor, reparameterize: bool) -> tuple[torch.Tensor, torch.Tensor]:
        out = actor(state)
        mu, sigma = out[:, :1], torch.clamp(out[:, 1:], min=1e-6, max=1)
        dist = torch.distributions.Normal(mu, sigma)
        actions = dist.rsample() if reparameterize else dist.sample()
        action = torch.tanh(actions)
        log_probs = dist.log_prob(actions)
        log_probs -= torch.log(1 - action.pow(2) + 1e-6)
        return action, log_probs.sum(1, keepdim=True).view(-1)

    def q(state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return torch.min(critic_1(torch.cat([state, action], 1)), critic_2(torch.cat([state, action], 1))).view(-1)

    state, state_, action, reward = torch.randn(64, 4), torch.randn(64, 4), torch.randn(64, 1), torch.randn(64)
    done = torch.rand(64) < 0.1

    def learn() -> str:
        v = value(state).view(-1)
        value_ = target_value(state_).view(-1)
        value_[done] = 0.0
        actions, log_probs = sample_normal(state, reparameterize=False)
        value_loss = 0.5 * F.mse_loss(v, q(state, actions) - log_probs)
        opts[value].zero_grad()
        value_loss.backward(retain_graph=True)
        opts[value].step()
        actions, log_probs = sample_normal(state, reparameterize=True)
        actor_loss = torch.mean(log_probs - q(state, actions))
        opts[actor].zero_grad()
        actor_loss.backward(retain_graph=True)
        opts[actor].step()
        opts[critic_1].zero_grad()
        opts[critic_2].zero_grad()
        q_hat = 2 * reward + 0.99 * value_
        critic_loss = 0.5 * F.mse_loss(critic_1(torch.cat([state, action], 1)).view(-1), q_hat) + \
            0.5 * F.mse_loss(critic_2(torch.cat([state, action], 1)).view(-1), q_hat)
        critic_loss.backward()
        opts[critic_1].step()
        opts[critic_2].step()
        return "ran"

    return f"learn() as stored, twice: {_outcome(lambda: [learn(), learn()][-1])}"


@reduction
def r3_tl007_add_after_batchnorm_ok() -> str:
    """`out = bn2(conv2(out)); out += identity; out = relu(out)` with nn.ReLU(inplace=True)."""
    torch.manual_seed(0)
    conv, bn, relu = nn.Conv2d(2, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(inplace=True)
    x = torch.randn(2, 2, 5, 5, requires_grad=True)
    out = bn(conv(x))
    out += x
    out = relu(out)
    return f"backward: {_outcome(lambda: out.sum().backward())}; x.grad set: {x.grad is not None}"


def main(argv: list[str]) -> int:
    return run_reductions(argv, REDUCTIONS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
