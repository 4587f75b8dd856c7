"""What the server lints for one document, and the edits it offers.

A Python file is a program of one cell.  A notebook's code cells are analysed in
order as one program, so a name defined in an earlier cell is known in later
ones; IPython magics and shell escapes are masked so that the program parses.
Everything here works in program coordinates and maps results back to cells;
nothing here speaks LSP.
"""

from __future__ import annotations

import bisect
import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.engine import MAX_FIX_PASSES, Finding, FixError, SourceError, fix_edit, fix_source, fixable, lint_source
from torchlint.lsp.text import Edit, Point, apply_edits, line_starts, minimal_edit, newline_offset, point_at, split_lines
from torchlint.noqa import NOQA
from torchlint.rule import Rule, RuleOptions

_CELL_MAGIC = re.compile(r"\s*%%")
# `%time f()`, `!pip install x`, `files = !ls`, `t = %timeit -o f()`, `?obj`
_LINE_MAGIC = re.compile(r"\s*(?:[%!?]|[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[%!])")
_PLACEHOLDER = "pass"


@dataclass(frozen=True)
class Cell:
    uri: str
    text: str


@dataclass(frozen=True)
class Program:
    cells: tuple[Cell, ...]
    source: str  # what the engine lints
    first_lines: tuple[int, ...]  # 0-based program line on which each cell starts
    line_counts: tuple[int, ...]
    masked: frozenset[int] = frozenset()  # program lines replaced by a placeholder

    @classmethod
    def of_file(cls, uri: str, text: str) -> Program:
        return cls((Cell(uri, text),), text, (0,), (len(split_lines(text)),))

    @classmethod
    def of_notebook(cls, cells: Sequence[Cell]) -> Program:
        lines: list[str] = []
        masked: set[int] = set()
        first_lines: list[int] = []
        line_counts: list[int] = []
        for cell in cells:
            cell_lines = split_lines(cell.text)
            if cell_lines[-1] == "":  # the text ends with a line break (or is empty)
                cell_lines.pop()
            first_lines.append(len(lines))
            line_counts.append(len(cell_lines))
            for number in _magic_lines(cell_lines):
                masked.add(len(lines) + number)
                indent = cell_lines[number][: len(cell_lines[number]) - len(cell_lines[number].lstrip())]
                cell_lines[number] = indent + _PLACEHOLDER
            lines.extend(cell_lines)
        source = "".join(line + "\n" for line in lines)
        return cls(tuple(cells), source, tuple(first_lines), tuple(line_counts), frozenset(masked))

    @property
    def is_notebook(self) -> bool:
        return len(self.cells) != 1 or bool(self.masked) or self.first_lines != (0,)

    @cached_property
    def _starts(self) -> list[int]:
        return line_starts(self.source)

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.source)

    def locate(self, line: int) -> tuple[int, int]:
        """(cell index, line in the cell) of a 0-based program line."""
        filled = [i for i, count in enumerate(self.line_counts) if count] or [0]
        firsts = [self.first_lines[i] for i in filled]
        cell = filled[max(0, bisect.bisect_right(firsts, line) - 1)]
        return cell, line - self.first_lines[cell]

    def program_line(self, cell: int, line: int) -> int:
        return self.first_lines[cell] + line

    def to_cell(self, start: Point, end: Point) -> tuple[int, Point, Point] | None:
        """A program range in cell coordinates; None when it crosses cells or touches a masked line."""
        cell, start_line = self.locate(start.line)
        end_cell, end_line = self.locate(end.line)
        if end_cell != cell or any(line in self.masked for line in range(start.line, end.line + 1)):
            return None
        return cell, Point(start_line, start.char), Point(end_line, end.char)

    def point(self, offset: int) -> Point:
        return point_at(self._starts, offset)


def _magic_lines(lines: list[str]) -> list[int]:
    if lines and _CELL_MAGIC.match(lines[0]):
        return list(range(len(lines)))
    found: list[int] = []
    continued = False
    for number, line in enumerate(lines):
        if continued or _LINE_MAGIC.match(line):
            found.append(number)
            continued = line.endswith("\\")
    return found


@dataclass
class Analysis:
    """One lint of a program: its findings, or why it could not be analysed."""

    program: Program
    findings: list[Finding] = field(default_factory=list)
    module: cst.Module | None = None
    error: str | None = None
    error_at: Point | None = None  # program position of a syntax error
    internal: bool = False  # the error is a torchlint bug, not the user's

    def span(self, finding: Finding) -> tuple[int, Point, Point]:
        """A finding's range in cell coordinates (clipped to its cell)."""
        cell, start = self.program.locate(finding.line - 1)
        end_cell, end_line = self.program.locate(finding.end_line - 1)
        end = Point(end_line, finding.end_col - 1)
        if end_cell != cell:
            last = self.program.line_counts[cell] - 1
            end = Point(last, len(self.program.lines[self.program.program_line(cell, last)]))
        return cell, Point(start, finding.col - 1), end


def analyse(program: Program, rules: Sequence[type[Rule]], options: RuleOptions) -> Analysis:
    """Lint a program; never raises (a crash in a rule becomes an internal error)."""
    try:
        result = lint_source(program.source, rules, options)
    except SourceError as error:
        at = Point((error.line or 1) - 1, (error.col or 1) - 1) if error.line is not None else None
        return Analysis(program, error=str(error), error_at=at)
    except Exception as error:  # noqa: BLE001 - a rule's bug must not take the server down
        return Analysis(program, error=f"{type(error).__name__}: {error}", internal=True)
    return Analysis(program, result.findings, result.module)


