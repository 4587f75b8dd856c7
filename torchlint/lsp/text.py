"""Text positions as LSP sees them: 0-based lines split at ``\\r\\n``, ``\\r`` or ``\\n``
(the same line breaks Python's tokenizer knows, and nothing else), and
character offsets measured in the negotiated encoding's code units."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torchlint.textdiff import LINE_BREAK, changed_span, line_and_column, line_starts

# Counts a string's length in the client's code units (UTF-16 unless negotiated otherwise).
UnitCounter = Callable[[str], int]


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their breaks; a trailing break starts one more (empty) line."""
    return LINE_BREAK.split(text)


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
    return Point(*line_and_column(starts, offset))


def minimal_edit(old: str, new: str) -> Edit | None:
    """One edit turning ``old`` into ``new``: the differing middle between the common prefix and suffix."""
    if old == new:
        return None
    start, end_old, end_new = changed_span(old, new)
    starts = line_starts(old)
    return Edit(point_at(starts, start), point_at(starts, end_old), new[start:end_new])


def to_units(line_text: str, char: int, units: UnitCounter = utf16_units) -> int:
    """A character index on a line in the client's code units (clamped to the line)."""
    return units(line_text[: max(0, char)])
