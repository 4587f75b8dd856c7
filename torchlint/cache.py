"""A persistent cache of lint results, like ruff's: re-linting an unchanged file
costs a read and a hash.

An entry is keyed by everything the result depends on: the file's bytes, its
path (per-file-ignores), the effective settings, torchlint's version and code,
and the libcst and Python versions.  Findings that depend on other files of the
project (a model class imported from ``network.py``: ``analysis/project.py``)
record those files' sizes and modification times in the entry; a hit whose
files changed is a miss.  Entries are content-addressed files under
``<cache dir>/v<SCHEMA>/``, written atomically (temporary file + rename), so
concurrent runs never see half an entry; an entry that cannot be read or does
not check out is a miss and is rewritten.

Cached findings are plain data: their fixes keep description and safety but
not the libcst nodes, so ``--fix``/``--diff`` re-lint any file whose cached
findings include a fix they would apply.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from torchlint import __version__
from torchlint.datatypes import FileReport, Finding, Fix, FixSafety, TextEdit
from torchlint.project_files import unchanged
from torchlint.rulebook import rulebook_dir
from torchlint.settings import Settings

CACHE_DIR_NAME = ".torchlint_cache"
SCHEMA = 1  # bump when the entry format changes


def default_cache_dir(settings: Settings) -> Path:
    """``.torchlint_cache`` in the project root (the configuration file's directory), else the cwd."""
    return Path(settings.project_root or os.getcwd()) / CACHE_DIR_NAME


@dataclass(frozen=True)
class CachedResult:
    findings: list[Finding]
    error: str | None = None
    cells: dict[int, str] | None = None

    def report(self, path: str, source: str | None) -> FileReport:
        return FileReport(path, list(self.findings), self.error, source=source, cells=self.cells)


@dataclass
class Cache:
    directory: Path
    settings: Settings
    _prefix: bytes = field(init=False, repr=False)
    _root: str = field(init=False, repr=False)
    _usable: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        self._prefix = settings_fingerprint(self.settings)
        self._root = os.path.join(self.directory, f"v{SCHEMA}")

    # ------------------------------------------------------------ keys
    def key(self, path: str, data: bytes) -> str:
        """The entry key of ``path`` holding ``data``."""
        # SHA-256: hardware-accelerated on current CPUs (here twice as fast as BLAKE2b),
        # and a warm run hashes every file.
        digest = hashlib.sha256(self._prefix)
        digest.update(os.fsencode(path) + b"\0" + os.fsencode(os.path.abspath(path)) + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def _entry(self, key: str) -> str:
        return os.path.join(self._root, key[:2], key[2:])  # a string: one per file, pathlib is slower

    # ------------------------------------------------------------ entries
    def load(self, key: str) -> CachedResult | None:
        """The cached result, or None (missing, unreadable or corrupt: a miss)."""
        try:
            with open(self._entry(key), "rb", buffering=0) as handle:  # unbuffered: cheaper for one small file
                raw = handle.readall()
            header, _, payload = raw.partition(b"\n")
            if header != _checksum(key, payload):
                return None
            data = json.loads(payload)
            if not unchanged(data.get("dependencies", ())):
                return None  # a sibling file the findings came from has changed
            return decode_result(data)
        except Exception:  # noqa: BLE001 - a broken entry is a miss, never a crash
            return None

    def store(self, key: str, report: FileReport) -> None:
        """Remember ``report``'s result for ``key``; silently skipped when it cannot be written."""
        if not self._usable:
            return
        try:
            payload = json.dumps(encode_result(report), separators=(",", ":")).encode()
        except (TypeError, ValueError):
            return  # something in the report is not plain data: not cacheable
        entry = self._entry(key)
        try:
            self._prepare(os.path.dirname(entry))
            _write_atomic(entry, _checksum(key, payload) + b"\n" + payload)
        except OSError:
            self._usable = False  # read-only or full: lint without caching

    def _prepare(self, bucket: str) -> None:
        if os.path.isdir(bucket):
            return
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True)
            # Like ruff's cache: ignored by git and marked as a cache for backup tools.
            _write_atomic(self.directory / ".gitignore", b"# Created by torchlint\n*\n")
            _write_atomic(
                self.directory / "CACHEDIR.TAG",
                b"Signature: 8a477f597d28d172789f06886806bc55\n# torchlint cache: https://bford.info/cachedir/\n",
            )
        os.makedirs(bucket, exist_ok=True)

    def entries(self) -> Iterator[Path]:
        root = Path(self._root)
        return (p for p in root.glob("*/*") if p.is_file()) if root.is_dir() else iter(())


def _checksum(key: str, payload: bytes) -> bytes:
    return hashlib.blake2b(key.encode() + b"\0" + payload, digest_size=16).hexdigest().encode()


def _write_atomic(path: str | Path, data: bytes) -> None:
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------- fingerprint
def settings_fingerprint(settings: Settings) -> bytes:
    """What, besides the file, decides its findings: settings, torchlint, libcst, Python."""
    # Which files are linted does not change what a file's findings are.
    relevant = dataclasses.replace(settings, exclude=(), extend_exclude=(), respect_gitignore=True)
    parts = [
        f"torchlint {__version__}",
        _code_fingerprint(),
        f"python {sys.version_info[0]}.{sys.version_info[1]}",
        repr(relevant),
    ]
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=20).digest()


