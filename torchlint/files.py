"""Finding the files to lint, reading them faithfully and writing fixes atomically."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import io
import os
import re
import signal
import stat
import tempfile
import tokenize
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchlint.gitignore import GitIgnore

PYTHON_SUFFIXES = (".py", ".pyi")
LINTED_SUFFIXES = (*PYTHON_SUFFIXES, ".ipynb")  # what directory walks pick up

# libcst needs about 250 bytes of memory per byte of source: bigger files are
# refused (with an error naming them) so that memory stays bounded.  The largest
# file in the torch package is 1.4 MB.
MAX_SOURCE_BYTES = 4 * 1024 * 1024
# Notebooks carry their outputs (images ...); only their code is analysed, and
# that is held to MAX_SOURCE_BYTES by the engine.
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
# Suffix of the temporary file a fix is written to before it replaces the original.
TEMPORARY_SUFFIX = ".torchlint-tmp"


class ReadError(Exception):
    """The file cannot be read or decoded."""


class WriteError(OSError):
    """A fixed file was not written (the original is untouched)."""


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str  # "utf-8-sig" when the file starts with a BOM
    digest: str = ""  # of the bytes read: ``write_atomic`` refuses to replace a file changed since


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def decode(data: bytes) -> SourceFile:
    """The text of a Python source file, decoded as Python itself would (PEP 263)."""
    if b"\0" in data:
        raise ReadError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        raise ReadError(_undecodable(data, getattr(error, "msg", str(error)))) from None
    try:
        return SourceFile(data.decode(encoding), encoding, _digest(data))
    except UnicodeDecodeError as error:
        name = _ENCODING_NAMES.get(encoding, encoding)
        raise ReadError(_undecodable(data, f"not valid {name}", error.start)) from None
    except LookupError:
        raise ReadError(f"unknown encoding {encoding!r} in the coding declaration") from None


def too_large(size: int, limit: int = MAX_SOURCE_BYTES) -> str:
    return f"file too large to analyse ({size / 2**20:.1f} MiB; the limit is {limit // 2**20} MiB)"


def _undecodable(data: bytes, reason: str, offset: int | None = None) -> str:
    """Why ``data`` cannot be decoded, pointing at the first bad byte."""
    if offset is None:
        try:
            data.decode("utf-8")
            return f"cannot decode: {reason}"
        except UnicodeDecodeError as error:
            offset, reason = error.start, "not valid UTF-8"
    if not _CODING_COOKIE.search(b"".join(data.splitlines(keepends=True)[:2])):
        reason += " and there is no coding declaration"
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"cannot decode: {reason} (byte 0x{data[offset]:02x} at line {line}, column {column})"


_ENCODING_NAMES = {"utf-8": "UTF-8", "utf-8-sig": "UTF-8"}
_CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)


def read_source(path: str | Path, max_bytes: int = MAX_SOURCE_BYTES) -> SourceFile:
    """Read and decode a source file; any problem is a ``ReadError`` with a one-line reason."""
    return decode(read_bytes(path, max_bytes))


def read_bytes(path: str | Path, max_bytes: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (else ``ReadError``)."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (regular files ignore it).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as error:
        raise ReadError(error.strerror or str(error)) from None
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ReadError("not a regular file")
            if info.st_size > max_bytes:
                raise ReadError(too_large(info.st_size, max_bytes))
            # Ask for one byte more than fstat saw: the file may have grown since.  (Not
            # read(max_bytes + 1): that allocates a max_bytes buffer for every file.)
            data = handle.read(info.st_size + 1)
            if len(data) > info.st_size:
                data += handle.read(max_bytes + 1 - len(data))
    except OSError as error:
        raise ReadError(error.strerror or str(error)) from None
    if len(data) > max_bytes:
        raise ReadError(too_large(len(data), max_bytes))
    return data


def write_atomic(path: str | Path, text: str, encoding: str, *, original: SourceFile | None = None) -> None:
    """Replace ``path`` with ``text`` so that readers see the old or the new file, never a mix.

    The temporary file lives in the same directory as the real file (a symlink is
    followed, not replaced), is fsynced, gets the original's permission bits and
    (where allowed) owner, then atomically replaces it.  SIGINT and SIGTERM are held
    back meanwhile, so an interrupted run leaves neither a half-written file nor a
    stray temporary one.  With ``original`` (what the fix was computed from), a file
    that changed on disk since it was read is left alone: ``WriteError``.
    """
    target = Path(os.path.realpath(path))
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as error:
        reason = f"the fixed code cannot be encoded as {encoding} ({error.reason}); nothing is written"
        raise WriteError(reason) from None
    info = os.stat(target)
    with _signals_held():
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMPORARY_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            _copy_metadata(temporary, info)
            if original is not None and original.digest:
                if not _unchanged_since_read(target, original.digest, data):
                    os.unlink(temporary)  # another run already wrote this very fix
                    return
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    _fsync_directory(target.parent)


def _copy_metadata(temporary: str, info: os.stat_result) -> None:
    os.chmod(temporary, stat.S_IMODE(info.st_mode))
    if hasattr(os, "chown"):
        with contextlib.suppress(OSError):  # only root may give a file away; keep what we can
            os.chown(temporary, info.st_uid, info.st_gid)


def _unchanged_since_read(target: Path, digest: str, new_data: bytes) -> bool:
    """True if ``target`` still holds what was read; False if it already holds the fixed
    code (another run wrote it); ``WriteError`` if it changed in any other way."""
    try:
        with open(target, "rb") as handle:
            current = handle.read()
    except OSError as error:
        raise WriteError(f"cannot re-read before replacing: {error.strerror or error}") from None
    if _digest(current) == digest:
        return True
    if current == new_data:
        return False
    raise WriteError("the file changed on disk while it was being fixed; nothing is written (run again)")


_HELD_SIGNALS = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)}


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Delay SIGINT/SIGTERM/SIGHUP until the block is done (where the OS allows)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); harmless where directories cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def is_excluded(name: str, relative: str, patterns: Sequence[str]) -> bool:
    matcher, prefixes = _exclude_matcher(tuple(patterns))
    if matcher is not None and (matcher(name) or matcher(relative)):
        return True
    return any(relative == prefix or relative.startswith(prefix + "/") for prefix in prefixes)


@functools.lru_cache(maxsize=16)
def _exclude_matcher(patterns: tuple[str, ...]) -> tuple[Callable[[str], object] | None, tuple[str, ...]]:
    """One regex for all glob patterns (``fnmatchcase`` on each, in one call: discovery
    tests every directory and file), and the patterns with a ``/``, which also exclude
    what is under them."""
    stripped = [pattern.rstrip("/") for pattern in patterns]
    regex = "|".join(f"(?:{fnmatch.translate(pattern)})" for pattern in stripped)
    matcher = re.compile(regex).match if stripped else None
    return matcher, tuple(pattern for pattern in stripped if "/" in pattern)


def discover(
    paths: Sequence[str],
    exclude: Sequence[str],
    *,
    respect_gitignore: bool = True,
    suffixes: Sequence[str] = LINTED_SUFFIXES,
    root: Path | None = None,
    force_exclude: bool = False,
) -> Iterator[tuple[str, str | None]]:
    """Yield ``(path, error)`` for every file to lint; ``error`` names a path that does not exist.

    As in ruff, paths named explicitly are linted even when an exclude pattern matches
    them, unless ``force_exclude`` (what pre-commit hooks pass: pre-commit names every
    file): then a path is skipped when it, or a directory above it, is excluded.
    Directories are walked skipping excluded and git-ignored entries.
    """
    base = root or Path.cwd()
    ignore = GitIgnore() if respect_gitignore else None
    seen: set[str] = set()
    for given in paths:
        path = Path(given)
        if not path.exists() and not path.is_symlink():
            yield given, "no such file or directory"
            continue
        if force_exclude and is_excluded_path(path, base, exclude):
            continue
        if path.is_file() or not path.is_dir():
            if given not in seen:
                seen.add(given)
                yield given, None
            continue
        yield from _walk(path, base, exclude, ignore, suffixes, seen)


def is_excluded_path(path: Path, base: Path, exclude: Sequence[str]) -> bool:
    """Whether ``path`` or one of its directories (below ``base`` when it is under it) is excluded."""
    parts = [part for part in _relative(path, base).split("/") if part not in ("", ".")]
    return any(is_excluded(parts[end - 1], "/".join(parts[:end]), exclude) for end in range(len(parts), 0, -1))


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
            if not is_excluded(d, _relative(current / d, base), exclude)
            and not (ignore and ignore.ignored(current / d, True))
        )
        for filename in sorted(filenames):
            if not filename.endswith(tuple(suffixes)):
                continue
            file_path = current / filename
            if is_excluded(filename, _relative(file_path, base), exclude):
                continue
            if ignore and ignore.ignored(file_path, False):
                continue
            display = str(file_path)
            if display not in seen:
                seen.add(display)
                yield display, None
