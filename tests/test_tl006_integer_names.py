"""TL006 on integral data named, not written (``n = 3; torch.arange(1, n + 1, requires_grad=True)``),
checked with torch 2.13: every reported line raises, every look-alike runs, the fixed file runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = Path(__file__).parent / "fixtures" / "TL006" / "integer_names.py"
MESSAGE = "Only Tensors of floating point and complex dtype can require gradients"


def _assignment_lines(source: str) -> list[int]:
    lines = source.splitlines()
    return [number for number, line in enumerate(lines, 1) if "requires_grad=True" in line and "return" not in line]


def _runs(source: str, line: int) -> bool:
    """Run the fixture's set-up, then the statement on ``line``."""
    lines = source.splitlines()
    setup = "\n".join(lines[:10])  # the imports and the names the cases use
    namespace: dict = {}
    exec(compile(setup, "<setup>", "exec"), namespace)
    try:
        exec(compile(lines[line - 1], "<line>", "exec"), namespace)
    except RuntimeError as error:
        assert MESSAGE in str(error)
        return False
    return True


def test_reported_lines_raise_and_look_alikes_run() -> None:
    source = FIXTURE.read_text()
    reported = {finding.line for finding in lint_source(source, [rule_by_code("TL006")]).findings}
    assert reported == {13, 15, 17, 19}
    for line in _assignment_lines(source):
        assert _runs(source, line) == (line not in reported), line


def test_fixed_file_runs_and_a_second_fix_changes_nothing() -> None:
    source = FIXTURE.read_text()
    rules = [rule_by_code("TL006")]
    fixed = fix_source(source, rules).source
    assert "torch.arange(1., n + 1, requires_grad=True)" in fixed
    assert "torch.arange(count, dtype=torch.float32, requires_grad=True)" in fixed
    namespace: dict = {}
    exec(compile(fixed, str(FIXTURE), "exec"), namespace)
    assert namespace["x"].requires_grad and namespace["z"].dtype == torch.float32
    assert not lint_source(fixed, rules).findings
    assert fix_source(fixed, rules).source == fixed
