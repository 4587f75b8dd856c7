"""The content pipeline: one entry point, ``lint_content(path, content, settings)``,
that checks, fixes or adds noqa comments to a file's content and returns the
findings and the new text (modelled on Fixit's ``fixit_bytes``).  Every front end
uses it: files and stdin on the command line, notebooks, the flake8 plugin.

A Python file is a program of its own; a notebook (``.ipynb``) is the program
its ``torchlint.notebook.Notebook`` builds from the code cells, and findings are
mapped back to cells.  A notebook cell that does not parse is reported and left
out; the other cells are linted as one program.

Importing this module does not import the engine (nor libcst): the functions do,
when some content is really analysed.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import fnmatch
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint import project_files
from torchlint.datatypes import FileReport, Finding
from torchlint.files import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, ReadError, SourceFile, decode, read_bytes, write_atomic
from torchlint.settings import Settings, resolve_rules

if TYPE_CHECKING:
    from torchlint.engine import Build, SourceError
    from torchlint.notebook import Notebook
    from torchlint.rule import Rule

__all__ = [
    "Action", "FileReport", "Linted", "NOTEBOOK_SUFFIX", "Problem", "add_noqa_to_file", "cell_texts", "check_file",
    "fix_file", "is_notebook", "lint_content", "noqa_text", "one_fix_text", "rules_for_path",
]


NOTEBOOK_SUFFIX = ".ipynb"


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


def _match_candidates(path: str, project_root: str | None) -> set[str]:
    """``path`` as given and relative to the project root, in posix form."""
    normalized = path.replace("\\", "/")
    while normalized.startswith("./"):
        normalized = normalized[2:]
    candidates = {path, normalized}
    if project_root is not None:
        try:
            candidates.add(Path(path).absolute().relative_to(project_root).as_posix())
        except ValueError:
            pass
    return candidates


def rules_for_path(path: str, rules: Sequence[type[Rule]], settings: Settings) -> list[type[Rule]]:
    ignored: set[str] = set()
    candidates = _match_candidates(path, settings.project_root)
    basename = path.replace("\\", "/").rsplit("/", 1)[-1]
    for pattern, codes in settings.per_file_ignores:
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates) or (
            "/" not in pattern and fnmatch.fnmatchcase(basename, pattern)
        ):
            ignored.update(codes)
    if not ignored:
        return list(rules)
    return [rule for rule in rules if not any(rule.code.startswith(code) or code == "ALL" for code in ignored)]


# ---------------------------------------------------------------- the pipeline
class Action(enum.Enum):
    CHECK = "check"
    FIX = "fix"  # apply the fixes (safe ones, or also unsafe ones)
    ADD_NOQA = "add-noqa"  # add `# noqa: CODE` for every finding


@dataclass(frozen=True)
class Problem:
    """Why content, or one notebook cell, could not be analysed (``FileReport.error`` in parts)."""

    message: str
    line: int | None = None  # 1-based, counted in ``cell`` for a notebook
    col: int | None = None  # 1-based
    cell: int | None = None  # a notebook's cell number (counting every cell, from 1)

    def __str__(self) -> str:
        where = f"{self.line}:{self.col or 1}: " if self.line is not None else ""
        if self.cell is None:
            return f"{where}{self.message}"
        return f"cell {self.cell}:{where}{self.message}" if where else f"cell {self.cell}: {self.message}"


@dataclass
class _Analysed:
    """The analysed program behind a check, kept so that one finding's fix or noqa comment
    is made without parsing again (``one_fix_text``, ``noqa_text``)."""

    program: str
    module: object  # the libcst module (None when no rule needed a tree)
    findings: list[Finding]  # in program coordinates, one for each of the report's findings
    notebook: Notebook | None = None


@dataclass
class Linted:
    """What ``lint_content`` made of one file's content."""

    report: FileReport  # findings (those that remain after fixing), error, fixed, diff; ``source``: ``text``
    text: str | None = None  # the content after the action (None: it could not be decoded)
    encoding: str = "utf-8"
    original: SourceFile | None = field(default=None, repr=False)  # the decoded input
    noqa_added: int = 0  # lines given a noqa comment (``Action.ADD_NOQA``)
    problems: list[Problem] = field(default_factory=list)  # what ``report.error`` says, with positions
    analysed: _Analysed | None = field(default=None, repr=False)  # ``Action.CHECK`` of content that parsed

    @property
    def changed(self) -> bool:
        return self.original is not None and self.text is not None and self.text != self.original.text


