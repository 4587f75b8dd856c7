"""The one recognition of autograd events (backward, autograd.grad, step, zeroing) rules share."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import Analyzer
from torchlint.analysis.events import EventKind
from torchlint.rule import Diagnostic, Rule, RuleOptions

PRELUDE = """\
import torch
from torch import nn
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
w = torch.zeros(3, requires_grad=True)
loss = (model(w) ** 2).sum()
"""


def events_of(source: str) -> list[tuple[str, str | None, bool | None]]:
    """(kind, subject source, retain_graph) of every call/assignment event after the prelude."""
    module = cst.parse_module(PRELUDE + textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    seen: list[tuple[str, str | None, bool | None]] = []
    start = len(PRELUDE.splitlines())

    def record(event) -> None:
        if event is not None:
            subject = module.code_for_node(event.subject) if event.subject is not None else None
            seen.append((event.kind.value, subject, event.retain_graph))

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"
        lines = 0

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            type(self).lines += 1

        def visit_Call(self, node: cst.Call) -> None:
            if type(self).lines > start:
                record(self.ctx.autograd_event(node))

        def visit_Assign(self, node: cst.Assign) -> None:
            if type(self).lines > start:
                for target in node.targets:
                    record(self.ctx.grad_reset_event(target.target, node.value))

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    return seen


@pytest.mark.parametrize(
    "source, expected",
    [
        ("loss.backward()", [("backward", "loss", None)]),
        ("loss.backward(retain_graph=True)", [("backward", "loss", True)]),
        ("torch.autograd.backward(loss)", [("backward", "loss", None)]),
        ("torch.autograd.backward(tensors=loss, retain_graph=False)", [("backward", "loss", False)]),
        ("scaler.scale(loss).backward()", [("backward", "loss", None)]),
        ("self.manual_backward(loss)", [("backward", "loss", None)]),
        ("accelerator.backward(loss)", [("backward", "loss", None)]),
        ("self.fabric.backward(loss)", [("backward", "loss", None)]),
        ("y = model(w)\ny.backward(torch.ones_like(y))", [("backward", "y", None)]),
        ("g, = torch.autograd.grad(loss, [w])", [("grad", "loss", None)]),
        ("opt.step()", [("step", "opt", None)]),
        ("scaler.step(opt)", [("step", "opt", None)]),
        ("self.optimizer.step()", [("step", "self.optimizer", None)]),
        ("sched.step()", []),
        ("env.step(action)", []),
        ("opt.zero_grad()", [("zero_grad", "opt", None)]),
        ("model.zero_grad(set_to_none=True)", [("zero_grad", "model", None)]),
        ("w.grad.zero_()", [("zero_grad", "w", None)]),
        ("w.grad.data.zero_()", [("zero_grad", "w", None)]),
        ("w.grad.data.fill_(0)", [("zero_grad", "w", None)]),
        ("w.grad = None", [("zero_grad", "w", None)]),
        ("w.grad = torch.zeros_like(w)", [("zero_grad", "w", None)]),
        ("w.grad = g", []),
        ("setattr(w, 'grad', None)", [("zero_grad", "w", None)]),
        ("torch._foreach_zero_(grads)", [("zero_grad", None, None)]),
        ("w.zero_()", []),
    ],
)
def test_event_spellings(source: str, expected: list) -> None:
    assert events_of(source) == expected


def test_kinds_are_the_documented_four() -> None:
    assert {kind.value for kind in EventKind} == {"backward", "grad", "step", "zero_grad"}
