"""Formats for programs: json, json-lines, sarif, rdjson (reviewdog), gitlab (Code
Quality) and junit.

Positions are 1-based; columns count characters and end columns are exclusive
(one past the last character), as in ruff.  In notebooks, ``finding.cell`` names
the cell (1-based, counting every cell) and lines count within it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from torchlint import __version__
from torchlint.datatypes import FileReport, Finding
from torchlint.output.common import (
    DEFAULT_OPTIONS, OutputOptions, artifact_uri, findings_of, message_with_cell, relative_path, url,
)


def _dump(data: Any, out: TextIO) -> None:
    json.dump(data, out, indent=2, ensure_ascii=False)
    out.write("\n")


# ---------------------------------------------------------------- json, json-lines
def _location(line: int, col: int) -> dict[str, int]:
    return {"row": line, "column": col}


def finding_as_json(report: FileReport, finding: Finding, options: OutputOptions = DEFAULT_OPTIONS) -> dict[str, Any]:
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.safety.value,
            "message": finding.fix.description,
            "edits": [
                {"content": edit.content, "location": _location(edit.line, edit.col),
                 "end_location": _location(edit.end_line, edit.end_col)}
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
        "url": url(finding.code, options),
    }


def format_json(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """A JSON array with one object per finding (schema in the README)."""
    _dump([finding_as_json(report, finding, options) for report, finding in findings_of(reports)], out)


def format_json_lines(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """One JSON object per line, the same objects as ``json``."""
    for report, finding in findings_of(reports):
        out.write(json.dumps(finding_as_json(report, finding, options), ensure_ascii=False, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------- sarif
def _region(line: int, col: int, end_line: int, end_col: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}


def _sarif_rules(options: OutputOptions) -> list[dict[str, Any]]:
    """Every rule, named from the rule book's file names and first lines (no rule is imported)."""
    from torchlint.rulebook import rule_index

    rules = []
    for meta in rule_index().values():
        entry: dict[str, Any] = {
            "id": meta.code,
            "name": meta.name,
            "shortDescription": {"text": meta.summary or meta.name},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["pytorch", "autograd"], "precision": "high", "problem.severity": "error"},
        }
        link = url(meta.code, options)
        if link is not None:
            entry["helpUri"] = link
        rules.append(entry)
    return rules


def _sarif_fix(report: FileReport, finding: Finding) -> dict[str, Any] | None:
    """The fix as SARIF replacements.  Not for notebook cells: their positions count in the cell,
    not in the file."""
    if finding.fix is None or not finding.edits or finding.cell is not None:
        return None
    replacements = [
        {"deletedRegion": _region(edit.line, edit.col, edit.end_line, edit.end_col), "insertedContent": {"text": edit.content}}
        for edit in finding.edits
    ]
    return {
        "description": {"text": finding.fix.description},
        "artifactChanges": [{"artifactLocation": artifact_uri(report.path), "replacements": replacements}],
        "properties": {"applicability": finding.fix.safety.value},
    }


def _sarif_result(report: FileReport, finding: Finding, index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": "error",
        "message": {"text": message_with_cell(finding)},
        "locations": [{"physicalLocation": {
            "artifactLocation": artifact_uri(report.path),
            "region": _region(finding.line, finding.col, finding.end_line, finding.end_col),
        }}],
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    fix = _sarif_fix(report, finding)
    if fix is not None:
        result["fixes"] = [fix]
    if finding.cell is not None:
        result["properties"] = {"cell": finding.cell}
    return result


def sarif_log(reports: Sequence[FileReport], options: OutputOptions = DEFAULT_OPTIONS) -> dict[str, Any]:
    rules = _sarif_rules(options)
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    notifications = [
        {"level": "error", "message": {"text": f"{report.path}: {report.error}"},
         "locations": [{"physicalLocation": {"artifactLocation": artifact_uri(report.path)}}]}
        for report in reports
        if report.error
    ]
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "torchlint", "version": __version__, "semanticVersion": __version__, "rules": rules}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}],
        "results": [_sarif_result(report, finding, index) for report, finding in findings_of(reports)],
    }
    return {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}


