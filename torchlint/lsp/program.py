"""What the server lints for one document, and the edits it offers.

A Python file is a program of one cell.  A notebook's code cells are one
program built by ``torchlint.notebook`` exactly as for ``torchlint nb.ipynb``:
cells in order (a name defined in an earlier cell is known in later ones), with
IPython magics masked.  Every edit is computed the same way: make the new program
text (apply one fix, every safe fix, or add a noqa comment), split it back into
cells, and diff each cell.  Nothing here speaks LSP.
"""

from __future__ import annotations

import ast
import json
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from torchlint.cache import plain_finding
from torchlint.engine import Finding, FixError, SourceError, apply_fixes, fix_source, fixable, lint_source
from torchlint.lsp.text import Edit, Point, minimal_edit
from torchlint.noqa import AddNoqaError, add_noqa
from torchlint.notebook import Notebook
from torchlint.rule import Rule, RuleOptions

CellEdits = dict[int, list[Edit]]  # cell index -> edits against that cell's text
FIX, NOQA, FIX_ALL = "fix", "noqa", "fixAll"  # what a code action does, in its ``data``


@dataclass(frozen=True)
class Cell:
    uri: str
    text: str


@dataclass(frozen=True)
class Program:
    cells: tuple[Cell, ...]
    source: str  # what the engine lints
    notebook: Notebook | None = field(default=None, compare=False)

    @classmethod
    def of_file(cls, uri: str, text: str) -> Program:
        return cls((Cell(uri, text),), text)

    @classmethod
    def of_notebook(cls, cells: Sequence[Cell]) -> Program:
        """The program of a notebook's Python code cells (given in order)."""
        document = {"cells": [{"cell_type": "code", "source": cell.text, "metadata": {}} for cell in cells]}
        notebook = Notebook(json.dumps({**document, "metadata": {}}))
        return cls(tuple(cells), notebook.program, notebook)

    def locate(self, line: int) -> tuple[int, int]:
        """(cell index, 0-based line in the cell) of a 1-based program line."""
        if self.notebook is None:
            return 0, line - 1
        number, cell_line = self.notebook.locate(line)
        return number - 1, cell_line - 1

    def cell_edits(self, new_source: str) -> CellEdits:
        """The edits, per cell, that turn this program into ``new_source``."""
        if self.notebook is None:
            edit = minimal_edit(self.source, new_source)
            return {0: [edit]} if edit else {}
        try:
            texts = self.notebook.cell_sources(new_source)
        except FixError:  # a fix moved code across cells
            return {}
        edits: CellEdits = {}
        for number, text in texts.items():
            edit = minimal_edit(self.cells[number - 1].text, text)
            if edit is not None:
                edits[number - 1] = [edit]
        return edits


@dataclass
class Analysis:
    """One lint of a program: its findings, or why it could not be analysed."""

    program: Program
    findings: list[Finding] = field(default_factory=list)
    module: cst.Module | None = None
    error: str | None = None
    error_at: tuple[int, int] | None = None  # 1-based program (line, col) of a syntax error
    crash: str | None = None  # the traceback when the error is a torchlint bug, not the user's

    def outcome(self) -> Outcome:
        return Outcome([plain_finding(f) for f in self.findings], self.error, self.error_at, self.crash)

    @classmethod
    def of(cls, program: Program, outcome: Outcome) -> Analysis:
        """The analysis the lint worker made of ``program`` (without its libcst tree)."""
        return cls(program, outcome.findings, None, outcome.error, outcome.error_at, outcome.crash)

    def span(self, finding: Finding) -> tuple[int, Point, Point]:
        """A finding's range in cell coordinates (kept inside its cell)."""
        cell, line = self.program.locate(finding.line)
        end_cell, end_line = self.program.locate(finding.end_line)
        start = Point(line, finding.col - 1)
        end = Point(end_line, finding.end_col - 1) if end_cell == cell else start
        return cell, start, end

    def error_point(self) -> tuple[int, Point]:
        if self.error_at is None:
            return 0, Point(0, 0)
        cell, line = self.program.locate(self.error_at[0])
        return cell, Point(line, self.error_at[1] - 1)


@dataclass(frozen=True)
class Outcome:
    """An analysis without its program and tree: what the lint worker sends back (a small pickle)."""

    findings: list[Finding]
    error: str | None = None
    error_at: tuple[int, int] | None = None
    crash: str | None = None


def analyse(program: Program, rules: Sequence[type[Rule]], options: RuleOptions) -> Analysis:
    """Lint a program; never raises (a crash in a rule becomes an internal error).

    The language server's one way into the engine's lint (its worker process calls
    it): repoint this function, and the server follows."""
    try:
        result = lint_source(program.source, rules, options)
    except SourceError as error:
        python = _python_syntax_error(program.source)
        if python is not None:
            return Analysis(program, error=python[0], error_at=python[1])
        at = (error.line, error.col or 1) if error.line is not None else None
        return Analysis(program, error=str(error), error_at=at)
    except Exception as error:  # noqa: BLE001 - a rule's bug must not take the server down
        return Analysis(program, error=f"{type(error).__name__}: {error}", crash=traceback.format_exc())
    return Analysis(program, result.findings, result.module)


def _python_syntax_error(source: str) -> tuple[str, tuple[int, int] | None] | None:
    """Python's own message and position for a syntax error: more precise than libcst's
    (which often points at the next token or line).  None when Python accepts the source."""
    try:
        ast.parse(source)
    except SyntaxError as error:
        return f"syntax error: {error.msg}", (error.lineno, error.offset or 1) if error.lineno else None
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, absurd nesting
        return f"syntax error: {error}", None
    return None


# ---------------------------------------------------------------- edits
def action_edits(
    analysis: Analysis, data: Mapping[str, Any], rules: Sequence[type[Rule]], options: RuleOptions
) -> CellEdits:
    """The edits of the code action described by ``data`` (``convert.code_actions`` makes it)."""
    action = data.get("action")
    if action == FIX_ALL:
        return fix_all_edits(analysis, rules, options)
    wanted = (data.get("code"), data.get("line"), data.get("col"))
    finding = next((f for f in analysis.findings if (f.code, f.line, f.col) == wanted), None)
    if finding is None:  # the document changed since the action was offered
        return {}
    return fix_edits(analysis, finding) if action == FIX else noqa_edits(analysis, finding)


def fix_edits(analysis: Analysis, finding: Finding) -> CellEdits:
    """One finding's fix."""
    if analysis.module is None or finding.fix is None:
        return {}
    try:
        fixed = apply_fixes(analysis.module, [finding.fix])
    except Exception:  # noqa: BLE001 - offer no action rather than fail the request
        return {}
    return analysis.program.cell_edits(fixed)


def fix_all_edits(analysis: Analysis, rules: Sequence[type[Rule]], options: RuleOptions) -> CellEdits:
    """Every safe fix, applied in passes until nothing changes (exactly ``--fix``)."""
    if analysis.module is None or not any(fixable(f, unsafe=False) for f in analysis.findings):
        return {}
    try:
        fixed = fix_source(analysis.program.source, rules, options).source
    except (FixError, SourceError):
        return {}
    return analysis.program.cell_edits(fixed)


def noqa_edits(analysis: Analysis, finding: Finding) -> CellEdits:
    """Add ``# noqa: CODE`` where it silences the finding (merged into an existing noqa)."""
    try:
        silenced, changed = add_noqa(analysis.program.source, [finding])
    except AddNoqaError:
        return {}
    return analysis.program.cell_edits(silenced) if changed else {}
