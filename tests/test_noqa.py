"""Suppressions: ``# noqa`` comments, file-level ``# torchlint: noqa``, ``add_noqa`` and
the opt-in TL100 unused-noqa audit."""

from __future__ import annotations

import ast
import re

import libcst as cst
import pytest

from torchlint.engine import fix_source, lint_source
from torchlint.noqa import (
    NoqaLines,
    add_noqa,
    file_exempt_codes,
    file_is_exempt,
    noqa_codes,
    physical_lines,
    suppression,
    without_codes,
)
from torchlint.rulebook import page_for
from torchlint.rules import all_rules, rule_by_code
from torchlint.settings import Settings, resolve_rules
from torchlint.verify import has_torch_evidence

# Pinned: other rules may also fire on these samples as the catalogue grows.
SEED = ("TL001", "TL002", "TL006", "TL012")
DEFAULT = resolve_rules(Settings(select=SEED))
WITH_TL100 = resolve_rules(Settings(select=(*SEED, "TL100")))

LOOP = """import torch

w = torch.zeros(3, requires_grad=True)
for step in range(3):
    loss = (w * 2).sum()
    loss.backward()
    w = w - 0.1 * w.grad{comment}
"""
MULTILINE = """import torch
x = torch.zeros({first}
    3,{middle}
    dtype=torch.int64,
    requires_grad=True,
){last}
"""


def codes_at(source: str, rules=DEFAULT) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in lint_source(source, rules).findings]


