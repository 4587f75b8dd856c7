"""TL009 on accumulators that escape, checked against torch 2.13: each program is linted and run.

A finding is right when running the program leaves the graph alive in the accumulator (or in
what it was passed on to) or raises M6; a program whose accumulator is backpropagated is fine.
For every finding the unsafe fix is applied and the fixed program is run: it must not raise,
must keep no graph, and every later use of the accumulator (``.item()`` on the total or an
element, ``torch.stack``, tensor arithmetic, numpy, formatting, returning) must still work."""

from __future__ import annotations

import textwrap
import warnings

import pytest

from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
pytestmark = pytest.mark.torch

M6 = "Can't call numpy() on Tensor that requires grad"

PRELUDE = """\
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
crit = nn.MSELoss()
X, Y = torch.randn(8, 3), torch.randn(8, 1)
loader = [(X, Y)] * 3
"""

STEP = "loss = crit(model(xb), yb)\nopt.zero_grad()\nloss.backward()\nopt.step()\n"


def loop(accumulate: str, indent: int = 0) -> str:
    body = textwrap.indent(STEP + accumulate + "  # TL009\n", "    ")
    return textwrap.indent("for xb, yb in loader:\n" + body, " " * indent)


# name -> (program after the prelude, runtime outcome): "M6" raises M6; "leak" leaves a graph
# in the variable `kept`; "ok" keeps no graph.  A line marked `# TL009` is reported, or none is.
PROGRAMS: dict[str, tuple[str, str]] = {
    "np_array_of_history": ("losses = []\n" + loop("losses.append(loss)") + "arr = np.array(losses)\n", "M6"),
    "np_mean_of_history": ("losses = []\n" + loop("losses.append(loss)") + "m = np.mean(losses)\n", "M6"),
    "history_stored_in_a_dict": (
        "tot = 0\n" + loop("tot += loss") + "log = {'loss': tot}\nkept = log['loss']\n", "leak"),
    "str_format_of_total": (
        "t = 0\n" + loop("t += loss") + "msg = 'loss {:.4f}'.format(t / 3)\nkept = t\n", "leak"),
    "f_string_of_total": ("t = 0\n" + loop("t += loss") + "msg = f'{t / 3:.4f}'\nkept = t\n", "leak"),
    "returned_from_a_train_epoch": (
        "def train_epoch():\n    total = 0\n" + loop("total += loss", 4) + "    return total / len(loader)\n"
        "kept = train_epoch()\n", "leak"),
    "reset_at_the_top_of_an_outer_loop": (
        "for epoch in range(2):\n    running = 0.0\n" + loop("running += loss", 4)
        + "    msg = f'{running / len(loader):.4f}'\nkept = running\n", "leak"),
    "element_item_later": (  # examples/regression/optimizer_loop.py
        "history = []\n" + loop("history.append(loss)")
        + "msg = f'{history[0].item():.4f} {history[-1].item():.4f}'\nkept = history[-1]\n", "leak"),
    "total_item_later": ("total = 0\n" + loop("total += loss") + "avg = (total / 3).item()\nkept = total\n", "leak"),
    "stacked_then_item": (
        "losses = []\n" + loop("losses.append(loss)") + "avg = torch.stack(losses).mean().item()\nkept = losses[0]\n",
        "leak"),
    "tensor_arithmetic_later": (
        "total = 0\n" + loop("total += loss") + "scaled = total * torch.ones(2)\navg = scaled.sum().item()\n"
        "kept = total\n", "leak"),
    "printed_and_returned_list": (
        "def fit():\n    hist = []\n" + loop("hist.append(loss)", 4) + "    print(hist[-1])\n    return hist\n"
        "kept = fit()[0]\n", "leak"),
    "numbers_only": (
        "total = 0\n" + loop("total += loss") + "avg = round(float(total) / 3, 4)\nkept = total\n", "leak"),
    # Known to carry a graph only as a term of what is backpropagated (the net is a parameter).
    "alias_backpropagated": (
        "def epoch(net, batches):\n    total = 0\n    for xb, yb in batches:\n"
        "        loss = crit(net(xb), yb)\n        loss_total = loss\n        opt.zero_grad()\n"
        "        loss_total.backward()\n        opt.step()\n        total += loss  # TL009\n"
        "    return total / len(batches)\nkept = epoch(model, loader)\n", "leak"),
    "terms_of_a_backpropagated_sum": (
        "def epoch(net, batches, beta):\n    fit_total = 0\n    for xb, yb in batches:\n"
        "        out = net(xb)\n        fit = crit(out, yb)\n        size = out.pow(2).mean()\n"
        "        loss = fit + beta.weight * size\n        opt.zero_grad()\n        loss.backward()\n"
        "        opt.step()\n        fit_total += fit  # TL009\n    return fit_total\n"
        "class Hyper:\n    weight = 0.1\nkept = epoch(model, loader, Hyper())\n", "leak"),
    "parts_returned_with_their_sum": (
        "def parts(net, xb, yb):\n    out = net(xb)\n    fit = crit(out, yb)\n    size = out.pow(2).mean()\n"
        "    return fit + 0.1 * size, fit, size\n"
        "def epoch(net, batches):\n    fits = []\n    for xb, yb in batches:\n"
        "        loss, fit, size = parts(net, xb, yb)\n        opt.zero_grad()\n        loss.backward()\n"
        "        opt.step()\n        fits.append(fit)  # TL009\n    return fits\nkept = epoch(model, loader)\n", "leak"),
    # A mean or sum keeps the terms it reduces; the parts come from methods of an object.
    "parts_returned_reduced_with_their_mean": (
        "class Scorer:\n    def __init__(self, net):\n        self.net = net\n"
        "    def per_sample_loss(self, xb, yb):\n        return (self.net(xb) - yb).pow(2)\n"
        "    def penalty(self, xb):\n        return self.net(xb).pow(2)\n"
        "def parts(scorer, xb, yb):\n    fit = scorer.per_sample_loss(xb, yb)\n    size = scorer.penalty(xb)\n"
        "    return torch.mean(fit + 0.01 * size), fit.mean(), size.sum(dim=1)\n"
        "def epoch(scorer, batches):\n    fits = []\n    for xb, yb in batches:\n"
        "        loss, fit, size = parts(scorer, xb, yb)\n        opt.zero_grad()\n        loss.backward()\n"
        "        opt.step()\n        fits.append(fit)  # TL009\n    return fits\n"
        "kept = epoch(Scorer(model), loader)\n", "leak"),
    "term_of_a_backpropagated_mean": (
        "def epoch(scorer, batches):\n    fit_total = 0\n    for xb, yb in batches:\n"
        "        fit = scorer.per_sample_loss(xb, yb)\n        loss = (fit + 0.01 * scorer.penalty(xb)).mean()\n"
        "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        fit_total += fit  # TL009\n"
        "    return fit_total\n"
        "class Scorer:\n    def __init__(self, net):\n        self.net = net\n"
        "    def per_sample_loss(self, xb, yb):\n        return (self.net(xb) - yb).pow(2)\n"
        "    def penalty(self, xb):\n        return self.net(xb).pow(2)\n"
        "kept = epoch(Scorer(model), loader)\n", "leak"),
    "list_element_per_model": (
        "models = [model, nn.Linear(3, 1)]\nopts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]\n"
        "totals = [0] * len(models)\nfor xb, yb in loader:\n    for i, m in enumerate(models):\n"
        "        cost = crit(m(xb), yb)\n        opts[i].zero_grad()\n        cost.backward()\n        opts[i].step()\n"
        "        totals[i] += cost  # TL009\nkept = totals\n", "leak"),
    "history_of_a_training_step_method": (
        "class Agent:\n    def __init__(self, net):\n        self.net = net\n"
        "        self.optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n        self.cost_his = []\n"
        "    def learn(self, xb, yb):\n        loss = crit(self.net(xb), yb)\n        self.optimizer.zero_grad()\n"
        "        loss.backward()\n        self.optimizer.step()\n        self.cost_his.append(loss)  # TL009\n"
        "    def costs(self):\n        return np.array(self.cost_his)\n"
        "agent = Agent(model)\nfor xb, yb in loader:\n    agent.learn(xb, yb)\narr = agent.costs()\n", "M6"),
}