def format_sarif(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """SARIF 2.1.0 for GitHub code scanning (upload with github/codeql-action/upload-sarif)."""
    _dump(sarif_log(reports, options), out)


# ---------------------------------------------------------------- rdjson
def _rdjson_range(line: int, col: int, end_line: int, end_col: int) -> dict[str, Any]:
    return {"start": {"line": line, "column": col}, "end": {"line": end_line, "column": end_col}}


def rdjson_result(reports: Sequence[FileReport], options: OutputOptions = DEFAULT_OPTIONS) -> dict[str, Any]:
    """reviewdog's Diagnostic Format (a ``DiagnosticResult``)."""
    diagnostics = []
    for report, finding in findings_of(reports):
        code: dict[str, str] = {"value": finding.code}
        link = url(finding.code, options)
        if link is not None:
            code["url"] = link
        diagnostic: dict[str, Any] = {
            "message": message_with_cell(finding),
            "location": {"path": report.path,
                         "range": _rdjson_range(finding.line, finding.col, finding.end_line, finding.end_col)},
            "severity": "ERROR",
            "code": code,
        }
        if finding.edits and finding.cell is None:
            diagnostic["suggestions"] = [
                {"range": _rdjson_range(edit.line, edit.col, edit.end_line, edit.end_col), "text": edit.content}
                for edit in finding.edits
            ]
        diagnostics.append(diagnostic)
    return {"source": {"name": "torchlint"}, "severity": "ERROR", "diagnostics": diagnostics}


def format_rdjson(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    _dump(rdjson_result(reports, options), out)


# ---------------------------------------------------------------- gitlab
def gitlab_report(reports: Sequence[FileReport]) -> list[dict[str, Any]]:
    """GitLab Code Quality issues.  The fingerprint hashes the path, code and message (and
    which occurrence of these it is), not the line: moving code does not make an issue new."""
    seen: Counter[tuple[str, str, str]] = Counter()
    issues = []
    for report, finding in findings_of(reports):
        path, message = relative_path(report.path), message_with_cell(finding)
        key = (path, finding.code, message)
        seen[key] += 1
        fingerprint = hashlib.sha256("\0".join((*key, str(seen[key]))).encode()).hexdigest()[:32]
        issues.append({
            "check_name": finding.code,
            "description": f"{finding.code}: {message}",
            "severity": "major",
            "fingerprint": fingerprint,
            "location": {"path": path, "positions": {
                "begin": {"line": finding.line, "column": finding.col},
                "end": {"line": finding.end_line, "column": finding.end_col},
            }},
        })
    return issues


def format_gitlab(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    _dump(gitlab_report(reports), out)


# ---------------------------------------------------------------- junit
def format_junit(reports: Sequence[FileReport], out: TextIO, options: OutputOptions = DEFAULT_OPTIONS) -> None:
    """JUnit XML: one test suite per file, a failing test case per finding, an erroring one per
    file that could not be checked (one passing case when everything passed)."""
    import xml.etree.ElementTree as ET  # only for this format

    failures = sum(len(report.findings) for report in reports)
    errors = sum(1 for report in reports if report.error)
    root = ET.Element("testsuites", name="torchlint", tests=str(max(1, failures + errors)),
                      failures=str(failures), errors=str(errors))
    for report in reports:
        if not report.findings and not report.error:
            continue
        suite = ET.SubElement(root, "testsuite", name=report.path, tests=str(len(report.findings) + bool(report.error)),
                              failures=str(len(report.findings)), errors=str(int(bool(report.error))))
        classname = report.path.rsplit(".", 1)[0]
        for finding in report.findings:
            case = ET.SubElement(suite, "testcase", name=f"torchlint.{finding.code}", classname=classname,
                                 line=str(finding.line), column=str(finding.col))
            failure = ET.SubElement(case, "failure", message=message_with_cell(finding))
            failure.text = f"line {finding.line}, col {finding.col}, {message_with_cell(finding)}"
        if report.error:
            case = ET.SubElement(suite, "testcase", name="torchlint.error", classname=classname)
            ET.SubElement(case, "error", message=report.error).text = report.error
    if failures + errors == 0:
        suite = ET.SubElement(root, "testsuite", name="torchlint", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="No errors found", classname="torchlint")
    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(root, encoding="unicode"))
    out.write("\n")
