"""Formats for people and line-oriented tools: concise (flake8's lines), full, grouped,
pylint, and ``--statistics``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from torchlint.datatypes import FileReport, Finding, FixSafety
from torchlint.output.common import (
    DEFAULT_OPTIONS, OutputOptions, findings_of, fix_marker, message_with_cell, position, style_for,
)


# ---------------------------------------------------------------- concise
def format_concise(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """``path:line:col: CODE message`` (1-based line and column), like flake8 and ruff's
    concise format; ``nb.ipynb:cell 3:2:5: CODE message`` in notebooks, like ruff."""
    paint = style_for(out, options)
    for report, finding in findings_of(reports):
        marker = fix_marker(finding) if options.show_fixes else ""
        out.write(f"{paint(position(report, finding), 'bold')}: {paint(finding.code, 'red')}{marker} {finding.message}\n")


# ---------------------------------------------------------------- grouped
def format_grouped(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """The findings under their file's name, positions aligned (ruff's grouped format)."""
    paint = style_for(out, options)
    for report in reports:
        if not report.findings:
            continue
        out.write(f"{paint(report.path, 'bold')}:\n")
        places = [position(report, finding)[len(report.path) + 1:] for finding in report.findings]
        width = max(len(place) for place in places)
        for place, finding in zip(places, report.findings):
            marker = fix_marker(finding) if options.show_fixes else ""
            out.write(f"  {place.ljust(width)} {paint(finding.code, 'red')}{marker} {finding.message}\n")
        out.write("\n")


# ---------------------------------------------------------------- pylint
def format_pylint(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """``path:line: [CODE] message``, pylint's parseable format (as ruff writes it)."""
    for report, finding in findings_of(reports):
        out.write(f"{report.path}:{finding.line}: [{finding.code}] {message_with_cell(finding)}\n")


# ---------------------------------------------------------------- full
def _source_lines(report: FileReport, finding: Finding) -> list[str]:
    if finding.cell is not None:
        text = (report.cells or {}).get(finding.cell, "")
    else:
        text = report.source or ""
    return [line.rstrip("\r\n") for line in text.splitlines(keepends=True)] if text else []


def format_full(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """Each finding with its source line(s), a caret under the reported range and the fix
    as a small diff when there is one."""
    paint = style_for(out, options)
    for report, finding in findings_of(reports):
        lines = _source_lines(report, finding)
        out.write(f"{paint(position(report, finding), 'bold')}: {paint(finding.code, 'red')}{fix_marker(finding)} {finding.message}\n")
        shown = [n for n in range(finding.line, min(finding.end_line, finding.line + 5) + 1) if 1 <= n <= len(lines)]
        width = len(str(max([*shown, *(e.end_line for e in finding.edits)], default=1)))
        gutter = paint(" " * width + " |", "blue")
        out.write(gutter + "\n")
        for number in shown:
            out.write(f"{paint(str(number).rjust(width) + ' |', 'blue')} {_expand(lines[number - 1])}\n")
            if number == finding.line:
                text = lines[number - 1]
                end = finding.end_col if finding.end_line == finding.line else len(text) + 1
                start = len(_expand(text[: finding.col - 1]))
                carets = "^" * max(1, len(_expand(text[: end - 1])) - start)
                out.write(f"{gutter} {' ' * start}{paint(carets + ' ' + finding.code, 'red')}\n")
        out.write(gutter + "\n")
        if finding.fix is not None:
            applicability = finding.fix.safety.value
            note = "" if finding.fix.safety is FixSafety.SAFE else " (apply with --fix --unsafe-fixes)"
            out.write(f"{' ' * width} = fix ({applicability}): {finding.fix.description}{note}\n")
            for sign, number, text in _edit_diff(lines, finding):
                colour = "red" if sign == "-" else "green"
                out.write(paint(f"{' ' * width} {sign} {str(number).rjust(width)} | {_expand(text)}", colour) + "\n")
        out.write("\n")


def _expand(text: str) -> str:
    return text.replace("\t", "    ")


def _edit_diff(lines: list[str], finding: Finding) -> list[tuple[str, int, str]]:
    """(sign, line number, text) rows showing each edit's lines before and after."""
    rows: list[tuple[str, int, str]] = []
    for edit in finding.edits:
        old = [lines[n - 1] if n <= len(lines) else "" for n in range(edit.line, edit.end_line + 1)]
        if not old:
            continue
        new_text = old[0][: edit.col - 1] + edit.content + old[-1][edit.end_col - 1:]
        rows += [("-", edit.line + offset, text) for offset, text in enumerate(old)]
        rows += [("+", edit.line + offset, text) for offset, text in enumerate(new_text.split("\n"))]
    return rows


# ---------------------------------------------------------------- statistics
def statistics(reports: Sequence[FileReport]) -> list[dict[str, Any]]:
    found = [finding for _, finding in findings_of(reports)]
    counts = Counter(finding.code for finding in found)
    names = {finding.code: finding.name for finding in found}
    fixable = Counter(finding.code for finding in found if finding.fix is not None and finding.fix.safety is FixSafety.SAFE)
    return [
        {"code": code, "name": names[code], "count": count, "fixable": fixable[code]}
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def format_statistics(reports: Sequence[FileReport], out: TextIO, *, as_json: bool = False) -> None:
    """Counts per rule, most frequent first (``[*]``: some have a safe fix)."""
    rows = statistics(reports)
    if as_json:
        json.dump(rows, out, indent=2)
        out.write("\n")
        return
    width = max((len(str(row["count"])) for row in rows), default=1)
    for row in rows:
        marker = "[*] " if row["fixable"] else "    "
        out.write(f"{str(row['count']).rjust(width)}\t{row['code']}\t{marker}{row['name']}\n")