# Look-alikes that are fine: the accumulated values are backpropagated (no line is marked).
FINE: dict[str, str] = {
    "multi_part_loss_backpropagated": (
        "total = 0\nfor k in range(3):\n    total = total + crit(model(X), Y * k)\ntotal.backward()\nkept = None\n"),
    "outputs_stacked_and_backpropagated": (
        "cell = nn.RNNCell(3, 4)\nseq = torch.randn(5, 2, 3)\nh = torch.zeros(2, 4)\nouts = []\n"
        "for t in range(5):\n    h = cell(seq[t], h)\n    outs.append(h)\n"
        "loss = crit(torch.stack(outs).mean(0)[:, :1], Y[:2])\nloss.backward()\nkept = None\n"),
    "log_probs_through_a_helper_then_backward": (
        "def policy_loss(log_probs):\n    return -torch.stack(log_probs).sum()\n"
        "log_probs = []\nfor t in range(4):\n    log_probs.append(torch.log_softmax(model(X[t:t + 1]), 0).sum())\n"
        "policy_loss(log_probs).backward()\nkept = None\n"),
    "hidden_states_in_forward": (
        "class RNN(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.cell = nn.RNNCell(3, 4)\n        self.fc = nn.Linear(4, 1)\n\n"
        "    def forward(self, x):\n        h = torch.zeros(x.size(1), 4)\n        outputs = []\n"
        "        for t in range(x.size(0)):\n            h = self.cell(x[t], h)\n            outputs.append(h)\n"
        "        outputs = torch.stack(outputs)\n        return self.fc(outputs)\n\n"
        "net = RNN()\nloss = net(torch.randn(5, 2, 3)).pow(2).mean()\nloss.backward()\nkept = None\n"),
    # The divisor of a backpropagated quotient and the factor of a product of names are no terms.
    "divisor_of_a_backpropagated_quotient": (
        "def epoch(net, batches):\n    weight_total = 0\n    for xb, yb in batches:\n"
        "        weights = torch.rand(len(yb), 1)\n        weight_sum = weights.sum()\n"
        "        loss = ((net(xb) - yb) ** 2 * weights).sum() / weight_sum\n        opt.zero_grad()\n"
        "        loss.backward()\n        opt.step()\n        weight_total += weight_sum\n    return weight_total\n"
        "kept = epoch(model, loader)\n"),
    "weights_inside_a_backpropagated_mean": (
        "def episode(net, batches):\n    totals = []\n    for xb, yb in batches:\n"
        "        log_probs = torch.log_softmax(net(xb).squeeze(1), 0)\n        weights = yb.squeeze(1) - yb.mean()\n"
        "        loss = -(log_probs * weights).mean()\n        opt.zero_grad()\n        loss.backward()\n"
        "        opt.step()\n        totals.append(weights.sum())\n    return totals\nkept = episode(model, loader)\n"),
    "numpy_element_per_model": (
        "models = [model, nn.Linear(3, 1)]\nopts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]\n"
        "average = np.zeros(len(models))\nfor xb, yb in loader:\n    for i, m in enumerate(models):\n"
        "        cost = crit(m(xb), yb)\n        opts[i].zero_grad()\n        cost.backward()\n        opts[i].step()\n"
        "        average[i] += cost / len(loader)\nkept = average\n"),
    "reward_scaling_a_log_probability": (
        "def episode(net, batches):\n    rewards = []\n    for xb, yb in batches:\n"
        "        log_prob = torch.log_softmax(net(xb).squeeze(1), 0)[0]\n        reward = yb.mean()\n"
        "        loss = -log_prob * reward\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
        "        rewards.append(reward)\n    return rewards\nkept = episode(model, loader)\n"),
}


