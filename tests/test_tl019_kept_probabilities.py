"""TL019 through ops that keep probabilities (tests/fixtures/TL019/kept_probabilities.py) and
through elements of a module's tuple output (unpacked_outputs.py), through a model built from
one of two classes (either_class.py), checked
against torch: each ``# %% case:`` section is run as a whole program (the fixture's set-up, then
the section) and linted alone.  The scores are perfectly confident: cross-entropy of what a
positive section feeds it stays at the floor of a softmax taken twice (-log(e/(e+2)) = 0.55 for
three classes), where cross-entropy of the scores themselves is near 0."""

from __future__ import annotations

import math

import pytest

from conftest import fixture_sections, marked_lines
from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

CASES = {
    **fixture_sections("TL019", "kept_probabilities.py"),
    **{f"{name} (unpacked)": source for name, source in fixture_sections("TL019", "unpacked_outputs.py").items()},
    **{f"{name} (either class)": source for name, source in fixture_sections("TL019", "either_class.py").items()},
}
FLOOR = -math.log(math.e / (math.e + 2))


def _loss(source: str) -> float:
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(source, "<program>", "exec"), namespace)
    return namespace["loss"].item()  # type: ignore[attr-defined]


def test_every_section_is_a_case() -> None:
    assert len(CASES) == 17
    assert sum(name.startswith("positive") for name in CASES) == 10


@pytest.mark.parametrize("name", sorted(CASES))
def test_kept_probabilities_agree_with_torch(name: str) -> None:
    source = CASES[name]
    marked = marked_lines(source, "TL019")
    assert {f.line for f in lint_source(source, [rule_by_code("TL019")]).findings} == marked
    assert bool(marked) is name.startswith("positive")
    loss = _loss(source)
    if name.startswith("positive"):
        assert loss == pytest.approx(FLOOR, abs=1e-3), "a softmax taken twice"
    elif "scores themselves" in name:
        assert loss < 1e-6
