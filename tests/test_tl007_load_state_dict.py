"""TL007 on ``load_state_dict`` between a forward and the backward through it
(tests/fixtures/TL007/load_state_dict.py), checked against torch 2.13: each ``# %% case``
section is run as a whole program and linted alone; a positive raises M4 where the fixture
marks it (the load copies into the parameters in place and bumps their version), a look-alike
trains."""

from __future__ import annotations

import pytest
from test_tl007_call_effects import fixture_cases
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

CASES = fixture_cases("load_state_dict.py")


def test_every_section_is_a_case() -> None:
    assert (len(CASES), sum(raises for _, raises in CASES.values())) == (9, 3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_load_state_dict_agrees_with_torch(name: str) -> None:
    _check(*CASES[name])
