"""TL003 for moves in a statement of their own, leaves on some paths and parameter groups
(tests/fixtures/TL003/moves_and_groups.py), checked against torch: each ``# %% case:`` section is
run as a whole program (the fixture's imports, then the section) and linted alone.  A positive
section fails as the rule says (an optimizer rejects the non-leaf, or a ``.grad`` read finds None);
a negative one runs."""

from __future__ import annotations

import warnings

import pytest

from conftest import fixture_sections, marked_lines
from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

CASES = fixture_sections("TL003", "moves_and_groups.py")
NON_LEAF = "can't optimize a non-leaf Tensor"
GRAD_NONE = "'NoneType' object has no attribute"


def _failure(source: str) -> str | None:
    """What running ``source`` raised (one of the two failures TL003 predicts), None if it ran."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the non-leaf .grad warning
            exec(compile(source, "<program>", "exec"), {"__name__": "__main__"})
    except ValueError as error:
        assert NON_LEAF in str(error)
        return NON_LEAF
    except AttributeError as error:
        assert GRAD_NONE in str(error)
        return GRAD_NONE
    return None


def test_every_section_is_a_case() -> None:
    assert len(CASES) == 9
    assert sum(name.startswith("positive") for name in CASES) == 4


@pytest.mark.parametrize("name", sorted(CASES))
def test_moves_and_groups_agree_with_torch(name: str) -> None:
    source = CASES[name]
    marked = marked_lines(source, "TL003")
    assert {f.line for f in lint_source(source, [rule_by_code("TL003")]).findings} == marked
    assert (_failure(source) is not None) is name.startswith("positive")
    assert bool(marked) is name.startswith("positive")
