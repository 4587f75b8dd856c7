"""Turn analyses into LSP objects: diagnostics, edits, code actions and hover text.

Stateless: the server passes in the analysis, the cell texts and a function that
counts code units in the negotiated position encoding (UTF-16 by default).
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from torchlint.datatypes import Finding, FixSafety
from torchlint.lsp.program import FIX, FIX_ALL, NOQA, Analysis, CellEdits
from torchlint.lsp.text import Point, UnitCounter, split_lines, to_units
from torchlint.rulebook import page_for, rule_url
from torchlint.runner import Problem

SOURCE = "torchlint"
FIX_ALL_KIND = "source.fixAll.torchlint"
FIX_ALL_TITLE = "Fix all torchlint findings"


class CellTexts:
    """Each cell's lines, split once, for converting characters to code units."""

    def __init__(self, analysis: Analysis, units: UnitCounter, rule_base: str | None = None) -> None:
        self.analysis = analysis
        self.units = units
        self.rule_base = rule_base  # the ``rule-url`` setting: where rule links point
        self._lines = [split_lines(cell.text) for cell in analysis.program.cells]

    def position(self, cell: int, point: Point) -> types.Position:
        lines = self._lines[cell]
        if point.line >= len(lines):  # past the end (a notebook cell without a final newline)
            return types.Position(len(lines) - 1, self.units(lines[-1]))
        return types.Position(point.line, to_units(lines[point.line], point.char, self.units))

    def range(self, cell: int, start: Point, end: Point) -> types.Range:
        return types.Range(self.position(cell, start), self.position(cell, end))

    def finding_range(self, finding: Finding) -> tuple[int, types.Range]:
        cell, start, end = self.analysis.span(finding)
        return cell, self.range(cell, start, end)

    def workspace_edit(self, edits: CellEdits) -> types.WorkspaceEdit:
        uris = [cell.uri for cell in self.analysis.program.cells]
        return types.WorkspaceEdit(
            changes={
                uris[cell]: [types.TextEdit(self.range(cell, e.start, e.end), e.text) for e in cell_edits]
                for cell, cell_edits in edits.items()
            }
        )


# ---------------------------------------------------------------- diagnostics
def diagnostics_by_cell(texts: CellTexts) -> dict[int, list[types.Diagnostic]]:
    """Each cell's diagnostics: the problem of a cell that could not be analysed (a
    syntax error), and the findings of the others."""
    analysis = texts.analysis
    by_cell: dict[int, list[types.Diagnostic]] = {i: [] for i in range(len(analysis.program.cells))}
    for problem in analysis.problems:
        cell, diagnostic = _problem_diagnostic(texts, problem)
        by_cell[cell].append(diagnostic)
    for finding in analysis.findings:
        cell, where = texts.finding_range(finding)
        by_cell[cell].append(finding_diagnostic(finding, where, texts.rule_base))
    return by_cell


def finding_diagnostic(finding: Finding, where: types.Range, rule_base: str | None = None) -> types.Diagnostic:
    url = rule_url(finding.code, rule_base)
    return types.Diagnostic(
        range=where,
        message=finding.message,
        severity=types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=url) if url else None,
        source=SOURCE,
    )


def _problem_diagnostic(texts: CellTexts, problem: Problem) -> tuple[int, types.Diagnostic]:
    """The diagnostic of code that cannot be analysed: from the error to the end of its line."""
    analysis = texts.analysis
    if analysis.crash is not None:
        message = f"torchlint could not analyse this code (a torchlint bug, please report it): {problem.message}"
    else:
        message = problem.message
    cell, start = analysis.problem_point(problem)
    lines = split_lines(analysis.program.cells[cell].text)
    end = Point(start.line, len(lines[start.line])) if start.line < len(lines) else start
    if end.char < start.char:
        end = start
    return cell, types.Diagnostic(
        range=texts.range(cell, start, end),
        message=message,
        severity=types.DiagnosticSeverity.Error,
        source=SOURCE,
    )


