"""TL009 on tuples of losses (tests/fixtures/TL009/loss_parts.py), checked against torch 2.13: the
reported histories keep each iteration's graph in a part, the look-alikes keep none (or are
backpropagated)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = Path(__file__).parent / "fixtures" / "TL009" / "loss_parts.py"


def test_reported_tuples_keep_graphs_and_look_alikes_do_not() -> None:
    source = FIXTURE.read_text()
    findings = lint_source(source, [rule_by_code("TL009")]).findings
    expected = {n for n, line in enumerate(source.splitlines(), 1) if "# expect: TL009" in line}
    assert {f.line for f in findings} == expected and len(expected) == 2
    assert all(f.fix is None and "holds losses" in f.message for f in findings)  # no one-edit fix of a tuple
    namespace: dict = {}
    exec(compile(source, str(FIXTURE), "exec"), namespace)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    loader = [(torch.randn(8, 3), torch.randn(8, 1))] * 3
    history, parts_kept, numbers = namespace["train_gan_like"](model, loader, torch.optim.SGD(model.parameters(), lr=0.05))
    assert all(part.grad_fn is not None for pair in history for part in pair)
    assert all(pair[0].grad_fn is not None for pair in parts_kept)
    assert all(isinstance(part, float) for pair in numbers for part in pair)
    cell, head = torch.nn.RNNCell(3, 4), torch.nn.Linear(4, 1)
    loss = namespace["unroll"](cell, head, torch.randn(5, 2, 3), torch.randn(5, 2, 1))
    assert head.weight.grad is not None and loss.grad_fn is not None  # the pairs were backpropagated


def test_a_tuple_that_holds_its_own_previous_value_is_followed_one_level() -> None:
    # `t = (t, loss)`: the name's literal names the name again (seen in a tokenizer: recursion).
    source = (
        "import torch\nnet = torch.nn.Linear(2, 1)\nhist = []\nt = ()\n"
        "for x in [torch.randn(2)] * 3:\n    loss = net(x).sum()\n    t = (t, loss)\n    hist.append(t)\n"
    )
    (finding,) = lint_source(source, [rule_by_code("TL009")]).findings
    assert finding.line == 8
