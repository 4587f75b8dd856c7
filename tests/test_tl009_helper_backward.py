"""TL009 on a loss a helper backpropagates and returns, accumulated in the caller's loop and then
passed on (to code torchlint cannot see): each iteration's loss was already backpropagated, so
the total cannot be backpropagated again and only keeps the graphs alive.  Checked with torch
2.13: the program keeps a graph in ``kept``, the fixed program keeps none and still runs."""

from __future__ import annotations

import pytest

from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
X, Y = torch.randn(8, 3), torch.randn(8, 1)
loader = [(X, Y)] * 3


class Monitor:
    def __init__(self):
        self.seen = []

    def update(self, value, epoch):
        self.seen.append(value)


def train_step(net, xb, yb):
    loss = ((net(xb) - yb) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def forward_only(net, xb, yb):
    return ((net(xb) - yb) ** 2).mean()
"""

# name -> (program after the prelude, whether it is a finding).  The accumulation is marked `# here`.
PROGRAMS = {
    "helper_backpropagates_total_passed_on": ("""
def fit(monitor, epochs):
    for epoch in range(epochs):
        epoch_total = 0
        for xb, yb in loader:
            epoch_total += train_step(model, xb, yb)  # here
        monitor.update(epoch_total / len(loader), epoch)
        epoch_total = 0
monitor = Monitor()
fit(monitor, 2)
kept = monitor.seen[-1]
""", True),
    "helper_backpropagates_named_loss_passed_on": ("""
def fit(monitor):
    total = 0
    for xb, yb in loader:
        loss = train_step(model, xb, yb)
        total = total + loss  # here
    monitor.update(total, 0)
monitor = Monitor()
fit(monitor)
kept = monitor.seen[-1]
""", True),
    # The helper does not backpropagate: whoever receives the total may (silent).
    "helper_only_computes_the_loss": ("""
def fit(monitor):
    total = 0
    for xb, yb in loader:
        total += forward_only(model, xb, yb)  # here
    monitor.update(total, 0)
monitor = Monitor()
fit(monitor)
kept = monitor.seen[-1]
""", False),
}


def _kept_graph(source: str) -> bool:
    namespace: dict = {}
    exec(compile(source, "<program>", "exec"), namespace)
    kept = namespace["kept"]
    return isinstance(kept, torch.Tensor) and kept.grad_fn is not None


def _lines(source: str) -> set[int]:
    return {f.line for f in lint_source(source, [rule_by_code("TL009")]).findings}


def _marked(source: str) -> set[int]:
    return {number for number, line in enumerate(source.splitlines(), 1) if line.endswith("# here")}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_total_of_losses_a_helper_backpropagated(name: str) -> None:
    body, finding = PROGRAMS[name]
    source = PRELUDE + body
    assert _kept_graph(source)  # every program keeps the graphs alive in what it passes on
    assert _lines(source) == (_marked(source) if finding else set())
    if finding:
        fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
        assert ".detach()" in fixed and not _lines(fixed)
        assert not _kept_graph(fixed)
