"""TL007 on activations looked up in a dict literal (tests/fixtures/TL007/activation_tables.py),
checked against torch 2.13: each ``# %% case`` section is run as a whole program and linted
alone; a positive raises M4 ("modified by an inplace operation") where the fixture marks it,
a look-alike trains."""

from __future__ import annotations

import pytest
from test_tl007_call_effects import fixture_cases
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

CASES = fixture_cases("activation_tables.py")


def test_every_section_is_a_case() -> None:
    assert (len(CASES), sum(raises for _, raises in CASES.values())) == (6, 3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_activation_tables_agree_with_torch(name: str) -> None:
    _check(*CASES[name])
