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
        ("loss.backward(retain_variables=True)", [("backward", "loss", True)]),  # before torch 0.4
        ("loss.backward(create_graph=True)", [("backward", "loss", True)]),
        ("loss.backward(create_graph=True, retain_graph=False)", [("backward", "loss", False)]),
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


def _probe(source: str, on_call, on_finish=None) -> None:
    """Run the analyzer over ``source`` with a rule that calls ``on_call(ctx, call)`` for every
    call and ``on_finish(ctx)`` at the end."""
    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_Call(self, node: cst.Call) -> None:
            on_call(self.ctx, node)

        def finish(self) -> None:
            if on_finish is not None:
                on_finish(self.ctx)

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()


@pytest.mark.parametrize(
    "call, hides",
    [
        ("print(loss)", False),
        ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", False),
        ("model(w)", False),
        ("model.train()", False),
        ("w.sum()", False),
        ("batch.to('cpu')", False),  # a tensor method on an unknown object
        ("log.append(loss.item())", False),
        ("trainer.training_step(batch)", True),
        ("helper(loss)", True),
        ("np_utils.fit(model)", True),
    ],
)
def test_calls_that_may_hide_autograd(call: str, hides: bool) -> None:
    from torchlint.analysis.events import may_hide_autograd

    seen: dict[str, bool] = {}
    source = PRELUDE + "import np_utils\n" + call + "\n"

    def on_call(ctx, node) -> None:
        if cst.Module([]).code_for_node(node) == call:
            seen[call] = may_hide_autograd(ctx, node)

    _probe(source, on_call)
    assert seen == {call: hides}


@pytest.mark.parametrize(
    "source, frees",
    [
        ("loss.backward()", True),
        ("loss.backward(torch.ones_like(loss))", True),
        ("loss.backward(retain_graph=True)", False),
        ("loss.backward(retain_graph=False)", True),
        ("loss.backward(create_graph=True)", False),
        ("loss.backward(retain_graph=keep)", False),
        ("loss.backward(g, True)", False),
        ("loss.backward(inputs=[w])", False),
        ("torch.autograd.backward(loss)", True),
        ("accelerator.backward(loss)", True),
        ("self.manual_backward(loss, retain_graph=True)", False),
    ],
)
def test_which_backward_calls_free_the_graph(source: str, frees: bool) -> None:
    from torchlint.analysis.events import frees_graph

    found: list[bool] = []

    def on_call(ctx, node) -> None:
        event = ctx.autograd_event(node)
        if event is not None and event.kind is EventKind.BACKWARD:
            found.append(frees_graph(event))

    _probe(PRELUDE + source + "\n", on_call)
    assert found == [frees]


def test_event_log_finds_backward_in_helpers_transitively() -> None:
    from torchlint.analysis.events import EventLog

    source = PRELUDE + textwrap.dedent(
        """\
        def inner(value):
            value.backward()

        def outer(value):
            inner(value)

        def quiet(value):
            return value * 2

        for step in range(3):
            outer(loss)
            quiet(loss)
            print(loss)
            loss.backward()
        """
    )
    logs: list[EventLog] = []
    found: list[str] = []

    def on_call(ctx, node) -> None:
        if not logs:
            logs.append(EventLog(ctx))
        logs[0].record(node)

    def on_finish(ctx) -> None:
        loop = next(s for s in ctx.module.body if isinstance(s, cst.For))
        calls = logs[0].backward_calls_in(ctx.flow(loop))
        found.extend(sorted(cst.Module([]).code_for_node(call) for call in calls))

    _probe(source, on_call, on_finish)
    assert found == ["loss.backward()", "outer(loss)"]


def test_repeated_body_is_the_innermost_loop_or_the_function() -> None:
    seen: dict[str, str | None] = {}

    def on_call(ctx, node) -> None:
        body = ctx.repeated_body()
        name = cst.Module([]).code_for_node(node.func)
        seen[name] = type(body).__name__ if body is not None else None

    _probe(
        "top()\nfor i in r:\n    in_loop()\n    while c:\n        in_while()\n"
        "def f():\n    in_function()\n    for j in s:\n        in_function_loop()\nf()\n",
        on_call,
    )
    assert seen == {"top": None, "in_loop": "For", "in_while": "While", "in_function": "FunctionDef",
                    "in_function_loop": "For", "f": None}


def test_properties_of_classes_in_the_file() -> None:
    module = cst.parse_module(
        "import functools\nclass C:\n    @property\n    def p(self): ...\n"
        "    @functools.cached_property\n    def q(self): ...\n    def m(self): ...\n"
    )
    analyzer = Analyzer(module, module.code)
    analyzer.run()
    cls = analyzer.scope.classes["C"]
    assert cls.method("p").is_property and cls.method("q").is_property and not cls.method("m").is_property


def test_event_log_records_gradient_writes_not_resets() -> None:
    from torchlint.analysis.events import EventLog

    module = cst.parse_module(PRELUDE + "w.grad = torch.ones(3)\nw.grad = None\nw.grad.add_(1.0)\nw.grad.zero_()\n")
    analyzer = Analyzer(module, module.code)
    written: list[str] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def __init__(self, *args) -> None:
            super().__init__(*args)
            self.log = EventLog(self.ctx)

        def visit_Call(self, node: cst.Call) -> None:
            self.log.record(node)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                self.log.record_assignment(target.target, node.value)

        def finish(self) -> None:
            written.extend(module.code_for_node(n) for n in self.log.gradient_writes_in(self.ctx.flow(module)))

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    assert written == ["w.grad", "w.grad.add_(1.0)"]
