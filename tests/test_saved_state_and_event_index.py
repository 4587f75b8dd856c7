"""The model parts TL007 and TL008 query: ``analysis/saved_state.py`` (what autograd saved, and
what a call of the file's own function does to it, summarised once per callee and bounded) and
``analysis/event_index.py`` (the backward() calls of each loop and function)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import Analyzer
from torchlint.analysis import saved_state
from torchlint.analysis.events import EventKind
from torchlint.engine import lint_source
from torchlint.rule import Rule, RuleOptions
from torchlint.rules import rule_by_code

NESTED_HELPERS = """\
import torch

def inner(x):
    return torch.sigmoid(x)

def outer_a(x):
    return inner(x)

def outer_b(x):
    h = inner(x)
    return h

def train(w):
    a = outer_a(w * 2)
    a.mul_(2)
    b = outer_b(w * 2)
    b.mul_(2)
    (a + b).sum().backward()
"""

RECURSIVE_HELPER = """\
import torch

def f(x):
    if x.sum() > 0:
        return f(x)
    return torch.sigmoid(x)

def train(w):
    y = f(w * 2)
    y.mul_(2)
    y.sum().backward()
"""


def _summaries(source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, int]], list[int]]:
    """(callee, depth) of every summary walk TL007's model makes, and the lines TL007 reports."""
    walks: list[tuple[str, int]] = []
    summarise = saved_state.SavedTensors.summarise

    def counting(self: saved_state.SavedTensors, info, passed) -> None:  # type: ignore[no-untyped-def]
        walks.append((info.name, self.ctx.summary_depth))
        summarise(self, info, passed)

    monkeypatch.setattr(saved_state.SavedTensors, "summarise", counting)
    findings = lint_source(source, [rule_by_code("TL007")]).findings
    return walks, [finding.line for finding in findings]


def test_a_helper_two_helpers_call_is_summarised_once(monkeypatch: pytest.MonkeyPatch) -> None:
    walks, _ = _summaries(NESTED_HELPERS, monkeypatch)
    assert sorted(walks) == [("inner", 2), ("outer_a", 1), ("outer_b", 1)]


def test_a_recursive_helper_is_summarised_to_the_depth_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    walks, lines = _summaries(RECURSIVE_HELPER, monkeypatch)
    assert walks == [("f", depth) for depth in range(1, saved_state.MAX_SUMMARY_DEPTH + 1)]
    assert lines == []  # one return is the recursive call's: what it gives is not known


INDEXED = """\
import torch

def fit(model, loader, opt, accelerator):
    for epoch in range(3):
        for x in loader:
            loss = model(x).sum()
            accelerator.backward(loss)
            opt.step()
    for x in loader:
        opt.step()

def once(model, x):
    model(x).sum().backward()

class Lit:
    def training_step(self, batch):
        for x in batch:
            self.manual_backward(self(x).sum())
"""


def _index(source: str) -> tuple[list[str], list[str], list[str], list[tuple[str, str]]]:
    """(the first lines of the loops calling backward; the functions calling backward outside
    their loops; every indexed backward; (event_at, autograd_event) kinds of each visited call)."""
    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    loops: list[cst.For] = []
    functions: dict[str, object] = {}
    kinds: list[tuple[str, str]] = []

    class Asker(Rule):
        code, name, summary = "TL999", "asker", "asks the index"

        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            self.index = self.ctx.track_autograd_events()

        def visit_For(self, node: cst.For) -> None:
            loops.append(node)

        def visit_Call(self, node: cst.Call) -> None:
            if self.ctx.function is not None:
                functions[self.ctx.function.name] = self.ctx.function
            seen, fresh = self.index.event_at(self.ctx, node), self.ctx.autograd_event(node)
            kinds.append((seen.kind.value if seen else "-", fresh.kind.value if fresh else "-"))

    asker = Asker(analyzer, [], RuleOptions())
    analyzer.attach([asker])
    analyzer.run()
    index = asker.index
    line = module.code_for_node
    flagged = [line(loop).splitlines()[0].strip() for loop in loops if index.loop_calls_backward(loop)]
    outside = sorted(name for name, info in functions.items() if index.calls_backward_outside_loops(info))
    return flagged, outside, [line(call) for call in index.backwards], kinds


def test_the_index_knows_which_loops_and_functions_call_backward_in_any_spelling() -> None:
    flagged, outside, backwards, kinds = _index(INDEXED)
    assert flagged == ["for epoch in range(3):", "for x in loader:", "for x in batch:"]
    assert outside == ["once"]
    assert backwards == ["accelerator.backward(loss)", "model(x).sum().backward()",
                         "self.manual_backward(self(x).sum())"]
    assert all(seen == fresh for seen, fresh in kinds)
    assert kinds.count((EventKind.BACKWARD.value, EventKind.BACKWARD.value)) == 3