def lint_content(
    path: str,
    content: bytes | str,
    settings: Settings,
    rules: Sequence[type[Rule]] | None = None,
    *,
    action: Action = Action.CHECK,
    unsafe: bool | None = None,
    respect_noqa: bool = True,
    notebook: bool | None = None,
    build: Build | None = None,
) -> Linted:
    """Lint one file's content (bytes as stored, decoded as Python does, or text).

    ``path`` names the file: it decides notebook or not, the per-file-ignores and
    the messages.  ``rules`` None: those ``settings`` select.  ``unsafe`` None: the
    settings' ``unsafe_fixes``.  ``respect_noqa`` False leaves ``# noqa`` and
    ``# flake8: noqa`` comments to the caller (flake8's plugin, with ``--disable-noqa``).
    ``notebook`` None: a notebook when ``path`` ends in ``.ipynb`` (an editor's Python
    view of a notebook has that name too).  ``build`` builds the tree of a check (the
    language server's worker reuses the previous version's: ``torchlint.incremental``).
    Never raises for bad content: the report's ``error`` says what is wrong (a syntax
    error, undecodable bytes, invalid notebook JSON), and ``problems`` says it with positions.
    """
    if isinstance(content, str):
        if (unencodable := _unencodable(content)) is not None:
            return Linted(FileReport(path, error=unencodable), problems=[Problem(unencodable)])
        source = SourceFile(content, "utf-8")
    else:
        try:
            source = decode(content)
        except ReadError as error:
            return Linted(FileReport(path, error=str(error)), problems=[Problem(str(error))])
    selected = rules_for_path(path, resolve_rules(settings) if rules is None else rules, settings)
    unsafe = settings.unsafe_fixes if unsafe is None else unsafe
    job = _Job(path, settings, selected, action, unsafe, respect_noqa, build)
    as_notebook = is_notebook(path) if notebook is None else notebook
    with project_files.session(path) as lookups:  # imports of sibling files are read relative to it
        linted = _lint_notebook(job, source) if as_notebook else _lint_python(job, source)
    if lookups is not None and lookups.read:
        linted.report.dependencies = tuple((p, *stamp) for p, stamp in sorted(lookups.read.items()))
    linted.original, linted.encoding = source, source.encoding
    if linted.problems:
        linted.report.error = _problems_line(linted.problems)
    linted.report.source = linted.text if linted.report.error is None else None  # as the cache gives it
    return linted


