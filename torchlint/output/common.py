"""What every output format shares: iterating findings, positions, paths, links, colour."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from torchlint.datatypes import FileReport, Finding, FixSafety


@dataclass(frozen=True)
class OutputOptions:
    """How findings are shown, beyond the format itself."""

    colour: bool | None = None  # None: automatic (a terminal, and neither NO_COLOR nor FORCE_COLOR)
    rule_url: str | None = None  # the `rule-url` setting: None links the pages shipped with the package
    show_fixes: bool = False  # text formats: mark each finding that has a fix ([*] safe, [unsafe fix])


DEFAULT_OPTIONS = OutputOptions()


def findings_of(reports: Sequence[FileReport]) -> Iterator[tuple[FileReport, Finding]]:
    for report in reports:
        for finding in report.findings:
            yield report, finding


def position(report: FileReport, finding: Finding) -> str:
    """``path:line:col``, or ``nb.ipynb:cell 3:line:col`` in notebooks (like ruff)."""
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{report.path}:{cell}{finding.line}:{finding.col}"


def message_with_cell(finding: Finding) -> str:
    """The message, prefixed with ``cell N:`` in notebooks (for formats that have no cell field)."""
    return finding.message if finding.cell is None else f"cell {finding.cell}: {finding.message}"


def fix_marker(finding: Finding) -> str:
    if finding.fix is None:
        return ""
    return " [*]" if finding.fix.safety is FixSafety.SAFE else " [unsafe fix]"


def url(code: str, options: OutputOptions) -> str | None:
    from torchlint.rulebook import rule_url

    return rule_url(code, options.rule_url)


def relative_path(path: str) -> str:
    """``path`` relative to the working directory in posix form, else absolute (for CI tools
    that resolve paths against the repository root)."""
    absolute = Path(path).absolute()
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def artifact_uri(path: str) -> dict[str, str]:
    """A repository-relative URI (what GitHub code scanning expects), or a file URI."""
    absolute = Path(path).absolute()
    try:
        relative = absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative), "uriBaseId": "%SRCROOT%"}


class Style:
    """ANSI styles, or nothing when colour is off."""

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


def style_for(out: TextIO, options: OutputOptions) -> Style:
    return Style(use_colour(out) if options.colour is None else options.colour)
