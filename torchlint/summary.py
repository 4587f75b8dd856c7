"""What a run says after the findings, in ruff's words: "Found 3 errors.", "[*] 2 fixable
with `--fix`", "All checks passed!", and after ``--fix`` what was fixed and what is left
and why, per file and per rule."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from torchlint.datatypes import FileReport, Finding, FixSafety


def plural(count: int, word: str, suffix: str = "s") -> str:
    return f"{count} {word}{suffix * (count != 1)}"


@dataclass(frozen=True)
class Mode:
    fix_only: bool = False  # --fix-only: what is left is not reported
    unsafe_fixes: bool = False  # unsafe fixes are applied by --fix


def _fixable(findings: Sequence[Finding], unsafe_fixes: bool) -> tuple[int, int]:
    """(findings --fix would fix, findings only --fix --unsafe-fixes would fix)."""
    safe = sum(1 for f in findings if f.fix is not None and (f.fix.safety is FixSafety.SAFE or unsafe_fixes))
    unsafe = sum(1 for f in findings if f.fix is not None and f.fix.safety is FixSafety.UNSAFE and not unsafe_fixes)
    return safe, unsafe


def _unsafe_hint(unsafe: int, option: str = "`--fix --unsafe-fixes`") -> str:
    return f"{plural(unsafe, 'unsafe fix', 'es')} available with {option}"


def check_summary(reports: Sequence[FileReport], mode: Mode, errors: int = 0) -> list[str]:
    """The summary lines of a run without --fix (``errors``: files that could not be checked)."""
    findings = [f for r in reports for f in r.findings]
    if not findings:
        return [] if errors else ["All checks passed!"]
    lines = [f"Found {plural(len(findings), 'error')}."]
    safe, unsafe = _fixable(findings, mode.unsafe_fixes)
    if safe:
        lines.append(f"[*] {safe} fixable with `--fix`" + (f" ({_unsafe_hint(unsafe)})." if unsafe else "."))
    elif unsafe:
        lines.append(f"No fixes available ({_unsafe_hint(unsafe)}).")
    return lines


def _reason(finding: Finding, unsafe_fixes: bool) -> str:
    if finding.fix is None:
        return "no fix available"
    if finding.fix.safety is FixSafety.UNSAFE and not unsafe_fixes:
        return "unsafe fix not applied (apply it with `--fix --unsafe-fixes`)"
    return "its fix could not be applied (it overlaps another fix, or breaks the code)"


def fix_summary(reports: Sequence[FileReport], mode: Mode, errors: int = 0) -> list[str]:
    """After --fix: per file and rule what was fixed, what is left and why, then the totals."""
    from torchlint.rulebook import rule_index

    names = {code: meta.name for code, meta in rule_index().items()}
    fixed = sum(r.fixed for r in reports)
    remaining = [f for r in reports for f in r.findings]
    lines: list[str] = []
    if fixed:
        lines.append(f"Fixed {plural(fixed, 'error')}:")
        for report in reports:
            counts = Counter(report.fixed_codes)
            if counts:
                lines.append(f"- {report.path}:")
                lines += [f"    {count} × {code} ({names.get(code, '?')})" for code, count in sorted(counts.items())]
    if remaining and not mode.fix_only:
        lines.append(f"Not fixed, {plural(len(remaining), 'error')}:")
        for report in reports:
            if report.findings:
                lines.append(f"- {report.path}:")
                counts = Counter((f.code, f.name, _reason(f, mode.unsafe_fixes)) for f in report.findings)
                lines += [f"    {count} × {code} ({name}): {reason}" for (code, name, reason), count in sorted(counts.items())]
    if mode.fix_only:
        _, unsafe = _fixable(remaining, mode.unsafe_fixes)
        hint = f" ({plural(unsafe, 'additional fix', 'es')} available with `--unsafe-fixes`)" if unsafe else ""
        lines.append(f"Fixed {plural(fixed, 'error')}{hint}." if fixed else f"No errors fixed{hint}.")
    elif remaining:
        lines.append(f"Found {plural(fixed + len(remaining), 'error')} ({fixed} fixed, {len(remaining)} remaining).")
    elif fixed:
        lines.append(f"Found {plural(fixed, 'error')} ({fixed} fixed, 0 remaining).")
    elif not errors:
        lines.append("All checks passed!")
    return lines


def diff_summary(reports: Sequence[FileReport], mode: Mode) -> list[str]:
    """After --diff: what --fix would do (ruff's wording)."""
    would = sum(r.fixed for r in reports if r.diff)
    _, unsafe = _fixable([f for r in reports for f in r.findings], mode.unsafe_fixes)
    if would:
        hint = f" ({plural(unsafe, 'additional fix', 'es')} available with `--unsafe-fixes`)" if unsafe else ""
        return [f"Would fix {plural(would, 'error')}{hint}."]
    hint = f" ({plural(unsafe, 'fix', 'es')} available with `--unsafe-fixes`)" if unsafe else ""
    return [f"No errors would be fixed{hint}."]
