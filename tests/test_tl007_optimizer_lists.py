"""TL007 on optimizers and modules kept in lists (tests/fixtures/TL007/optimizer_lists.py), checked
against torch 2.13: each ``# %% case`` section is run as a whole program and linted alone; a
positive raises M4 where the fixture marks it (a list's optimizer steps weights a forward of a
listed module saved for a later backward), a look-alike trains."""

from __future__ import annotations

import pytest
from test_tl007_call_effects import fixture_cases
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

CASES = fixture_cases("optimizer_lists.py")


def test_every_section_is_a_case() -> None:
    assert (len(CASES), sum(raises for _, raises in CASES.values())) == (5, 2)


@pytest.mark.parametrize("name", sorted(CASES))
def test_optimizer_lists_agrees_with_torch(name: str) -> None:
    _check(*CASES[name])
