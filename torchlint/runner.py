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

from torchlint.datatypes import FileReport, Finding
from torchlint.files import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, ReadError, SourceFile, decode, read_bytes, write_atomic
from torchlint.settings import Settings, resolve_rules

if TYPE_CHECKING:
    from torchlint.engine import SourceError
    from torchlint.notebook import Notebook
    from torchlint.rule import Rule

__all__ = [
    "Action", "FileReport", "Linted", "NOTEBOOK_SUFFIX", "add_noqa_to_file", "check_file", "fix_file",
    "is_notebook", "lint_content", "rules_for_path",
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


@dataclass
class Linted:
    """What ``lint_content`` made of one file's content."""

    report: FileReport  # findings (those that remain after fixing), error, fixed, diff; ``source``: ``text``
    text: str | None = None  # the content after the action (None: it could not be decoded)
    encoding: str = "utf-8"
    original: SourceFile | None = field(default=None, repr=False)  # the decoded input
    noqa_added: int = 0  # lines given a noqa comment (``Action.ADD_NOQA``)

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
) -> Linted:
    """Lint one file's content (bytes as stored, decoded as Python does, or text).

    ``path`` names the file: it decides notebook or not, the per-file-ignores and
    the messages.  ``rules`` None: those ``settings`` select.  ``unsafe`` None: the
    settings' ``unsafe_fixes``.  ``respect_noqa`` False leaves ``# noqa`` and
    ``# flake8: noqa`` comments to the caller (flake8's plugin, with ``--disable-noqa``).  Never raises for bad content: the report's ``error``
    says what is wrong (a syntax error, undecodable bytes, invalid notebook JSON).
    """
    if isinstance(content, str):
        source = SourceFile(content, "utf-8")
    else:
        try:
            source = decode(content)
        except ReadError as error:
            return Linted(FileReport(path, error=str(error)))
    selected = rules_for_path(path, resolve_rules(settings) if rules is None else rules, settings)
    job = _Job(path, settings, selected, action, settings.unsafe_fixes if unsafe is None else unsafe, respect_noqa)
    linted = _lint_notebook(job, source) if is_notebook(path) else _lint_python(job, source)
    linted.original, linted.encoding = source, source.encoding
    linted.report.source = linted.text if linted.report.error is None else None  # as the cache gives it
    return linted


@dataclass(frozen=True)
class _Job:
    path: str
    settings: Settings
    rules: Sequence[type[Rule]]
    action: Action
    unsafe: bool
    respect_noqa: bool


@dataclass
class _Outcome:
    """The action done on one program (a file's source, or a notebook's cells)."""

    program: str  # after the action
    findings: list[Finding]
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
    result = engine.lint_source(program, job.rules, options, respect_noqa=job.respect_noqa)
    if job.action is Action.ADD_NOQA:
        return _with_noqa_comments(program, result.findings)
    findings = engine.with_fix_edits(result, program) if job.settings.fix_edits else result.findings
    return _Outcome(program, findings)


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
        report.error = _error_text(error)
        return Linted(report, source.text)
    report.findings, report.fixed, report.fixed_codes = outcome.findings, outcome.fixed, outcome.fixed_codes
    if outcome.program != source.text:
        report.diff = "".join(difflib.unified_diff(
            source.text.splitlines(keepends=True), outcome.program.splitlines(keepends=True),
            fromfile=job.path, tofile=job.path,
        ))
    return Linted(report, outcome.program, noqa_added=outcome.noqa_added)


def _lint_notebook(job: _Job, source: SourceFile) -> Linted:
    from torchlint.notebook import Notebook, NotebookError, cell_diffs

    report = FileReport(job.path)
    try:
        notebook = Notebook(source.text)
        notebook, cell_errors, outcome = _run_on_cells_that_parse(job, notebook)
        new_text = notebook.render(outcome.program)
    except NotebookError as error:
        report.error = str(error)
        return Linted(report, source.text)
    except _analysis_errors() as error:
        from torchlint.engine import SourceError

        report.error = _notebook_error(notebook, error) if isinstance(error, SourceError) else str(error)
        return Linted(report, source.text)
    after = notebook if new_text == source.text else Notebook(new_text, notebook.skipped)
    findings = outcome.findings
    if after.program != outcome.program:  # cannot happen unless masking is not idempotent: re-lint to be exact
        findings = _run(dataclasses.replace(job, action=Action.CHECK), after.program).findings
    report.findings = [after.to_cells(finding) for finding in findings]
    report.fixed, report.fixed_codes = outcome.fixed, outcome.fixed_codes
    report.cells = after.cell_texts
    report.diff = cell_diffs(job.path, notebook, after)
    report.error = _cells_error(cell_errors)
    return Linted(report, new_text, noqa_added=outcome.noqa_added)


def _run_on_cells_that_parse(job: _Job, notebook: Notebook) -> tuple[Notebook, dict[int, str], _Outcome]:
    """Run the job on the notebook's program; if it does not parse, without the cells that
    do not parse on their own.  Also returns an error line for each of those cells
    (``cell N:line:col: message``, counted in the cell)."""
    from torchlint.engine import SourceError, check_syntax

    try:
        return notebook, {}, _run(job, notebook.program)
    except SourceError:
        bad: dict[int, str] = {}
        for cell in notebook.cells:
            try:
                check_syntax(cell.program_text)
            except SourceError as error:
                bad[cell.number] = _cell_error(notebook, cell.number, error)
        if not bad:  # each cell parses, the program does not: the error is where the parser gave up
            raise
    notebook = notebook.without(frozenset(bad))
    return notebook, bad, _run(job, notebook.program)


def _cell_error(notebook: Notebook, number: int, error: SourceError) -> str:
    if error.line is None:
        return f"cell {number}: {error}"
    line, col = notebook.position_in_cell(number, error.line, error.col or 1)
    return f"cell {number}:{line}:{col}: {error}"


def _notebook_error(notebook: Notebook, error: SourceError) -> str:
    if error.line is None:
        return str(error)
    number, line = notebook.locate(error.line)
    return _cell_error(notebook, number, SourceError(str(error), line, error.col))


def _cells_error(errors: dict[int, str]) -> str | None:
    """One line for the cells left out: the first one's error, and the others' numbers."""
    if not errors:
        return None
    first, *others = errors
    if not others:
        return errors[first]
    numbers = ", ".join(map(str, others))
    return f"{errors[first]} (cell{'s' * (len(others) > 1)} {numbers} do{'es' * (len(others) == 1)} not parse either)"


def _error_text(error: Exception) -> str:
    """The error in one line, ``line:col: message`` when it has a position (a ``SourceError``)."""
    line = getattr(error, "line", None)
    if line is not None:
        return f"{line}:{getattr(error, 'col', None) or 1}: {error}"
    return str(error)


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