# ---------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("x = 1", None),
        ("x = 1  # noqa", frozenset()),
        ("x = 1  # NOQA", frozenset()),
        ("x = 1  #noqa:TL001", {"TL001"}),
        ("x = 1  # noqa: tl001", {"TL001"}),
        ("x = 1  # noqa: TL001,TL002", {"TL001", "TL002"}),
        ("x = 1  # noqa: TL001, E501 because", {"TL001", "E501"}),
        ("x = 1  # type: ignore  # noqa: TL001", {"TL001"}),
    ],
)
def test_noqa_comment_parsing(line: str, expected) -> None:
    assert noqa_codes(line) == (frozenset(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("comment", "exempt", "codes"),
    [
        ("# flake8: noqa", True, set()),
        ("#flake8:noqa", True, set()),
        ("  # FLAKE8= NOQA", True, set()),
        ("# flake8: noqa because it is generated", True, set()),
        ("# flake8: noqa: TL001, tl002", False, {"TL001", "TL002"}),
        ("x = 1  # flake8: noqa", False, set()),  # not a line of its own: neither flake8 nor ruff skip the file
        ("# ruff: noqa", False, set()),
        ("# torchlint: noqa: TL003", False, {"TL003"}),
    ],
)
def test_file_level_directives(comment: str, exempt: bool, codes: set[str]) -> None:
    source = f"import torch\n{comment}\n"
    assert (file_is_exempt(source), file_exempt_codes(source)) == (exempt, codes)
    assert not file_is_exempt(source, flake8=False) or "torchlint" in comment  # flake8's --disable-noqa


def test_a_noqa_covers_its_multi_line_string_or_continued_line_as_in_flake8() -> None:
    source = 'x = 1\ny = """a\n# noqa: TL001\n""" + \\\n  z\nw = (1,  # noqa: TL002\n 2)\n'
    lines = NoqaLines(source)
    assert suppression("TL001", lines, [2]) == (3, "TL001")  # the string's second line is in the span
    assert suppression("TL001", lines, [5]) == (3, "TL001")  # and the continued line
    assert suppression("TL001", lines, [1]) is None
    assert suppression("TL002", lines, [7]) is None  # brackets end a span at each line, as flake8's do
    assert suppression("TL002", lines, [6]) == (6, "TL002")


def test_physical_lines_do_not_split_at_form_feeds() -> None:
    assert physical_lines("a\x0cb\nc\r\nd\re\n") == ["a\x0cb", "c", "d", "e"]


def test_a_form_feed_does_not_shift_the_noqa_line() -> None:
    source = "\x0c\n" + LOOP.replace("import torch", "import torch  # \x0c").format(comment="  # noqa: TL001")
    assert codes_at(source) == []


# ---------------------------------------------------------------- suppression
@pytest.mark.parametrize(
    ("comment", "suppressed"),
    [
        ("", False),
        ("  # noqa", True),
        ("  # noqa: TL001", True),
        ("  # noqa: TL0", True),  # a listed prefix covers the codes it starts
        ("  # noqa: TL002", False),
        ("  # noqa: E501,TL001", True),
        ("  # noqa:TL002 TL001", True),
    ],
)
def test_noqa_on_the_reported_line(comment: str, suppressed: bool) -> None:
    assert codes_at(LOOP.format(comment=comment)) == ([] if suppressed else [(7, "TL001")])


@pytest.mark.parametrize(
    ("place", "suppressed"),
    [("first", True), ("last", True), ("middle", False), (None, False)],
)
def test_noqa_on_the_first_or_last_line_of_a_multiline_statement(place: str | None, suppressed: bool) -> None:
    slots = {"first": "", "middle": "", "last": ""}
    if place is not None:
        slots[place] = "  # noqa: TL006"
    assert codes_at(MULTILINE.format(**slots)) == ([] if suppressed else [(2, "TL006")])


def test_noqa_after_a_backslash_continuation_on_the_statements_last_line() -> None:
    source = LOOP.format(comment="").replace("w = w - 0.1 * w.grad", "w = w - 0.1 * \\\n        w.grad  # noqa: TL001")
    assert codes_at(source) == []


def test_noqa_inside_a_string_is_a_string() -> None:
    # flake8 reads noqa from the physical line, string or not; so do we (users expect the same behaviour).
    source = LOOP.format(comment="; s = '# noqa'")
    assert codes_at(source) == []


def test_file_level_noqa_skips_the_file() -> None:
    assert codes_at("# torchlint: noqa\n" + LOOP.format(comment="")) == []
    assert codes_at(LOOP.format(comment="") + "# TORCHLINT:NOQA\n") == []


def test_file_level_noqa_with_codes_turns_off_only_those() -> None:
    source = LOOP.format(comment="") + "b = torch.zeros(1)\nb.require_grad = True\n"
    assert {code for _, code in codes_at(source)} == {"TL001", "TL012"}
    assert codes_at("# torchlint: noqa: TL001\n" + source) == [(10, "TL012")]
    assert codes_at("# torchlint: noqa: TL001, TL012\n" + source) == []


def test_line_noqa_is_left_to_a_caller_that_applies_it_itself() -> None:
    # The flake8 plugin passes respect_noqa=False: flake8 applies `# noqa` comments itself...
    source = LOOP.format(comment="  # noqa: TL001")
    assert [f.code for f in lint_source(source, DEFAULT, respect_noqa=False).findings] == ["TL001"]
    # ...but knows nothing of torchlint's file-level comments, so those always count.
    assert lint_source("# torchlint: noqa\n" + source, DEFAULT, respect_noqa=False).findings == []
    assert lint_source("# torchlint: noqa: TL001\n" + source, DEFAULT, respect_noqa=False).findings == []


def test_fix_leaves_suppressed_findings_alone() -> None:
    source = LOOP.format(comment="  # noqa: TL001")
    assert fix_source(source, DEFAULT).source == source


# ---------------------------------------------------------------- add_noqa
def _add(source: str, rules=DEFAULT) -> str:
    new, _ = add_noqa(source, lint_source(source, rules).findings)
    return new


def _assert_clean_and_parses(source: str) -> None:
    cst.parse_module(source)
    ast.parse(source)
    assert codes_at(source) == []


def test_add_noqa_on_the_reported_line() -> None:
    fixed = _add(LOOP.format(comment=""))
    assert fixed == LOOP.format(comment="  # noqa: TL001")
    _assert_clean_and_parses(fixed)


def test_add_noqa_merges_codes_into_an_existing_noqa_comment() -> None:
    fixed = _add(LOOP.format(comment="  # noqa: E501 long line"))
    assert fixed.splitlines()[6].endswith("  # noqa: E501, TL001 long line")
    _assert_clean_and_parses(fixed)


def test_add_noqa_keeps_another_comment_first() -> None:
    fixed = _add(LOOP.format(comment="  # type: ignore[misc]"))
    assert fixed.splitlines()[6].endswith("w.grad  # type: ignore[misc]  # noqa: TL001")
    _assert_clean_and_parses(fixed)


def test_add_noqa_never_writes_into_a_multiline_string() -> None:
    source = 'import torch\ny = torch.zeros(3, dtype=torch.long, requires_grad=True, names="""a\nb""")\nz = 1\n'
    fixed = _add(source)
    assert fixed == source.replace('b""")', 'b""")  # noqa: TL006')
    assert ast.literal_eval(ast.parse(fixed).body[1].value.keywords[-1].value) == "a\nb"  # type: ignore[attr-defined]
    _assert_clean_and_parses(fixed)


def test_add_noqa_after_a_backslash_continuation_uses_the_last_line() -> None:
    source = LOOP.format(comment="").replace("w = w - 0.1 * w.grad", "w = w - 0.1 * \\\n        w.grad")
    fixed = _add(source)
    assert "\\\n        w.grad  # noqa: TL001\n" in fixed
    _assert_clean_and_parses(fixed)


def test_add_noqa_combines_codes_on_one_line_and_is_idempotent() -> None:
    source = "import torch\nb = torch.zeros(1); b.require_grad = True; c = torch.ones(2, dtype=torch.int32, requires_grad=True)\n"
    fixed = _add(source)
    assert fixed.splitlines()[1].endswith("  # noqa: TL006, TL012")
    _assert_clean_and_parses(fixed)
    assert _add(fixed) == fixed


def test_add_noqa_keeps_crlf_line_endings() -> None:
    source = LOOP.format(comment="").replace("\n", "\r\n")
    fixed = _add(source)
    assert fixed == LOOP.format(comment="  # noqa: TL001").replace("\n", "\r\n")


def test_add_noqa_does_not_fight_tl100() -> None:
    fixed = _add(LOOP.format(comment=""), WITH_TL100)
    assert codes_at(fixed, WITH_TL100) == []


# ---------------------------------------------------------------- TL100 unused-noqa
def test_tl100_is_opt_in() -> None:
    assert rule_by_code("TL100") is not None and not rule_by_code("TL100").default
    assert "TL100" not in {rule.code for rule in DEFAULT}
    assert codes_at("x = 1  # noqa: TL001\n") == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("x = 1  # noqa: TL001", "unused: TL001"),
        ("x = 1  # noqa: TL001, TL012", "unused: TL001, TL012"),
        ("x = 1  # noqa: E501, TL999", "unknown: TL999"),
        ("# noqa: TL002", "unused: TL002"),  # an own-line comment covers no statement
        ("x = 1  # NOQA: TL001", "unused: TL001"),  # noqa is case-insensitive, so is the pre-filter
        ("x = 1  # NoQa: TL001", "unused: TL001"),
    ],
)
def test_tl100_reports_unused_and_unknown_codes(line: str, message: str) -> None:
    findings = lint_source(f"import torch\n{line}\n", WITH_TL100).findings
    assert [(f.code, f.line, f.col) for f in findings] == [("TL100", 2, line.index("#") + 1)]
    assert message in findings[0].message


