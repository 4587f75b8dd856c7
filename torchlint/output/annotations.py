"""CI annotations: GitHub Actions workflow commands and Azure Pipelines logging commands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from torchlint.datatypes import FileReport, Finding
from torchlint.output.common import DEFAULT_OPTIONS, OutputOptions, findings_of, message_with_cell


# ---------------------------------------------------------------- github
def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _place(report: FileReport, finding: Finding) -> tuple[str, int, int, int, int]:
    return report.path, finding.line, finding.col, finding.end_line, finding.end_col


def format_github(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """GitHub Actions workflow commands: ``::error file=...,line=...,col=...,title=CODE::message``."""
    for report, finding in findings_of(reports):
        properties = [*zip(("file", "line", "col", "endLine", "endColumn"), _place(report, finding)), ("title", finding.code)]
        encoded = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties)
        out.write(f"::error {encoded}::{_escape_data(f'{finding.code} {message_with_cell(finding)}')}\n")


# ---------------------------------------------------------------- azure
def _escape_azure_data(text: str) -> str:
    return text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_azure_property(text: str) -> str:
    # A property ends at ';' and the command's properties at ']'.
    return _escape_azure_data(text).replace(";", "%3B").replace("]", "%5D")


def format_azure(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """Azure Pipelines logging commands: ``##vso[task.logissue type=error;sourcepath=...;...]message``."""
    for report, finding in findings_of(reports):
        place = zip(("sourcepath", "linenumber", "columnnumber"), _place(report, finding))
        properties = [("type", "error"), *place, ("code", finding.code)]
        encoded = "".join(f"{key}={_escape_azure_property(str(value))};" for key, value in properties)
        out.write(f"##vso[task.logissue {encoded}]{_escape_azure_data(message_with_cell(finding))}\n")