def _unencodable(text: str) -> str | None:
    """Why text handed over as a string (an editor's, a shell's) is no source file: a lone
    surrogate cannot be encoded, and the parser cannot take it; None when it is fine."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"cannot encode the text as UTF-8 ({error.reason} at character {error.start})"
    return None


@dataclass(frozen=True)
class _Job:
    path: str
    settings: Settings
    rules: Sequence[type[Rule]]
    action: Action
    unsafe: bool
    respect_noqa: bool
    build: Build | None = None


@dataclass
class _Outcome:
    """The action done on one program (a file's source, or a notebook's cells)."""

    program: str  # after the action
    findings: list[Finding]
    module: object = None  # ``Action.CHECK``: the libcst tree of ``program`` the findings point into
    fixed: int = 0
    noqa_added: int = 0
    fixed_codes: list[str] = dataclasses.field(default_factory=list)  # the rule of each applied fix


def _run(job: _Job, program: str) -> _Outcome:
    """Check, fix or add noqa to one program; raises the engine's ``SourceError`` and
    ``FixError``, and ``AddNoqaError``."""
    from torchlint import engine  # analysis: libcst, only now

    options = job.settings.rule_options
    if job.action is Action.FIX:
        fixed = engine.fix_source(program, job.rules, options, unsafe=job.unsafe)
        return _Outcome(fixed.source, fixed.remaining, fixed=len(fixed.applied),
                        fixed_codes=[finding.code for finding in fixed.applied])
    result = engine.lint_source(program, job.rules, options, respect_noqa=job.respect_noqa, build=job.build)
    if job.action is Action.ADD_NOQA:
        return _with_noqa_comments(program, result.findings)
    findings = engine.with_fix_edits(result, program) if job.settings.fix_edits else result.findings
    return _Outcome(program, findings, result.module)


def _with_noqa_comments(program: str, findings: list[Finding]) -> _Outcome:
    import libcst as cst

    from torchlint.engine import FixError
    from torchlint.noqa import add_noqa

    new_program, changed = add_noqa(program, findings)
    if changed:
        try:
            cst.parse_module(new_program)  # a comment at a line's end never breaks code; make sure
        except cst.ParserSyntaxError as error:
            raise FixError(f"adding noqa comments would break the code ({error.message}); nothing is written") from None
    return _Outcome(new_program, [], noqa_added=changed)


def _analysis_errors() -> tuple[type[Exception], ...]:
    from torchlint.engine import FixError, SourceError
    from torchlint.noqa import AddNoqaError

    return SourceError, FixError, AddNoqaError


def _lint_python(job: _Job, source: SourceFile) -> Linted:
    report = FileReport(job.path)
    try:
        outcome = _run(job, source.text)
    except _analysis_errors() as error:
        return Linted(report, source.text, problems=[_problem(error)])
    report.findings, report.fixed, report.fixed_codes = outcome.findings, outcome.fixed, outcome.fixed_codes
    if outcome.program != source.text:
        report.diff = "".join(difflib.unified_diff(
            source.text.splitlines(keepends=True), outcome.program.splitlines(keepends=True),
            fromfile=job.path, tofile=job.path,
        ))
    analysed = _Analysed(source.text, outcome.module, outcome.findings) if job.action is Action.CHECK else None
    return Linted(report, outcome.program, noqa_added=outcome.noqa_added, analysed=analysed)


def _lint_notebook(job: _Job, source: SourceFile) -> Linted:
    from torchlint.notebook import Notebook, NotebookError, cell_diffs

    report = FileReport(job.path)
    try:
        notebook = Notebook(source.text)
        notebook, cell_errors, outcome = _run_on_cells_that_parse(job, notebook)
        new_text = notebook.render(outcome.program)
    except NotebookError as error:
        return Linted(report, source.text, problems=[Problem(str(error))])
    except _analysis_errors() as error:
        from torchlint.engine import SourceError

        problem = _notebook_problem(notebook, error) if isinstance(error, SourceError) else Problem(str(error))
        return Linted(report, source.text, problems=[problem])
    after = notebook if new_text == source.text else Notebook(new_text, notebook.skipped)
    findings = outcome.findings
    if after.program != outcome.program:  # cannot happen unless masking is not idempotent: re-lint to be exact
        findings = _run(dataclasses.replace(job, action=Action.CHECK), after.program).findings
    report.findings = [after.to_cells(finding) for finding in findings]
    report.fixed, report.fixed_codes = outcome.fixed, outcome.fixed_codes
    report.cells = after.cell_texts
    report.diff = cell_diffs(job.path, notebook, after)
    analysed = _Analysed(notebook.program, outcome.module, findings, notebook) if job.action is Action.CHECK else None
    return Linted(report, new_text, noqa_added=outcome.noqa_added, problems=cell_errors, analysed=analysed)


def _run_on_cells_that_parse(job: _Job, notebook: Notebook) -> tuple[Notebook, list[Problem], _Outcome]:
    """Run the job on the notebook's program; if it does not parse, without the cells that
    do not parse on their own.  Also returns the problem of each of those cells (its
    position counted in the cell)."""
    from torchlint.engine import SourceError, check_syntax

    try:
        return notebook, [], _run(job, notebook.program)
    except SourceError:
        bad: list[Problem] = []
        for cell in notebook.cells:
            try:
                check_syntax(cell.program_text)
            except SourceError as error:
                bad.append(_cell_problem(notebook, cell.number, error))
        if not bad:  # each cell parses, the program does not: the error is where the parser gave up
            raise
    notebook = notebook.without(frozenset(problem.cell for problem in bad if problem.cell is not None))
    return notebook, bad, _run(job, notebook.program)


def _cell_problem(notebook: Notebook, number: int, error: SourceError) -> Problem:
    if error.line is None:
        return Problem(str(error), cell=number)
    line, col = notebook.position_in_cell(number, error.line, error.col or 1)
    return Problem(str(error), line, col, number)


def _notebook_problem(notebook: Notebook, error: SourceError) -> Problem:
    if error.line is None:
        return Problem(str(error))
    number, line = notebook.locate(error.line)
    return _cell_problem(notebook, number, SourceError(str(error), line, error.col))


def _problems_line(problems: list[Problem]) -> str:
    """One line for the report: the first problem, and the numbers of the other cells left out."""
    first, *others = problems
    if not others:
        return str(first)
    numbers = ", ".join(str(problem.cell) for problem in others)
    return f"{first} (cell{'s' * (len(others) > 1)} {numbers} do{'es' * (len(others) == 1)} not parse either)"


def _problem(error: Exception) -> Problem:
    """The error with its position when it has one (a ``SourceError``)."""
    line = getattr(error, "line", None)
    return Problem(str(error), line, (getattr(error, "col", None) or 1) if line is not None else None)


# ---------------------------------------------------------------- one finding at a time (editors)
def one_fix_text(linted: Linted, finding: Finding) -> str | None:
    """The content with only this finding's fix applied (safe or not: the user picked it).

    ``finding`` is one of ``linted.report.findings`` of an ``Action.CHECK``; None when it
    has no fix, or the fix cannot be applied (too deep, the result does not parse)."""
    from torchlint.engine import FixError, SourceError, apply_fixes, check_syntax

    analysed, program_finding = _analysed_finding(linted, finding)
    if program_finding is None or program_finding.fix is None or analysed.module is None:
        return None
    try:
        program = apply_fixes(analysed.module, [program_finding.fix])  # type: ignore[arg-type]
        check_syntax(program)
        return _content_of(analysed, program)
    except (FixError, SourceError):
        return None


def noqa_text(linted: Linted, finding: Finding) -> str | None:
    """The content with a ``# noqa: CODE`` comment that silences this finding (merged into
    a noqa comment already there), made as ``Action.ADD_NOQA`` makes it; None if it cannot be."""
    analysed, program_finding = _analysed_finding(linted, finding)
    if program_finding is None:
        return None
    try:
        outcome = _with_noqa_comments(analysed.program, [program_finding])
        return _content_of(analysed, outcome.program) if outcome.noqa_added else None
    except _analysis_errors():
        return None


def _analysed_finding(linted: Linted, finding: Finding) -> tuple[_Analysed, Finding | None]:
    analysed = linted.analysed
    if analysed is None:
        raise ValueError("only the findings of a check of content that parsed can be fixed one at a time")
    index = next((i for i, reported in enumerate(linted.report.findings) if reported is finding), None)
    return analysed, analysed.findings[index] if index is not None else None


def _content_of(analysed: _Analysed, program: str) -> str:
    """The file's content for a new text of its program (a notebook: its JSON, cells rewritten)."""
    return analysed.notebook.render(program) if analysed.notebook is not None else program


