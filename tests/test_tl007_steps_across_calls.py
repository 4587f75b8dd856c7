"""TL007 steps whose loss, optimizer or modules come from another function of this file,
checked against torch: each ``# %% case`` section of tests/fixtures/TL007/steps_across_calls.py
is run as a whole program (the fixture's set-up, then the section) and linted alone; the marked
step is where torch's M4 comes from, and the look-alikes train.  A ``# run:`` line is code that
only the run executes: the caller of a method no code of the linted file calls."""

from __future__ import annotations

import pytest
from test_tl007_call_effects import fixture_cases
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

CASES = fixture_cases("steps_across_calls.py")


def test_every_section_is_a_case() -> None:
    assert len(CASES) == 17
    assert sum(raises for _, raises in CASES.values()) == 7


@pytest.mark.parametrize("name", sorted(CASES))
def test_steps_across_calls_agree_with_torch(name: str) -> None:
    _check(*CASES[name])
