"""What the server lints for one document, and the edits it offers: a thin layer over
the content pipeline (``torchlint.runner.lint_content``), which the CLI, stdin,
notebook files and the flake8 plugin use too, so that settings, per-file-ignores,
noqa comments, syntax errors and notebook handling are the same everywhere.

A Python file is a program of one cell.  A notebook's Python code cells are given
to the pipeline as a notebook file (``.ipynb`` JSON) of those cells, so it is
linted exactly as ``torchlint nb.ipynb``: one program, IPython syntax masked,
indented cells dedented, a cell that does not parse reported and left out.  Every
edit is the pipeline's new content (one fix applied, every safe fix, a noqa
comment added), split back into cells, and each changed cell diffed.

The server side of this module (``Program``, ``Analysis``) imports neither the
engine nor libcst; ``analyse`` and ``action_edits`` run in the lint worker.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from torchlint.datatypes import Finding
from torchlint.lsp.text import Edit, Point, minimal_edit
from torchlint.runner import Action, Linted, Problem, cell_texts, lint_content, noqa_text, one_fix_text
from torchlint.settings import Settings

if TYPE_CHECKING:
    from torchlint.engine import Build
    from torchlint.rule import Rule

CellEdits = dict[int, list[Edit]]  # cell index -> edits against that cell's text
FIX, NOQA, FIX_ALL = "fix", "noqa", "fixAll"  # what a code action does, in its ``data``


@dataclass(frozen=True)
class Cell:
    uri: str
    text: str


@dataclass(frozen=True)
class Program:
    """The cells linted as one program, and the path the settings see (per-file-ignores)."""

    cells: tuple[Cell, ...]
    path: str
    notebook: bool = False

    @classmethod
    def of_file(cls, path: str, uri: str, text: str) -> Program:
        return cls((Cell(uri, text),), path)

    @classmethod
    def of_notebook(cls, path: str, cells: Sequence[Cell]) -> Program:
        """The program of a notebook's Python code cells (given in order)."""
        return cls(tuple(cells), path, notebook=True)

    @cached_property
    def content(self) -> str:
        """What the pipeline lints: the file's text, or a notebook file of the cells (cell N is ``cells[N - 1]``)."""
        if not self.notebook:
            return self.cells[0].text
        cells = [{"cell_type": "code", "source": cell.text, "metadata": {}, "outputs": []} for cell in self.cells]
        return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})

    def cell_index(self, cell: int | None) -> int:
        """The index in ``cells`` of a finding's or a problem's cell number (None: a file)."""
        return min(max((cell or 1) - 1, 0), len(self.cells) - 1)

    def cell_edits(self, new_content: str) -> CellEdits:
        """The edits, per cell, that turn this program's content into ``new_content``."""
        edits: CellEdits = {}
        for number, text in cell_texts(new_content, notebook=self.notebook).items():
            index = number - 1
            if index < len(self.cells) and (edit := minimal_edit(self.cells[index].text, text)) is not None:
                edits[index] = [edit]
        return edits


@dataclass
class Analysis:
    """One lint of a program: its findings (lines and columns counted in their cell), and
    why it, or some of its cells, could not be analysed."""

    program: Program
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    crash: str | None = None  # the traceback when the problem is a torchlint bug, not the user's
    linted: Linted | None = field(default=None, repr=False)  # in the worker: what the pipeline made

    def outcome(self) -> Outcome:
        from torchlint.cache import plain_finding

        return Outcome([plain_finding(f) for f in self.findings], self.problems, self.crash)

    @classmethod
    def of(cls, program: Program, outcome: Outcome) -> Analysis:
        """The analysis the lint worker made of ``program``."""
        return cls(program, outcome.findings, outcome.problems, outcome.crash)

    def span(self, finding: Finding) -> tuple[int, Point, Point]:
        """A finding's cell index and range (0-based lines, character columns)."""
        return self.program.cell_index(finding.cell), Point(finding.line - 1, finding.col - 1), Point(
            finding.end_line - 1, finding.end_col - 1
        )

    def problem_point(self, problem: Problem) -> tuple[int, Point]:
        if problem.line is None:
            return self.program.cell_index(problem.cell), Point(0, 0)
        return self.program.cell_index(problem.cell), Point(problem.line - 1, (problem.col or 1) - 1)


@dataclass(frozen=True)
class Outcome:
    """An analysis without its program: what the lint worker sends back (a small pickle)."""

    findings: list[Finding]
    problems: list[Problem] = field(default_factory=list)
    crash: str | None = None


def analyse(
    program: Program, settings: Settings, rules: Sequence[type[Rule]] | None = None, build: Build | None = None
) -> Analysis:
    """Lint a program through the content pipeline; never raises (a crash in a rule
    becomes an internal error).  ``rules`` None: those the settings select; ``build``:
    how the tree is built (``engine.parse``)."""
    try:
        linted = lint_content(program.path, program.content, settings, rules, notebook=program.notebook, build=build)
    except Exception as error:  # noqa: BLE001 - a rule's bug must not take the server down
        problem = Problem(f"{type(error).__name__}: {error}")
        return Analysis(program, problems=[problem], crash=traceback.format_exc())
    return Analysis(program, linted.report.findings, linted.problems, linted=linted)


# ---------------------------------------------------------------- edits
def action_edits(
    analysis: Analysis, data: Mapping[str, Any], settings: Settings, rules: Sequence[type[Rule]] | None = None
) -> CellEdits:
    """The edits of the code action described by ``data`` (``convert.code_actions`` makes it)."""
    linted, program = analysis.linted, analysis.program
    if linted is None or linted.analysed is None:
        return {}
    if data.get("action") == FIX_ALL:  # every safe fix, in passes until nothing changes: exactly ``--fix``
        fixed = lint_content(program.path, program.content, settings, rules, action=Action.FIX, unsafe=False,
                             notebook=program.notebook)
        return program.cell_edits(fixed.text) if fixed.changed and fixed.text is not None else {}
    wanted = (data.get("code"), data.get("line"), data.get("col"), data.get("cell"))
    finding = next((f for f in linted.report.findings if (f.code, f.line, f.col, f.cell) == wanted), None)
    if finding is None:  # the document changed since the action was offered
        return {}
    new_content = one_fix_text(linted, finding) if data.get("action") == FIX else noqa_text(linted, finding)
    return program.cell_edits(new_content) if new_content is not None else {}