def cell_texts(content: str, *, notebook: bool) -> dict[int, str]:
    """Content's Python text by cell number: ``{1: text}`` for a Python file, each Python
    code cell's source for a notebook (``NotebookError`` if it is not one)."""
    if not notebook:
        return {1: content}
    from torchlint.notebook import Notebook

    return Notebook(content).cell_texts


# ---------------------------------------------------------------- files
def _never_crash(function: Callable[..., FileReport]) -> Callable[..., FileReport]:
    """A bug in torchlint while handling one file is reported for that file, and the run goes on."""

    @functools.wraps(function)
    def guarded(path: str, *args: object, **kwargs: object) -> FileReport:
        try:
            return function(path, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - the last line of defence
            return FileReport(path, error=internal_error(error))

    return guarded


def internal_error(error: Exception) -> str:
    detail = str(error).splitlines()[0][:200] if str(error) else ""
    return f"internal error: {type(error).__name__}: {detail} (please report this torchlint bug)"


def _read(path: str) -> bytes:
    return read_bytes(path, MAX_NOTEBOOK_BYTES if is_notebook(path) else MAX_SOURCE_BYTES)


@_never_crash
def check_file(path: str, rules: Sequence[type[Rule]], settings: Settings) -> FileReport:
    try:
        data = _read(path)
    except ReadError as error:
        return FileReport(path, error=str(error))
    return lint_content(path, data, settings, rules).report


@_never_crash
def fix_file(
    path: str, rules: Sequence[type[Rule]], settings: Settings, *, write: bool, unsafe: bool | None = None
) -> FileReport:
    """Fix one file; with ``write`` False only compute the diff."""
    try:
        data = _read(path)
    except ReadError as error:
        return FileReport(path, error=str(error))
    linted = lint_content(path, data, settings, rules, action=Action.FIX, unsafe=unsafe)
    if write and linted.changed:  # a notebook's cells that parse are fixed even if another does not
        _write(linted)
    return linted.report


def add_noqa_to_file(path: str, rules: Sequence[type[Rule]], settings: Settings) -> tuple[int, str | None]:
    """Add ``# noqa: CODE`` comments for every finding; returns (lines changed, error)."""
    try:
        data = _read(path)
        linted = lint_content(path, data, settings, rules, action=Action.ADD_NOQA)
    except ReadError as error:
        return 0, str(error)
    except Exception as error:  # noqa: BLE001 - the last line of defence
        return 0, internal_error(error)
    if linted.changed:
        _write(linted)
    return linted.noqa_added, linted.report.error


def _write(linted: Linted) -> None:
    """Write the new text over the file read (the report's error says why not)."""
    assert linted.text is not None
    try:
        write_atomic(linted.report.path, linted.text, linted.encoding, original=linted.original)
    except OSError as error:
        linted.report.error = f"cannot write fixed file: {error.strerror or error}"
