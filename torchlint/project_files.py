"""Which other files of its project a linted file's analysis read (``analysis/project.py``),
without libcst: the runner opens a ``session`` per linted file and the results cache checks
the recorded files on a hit (``unchanged``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

# Files one linted file may read besides itself.
MAX_FILES = 24

Stamp = tuple[int, int]  # (size, modification time in ns)


# ---------------------------------------------------------------- the session of one linted file
@dataclass
class Session:
    """The project lookups of one linted file: where it is, and which other files were read."""

    path: str  # absolute
    read: dict[str, Stamp] = field(default_factory=dict)

    def may_read(self, path: str) -> bool:
        return path in self.read or len(self.read) < MAX_FILES


_current: ContextVar[Session | None] = ContextVar("torchlint_project_session", default=None)


@contextmanager
def session(path: str | None) -> Iterator[Session | None]:
    """Lint ``path`` with project lookups (None, or a path that is no file on disk: none)."""
    real = os.path.abspath(path) if path and os.path.isfile(path) else None
    current = Session(real) if real is not None else None
    token = _current.set(current)
    try:
        yield current
    finally:
        _current.reset(token)


def stamp(path: str) -> Stamp | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns)


def unchanged(dependencies: Sequence[Sequence[object]]) -> bool:
    """Every ``(path, size, mtime_ns)`` still holds (the results cache validates a hit with it)."""
    for path, size, mtime in dependencies:
        if stamp(str(path)) != (size, mtime):
            return False
    return True


def current_session() -> Session | None:
    """The session of the file being linted, if it has a project."""
    return _current.get()
