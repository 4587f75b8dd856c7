"""Reporting findings.  Each format is a function ``(reports, out, options)`` that writes text.

The formats and their names follow ruff's ``--output-format``.  None of them imports a
rule or libcst: rule names and links come from the rule book's file names
(``torchlint.rulebook.rule_index``), so a run whose every result is cached stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TextIO

from torchlint.datatypes import FileReport
from torchlint.output.annotations import format_azure, format_github
from torchlint.output.common import DEFAULT_OPTIONS, OutputOptions, use_colour
from torchlint.output.machine import (
    finding_as_json, format_gitlab, format_json, format_json_lines, format_junit, format_rdjson, format_sarif,
    gitlab_report, rdjson_result, sarif_log,
)
from torchlint.output.text import format_concise, format_full, format_grouped, format_pylint, format_statistics, statistics

Formatter = Callable[[Sequence[FileReport], TextIO, OutputOptions], None]

FORMATS: dict[str, Formatter] = {
    "concise": format_concise,
    "flake8": format_concise,  # the original name: flake8's `path:line:col: CODE message` lines
    "full": format_full,
    "grouped": format_grouped,
    "json": format_json,
    "json-lines": format_json_lines,
    "junit": format_junit,
    "github": format_github,
    "gitlab": format_gitlab,
    "pylint": format_pylint,
    "rdjson": format_rdjson,
    "azure": format_azure,
    "sarif": format_sarif,
}
DEFAULT_FORMAT = "concise"
# Formats for people: the run's summary ("Found 3 errors.") follows the findings, as in ruff.
FORMATS_WITH_SUMMARY = frozenset({"concise", "flake8", "full", "grouped"})
# Formats that show fixes as edits: the runner computes them only for these.
FORMATS_WITH_EDITS = frozenset({"full", "json", "json-lines", "sarif", "rdjson"})
# Formats that show the code (``report.source``): cached reports are decoded only for these.
FORMATS_WITH_SOURCE = frozenset({"full"})

__all__ = [
    "DEFAULT_FORMAT", "DEFAULT_OPTIONS", "FORMATS", "FORMATS_WITH_EDITS", "FORMATS_WITH_SOURCE", "FORMATS_WITH_SUMMARY",
    "OutputOptions", "finding_as_json", "format_statistics", "gitlab_report", "rdjson_result", "sarif_log",
    "statistics", "use_colour",
]