def _code_fingerprint() -> str:
    """torchlint's and libcst's installed files (name, size, mtime): an edited rule, or a
    rule-book page a rule reads its data from (the saved-tensor table), invalidates the cache."""
    digest = hashlib.blake2b(digest_size=16)
    package = Path(__file__).resolve().parent
    trees = [package]
    try:
        book = rulebook_dir()
        if package not in book.parents:
            trees.append(book)  # a source checkout: rules/ beside the package
    except FileNotFoundError:
        pass
    for tree in trees:
        for root, dirnames, filenames in os.walk(tree):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".md", ".toml", ".json")):
                    info = os.stat(os.path.join(root, name))
                    digest.update(f"{os.path.join(root, name)}:{info.st_size}:{info.st_mtime_ns}\0".encode())
    spec = find_spec("libcst")
    if spec is not None and spec.origin:
        info = os.stat(spec.origin)
        digest.update(f"{spec.origin}:{info.st_size}:{info.st_mtime_ns}".encode())
        version_file = Path(spec.origin).with_name("_version.py")
        if version_file.is_file():
            digest.update(version_file.read_bytes())
    return digest.hexdigest()


# ---------------------------------------------------------------- (de)serialising
def plain_finding(finding: Finding) -> Finding:
    """``finding`` without libcst objects: safe to pickle and to cache."""
    fix = Fix(finding.fix.description, (), finding.fix.safety) if finding.fix is not None else None
    return dataclasses.replace(finding, fix=fix, diagnostic=None)


def plain_report(report: FileReport) -> FileReport:
    return dataclasses.replace(report, findings=[plain_finding(f) for f in report.findings])


def encode_result(report: FileReport) -> dict[str, Any]:
    return {
        "findings": [_encode_finding(f) for f in report.findings],
        "error": report.error,
        "cells": None if report.cells is None else [[number, text] for number, text in report.cells.items()],
        "dependencies": [list(dependency) for dependency in report.dependencies],
    }


def decode_result(data: dict[str, Any]) -> CachedResult:
    cells = data["cells"]
    return CachedResult(
        [_decode_finding(item) for item in data["findings"]],
        data["error"],
        None if cells is None else {int(number): str(text) for number, text in cells},
    )


def _encode_finding(finding: Finding) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    for item in dataclasses.fields(finding):
        value = getattr(finding, item.name)
        if item.name == "diagnostic":
            continue
        if item.name == "fix":
            value = None if value is None else [value.description, value.safety.value]
        elif item.name == "edits":
            value = [dataclasses.astuple(edit) for edit in value]
        elif not _is_plain(value):
            raise TypeError(f"Finding.{item.name} is not plain data")
        encoded[item.name] = value
    return encoded


def _decode_finding(data: dict[str, Any]) -> Finding:
    values = dict(data)
    fix = values.pop("fix")
    edits = values.pop("edits", [])
    values = {name: tuple(value) if isinstance(value, list) else value for name, value in values.items()}
    return Finding(
        **values,
        fix=None if fix is None else Fix(fix[0], (), FixSafety(fix[1])),
        edits=tuple(TextEdit(*edit) for edit in edits),
    )


def _is_plain(value: object) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    return isinstance(value, tuple) and all(_is_plain(item) for item in value)
