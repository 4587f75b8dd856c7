"""TL018 on NumPy round trips (tests/fixtures/TL018/numpy_round_trip.py), checked against torch 2.13:
each ``# %% case`` section runs as a whole program after the fixture's set-up and is linted alone.
A positive's `term` has no graph and the gradient of `loss` is that of `loss - term` (the term is
silently not trained), while `loss` itself has one; a negative's `term` keeps its graph."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")

_FIXTURE = Path(__file__).parent / "fixtures" / "TL018" / "numpy_round_trip.py"
_PRELUDE, *_SECTIONS = _FIXTURE.read_text().split("\n# %% case: ")
CASES = {section.split("\n", 1)[0]: _PRELUDE + "\n# case: " + section for section in _SECTIONS}


def _run(source: str) -> dict[str, object]:
    """The program, keeping the last graph for the gradients compared below (no step changes the weights)."""
    source = source.replace("loss.backward()", "loss.backward(retain_graph=True)").replace("optimizer.step()", "pass")
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, "<program>", "exec"), namespace)
    return namespace


def _marked_lines(source: str) -> set[int]:
    return {number for number, line in enumerate(source.splitlines(), 1) if "# expect: TL018:" in line}


def test_every_section_is_a_case() -> None:
    assert (len(CASES), sum(name.startswith("positive") for name in CASES)) == (6, 2)


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_round_trips_agree_with_torch(name: str) -> None:
    source = CASES[name]
    ns = _run(source)
    loss, term = ns["loss"], ns["term"]
    assert loss.requires_grad
    parameters = [*ns["embed"].parameters()]
    with_term = torch.autograd.grad(loss, parameters, retain_graph=True, allow_unused=True)
    if name.startswith("positive"):
        assert not term.requires_grad and term.grad_fn is None and term.item() != 0.0
        without = torch.autograd.grad(loss - term, parameters, allow_unused=True)
        assert all(torch.equal(a, b) for a, b in zip(with_term, without))  # the term adds no gradient
    else:
        assert term.requires_grad
    reported = {finding.line for finding in lint_source(source, [rule_by_code("TL018")]).findings}
    assert reported == _marked_lines(source)
