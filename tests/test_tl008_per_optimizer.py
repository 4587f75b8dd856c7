"""TL008's per-optimizer resets, run with real torch: in a loop stepping two optimizers over
different modules, a reset of one leaves the other's gradients accumulating (each step uses the
sum of all gradients so far), and the fix's ``zero_grad()`` makes every step use one gradient."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code

SETUP = """
import torch
import torch.nn as nn
torch.manual_seed(0)
X = torch.randn(8, 4)
netG = nn.Linear(4, 4)
netD = nn.Linear(4, 1)
optimizerG = torch.optim.SGD(netG.parameters(), lr=0.01)
optimizerD = torch.optim.SGD(netD.parameters(), lr=0.01)
"""

# The shapes of tests/fixtures/TL008/per_optimizer.py: (the stepped optimizer, the loop).
LOOPS = {
    "module reset of the other model": (
        "optimizerG",
        """
        for step in range(3):
            netD.zero_grad()
            d_loss = netD(netG(X).detach()).mean() - netD(X).mean()
            d_loss.backward()
            optimizerD.step()
            g_loss = -netD(netG(X)).mean()
            g_loss.backward()
            optimizerG.step()
        """,
    ),
    "the other optimizer's reset": (
        "optimizerG",
        """
        for step in range(3):
            optimizerD.zero_grad()
            loss = ((netD(netG(X)) - 1) ** 2).mean()
            loss.backward()
            optimizerD.step()
            optimizerG.step()
        """,
    ),
}


def _steps_and_fresh_gradients(loop: str, optimizer: str) -> tuple[list, list]:
    """Run ``SETUP + loop``; per ``optimizer.step()``: the gradient it used, and the sum of the
    gradients backward() delivered since the previous step (hooks: the code itself is unchanged)."""
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(SETUP, namespace)
    weight = namespace["netG"].weight
    delivered: list = []
    used: list = []
    fresh: list = []
    weight.register_hook(lambda grad: delivered.append(grad.clone()))

    def before_step(*_: object) -> None:
        used.append(weight.grad.clone())
        fresh.append(torch.stack(delivered).sum(0))
        delivered.clear()

    namespace[optimizer].register_step_pre_hook(before_step)
    exec(loop, namespace)
    return used, fresh


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(LOOPS))
def test_the_uncovered_optimizer_steps_with_accumulated_gradients(name: str) -> None:
    torch = pytest.importorskip("torch")
    optimizer, loop = LOOPS[name]
    loop = textwrap.dedent(loop)
    source = SETUP + loop
    findings = lint_source(source, [rule_by_code("TL008")]).findings
    assert [f.code for f in findings] == ["TL008"] and f"`{optimizer}.step()`" in findings[0].message

    used, fresh = _steps_and_fresh_gradients(loop, optimizer)
    assert torch.allclose(used[1], fresh[0] + fresh[1])  # the bug: step 2 uses both gradients
    assert not torch.allclose(used[1], fresh[1])

    fixed = fix_source(source, [rule_by_code("TL008")], unsafe=True).source
    assert f"{optimizer}.zero_grad()" in fixed and not lint_source(fixed, [rule_by_code("TL008")]).findings
    used, fresh = _steps_and_fresh_gradients(fixed[len(SETUP):], optimizer)
    assert all(torch.allclose(u, f) for u, f in zip(used, fresh, strict=True))
