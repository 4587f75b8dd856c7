"""Unit tests of the value facts behind TL014/TL015/TL018/TL019 (``analysis/facts.py``):
softmax outputs, graph-cut copies, lists built by ``append``, function returns, frozen parameters."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import libcst as cst

from torchlint.analysis import Analyzer, Kind, Value
from torchlint.rule import Rule, RuleOptions


def probe(source: str, question: Callable[[Analyzer, Value], object] = lambda ctx, v: v) -> list[object]:
    """``question(ctx, value)`` for every ``reveal(expr)``, asked once the whole file is analysed."""
    module = cst.parse_module(source)
    analyzer = Analyzer(module, module.code)
    seen: list[Value] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "reveal":
                seen.append(self.ctx.value_of(node.args[0].value))

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    return [question(analyzer, value) for value in seen]


PRELUDE = """import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
w = torch.zeros(3, requires_grad=True)
x = torch.randn(4, 3)
lin = nn.Linear(3, 3)
"""


def softmax(ctx: Analyzer, value: Value) -> bool:
    return ctx.is_softmax_output(value)


def test_softmax_spellings_are_softmax_outputs() -> None:
    source = PRELUDE + textwrap.dedent("""
    reveal(F.softmax(lin(x), dim=1))
    reveal(torch.softmax(x @ w, 0))
    reveal(lin(x).softmax(1))
    reveal(make_logits().softmax(-1))
    reveal(nn.Softmax(dim=1)(lin(x)))
    reveal(nn.Sequential(nn.Linear(3, 3), nn.Softmax(dim=1))(x))
    reveal(F.log_softmax(lin(x), dim=1))
    reveal(torch.log(F.softmax(lin(x), dim=1)))
    reveal(F.softmax(lin(x), dim=1).argmax(1))
    reveal(nn.Sequential(nn.Softmax(dim=1), nn.Linear(3, 3))(x))
    """)
    assert probe(source, softmax) == [True] * 6 + [False] * 4


def test_module_class_output_is_softmax_when_every_forward_return_is() -> None:
    source = PRELUDE + textwrap.dedent("""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.sm = nn.Softmax(dim=1)
        def forward(self, x):
            h = self.fc(x)
            return self.sm(h)
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
        def forward(self, x):
            if self.training:
                return self.fc(x)
            return F.softmax(self.fc(x), dim=1)
    reveal(Net()(x))
    reveal(Mixed()(x))
    """)
    # Both forwards are analysed after the module-level calls: the facts are complete afterwards.
    assert probe(source, softmax) == [True, False]


def test_torch_tensor_copy_of_a_grad_tensor_has_no_graph() -> None:
    source = PRELUDE + textwrap.dedent("""
    reveal(torch.tensor(x @ w))
    reveal(torch.tensor((x @ w).sum().item()))
    reveal(torch.tensor([(x @ w).sum(), (x @ w).mean()]))
    reveal(torch.from_numpy((x @ w).detach().numpy()))
    reveal((x @ w).detach())
    with torch.no_grad():
        reveal(lin(x).sum())
    reveal(torch.tensor([1.0, 2.0]))
    reveal(torch.as_tensor(x @ w))
    reveal(torch.Tensor(x @ w))
    reveal(torch.tensor(x @ w, requires_grad=True))
    reveal((x @ w).sum())
    """)
    assert probe(source, lambda ctx, v: v.has_no_graph) == [True] * 6 + [False] * 5
    kinds = probe(source, lambda ctx, v: v.kind)
    assert kinds[7] is Kind.NONLEAF  # as_tensor(t) is t: it keeps the graph
    assert kinds[9] is Kind.LEAF  # a new leaf, cut from x @ w


def test_lists_built_by_append_carry_their_elements() -> None:
    source = PRELUDE + textwrap.dedent("""
    losses = []
    numbers = []
    for step in range(3):
        loss = (x @ w).sum()
        losses.append(loss)
        numbers.append(loss.item())
    reveal(losses)
    reveal(numbers)
    reveal([x @ w, x])
    reveal([])
    maybe = []
    if cond:
        maybe.append(x @ w)
    reveal(maybe)
    """)
    assert probe(source, lambda ctx, v: v.carries_grad) == [True, False, False, False, True]


def test_plain_tensor_accumulating_unknown_values_is_unknown() -> None:
    source = PRELUDE + textwrap.dedent("""
    total = torch.zeros(1)
    total += loss_of(x)
    reveal(total)
    plain = torch.zeros(1)
    plain += x
    reveal(plain)
    flag = torch.zeros(3)
    flag.requires_grad_(train)
    reveal(flag)
    """)
    assert probe(source, lambda ctx, v: v.kind) == [Kind.UNKNOWN, Kind.PLAIN, Kind.UNKNOWN]


def test_torch_class_and_function_returns() -> None:
    source = PRELUDE + textwrap.dedent("""
    crit = nn.CrossEntropyLoss()
    reveal(crit)
    reveal(crit.to("cpu"))
    reveal(w)
    """)
    assert probe(source, lambda ctx, v: ctx.torch_class(v)) == ["torch.nn.CrossEntropyLoss"] * 2 + [None]


def test_parameters_may_be_frozen() -> None:
    frozen = probe(PRELUDE + "for p in lin.parameters():\n    p.requires_grad = False\nreveal(w)\n",
                   lambda ctx, v: ctx.parameters_may_be_frozen)
    module = probe(PRELUDE + "lin.requires_grad_(False)\nreveal(w)\n", lambda ctx, v: ctx.parameters_may_be_frozen)
    trainable = probe(PRELUDE + "w.requires_grad_()\nx.requires_grad = True\nreveal(w)\n",
                      lambda ctx, v: ctx.parameters_may_be_frozen)
    assert (frozen, module, trainable) == ([True], [True], [False])


def test_a_branch_guarded_by_requires_grad_asks_the_run() -> None:
    source = PRELUDE + textwrap.dedent("""
    with torch.no_grad():
        loss = (x @ w).sum()
    if loss.requires_grad:
        reveal(loss)
    else:
        reveal(loss)
    if loss.grad_fn is not None and ready:
        reveal(loss)
    reveal(loss)
    """)
    assert probe(source, lambda ctx, v: v.has_no_graph) == [False, True, False, False]


def test_tensor_metadata_is_a_number_not_a_tensor() -> None:
    source = PRELUDE + textwrap.dedent("""
    params = list(lin.parameters())
    reveal(params[0].size())
    reveal((x @ w).dim())
    reveal(w.numel())
    reveal(np.array(params[0].size()))
    """)
    assert probe(source, lambda ctx, v: v.kind) == [Kind.NUMBER] * 3 + [Kind.UNKNOWN]


def conditions(source: str) -> list[object]:
    """``requires_grad_when_run`` asked at each ``reveal(expr)``, its condition evaluated at the end."""
    module = cst.parse_module(source)
    analyzer = Analyzer(module, module.code)
    asked: list[object] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "reveal":
                asked.append(self.ctx.requires_grad_when_run(self.ctx.value_of(node.args[0].value)))

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    return [None if condition is None else condition() for condition in asked]


def test_requires_grad_when_run_follows_grad_mode_and_frozen_parameters() -> None:
    source = PRELUDE + textwrap.dedent("""
    reveal(x @ w)
    reveal([lin(x)])
    with torch.no_grad():
        reveal(w)
    def evaluate():
        reveal(w)
    with torch.no_grad():
        evaluate()
    """)
    assert conditions(source) == [True, True, None, False]
    frozen = PRELUDE + "lin.requires_grad_(False)\nreveal([lin(x)])\nreveal(x @ w)\n"
    assert conditions(frozen) == [False, True]
