"""TL007 in a module class whose ``__call__`` replaces ``forward``
(tests/fixtures/TL007/call_instead_of_forward.py), checked against torch: each section is run as a
whole program (the set-up, then the section) and linted alone; the marked write is where torch's
M4 comes from, and the look-alikes run."""

from __future__ import annotations

import pytest
from test_tl007_call_effects import fixture_cases
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

CASES = fixture_cases("call_instead_of_forward.py")


def test_every_section_is_a_case() -> None:
    assert len(CASES) == 5
    assert sum(raises for _, raises in CASES.values()) == 2


@pytest.mark.parametrize("name", sorted(CASES))
def test_call_instead_of_forward_agrees_with_torch(name: str) -> None:
    _check(*CASES[name])
