"""Finding the files to lint, reading them faithfully and writing fixes atomically."""

from __future__ import annotations

import fnmatch
import io
import os
import stat
import tempfile
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchlint.gitignore import GitIgnore

PYTHON_SUFFIXES = (".py", ".pyi")
LINTED_SUFFIXES = (*PYTHON_SUFFIXES, ".ipynb")  # what directory walks pick up


class ReadError(Exception):
    """The file cannot be read or decoded."""


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str  # "utf-8-sig" when the file starts with a BOM


def decode(data: bytes) -> SourceFile:
    if b"\0" in data[:8192]:
        raise ReadError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        raise ReadError(f"cannot decode: {error.msg if hasattr(error, 'msg') else error}") from None
    try:
        return SourceFile(data.decode(encoding), encoding)
    except (UnicodeDecodeError, LookupError) as error:
        raise ReadError(f"cannot decode as {encoding}: {error}") from None


def read_source(path: str | Path) -> SourceFile:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ReadError(error.strerror or str(error)) from None
    return decode(data)


def write_atomic(path: str | Path, text: str, encoding: str) -> None:
    """Replace ``path`` with ``text`` so that readers see the old or the new file, never a mix.

    The temporary file lives in the same directory (same filesystem), is fsynced,
    gets the original's permission bits, then atomically replaces it.
    """
    path = Path(path)
    data = text.encode(encoding)
    mode = stat.S_IMODE(os.stat(path).st_mode)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".torchlint-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _excluded(name: str, relative: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(relative, pattern):
            return True
        if "/" in pattern and (relative == pattern or relative.startswith(pattern + "/")):
            return True
    return False


def discover(
    paths: Sequence[str],
    exclude: Sequence[str],
    *,
    respect_gitignore: bool = True,
    suffixes: Sequence[str] = LINTED_SUFFIXES,
    root: Path | None = None,
) -> Iterator[tuple[str, str | None]]:
    """Yield ``(path, error)`` for every file to lint; ``error`` names a path that does not exist.

    Paths named explicitly are linted unless an exclude pattern matches them
    (so a pre-commit hook honours the project's excludes); directories are walked
    skipping excluded and git-ignored entries.
    """
    base = root or Path.cwd()
    ignore = GitIgnore() if respect_gitignore else None
    seen: set[str] = set()
    for given in paths:
        path = Path(given)
        if not path.exists() and not path.is_symlink():
            yield given, "no such file or directory"
            continue
        if path.is_file() or not path.is_dir():
            if not _excluded(path.name, _relative(path, base), exclude) and given not in seen:
                seen.add(given)
                yield given, None
            continue
        yield from _walk(path, base, exclude, ignore, suffixes, seen)


def _relative(path: Path, base: Path) -> str:
    try:
        return path.absolute().relative_to(base.absolute()).as_posix()
    except ValueError:
        return path.as_posix()


def _walk(
    top: Path, base: Path, exclude: Sequence[str], ignore: GitIgnore | None, suffixes: Sequence[str], seen: set[str]
) -> Iterator[tuple[str, str | None]]:
    visited: set[tuple[int, int]] = set()
    for directory, dirnames, filenames in os.walk(top, followlinks=False):
        try:
            info = os.stat(directory)
            if (info.st_dev, info.st_ino) in visited:
                dirnames[:] = []
                continue
            visited.add((info.st_dev, info.st_ino))
        except OSError:
            continue
        current = Path(directory)
        dirnames[:] = sorted(
            d for d in dirnames
            if not _excluded(d, _relative(current / d, base), exclude)
            and not (ignore and ignore.ignored(current / d, True))
        )
        for filename in sorted(filenames):
            if not filename.endswith(tuple(suffixes)):
                continue
            file_path = current / filename
            if _excluded(filename, _relative(file_path, base), exclude):
                continue
            if ignore and ignore.ignored(file_path, False):
                continue
            display = str(file_path)
            if display not in seen:
                seen.add(display)
                yield display, None
