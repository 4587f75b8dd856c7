"""Every fixture file is linted with its rule; findings must match the
``# expect: CODE:col`` annotations exactly (unannotated lines stay silent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, expected_findings
from torchlint.engine import lint_source
from torchlint.noqa import NoqaAudit
from torchlint.rules import all_rules, rule_by_code

FIXTURE_FILES = sorted(FIXTURES.glob("TL*/*.py"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_findings_match_annotations(path: Path) -> None:
    code = path.parent.name
    rule = rule_by_code(code)
    if rule is None:
        pytest.skip(f"{code} is not implemented")
    source = path.read_text(encoding="utf-8")
    expected = {item for item in expected_findings(source) if item[2] == code}
    found = {(f.line, f.col, f.code) for f in lint_source(source, [rule]).findings}
    # An annotation without a column accepts any column on that line.
    loose = {(line, code_) for line, col, code_ in expected if col is None}
    found_cmp = {(l, None if (l, c) in loose else col, c) for l, col, c in found}
    missing = sorted(expected - found_cmp, key=str)
    unexpected = sorted(found_cmp - expected, key=str)
    assert not missing and not unexpected, f"missing: {missing}\nunexpected (false positives): {unexpected}"


def test_every_rule_has_fixtures() -> None:
    for rule in all_rules():
        if issubclass(rule, NoqaAudit):
            continue  # audits of noqa comments see other rules' findings: tested in test_noqa.py
        assert any(FIXTURES.glob(f"{rule.code}/*.py")), f"{rule.code} has no fixtures"


def test_fixtures_cover_every_rule_in_all_rules_mode() -> None:
    """Running all rules together must give the same findings as running each alone."""
    rules = all_rules()
    for path in FIXTURE_FILES:
        source = path.read_text(encoding="utf-8")
        together = {(f.line, f.col, f.code) for f in lint_source(source, rules).findings}
        alone = {(f.line, f.col, f.code) for r in rules for f in lint_source(source, [r]).findings}
        assert together == alone, path
