"""TL015 on plotted (or NumPy-converted) lists of losses that carry their graph
(``analysis/histories.py``): per-batch terms of the backpropagated loss, epoch means
``sum(batch_losses) / len(batch_losses)`` of them, and matplotlib ``Axes`` methods
(``fig, ax = plt.subplots(); ax.plot(history)``).  Checked against torch 2.13: each program
is linted and run.  matplotlib is not installed here; the stand-in below converts the data
arguments with ``np.asarray``, which is what its ``plot`` does with y data (M6 on a tensor
that requires grad, as corpus/reductions/gh2.py ``gh2_tl015_epoch_means_plotted`` measured)."""

from __future__ import annotations

import sys
import types

import pytest

from tests.test_tl009_escapes import M6
from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
pytestmark = pytest.mark.torch

PRELUDE = """\
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
crit = nn.MSELoss()
X, Y = torch.randn(8, 3), torch.randn(8, 1)
loader = [(X, Y)] * 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x), x.shape[0]


def parts(net, xb, yb):
    out, count = net(xb)
    fit = crit(out, yb)
    size = out.pow(2).mean()
    return fit + 0.1 * size, fit, size


"""

# The net returns a tuple: its outputs are known to carry a graph only because the loss they
# are terms of is backpropagated.
TRAIN = """\
def train(net, opt, epochs):
    history = []
    for epoch in range(epochs):
        fits = []
        for xb, yb in loader:
            loss, fit, size = parts(net, xb, yb)
            fits.append(fit)
            opt.zero_grad()
            loss.backward()
            opt.step()
        history.append(sum(fits) / len(fits))
{plot}


model = Net()
train(model, torch.optim.SGD(model.parameters(), lr=0.05), 2)
"""

AXES = "    fig, axs = plt.subplots(1, 2)\n    axs[0].plot(range(epochs), history)  # TL015\n"
FIGURE = "    fig = plt.figure()\n    ax = fig.add_subplot(111)\n    ax.plot(history)  # TL015\n"
PYPLOT = "    plt.plot(history)  # TL015\n"

# name -> program after the prelude; `# TL015` marks the reported line, and running it raises M6.
RAISING: dict[str, str] = {
    "epoch_means_on_axes_of_subplots": TRAIN.format(plot=AXES),
    "epoch_means_on_axes_of_a_figure": TRAIN.format(plot=FIGURE),
    "epoch_means_with_pyplot": TRAIN.format(plot=PYPLOT),
    "batch_terms_with_pyplot": TRAIN.replace("        history.append(sum(fits) / len(fits))\n", "")
    .format(plot="    plt.plot(fits)  # TL015\n"),
    "np_mean_of_batch_terms": TRAIN.replace("        history.append(sum(fits) / len(fits))\n", "")
    .format(plot="    np.mean(fits)  # TL015\n"),
}

# Look-alikes that run: nothing is reported.
FINE: dict[str, str] = {
    "means_computed_under_no_grad": TRAIN.replace(
        "        history.append(sum(fits) / len(fits))\n",
        "        with torch.no_grad():\n            mean = sum(fits) / len(fits)\n        history.append(mean)\n",
    ).format(plot=AXES.replace("  # TL015", "")),
    "validation_terms_under_no_grad": TRAIN.replace(
        "        history.append(sum(fits) / len(fits))\n",
        "        val = []\n        with torch.no_grad():\n            for xb, yb in loader:\n"
        "                loss, fit, size = parts(net, xb, yb)\n                val.append(fit)\n"
        "        history.append(sum(val) / len(val))\n",
    ).format(plot=AXES.replace("  # TL015", "")),
    "item_values": TRAIN.replace("fits.append(fit)", "fits.append(fit.item())").format(plot=PYPLOT.replace("  # TL015", "")),
    "not_an_axes": TRAIN.format(
        plot="    class Board:\n        def plot(self, *series):\n            self.series = series\n"
        "    ax = Board()\n    ax.plot(history)\n"),
}


class _Axes:
    def plot(self, *args: object, **kwargs: object) -> None:
        for arg in args:
            np.asarray(arg)  # matplotlib's conversion of the data arguments


def _pyplot() -> types.ModuleType:
    module = types.ModuleType("matplotlib.pyplot")
    figure = types.SimpleNamespace(add_subplot=lambda *a: _Axes())
    module.plot = _Axes().plot  # type: ignore[attr-defined]
    module.subplots = lambda *a, **k: (figure, [_Axes(), _Axes()])  # type: ignore[attr-defined]
    module.figure = lambda *a, **k: figure  # type: ignore[attr-defined]
    return module


def _run(source: str, monkeypatch: pytest.MonkeyPatch) -> str:
    package = types.ModuleType("matplotlib")
    pyplot = _pyplot()
    package.pyplot = pyplot  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "matplotlib", package)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    try:
        exec(compile(source, "<program>", "exec"), {})
    except RuntimeError as error:
        if M6 in str(error):
            return "M6"
        raise
    return "ok"


def _lines(source: str) -> set[int]:
    return {f.line for f in lint_source(source, [rule_by_code("TL015")]).findings}


def _marked(source: str) -> set[int]:
    return {number for number, line in enumerate(source.splitlines(), 1) if line.endswith("# TL015")}


@pytest.mark.parametrize("name", sorted(RAISING))
def test_plotted_graph_carrying_histories_are_findings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = PRELUDE + RAISING[name]
    assert _run(source, monkeypatch) == "M6"
    assert _lines(source) == _marked(source)


@pytest.mark.parametrize("name", sorted(FINE))
def test_histories_without_graphs_are_silent(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = PRELUDE + FINE[name]
    assert _run(source, monkeypatch) == "ok"
    assert not _lines(source)


def test_backward_of_another_framework_is_no_torch_graph() -> None:
    """micrograd-like values have a ``backward()`` too: without torch, no M6 is claimed."""
    body = (
        "import matplotlib.pyplot as plt\nfrom micrograd.nn import MLP\n\nmodel = MLP(3, [4, 1])\nlosses = []\n"
        "for step in range(3):\n    loss = model([1.0, 2.0, 3.0])\n    loss.backward()\n    losses.append(loss)\n"
        "plt.plot(losses)\n"
    )
    assert not _lines(body)
    assert _lines("import torch\n" + body) == {11}


def test_history_plotted_on_axes_is_a_tl009_finding_and_its_fix_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ax.plot(val_losses)`` converts with numpy (M6): the history of validation losses computed
    with grad is no longer an escape the caller may backpropagate, and fixing the append runs."""
    source = PRELUDE + (
        "model = nn.Linear(3, 1)\nval_losses = []\nfor xb, yb in loader:\n"
        "    val_losses.append(crit(model(xb), yb))  # TL009\n"
        "fig, axs = plt.subplots(1, 2)\naxs[1].plot(val_losses)  # TL015\n"
    )
    assert _run(source, monkeypatch) == "M6"
    tl009 = lint_source(source, [rule_by_code("TL009")]).findings
    marked = {number for number, line in enumerate(source.splitlines(), 1) if line.endswith("# TL009")}
    assert {f.line for f in tl009} == marked and "raises" in tl009[0].message
    assert _lines(source) == _marked(source)
    fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
    assert _run(fixed, monkeypatch) == "ok"
