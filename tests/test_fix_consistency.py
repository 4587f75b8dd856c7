"""One consistent product: no torchlint fix writes code another enabled torchlint rule reports.

Every fixture file and bundled example is fixed with every rule enabled (unsafe fixes too, in
each fix style the user may choose and in the style torchlint picks when none is chosen); the
fixed code is linted again with the same rules, and no finding may sit on a line the fixes
wrote.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from torchlint.engine import SourceError, fix_source, lint_source
from torchlint.noqa import NoqaAudit
from torchlint.rule import FixStyle, RuleOptions
from torchlint.rules import all_rules

RULES = [rule for rule in all_rules() if not issubclass(rule, NoqaAudit)]
SOURCES = sorted([*FIXTURES.glob("TL*/*.py"), *(ROOT / "examples").rglob("*.py")])
STYLES = [None, FixStyle.DATA, FixStyle.NO_GRAD]


def written_lines(before: str, after: str) -> dict[int, int | None]:
    """Lines of ``after`` (1-based) that the fixes inserted or changed -> the line of ``before``
    each replaces one for one (None: inserted)."""
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    lines: dict[int, int | None] = {}
    for tag, old_start, old_end, start, end in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            one_for_one = tag == "replace" and old_end - old_start == end - start
            for offset, line in enumerate(range(start + 1, end + 1)):
                lines[line] = old_start + offset + 1 if one_for_one else None
    return lines


@pytest.mark.parametrize("style", STYLES, ids=lambda s: s.value if s else "unset")
@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fixes_write_nothing_another_rule_reports(path: Path, style: FixStyle | None) -> None:
    source = path.read_text(encoding="utf-8")
    options = RuleOptions(fix_style=style)
    try:
        fixed = fix_source(source, RULES, options, unsafe=True).source
    except SourceError:
        pytest.skip("not analysable (deliberately hostile fixture)")
    written = written_lines(source, fixed)
    if not written:
        return
    # A finding the original already had (the unfixed part of a partly fixed line, a finding
    # without a fix: same rule, same message, or the same rule on the line a fix rewrote) is
    # not one the fixes wrote.
    original = lint_source(source, RULES, options).findings
    messages = {(f.code, f.message) for f in original}
    on_line = {(f.code, f.line) for f in original}
    reported = [
        f for f in lint_source(fixed, RULES, options).findings
        if f.line in written and (f.code, f.message) not in messages and (f.code, written[f.line]) not in on_line
    ]
    if style is FixStyle.DATA:
        # The user chose `.data` updates: TL011 (opt-in, the migration away from `.data`)
        # reporting them is what they asked for.
        reported = [f for f in reported if f.code != "TL011"]
    assert not reported, "\n".join(f"{f.line}: {f.code} {f.message}" for f in reported) + "\n\n" + fixed
