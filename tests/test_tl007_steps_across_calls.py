"""TL007 steps whose loss, optimizer or modules come from another function of this file,
checked against torch: each ``# %% case`` section of tests/fixtures/TL007/steps_across_calls.py
is run as a whole program (the fixture's set-up, then the section) and linted alone; the marked
step is where torch's M4 comes from, and the look-alikes train.  A ``# run:`` line is code that
only the run executes: the caller of a method no code of the linted file calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tl007_modules_and_steps import _marked_lines, _reported_lines, _run

pytest.importorskip("torch")

_FIXTURE = (Path(__file__).parent / "fixtures" / "TL007" / "steps_across_calls.py").read_text()
_PRELUDE, *_SECTIONS = _FIXTURE.split("\n# %% case: ")


def _program(section: str) -> tuple[str, bool]:
    lines = [line.split("  # expect: TL007:")[0] + "  # M4" if "# expect: TL007:" in line else line
             for line in section.splitlines()]
    return _PRELUDE + "\n# case: " + "\n".join(lines) + "\n", section.startswith("positive")


def _check(source: str, raises: bool) -> None:
    run = "\n".join(line.removeprefix("# run: ") for line in source.splitlines())
    assert _run(run) is raises, "the program's label disagrees with torch"
    assert bool(_marked_lines(source)) is raises
    assert _reported_lines(source) == _marked_lines(source)


CASES = {section.split("\n", 1)[0]: _program(section) for section in _SECTIONS}


def test_every_section_is_a_case() -> None:
    assert len(CASES) == len(_SECTIONS) == 17
    assert sum(raises for _, raises in CASES.values()) == 7


@pytest.mark.parametrize("name", sorted(CASES))
def test_steps_across_calls_agree_with_torch(name: str) -> None:
    _check(*CASES[name])
