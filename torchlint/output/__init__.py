"""Reporting findings.  Each format is a function ``(reports, out, options)`` that writes text.

The formats and their names follow ruff's ``--output-format``.  None of them imports a
rule or libcst: rule names and links come from the rule book's file names
(``torchlint.rulebook.rule_index``), so a run whose every result is cached stays cheap.
A format's module is imported when the format is first used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from torchlint.datatypes import FileReport
from torchlint.output.common import DEFAULT_OPTIONS, OutputOptions, use_colour

Formatter = Callable[[Sequence[FileReport], TextIO, OutputOptions], None]

# format name -> (module in torchlint.output, function)
_FORMATTERS = {
    "concise": ("text", "format_concise"),
    "flake8": ("text", "format_concise"),  # the original name: flake8's `path:line:col: CODE message` lines
    "full": ("text", "format_full"),
    "grouped": ("text", "format_grouped"),
    "json": ("machine", "format_json"),
    "json-lines": ("machine", "format_json_lines"),
    "junit": ("machine", "format_junit"),
    "github": ("annotations", "format_github"),
    "gitlab": ("machine", "format_gitlab"),
    "pylint": ("text", "format_pylint"),
    "rdjson": ("machine", "format_rdjson"),
    "azure": ("annotations", "format_azure"),
    "sarif": ("machine", "format_sarif"),
}
# Helpers for tests and other front ends, imported on first use like the formats.
_HELPERS = {
    "finding_as_json": "machine", "gitlab_report": "machine", "rdjson_result": "machine", "sarif_log": "machine",
    "format_statistics": "text", "statistics": "text",
}


def _load(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def _formatter(module: str, name: str) -> Formatter:
    def write(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
        _load(module, name)(reports, out, options)

    write.__name__ = write.__qualname__ = name
    return write


def __getattr__(name: str) -> Any:
    if name in _HELPERS:
        return _load(_HELPERS[name], name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


FORMATS: dict[str, Formatter] = {name: _formatter(*target) for name, target in _FORMATTERS.items()}
DEFAULT_FORMAT = "concise"
# Formats for people: the run's summary ("Found 3 errors.") follows the findings, as in ruff.
FORMATS_WITH_SUMMARY = frozenset({"concise", "flake8", "full", "grouped"})
# Formats that show fixes as edits: the runner computes them only for these.
FORMATS_WITH_EDITS = frozenset({"full", "json", "json-lines", "sarif", "rdjson"})
# Formats that show the code (``report.source``): cached reports are decoded only for these.
FORMATS_WITH_SOURCE = frozenset({"full"})

__all__ = [
    "DEFAULT_FORMAT", "DEFAULT_OPTIONS", "FORMATS", "FORMATS_WITH_EDITS", "FORMATS_WITH_SOURCE", "FORMATS_WITH_SUMMARY",
    "OutputOptions", "use_colour", *_HELPERS,
]
