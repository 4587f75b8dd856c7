"""Linting many files: cached results first, then the rest across a process pool.

Reports come back in the order of the paths given, whatever the number of
workers.  Small runs stay in this process: starting workers costs more than
linting a few files (pre-commit and editors lint one file at a time).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from torchlint.cache import Cache, plain_report
from torchlint.datatypes import FileReport, FixSafety
from torchlint.files import ReadError, decode, read_bytes
from torchlint.runner import check_file, fix_file, is_notebook
from torchlint.settings import Settings, resolve_rules

if TYPE_CHECKING:
    import multiprocessing.context

    from torchlint.rule import Rule

# Below this much source to analyse, one process is faster than starting a pool.
SMALL_RUN_BYTES = 256 * 1024


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class _Context:
    rules: tuple[type[Rule], ...]
    settings: Settings
    fix: bool  # --fix or --diff
    write: bool  # --fix (not --diff): write fixed files
    cache: Cache | None


_context: _Context | None = None  # in a worker: what every file is linted with


def lint_files(
    paths: Sequence[str],
    rules: Sequence[type[Rule]] | None,
    settings: Settings,
    *,
    fix: bool = False,
    write: bool = False,
    jobs: int | None = None,
    cache: Cache | None = None,
    with_source: bool = True,
) -> list[FileReport]:
    """One report per path, in order: like ``check_file`` (or ``fix_file`` with ``fix``) on each.

    ``rules`` None: those ``settings`` select, resolved only if some file must be
    analysed (a run whose every result is cached imports neither the rules nor
    libcst).  ``jobs``: worker processes (None or 0: one per CPU).  Findings in the
    reports are plain data (``cache.plain_finding``), with or without workers.
    ``with_source`` False: reports from the cache leave ``source`` None (for output
    that shows no code, which saves decoding every file).
    """
    reports: list[FileReport | None] = [None] * len(paths)
    pending: list[tuple[int, str, int]] = []  # (index, path, size) of files to analyse
    for index, path in enumerate(paths):
        cached, size = _from_cache(path, settings, cache, fix=fix, with_source=with_source)
        if cached is not None:
            reports[index] = cached
        else:
            pending.append((index, path, size))
    if not pending:
        return reports  # type: ignore[return-value]
    if rules is None:
        rules = resolve_rules(settings)
        _freeze_imported()
    context = _Context(tuple(rules), settings, fix, write, cache)
    workers = _worker_count(jobs, pending)
    if workers <= 1:
        global _context
        outer, _context = _context, context
        try:
            for index, path, _ in pending:
                reports[index] = _lint_one(path)
        finally:
            _context = outer
    else:
        # Only now: a pool's machinery costs start-up time that runs without workers never need.
        from concurrent.futures import ProcessPoolExecutor

        import torchlint.engine  # noqa: F401 - forked workers inherit it (the rules brought libcst)

        # Largest files first so that no worker is left with a big file at the end.
        order = sorted(pending, key=lambda item: -item[2])
        chunk = max(1, min(8, len(order) // (workers * 16)))
        with ProcessPoolExecutor(workers, mp_context=_mp_context(), initializer=_start_worker, initargs=(context,)) as pool:
            try:
                for (index, _, _), report in zip(order, pool.map(_lint_one, [p for _, p, _ in order], chunksize=chunk)):
                    reports[index] = report
            except BaseException:  # Ctrl-C: stop now instead of finishing every queued file
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    return reports  # type: ignore[return-value]


def _freeze_imported() -> None:
    """Move what is alive now (above all libcst and the rules, just imported: objects that
    live until the process exits) out of the garbage collector's generations: neither the
    collections during the run nor the ones at exit scan them again, and forked workers
    share their memory pages instead of copying them when a collection touches them.
    Garbage alive now is never freed: only what the imports left (little).  Once per process."""
    global _frozen
    if not _frozen:
        import gc

        gc.freeze()
        _frozen = True


_frozen = False


def _worker_count(jobs: int | None, pending: Sequence[tuple[int, str, int]]) -> int:
    wanted = jobs if jobs else cpu_count()
    if jobs is None or jobs == 0:  # automatic: only when it pays
        if sum(size for _, _, size in pending) < SMALL_RUN_BYTES:
            return 1
    return max(1, min(wanted, len(pending)))


def _mp_context() -> multiprocessing.context.BaseContext | None:
    import multiprocessing

    # fork: workers inherit the imported modules instead of importing libcst again.
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return None


def _start_worker(context: _Context) -> None:
    global _context
    _context = context
    _follow_parent()


def _follow_parent() -> None:
    """Workers leave stopping to the parent: they ignore Ctrl-C (the parent cancels
    the run) and, on Linux, get SIGTERM when the parent dies (otherwise they would
    wait for work forever).  A file being written is finished first (``write_atomic``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _read(path: str) -> bytes | None:
    try:
        return read_bytes(path)  # never blocks on a FIFO, never reads a huge file
    except ReadError:
        return None


def _from_cache(
    path: str, settings: Settings, cache: Cache | None, *, fix: bool, with_source: bool
) -> tuple[FileReport | None, int]:
    """The cached report for ``path`` (None: it must be analysed) and the file's size."""
    if cache is None:
        try:
            return None, os.path.getsize(path)
        except OSError:
            return None, 0
    data = _read(path)
    if data is None:
        return None, 0
    cached = cache.load(cache.key(path, data))
    if cached is None:
        return None, len(data)
    if fix and (is_notebook(path) or cached.error is not None or _has_fix_to_apply(cached.findings, settings)):
        return None, len(data)  # the fix needs the syntax tree
    if fix:  # fix_file's findings carry no fix edits
        cached = replace(cached, findings=[replace(f, edits=()) for f in cached.findings])
    source: str | None = None
    if with_source and cached.error is None:
        try:
            source = decode(data).text
        except ReadError:
            return None, len(data)
    return cached.report(path, source), len(data)


def _has_fix_to_apply(findings: Sequence, settings: Settings) -> bool:
    unsafe = settings.unsafe_fixes
    return any(f.fix is not None and (unsafe or f.fix.safety is FixSafety.SAFE) for f in findings)


def _lint_one(path: str) -> FileReport:
    context = _context
    assert context is not None
    data = _read(path) if context.cache is not None else None
    if context.fix:
        report = fix_file(path, context.rules, context.settings, write=context.write)
    else:
        report = check_file(path, context.rules, context.settings)
    report = plain_report(report)
    if data is not None and context.cache is not None and _cacheable(report, context) and _read(path) == data:
        context.cache.store(context.cache.key(path, data), report)
    return report


def _cacheable(report: FileReport, context: _Context) -> bool:
    if not context.fix:
        return True
    # A fix run that changed nothing found what a check run finds (without the
    # fix edits that some output formats ask for).
    return (
        not report.fixed and not report.diff and report.error is None
        and not context.settings.fix_edits and not is_notebook(report.path)
    )
