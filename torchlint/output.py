"""Reporting findings.  Each format is a function from reports to text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TextIO

from torchlint.runner import FileReport

Formatter = Callable[[Sequence[FileReport], TextIO], None]


def format_flake8(reports: Sequence[FileReport], out: TextIO) -> None:
    """``path:line:col: CODE message`` (1-based line and column), like flake8."""
    for report in reports:
        for finding in report.findings:
            out.write(f"{report.path}:{finding.line}:{finding.col}: {finding.code} {finding.message}\n")


FORMATS: dict[str, Formatter] = {"flake8": format_flake8}
