"""Text positions as LSP sees them: 0-based lines split at ``\\r\\n``, ``\\r`` or ``\\n``
(the same line breaks Python's tokenizer knows, and nothing else), and
character offsets measured in the negotiated encoding's code units."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from torchlint.textdiff import changed_span

_LINE_BREAK = re.compile(r"\r\n|\r|\n")

# Counts a string's length in the client's code units (UTF-16 unless negotiated otherwise).
UnitCounter = Callable[[str], int]


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their breaks; a trailing break starts one more (empty) line."""
    return _LINE_BREAK.split(text)


def line_starts(text: str) -> list[int]:
    """Offset of the first character of every line."""
    return [0, *(match.end() for match in _LINE_BREAK.finditer(text))]


@dataclass(frozen=True)
class Point:
    """A 0-based line and a 0-based character (code point) index into that line."""

    line: int
    char: int


@dataclass(frozen=True)
class Edit:
    """Replace the text from ``start`` up to ``end`` with ``text``."""

    start: Point
    end: Point
    text: str


def point_at(starts: list[int], offset: int) -> Point:
    """The point of a string offset, given the string's ``line_starts``."""
    line = bisect.bisect_right(starts, offset) - 1
    return Point(line, offset - starts[line])


def minimal_edit(old: str, new: str) -> Edit | None:
    """One edit turning ``old`` into ``new``: the differing middle between the common prefix and suffix."""
    if old == new:
        return None
    start, end_old, end_new = changed_span(old, new)
    # Never split a "\r\n" pair: an edit ending between them would leave a lone "\r".
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1
    if end_old < len(old) and end_old > start and old[end_old - 1] == "\r" and old[end_old] == "\n":
        end_old += 1
        end_new += 1
    starts = line_starts(old)
    return Edit(point_at(starts, start), point_at(starts, end_old), new[start:end_new])


def to_units(line_text: str, char: int, units: UnitCounter = utf16_units) -> int:
    """A character index on a line in the client's code units (clamped to the line)."""
    return units(line_text[: max(0, char)])
