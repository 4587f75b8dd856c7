"""TL007 across calls of this file's functions (analysis/effects.py), checked against torch:
each ``# %% case`` section of tests/fixtures/TL007/call_effects.py is run as a whole program
(the fixture's set-up, then the section) and linted alone; the marked step is where torch's
M4 comes from, and the look-alikes train."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tl007_modules_and_steps import _check

pytest.importorskip("torch")

_FIXTURES = Path(__file__).parent / "fixtures" / "TL007"


def fixture_cases(name: str) -> dict[str, tuple[str, bool]]:
    """The ``# %% case: <name>`` sections of tests/fixtures/TL007/``name``: section name -> (the
    set-up and the section as one program with ``# M4`` on the expected lines, whether it is a
    positive)."""
    prelude, *sections = (_FIXTURES / name).read_text().split("\n# %% case: ")
    cases = {}
    for section in sections:
        lines = [line.split("  # expect: TL007:")[0] + "  # M4" if "# expect: TL007:" in line else line
                 for line in section.splitlines()]
        cases[section.split("\n", 1)[0]] = (prelude + "\n# case: " + "\n".join(lines) + "\n",
                                            section.startswith("positive"))
    assert len(cases) == len(sections), "two sections of one name"
    return cases


CASES = fixture_cases("call_effects.py")


def test_every_section_is_a_case() -> None:
    assert len(CASES) == 7
    assert sum(raises for _, raises in CASES.values()) == 3


@pytest.mark.parametrize("name", sorted(CASES))
def test_call_effects_agree_with_torch(name: str) -> None:
    _check(*CASES[name])
