"""Lint and fix files: the glue between discovery, the engine and reporting.

Importing this module does not import the engine (nor libcst): ``check_file``
and ``fix_file`` do, when a file is really analysed.
"""

from __future__ import annotations

import difflib
import functools
import fnmatch
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.datatypes import FileReport
from torchlint.files import ReadError, read_source, write_atomic
from torchlint.settings import Settings

if TYPE_CHECKING:
    from torchlint.rule import Rule

__all__ = ["FileReport", "NOTEBOOK_SUFFIX", "check_file", "fix_file", "is_notebook", "rules_for_path"]


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


def _error_text(error: Exception) -> str:
    """The error in one line, ``line:col: message`` when it has a position (a ``SourceError``)."""
    line = getattr(error, "line", None)
    if line is not None:
        return f"{line}:{getattr(error, 'col', None) or 1}: {error}"
    return str(error)


def _never_crash(function: Callable[..., FileReport]) -> Callable[..., FileReport]:
    """A bug in torchlint while handling one file is reported for that file, and the run goes on."""

    @functools.wraps(function)
    def guarded(path: str, *args: object, **kwargs: object) -> FileReport:
        try:
            return function(path, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - the last line of defence
            detail = str(error).splitlines()[0][:200] if str(error) else ""
            return FileReport(path, error=f"internal error: {type(error).__name__}: {detail} (please report this torchlint bug)")

    return guarded


@_never_crash
def check_file(path: str, rules: Sequence[type[Rule]], settings: Settings) -> FileReport:
    if is_notebook(path):
        from torchlint.notebook import check_notebook

        return check_notebook(path, rules, settings)
    from torchlint.engine import SourceError, lint_source, with_fix_edits  # analysis: libcst, only now

    report = FileReport(path)
    try:
        source = read_source(path)
        result = lint_source(source.text, rules_for_path(path, rules, settings), settings.rule_options)
    except (ReadError, SourceError) as error:
        report.error = _error_text(error)
        return report
    report.findings = with_fix_edits(result, source.text) if settings.fix_edits else result.findings
    report.source = source.text
    return report


@_never_crash
def fix_file(
    path: str, rules: Sequence[type[Rule]], settings: Settings, *, write: bool, unsafe: bool | None = None
) -> FileReport:
    """Fix one file; with ``write`` False only compute the diff."""
    if is_notebook(path):
        from torchlint.notebook import fix_notebook

        return fix_notebook(path, rules, settings, write=write, unsafe=unsafe)
    from torchlint.engine import FixError, SourceError, fix_source  # analysis: libcst, only now

    report = FileReport(path)
    try:
        source = read_source(path)
        result = fix_source(
            source.text,
            rules_for_path(path, rules, settings),
            settings.rule_options,
            unsafe=settings.unsafe_fixes if unsafe is None else unsafe,
        )
    except (ReadError, SourceError, FixError) as error:
        report.error = _error_text(error)
        return report
    report.findings = result.remaining
    report.fixed = len(result.applied)
    report.fixed_codes = [finding.code for finding in result.applied]
    report.source = result.source
    if result.source != source.text:
        report.diff = "".join(
            difflib.unified_diff(
                source.text.splitlines(keepends=True),
                result.source.splitlines(keepends=True),
                fromfile=path,
                tofile=path,
            )
        )
        if write:
            try:
                write_atomic(path, result.source, source.encoding, original=source)
            except OSError as error:
                report.error = f"cannot write fixed file: {error.strerror or error}"
    return report
