"""TL014 on losses computed only from tensors that do not require grad, run under torch 2.13:
the reported functions raise M3 at backward(), the look-alikes train (the weight moves)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import top_level_functions

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = Path(__file__).parent / "fixtures" / "TL014" / "forgotten_requires_grad.py"
M3 = "element 0 of tensors does not require grad and does not have a grad_fn"


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")  # (the penalty look-alike)
def test_reported_functions_raise_m3_and_the_look_alikes_train() -> None:
    source = FIXTURE.read_text()
    lines = {f.line for f in lint_source(source, [rule_by_code("TL014")]).findings}
    flagged = {name for name, span in top_level_functions(source).items() if lines & set(span)}
    assert flagged == {"train_inline", "train_with_helpers"}
    namespace: dict = {}
    exec(compile(source, str(FIXTURE), "exec"), namespace)
    for name in flagged:
        with pytest.raises(RuntimeError, match=M3):
            namespace[name](3)
    for name, args in (("train_leaf", ()), ("train_made_leaf", ()), ("train_given", (torch.zeros(1, requires_grad=True),))):
        assert float(namespace[name](3, *args).detach().sum()) != 0.0, name  # the weight moved
    namespace["train_maybe"](3, True)
    namespace["train_maybe"](3, False)
    assert float(namespace["second_derivative"]()) == 18.0  # d2(x**3)/dx2 at 3
    strategy, w = namespace["Strategy"](), torch.tensor(1.0, requires_grad=True)
    strategy.criterion(w)
    strategy.backward()  # (the loss added in another method carries the graph)
    assert w.grad is not None
    assert float(namespace["gradient_penalty"]()) == 288.0  # d/dw (3w²)² = 36w³ at 2
