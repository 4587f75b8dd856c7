"""TL007 through what this file's functions and modules do, checked against torch 2.13: each
``# %% case`` section of the fixtures below is run as a whole program (the fixture's set-up,
then the section) and linted alone; a positive raises M4 where the fixture marks it, a
look-alike trains.

- helper_outputs.py: a helper, method, module or ``nn.Sequential`` of this file returns an output
  autograd saved (its last op ``F.relu``), changed in place by the caller;
- callee_writes.py: a function or module of this file changes its parameter in place, and the
  caller hands it a tensor autograd saved (reported at the change, in the callee);
- stored_by_forward.py: a tensor a module's forward stored on it (``encoder.z_mean``) carries
  that forward, so an optimizer step between two backwards is found through it."""

from __future__ import annotations

import pytest
from test_tl007_call_effects import fixture_cases
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

OUTPUTS = fixture_cases("helper_outputs.py")
WRITES = fixture_cases("callee_writes.py")
STORED = fixture_cases("stored_by_forward.py")


def test_every_section_is_a_case() -> None:
    assert (len(OUTPUTS), sum(raises for _, raises in OUTPUTS.values())) == (14, 5)
    assert (len(WRITES), sum(raises for _, raises in WRITES.values())) == (8, 3)
    assert (len(STORED), sum(raises for _, raises in STORED.values())) == (4, 1)


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_helper_outputs_agree_with_torch(name: str) -> None:
    _check(*OUTPUTS[name])


@pytest.mark.parametrize("name", sorted(WRITES))
def test_callee_writes_agree_with_torch(name: str) -> None:
    _check(*WRITES[name])


@pytest.mark.parametrize("name", sorted(STORED))
def test_stored_by_forward_agrees_with_torch(name: str) -> None:
    _check(*STORED[name])
