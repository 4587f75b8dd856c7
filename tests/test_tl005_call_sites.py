"""TL005 in methods known only from later call sites (tests/fixtures/TL005/call_sites.py, see
``analysis/call_sites.py``), checked against torch: each ``# %% case:`` section is run as a whole
program (the fixture's set-up, then the section) and linted alone.  A positive section whose
flagged line turns requires_grad off raises torch's leaf-flag error; one that turns it on runs and
asserts the tensor stays a non-leaf without ``.grad`` (the call did nothing); a negative one runs."""

from __future__ import annotations

import warnings

import pytest

from conftest import fixture_sections, marked_lines
from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

CASES = fixture_sections("TL005", "call_sites.py")
LEAF_FLAG_ERROR = "you can only change requires_grad flags of leaf variables"


def _raises_leaf_flag_error(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reading the non-leaf's .grad (the section's check)
            exec(compile(source, "<program>", "exec"), {"__name__": "__main__"})
    except RuntimeError as error:
        assert LEAF_FLAG_ERROR in str(error)
        return True
    return False


def test_every_section_is_a_case() -> None:
    assert len(CASES) == 6
    assert sum(name.startswith("positive") for name in CASES) == 3


@pytest.mark.parametrize("name", sorted(CASES))
def test_call_site_values_agree_with_torch(name: str) -> None:
    source = CASES[name]
    marked = marked_lines(source, "TL005")
    assert {f.line for f in lint_source(source, [rule_by_code("TL005")]).findings} == marked
    assert bool(marked) is name.startswith("positive")
    lines = source.splitlines()
    turns_off = any("False" in lines[number - 1] for number in marked)
    assert _raises_leaf_flag_error(source) is turns_off