def _graph_kept(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_graph_kept(v) for v in value)
    return isinstance(value, torch.Tensor) and value.grad_fn is not None


def _run(source: str) -> tuple[str, dict]:
    namespace: dict = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(source, "<program>", "exec"), namespace)
    except RuntimeError as error:
        if M6 in str(error):
            return "M6", namespace
        raise
    return ("leak" if _graph_kept(namespace.get("kept")) else "ok"), namespace


def _findings(source: str):
    return lint_source(source, [rule_by_code("TL009")]).findings


def _marked(source: str) -> set[int]:
    return {number for number, line in enumerate(source.splitlines(), 1) if line.endswith("# TL009")}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_escaping_accumulators_are_findings_and_fixed_programs_run(name: str) -> None:
    body, outcome = PROGRAMS[name]
    source = PRELUDE + body
    assert _run(source)[0] == outcome
    findings = _findings(source)
    assert {f.line for f in findings} == _marked(source)
    assert all(f.fix is not None for f in findings)
    fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
    assert fixed != source
    assert _run(fixed)[0] == "ok"  # runs to the end (no AttributeError, no M6) and keeps no graph
    assert not _findings(fixed)


@pytest.mark.parametrize("name", sorted(FINE))
def test_backpropagated_sequences_are_not_histories(name: str) -> None:
    source = PRELUDE + FINE[name]
    assert _run(source)[0] == "ok"
    assert not _findings(source)


def test_the_fix_follows_the_later_uses() -> None:
    def fix_of(name: str) -> str:
        source = PRELUDE + PROGRAMS[name][0]
        (finding,) = _findings(source)
        assert finding.fix is not None
        return finding.fix.description

    assert fix_of("numbers_only") == "accumulate `loss.item()`"
    assert fix_of("np_array_of_history") == "accumulate `loss.item()`"
    assert fix_of("f_string_of_total") == "accumulate `loss.item()`"
    for name in ("element_item_later", "total_item_later", "stacked_then_item", "tensor_arithmetic_later",
                 "returned_from_a_train_epoch", "printed_and_returned_list"):
        assert fix_of(name) == "accumulate `loss.detach()`", name


def test_the_regression_example_trains_after_the_unsafe_fix() -> None:
    """examples/regression/optimizer_loop.py: `history[0].item()` later must keep working."""
    from pathlib import Path

    source = (Path(__file__).resolve().parent.parent / "examples" / "regression" / "optimizer_loop.py").read_text()
    fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
    assert "history.append(loss.detach())" in fixed
    namespace: dict = {}
    exec(compile(fixed, "optimizer_loop.py", "exec"), namespace)
    assert not _graph_kept(namespace["history"])
