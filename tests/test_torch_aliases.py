"""Names bound to torch objects themselves (``self.softmax = nn.functional.softmax``,
``loss_fn = F.cross_entropy``, ``act = F.relu``, ``nn = torch.nn``) are read through by
``Analyzer.qualify``: the fixtures' findings, checked against torch 2.13."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURES = Path(__file__).parent / "fixtures"
M4 = "one of the variables needed for gradient computation has been modified by an inplace operation"
# Cross-entropy of probabilities over 3 classes cannot fall below -log(e / (e + 2)): a softmax taken twice.
FLOOR = -math.log(math.e / (math.e + 2))


def _load(rule: str) -> tuple[str, dict]:
    path = FIXTURES / rule / "torch_aliases.py"
    source = path.read_text()
    namespace: dict = {"__name__": "fixture"}
    exec(compile(source, str(path), "exec"), namespace)
    return source, namespace


def _reported(source: str, code: str) -> set[int]:
    return {finding.line for finding in lint_source(source, [rule_by_code(code)]).findings}


def _expected(source: str, code: str) -> set[int]:
    return {n for n, line in enumerate(source.splitlines(), 1) if f"# expect: {code}" in line}


def test_softmax_through_aliases_stalls_at_the_floor() -> None:
    source, ns = _load("TL019")
    assert _reported(source, "TL019") == _expected(source, "TL019") and len(_expected(source, "TL019")) == 2
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    ns["train"](x, y), ns["train_log"](x, y), ns["train_functional"](x, y)  # they run
    net = ns["Classifier"]()
    assert torch.allclose(net(x).sum(1), torch.ones(64))  # the attribute is the softmax function
    net.fc.weight.data.mul_(100.0)  # perfectly confident probabilities
    probabilities = net(x)
    assert torch.nn.functional.cross_entropy(probabilities, probabilities.argmax(1)).item() >= FLOOR - 1e-6
    log_net = ns["LogClassifier"]()
    log_net.fc.weight.data.mul_(100.0)
    assert torch.nn.functional.nll_loss(log_net(x), log_net(x).argmax(1)).item() < 0.05  # the look-alike learns


def test_in_place_through_aliases_raises_m4() -> None:
    source, ns = _load("TL007")
    assert _reported(source, "TL007") == _expected(source, "TL007") and len(_expected(source, "TL007")) == 2
    x = torch.randn(8, 4)
    for name in ("in_place_function", "in_place_module"):
        with pytest.raises(RuntimeError, match=M4):
            ns[name](x)
    ns["fine"](x, True)
    ns["fine"](x, False)
