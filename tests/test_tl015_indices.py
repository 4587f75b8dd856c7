"""TL015 and the (values, indices) reductions: the fixture's silent lines run under torch 2.13
and each flagged line raises M6, as the rule says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_tl009_escapes import M6
from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = Path(__file__).parent / "fixtures" / "TL015" / "indices.py"


def _statements() -> tuple[str, list[tuple[int, str]]]:
    lines = FIXTURE.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("predicted ="))
    return "\n".join(lines[:first]) + "\n", [(i + 1, lines[i]) for i in range(first, len(lines))]


def test_flagged_lines_raise_m6_and_the_others_run() -> None:
    prelude, statements = _statements()
    flagged = {f.line for f in lint_source(FIXTURE.read_text(), [rule_by_code("TL015")]).findings}
    namespace: dict = {}
    exec(compile(prelude, str(FIXTURE), "exec"), namespace)
    for number, statement in statements:
        if number in flagged:
            with pytest.raises(RuntimeError, match=re.escape(M6)):
                exec(statement, namespace)
        else:
            exec(statement, namespace)
    assert flagged == {number for number, statement in statements if "# expect: TL015" in statement}
