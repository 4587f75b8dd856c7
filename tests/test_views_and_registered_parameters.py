"""TL002 on views of parameters and TL001 on registered module parameters, checked against torch:
each ``# %% case`` section of tests/fixtures/TL002/views.py and
tests/fixtures/TL001/registered_parameters.py runs as a program (the fixture's set-up, then the
section).  A positive section raises the rule's error and the rule reports exactly its
``# expect:`` lines; with the fixes applied (both styles) it runs and the finding is gone; a
negative section runs and is not reported."""

from __future__ import annotations

import warnings

import pytest
from conftest import fixture_sections, marked_lines

from torchlint.engine import fix_source, lint_source
from torchlint.rule import FixStyle, RuleOptions
from torchlint.rules import rule_by_code

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

# The error each rule's positive sections raise (measured with torch 2.13.0+cpu).
_ERRORS = {
    "TL002": (RuntimeError, "a view of a leaf Variable that requires grad is being used in an in-place operation"),
    "TL001": (TypeError, "cannot assign 'torch.FloatTensor' as parameter"),
}


def _sections(code: str, fixture: str) -> dict[str, tuple[str, str]]:
    return {f"{code}: {name}": (code, source) for name, source in fixture_sections(code, fixture).items()}


CASES = {**_sections("TL002", "views.py"), **_sections("TL001", "registered_parameters.py")}


def _error_of(source: str) -> BaseException | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(compile(source, "<program>", "exec"), {"__name__": "__program__"})
        except Exception as error:  # noqa: BLE001 - the error is the outcome
            return error
    return None


def _reported(source: str, code: str) -> set[int]:
    return {finding.line for finding in lint_source(source, [rule_by_code(code)]).findings}


def test_every_section_is_a_case() -> None:
    assert sum(name.startswith("TL002") for name in CASES) == 9
    assert sum(name.startswith("TL001") for name in CASES) == 6


@pytest.mark.parametrize("name", sorted(CASES))
def test_findings_agree_with_torch(name: str) -> None:
    code, source = CASES[name]
    positive = name.split(": ", 1)[1].startswith("positive")
    error = _error_of(source)
    if positive:
        kind, message = _ERRORS[code]
        assert isinstance(error, kind) and message in str(error), error
    else:
        assert error is None, error
    assert bool(marked_lines(source, code)) is positive
    assert _reported(source, code) == marked_lines(source, code)


@pytest.mark.parametrize("style", [FixStyle.DATA, FixStyle.NO_GRAD])
@pytest.mark.parametrize("name", sorted(n for n in CASES if ": positive" in n))
def test_fixed_positives_run(name: str, style: FixStyle) -> None:
    code, source = CASES[name]
    rules = [rule_by_code(code)]
    fixed = fix_source(source, rules, RuleOptions(fix_style=style)).source
    if not lint_source(source, rules).findings[0].fix:
        pytest.skip("reported without a fix")
    assert _error_of(fixed) is None
    assert not _reported(fixed, code)