# ---------------------------------------------------------------- code actions
def kind_wanted(kind: str, only: Sequence[str] | None) -> bool:
    """LSP kinds are hierarchical: asking for ``source.fixAll`` includes ``source.fixAll.torchlint``."""
    return only is None or any(kind == wanted or kind.startswith(wanted + ".") for wanted in only)


def code_actions(texts: CellTexts, cell: int, requested: types.Range, only: Sequence[str] | None) -> list[types.CodeAction]:
    """The actions for a range of one cell, each with only its ``data`` (which names the cell's uri).

    The edit of an action is computed by the lint worker, when the user picks it
    (``codeAction/resolve``) or, for clients that cannot resolve, before answering:
    editors request actions on every cursor move, and computing a fix costs a pass
    over the whole module.
    """
    uri = texts.analysis.program.cells[cell].uri
    actions: list[types.CodeAction] = []
    if kind_wanted(types.CodeActionKind.QuickFix, only):
        for finding in texts.analysis.findings:
            finding_cell, where = texts.finding_range(finding)
            if finding_cell == cell and _overlaps(where, requested):
                actions += _finding_actions(uri, finding, where, texts.rule_base)
    if kind_wanted(FIX_ALL_KIND, only) and any(_safely_fixable(f) for f in texts.analysis.findings):
        actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL_KIND, data={"uri": uri, "action": FIX_ALL}))
    return actions


def _safely_fixable(finding: Finding) -> bool:
    """What "Fix all" applies (``--fix`` without ``--unsafe-fixes``)."""
    return finding.fix is not None and finding.fix.safety is FixSafety.SAFE


def _finding_actions(uri: str, finding: Finding, where: types.Range, rule_base: str | None) -> list[types.CodeAction]:
    diagnostic = finding_diagnostic(finding, where, rule_base)
    # The finding is found again by its code and position when the action is resolved.
    data = {"uri": uri, "code": finding.code, "line": finding.line, "col": finding.col, "cell": finding.cell}
    actions: list[types.CodeAction] = []
    if finding.fix is not None:
        unsafe = finding.fix.safety is FixSafety.UNSAFE
        actions.append(
            types.CodeAction(
                title=f"Fix {finding.code}: {finding.fix.description}" + (" (unsafe)" if unsafe else ""),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=not unsafe,
                data={**data, "action": FIX},
            )
        )
    actions.append(
        types.CodeAction(
            title=f"Disable {finding.code} for this line",
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[diagnostic],
            data={**data, "action": NOQA},
        )
    )
    return actions


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return _key(a.start) <= _key(b.end) and _key(b.start) <= _key(a.end)


def _key(position: types.Position) -> tuple[int, int]:
    return position.line, position.character


# ---------------------------------------------------------------- hover
def hover(texts: CellTexts, cell: int, position: types.Position) -> types.Hover | None:
    parts: list[str] = []
    first: types.Range | None = None
    for finding in texts.analysis.findings:
        finding_cell, where = texts.finding_range(finding)
        if finding_cell == cell and _key(where.start) <= _key(position) <= _key(where.end):
            parts.append(explanation(finding, texts.rule_base))
            first = first or where
    if not parts:
        return None
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)),
        range=first,
    )


def explanation(finding: Finding, rule_base: str | None = None) -> str:
    """A finding's message followed by its rule page's explanation, in Markdown."""
    lines = [f"**{finding.code}** ({finding.name}): {finding.message}"]
    page = page_for(finding.code)
    if page is not None:
        for heading in ("What it does", "Why is this bad?"):
            if body := page.section(heading):
                lines += ["", f"#### {heading}", "", body]
    if url := rule_url(finding.code, rule_base):
        lines += ["", f"[{finding.code} in the rule book]({url})"]
    return "\n".join(lines)
