"""TL005 in methods known only from later call sites (tests/fixtures/TL005/call_sites.py, see
``analysis/call_sites.py``), checked against torch: each ``# %% case:`` section is run as a whole
program (the fixture's set-up, then the section) and linted alone.  A positive section whose
flagged line turns requires_grad off raises torch's leaf-flag error; one that turns it on runs and
asserts the tensor stays a non-leaf without ``.grad`` (the call did nothing); a negative one runs."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_FIXTURE = (Path(__file__).parent / "fixtures" / "TL005" / "call_sites.py").read_text()
_PRELUDE, *_SECTIONS = _FIXTURE.split("\n# %% case: ")
CASES = {section.split("\n", 1)[0]: _PRELUDE + "\n# case: " + section for section in _SECTIONS}
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
    marked = [line for line in source.splitlines() if "# expect: TL005:" in line]
    reported = {f.line for f in lint_source(source, [rule_by_code("TL005")]).findings}
    assert reported == {n for n, line in enumerate(source.splitlines(), 1) if "# expect: TL005:" in line}
    assert bool(marked) is name.startswith("positive")
    turns_off = any("False" in line for line in marked)
    assert _raises_leaf_flag_error(source) is turns_off