@pytest.mark.parametrize(
    "line",
    [
        "x = 1  # noqa",  # a bare noqa may be for any tool
        "x = 1  # noqa: E501, F401",  # other tools' codes
        "x = 1  # noqa: TL100",  # its own code
        "s = '# noqa: TL001'",  # not a comment
    ],
)
def test_tl100_leaves_other_comments_alone(line: str) -> None:
    assert codes_at(f"import torch\n{line}\n", WITH_TL100) == []


def test_tl100_does_not_report_codes_of_rules_that_are_not_enabled() -> None:
    rules = resolve_rules(Settings(select=("TL001", "TL100")))
    assert codes_at("x = 1  # noqa: TL012\n", rules) == []
    assert codes_at("x = 1  # noqa: TL001\n", rules) == [(1, "TL100")]


def test_tl100_keeps_used_codes() -> None:
    assert codes_at(LOOP.format(comment="  # noqa: TL001"), WITH_TL100) == []
    assert codes_at(LOOP.format(comment="  # noqa"), WITH_TL100) == []
    findings = lint_source(LOOP.format(comment="  # noqa: TL001, TL012"), WITH_TL100).findings
    assert [(f.code, f.line) for f in findings] == [("TL100", 7)] and "unused: TL012" in findings[0].message


def test_tl100_counts_a_noqa_on_a_statements_last_line_as_used() -> None:
    assert codes_at(MULTILINE.format(first="", middle="", last="  # noqa: TL006"), WITH_TL100) == []


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("x = 1  # noqa: TL001\n", "x = 1\n"),
        ("x = 1  # noqa: TL001, E501  # why\n", "x = 1  # noqa: E501  # why\n"),
        ("x = 1  # noqa: TL001 because\n", "x = 1  # because\n"),
        ("x = 1  # keep  # noqa: TL001\n", "x = 1  # keep\n"),
        ("x = 1\n# noqa: TL001\ny = 2\n", "x = 1\ny = 2\n"),
        ("if True:\n    x = 1  # noqa: TL012,TL001\n", "if True:\n    x = 1\n"),
    ],
)
def test_tl100_fix_removes_the_unused_codes(before: str, after: str) -> None:
    assert fix_source(before, WITH_TL100).source == after


def test_without_codes_keeps_the_rest_of_the_comment() -> None:
    assert without_codes("# noqa: TL001,E501", {"TL001"}) == "# noqa: E501"
    assert without_codes("# noqa: TL001", {"TL001"}) is None
    assert without_codes("# note", {"TL001"}) == "# note"


def test_tl100_in_a_fix_run_removes_noqa_that_a_fix_made_unused() -> None:
    # `# noqa: TL012` is unused once TL012 is enabled and does not fire; TL001 is fixed meanwhile.
    source = LOOP.format(comment="  # noqa: TL012")
    fixed = fix_source(source, WITH_TL100).source
    assert fixed == LOOP.format(comment="").replace("w = w - 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")


def test_tl100_rule_book_page_examples() -> None:
    page = page_for("TL100")
    assert page is not None and "unused-noqa" in page.text
    bad, fixed = re.findall(r"```python\n(.*?)```", page.text, re.DOTALL)
    findings = lint_source(bad, WITH_TL100).findings
    assert [f.code for f in findings] == ["TL100"]
    assert fix_source(bad, WITH_TL100).source == fixed
    for heading in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "Evidence"):
        assert page.section(heading), heading


def test_verify_skips_only_rules_without_a_bad_example() -> None:
    assert not has_torch_evidence(rule_by_code("TL100"))
    assert all(has_torch_evidence(rule) for rule in all_rules() if rule.code != "TL100")
