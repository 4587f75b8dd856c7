"""``--watch``: lint, then lint again whenever a linted file or a ``pyproject.toml`` changes.

Polling (twice a second) of the files' sizes and modification times: no dependency, and
cheap next to a lint run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence

from torchlint.files import LINTED_SUFFIXES

WATCHED_SUFFIXES = (*LINTED_SUFFIXES, "pyproject.toml")
SKIPPED_DIRECTORIES = frozenset({".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", ".torchlint_cache"})


def snapshot(paths: Sequence[str]) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every watched file under ``paths``."""
    state: dict[str, tuple[int, int]] = {}
    for top in paths:
        if os.path.isdir(top):
            for directory, dirnames, filenames in os.walk(top):
                dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRECTORIES]
                for name in filenames:
                    if name.endswith(WATCHED_SUFFIXES):
                        _add(state, os.path.join(directory, name))
        else:
            _add(state, top)
    return state


def _add(state: dict[str, tuple[int, int]], path: str) -> None:
    try:
        info = os.stat(path)
    except OSError:
        return
    state[path] = (info.st_size, info.st_mtime_ns)


def watch(run: Callable[[], int], paths: Sequence[str], *, clear: bool = False, interval: float = 0.5) -> int:
    """Run ``run`` now and after every change, until interrupted (Ctrl-C: exit 0).  The files
    are looked at after each run, so that what ``--fix`` wrote does not count as a change."""
    message = "Starting linter in watch mode"
    try:
        while True:
            if clear:
                sys.stdout.write("\x1b[2J\x1b[H")
            print(f"[{time.strftime('%H:%M:%S')}] {message}...", flush=True)
            run()
            sys.stdout.flush()
            sys.stderr.flush()
            state = snapshot(paths)
            while snapshot(paths) == state:
                time.sleep(interval)
            message = "File change detected"
    except KeyboardInterrupt:
        return 0