# ---------------------------------------------------------------- edits
CellEdits = dict[int, list[Edit]]  # cell index -> edits against that cell's text


def fix_edits(analysis: Analysis, finding: Finding) -> CellEdits | None:
    """One finding's fix as an edit of its cell."""
    if analysis.module is None or finding.fix is None:
        return None
    try:
        found = fix_edit(analysis.module, analysis.program.source, finding)
    except Exception:  # noqa: BLE001 - no action rather than a failed request
        return None
    if found is None:
        return None
    (line, col), (end_line, end_col), text = found
    source = analysis.program.source
    start = analysis.program.point(newline_offset(source, line, col))
    end = analysis.program.point(newline_offset(source, end_line, end_col))
    placed = analysis.program.to_cell(start, end)
    if placed is None:
        return None
    cell, cell_start, cell_end = placed
    return {cell: [Edit(cell_start, cell_end, text)]}


def fix_all_edits(analysis: Analysis, rules: Sequence[type[Rule]], options: RuleOptions) -> CellEdits:
    """Every safe fix, applied in passes until nothing changes (like ``--fix``)."""
    program = analysis.program
    if analysis.module is None or not any(fixable(f, unsafe=False) for f in analysis.findings):
        return {}
    if not program.is_notebook:
        try:
            fixed = fix_source(program.source, rules, options).source
        except (FixError, SourceError):
            return {}
        edit = minimal_edit(program.source, fixed)
        return {0: [edit]} if edit else {}
    texts = _fix_cells(analysis, rules, options)
    edits: CellEdits = {}
    for index, (cell, text) in enumerate(zip(program.cells, texts)):
        edit = minimal_edit(cell.text, text)
        if edit is not None:
            edits[index] = [edit]
    return edits


def _fix_cells(analysis: Analysis, rules: Sequence[type[Rule]], options: RuleOptions) -> list[str]:
    """The notebook's cell texts with every safe fix applied; each pass must still parse."""
    texts = [cell.text for cell in analysis.program.cells]
    for _ in range(MAX_FIX_PASSES):
        per_cell: CellEdits = {}
        taken: set[tuple[int, int]] = set()  # (cell, line) already being edited this pass
        for finding in analysis.findings:
            if not fixable(finding, unsafe=False):
                continue
            edits = fix_edits(analysis, finding)
            if not edits:
                continue
            lines = {(cell, line) for cell, cell_edits in edits.items() for e in cell_edits
                     for line in range(e.start.line, e.end.line + 1)}
            if lines & taken:
                continue  # overlaps another fix: the next pass gets it
            taken |= lines
            for cell, cell_edits in edits.items():
                per_cell.setdefault(cell, []).extend(cell_edits)
        if not per_cell:
            break
        candidate = [apply_edits(text, per_cell.get(i, [])) for i, text in enumerate(texts)]
        cells = [Cell(cell.uri, text) for cell, text in zip(analysis.program.cells, candidate)]
        next_analysis = analyse(Program.of_notebook(cells), rules, options)
        if next_analysis.module is None:
            break  # a fix broke the program: keep the last good texts
        texts, analysis = candidate, next_analysis
    return texts


def noqa_edit(analysis: Analysis, finding: Finding) -> tuple[int, Edit] | None:
    """Add (or extend) ``# noqa: CODE`` on a line that suppresses the finding."""
    program = analysis.program
    ends_in_code, comments = _line_ends(program.source)
    line = next((n for n in _noqa_candidates(analysis, finding) if n in ends_in_code), finding.line)
    if line - 1 in program.masked or line > len(program.lines):
        return None
    text = program.lines[line - 1]
    comment_col = comments.get(line)
    edit: Edit
    if comment_col is not None and (match := NOQA.search(text, comment_col)):
        if not match.group("codes"):
            return None  # a bare `# noqa` already silences everything on the line
        insert = match.end("codes")
        edit = Edit(Point(line - 1, insert), Point(line - 1, insert), f", {finding.code}")
    else:
        code_end = len(text.rstrip())
        edit = Edit(Point(line - 1, code_end), Point(line - 1, len(text)), f"  # noqa: {finding.code}")
    placed = program.to_cell(edit.start, edit.end)
    if placed is None:
        return None
    cell, start, end = placed
    return cell, Edit(start, end, edit.text)


def _noqa_candidates(analysis: Analysis, finding: Finding) -> list[int]:
    """1-based lines whose noqa comment the engine honours for this finding, best first."""
    candidates = [finding.line]
    statement = finding.diagnostic.statement if finding.diagnostic else None
    if statement is not None and analysis.module is not None:
        positions = MetadataWrapper(analysis.module, unsafe_skip_copy=True).resolve(PositionProvider)
        if statement in positions:
            where = positions[statement]
            candidates += [where.start.line, where.end.line]
    return candidates


def _line_ends(source: str) -> tuple[set[int], dict[int, int]]:
    """Lines that end in code rather than inside a string, and where each line's comment starts."""
    ends_in_code: set[int] = set()
    comments: dict[int, int] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                ends_in_code.add(token.start[0])
            elif token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.start[1]
    except (tokenize.TokenError, SyntaxError):
        pass
    return ends_in_code, comments
