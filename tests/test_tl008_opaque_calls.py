"""TL008 next to calls into code it cannot see (tests/fixtures/TL008/opaque_calls.py), checked
against torch: each ``# %% case:`` section is run as a whole program (the fixture's set-up, then
the section) with the imported helpers implemented here, and linted alone.  In a positive section
the gradient each ``step()`` uses is the sum of every iteration's so far: with SGD, the second
step's gradient is the first step's plus the second's of the program torchlint fixed (both
programs make the same first step, so the second gradients are taken at the same weights)."""

from __future__ import annotations

import sys
import types

import pytest

from conftest import fixture_sections, marked_lines
from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

CASES = fixture_sections("TL008", "opaque_calls.py")
RULE = rule_by_code("TL008")


def _elsewhere() -> types.ModuleType:
    """What the fixture imports from code torchlint does not see."""
    module = types.ModuleType("elsewhere")

    def clip_gradient(optimizer, limit):
        for group in optimizer.param_groups:
            for p in group["params"]:
                p.grad.data.clamp_(-limit, limit)

    def forward_and_zero(model, optimizer, x, y):
        optimizer.zero_grad()
        return torch.nn.functional.mse_loss(model(x), y)

    module.clip_gradient = clip_gradient
    module.predict = lambda model, x: model(x)
    module.log_norms = lambda model: [p.grad.norm().item() for p in model.parameters()]
    module.refresh = lambda *models: [model.zero_grad() for model in models]
    module.prepare_step = lambda model, x: (model.zero_grad(), model(x).mean().item())[1]
    module.forward_and_zero = forward_and_zero
    return module


def _step_gradients(source: str, monkeypatch: pytest.MonkeyPatch) -> list[list[torch.Tensor]]:
    """Run ``source``; the gradients of the parameters at each ``SGD.step()``."""
    seen: list[list[torch.Tensor]] = []

    class RecordingSGD(torch.optim.SGD):
        def step(self, closure=None):
            seen.append([p.grad.clone() for group in self.param_groups for p in group["params"]])
            return super().step(closure)

    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "elsewhere", _elsewhere())
        patch.setattr(torch.optim, "SGD", RecordingSGD)
        exec(compile(source, "<program>", "exec"), {"__name__": "__main__"})
    return seen


def test_every_section_is_a_case() -> None:
    assert len(CASES) == 7
    assert sum(name.startswith("positive") for name in CASES) == 3


@pytest.mark.parametrize("name", sorted(CASES))
def test_opaque_calls_agree_with_torch(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = CASES[name]
    assert {f.line for f in lint_source(source, [RULE]).findings} == marked_lines(source, "TL008")
    gradients = _step_gradients(source, monkeypatch)
    assert len(gradients) >= 3
    if not name.startswith("positive"):
        return
    fixed = fix_source(source, [RULE], unsafe=True)
    assert not fixed.remaining, "torchlint fixed the loop"
    clean = _step_gradients(fixed.source, monkeypatch)
    for bad, first, second in zip(gradients[1], clean[0], clean[1]):
        assert torch.allclose(bad, first + second), "the second step uses the sum of both gradients"
        assert not torch.allclose(bad, second)
