"""A small .gitignore matcher (the subset real projects use: globs, ``**``,
anchoring, directory-only patterns and negation), so discovery needs no git."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


def _translate(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = glob.find("]", i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = glob[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif char == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def parse_gitignore(text: str) -> list[_Pattern]:
    patterns: list[_Pattern] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line)
        regex = f"^{body}$" if anchored else f"^(?:.*/)?{body}$"
        patterns.append(_Pattern(re.compile(regex), negated, dir_only))
    return patterns


@lru_cache(maxsize=1024)
def _patterns_in(directory: str) -> tuple[_Pattern, ...]:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as handle:
            return tuple(parse_gitignore(handle.read()))
    except OSError:
        return ()


def _git_root(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


class GitIgnore:
    """Answers "is this path ignored?" using every .gitignore from the git root down."""

    def __init__(self) -> None:
        self._roots: dict[Path, Path | None] = {}

    def ignored(self, path: Path, is_dir: bool) -> bool:
        path = path.absolute()
        parent = path.parent
        if parent not in self._roots:
            self._roots[parent] = _git_root(parent)
        root = self._roots[parent] or parent
        result = False
        # Deeper .gitignore files override shallower ones; within one file the last match wins.
        directories = [root, *[p for p in reversed(parent.parents) if root in p.parents], parent] if parent != root else [root]
        seen: set[Path] = set()
        for directory in directories:
            if directory in seen or not (directory == root or root in directory.parents):
                continue
            seen.add(directory)
            relative = path.relative_to(directory).as_posix()
            for pattern in _patterns_in(str(directory)):
                if pattern.dir_only and not is_dir:
                    continue
                if pattern.regex.match(relative):
                    result = not pattern.negated
        return result
