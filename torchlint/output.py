"""Reporting findings.  Each format is a function from reports to text.

Positions are 1-based; columns count characters and end columns are exclusive
(one past the last character), as in ruff.  In notebooks, ``finding.cell`` names
the cell (1-based, counting every cell) and lines count within it.  The JSON
schema is documented in ``docs/usage.md`` and kept stable.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from torchlint import __version__
from torchlint.datatypes import FileReport, Finding, FixSafety

Formatter = Callable[[Sequence[FileReport], TextIO], None]
INFORMATION_URI = "https://github.com/torchlint/torchlint"


def _findings(reports: Sequence[FileReport]) -> Iterator[tuple[FileReport, Finding]]:
    for report in reports:
        for finding in report.findings:
            yield report, finding


def _position(report: FileReport, finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{report.path}:{cell}{finding.line}:{finding.col}"


def _url(code: str) -> str | None:
    from torchlint.rulebook import page_for

    page = page_for(code)
    return page.url if page is not None else None


# ---------------------------------------------------------------- flake8
def format_flake8(reports: Sequence[FileReport], out: TextIO) -> None:
    """``path:line:col: CODE message`` (1-based line and column), like flake8;
    ``nb.ipynb:cell 3:2:5: CODE message`` in notebooks, like ruff."""
    for report, finding in _findings(reports):
        out.write(f"{_position(report, finding)}: {finding.code} {finding.message}\n")


# ---------------------------------------------------------------- full
class _Style:
    CODES = {"bold": "1", "red": "1;31", "green": "32", "blue": "1;34", "cyan": "36"}

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        return f"\x1b[{self.CODES[style]}m{text}\x1b[0m" if self.enabled and text else text


def use_colour(out: TextIO) -> bool:
    """Colour only on a terminal, never with NO_COLOR set (https://no-color.org);
    FORCE_COLOR asks for colour even when not on a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def _source_lines(report: FileReport, finding: Finding) -> list[str]:
    if finding.cell is not None:
        text = (report.cells or {}).get(finding.cell, "")
    else:
        text = report.source or ""
    return [line.rstrip("\r\n") for line in text.splitlines(keepends=True)] if text else []


def format_full(reports: Sequence[FileReport], out: TextIO) -> None:
    """Each finding with its source line(s), a caret under the reported range and the fix
    as a small diff when there is one."""
    paint = _Style(use_colour(out))
    for report, finding in _findings(reports):
        lines = _source_lines(report, finding)
        marker = ""
        if finding.fix is not None:
            marker = " [*]" if finding.fix.safety is FixSafety.SAFE else " [unsafe fix]"
        out.write(f"{paint(_position(report, finding), 'bold')}: {paint(finding.code, 'red')}{marker} {finding.message}\n")
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


# ---------------------------------------------------------------- json
def _location(line: int, col: int) -> dict[str, int]:
    return {"row": line, "column": col}


def finding_as_json(report: FileReport, finding: Finding) -> dict[str, Any]:
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.safety.value,
            "message": finding.fix.description,
            "edits": [
                {
                    "content": edit.content,
                    "location": _location(edit.line, edit.col),
                    "end_location": _location(edit.end_line, edit.end_col),
                }
                for edit in finding.edits
            ],
        }
    return {
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "filename": report.path,
        "cell": finding.cell,
        "location": _location(finding.line, finding.col),
        "end_location": _location(finding.end_line, finding.end_col),
        "fix": fix,
        "url": _url(finding.code),
    }


def format_json(reports: Sequence[FileReport], out: TextIO) -> None:
    """A JSON array with one object per finding (schema in docs/usage.md)."""
    json.dump([finding_as_json(report, finding) for report, finding in _findings(reports)], out, indent=2,
              ensure_ascii=False)
    out.write("\n")


# ---------------------------------------------------------------- sarif
def _artifact_uri(path: str) -> dict[str, str]:
    """A repository-relative URI (what GitHub code scanning expects), or a file URI."""
    absolute = Path(path).absolute()
    try:
        relative = absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative), "uriBaseId": "%SRCROOT%"}


def _sarif_rule(rule: Any) -> dict[str, Any]:
    from torchlint.rulebook import page_for

    page = page_for(rule.code)
    entry: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["pytorch", "autograd"], "precision": "high", "problem.severity": "error"},
    }
    if page is not None:
        entry["fullDescription"] = {"text": page.section("What it does") or rule.summary}
        entry["help"] = {"text": page.text, "markdown": page.text}
        entry["helpUri"] = page.url
    return entry


def sarif_log(reports: Sequence[FileReport]) -> dict[str, Any]:
    from torchlint.rules import all_rules

    rules = list(all_rules())
    index = {rule.code: position for position, rule in enumerate(rules)}
    results = []
    for report, finding in _findings(reports):
        message = finding.message if finding.cell is None else f"cell {finding.cell}: {finding.message}"
        result: dict[str, Any] = {
            "ruleId": finding.code,
            "level": "error",
            "message": {"text": message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact_uri(report.path),
                        "region": {
                            "startLine": finding.line,
                            "startColumn": finding.col,
                            "endLine": finding.end_line,
                            "endColumn": finding.end_col,
                        },
                    }
                }
            ],
        }
        if finding.code in index:
            result["ruleIndex"] = index[finding.code]
        if finding.cell is not None:
            result["properties"] = {"cell": finding.cell}
        results.append(result)
    notifications = [
        {"level": "error", "message": {"text": f"{report.path}: {report.error}"},
         "locations": [{"physicalLocation": {"artifactLocation": _artifact_uri(report.path)}}]}
        for report in reports
        if report.error
    ]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "torchlint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_sarif_rule(rule) for rule in rules],
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}],
        "results": results,
    }
    return {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}


def format_sarif(reports: Sequence[FileReport], out: TextIO) -> None:
    """SARIF 2.1.0 for GitHub code scanning (upload with github/codeql-action/upload-sarif)."""
    json.dump(sarif_log(reports), out, indent=2, ensure_ascii=False)
    out.write("\n")


# ---------------------------------------------------------------- github
def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(reports: Sequence[FileReport], out: TextIO) -> None:
    """GitHub Actions workflow commands: ``::error file=...,line=...,col=...,title=CODE::message``."""
    for report, finding in _findings(reports):
        properties = {
            "file": report.path,
            "line": finding.line,
            "col": finding.col,
            "endLine": finding.end_line,
            "endColumn": finding.end_col,
            "title": finding.code,
        }
        encoded = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items())
        message = finding.message if finding.cell is None else f"cell {finding.cell}: {finding.message}"
        out.write(f"::error {encoded}::{_escape_data(f'{finding.code} {message}')}\n")


FORMATS: dict[str, Formatter] = {
    "flake8": format_flake8,
    "full": format_full,
    "json": format_json,
    "sarif": format_sarif,
    "github": format_github,
}
# Formats that show fixes as edits: the runner computes them only for these.
FORMATS_WITH_EDITS = frozenset({"full", "json"})
# Formats that show the code (``report.source``): cached reports are decoded only for these.
FORMATS_WITH_SOURCE = frozenset({"full"})


# ---------------------------------------------------------------- statistics
def statistics(reports: Sequence[FileReport]) -> list[dict[str, Any]]:
    counts = Counter(finding.code for _, finding in _findings(reports))
    names = {finding.code: finding.name for _, finding in _findings(reports)}
    fixable = Counter(
        finding.code for _, finding in _findings(reports)
        if finding.fix is not None and finding.fix.safety is FixSafety.SAFE
    )
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
