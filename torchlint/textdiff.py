"""The smallest single text edit between two versions of a source, and where it is."""

from __future__ import annotations

import bisect
import re

# Python's line breaks (and LSP's): a lone "\r" ends a line too.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def changed_span(old: str, new: str) -> tuple[int, int, int]:
    """``(start, end_old, end_new)``: ``old[start:end_old]`` becomes ``new[start:end_new]``;
    everything before ``start`` and after the ends is the common prefix and suffix.

    The span never splits a ``"\\r\\n"`` pair of ``old``: an edit starting or ending
    between the two would leave a lone ``"\\r"``, which is a line break of its own.
    """
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    if old == new:
        return start, end_old, end_new
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1
    if start < end_old < len(old) and old[end_old - 1] == "\r" and old[end_old] == "\n":
        end_old += 1
        end_new += 1
    return start, end_old, end_new


def line_starts(text: str) -> list[int]:
    """Offset of the first character of every line."""
    return [0, *(match.end() for match in LINE_BREAK.finditer(text))]


def line_and_column(starts: list[int], offset: int) -> tuple[int, int]:
    """The 0-based line and character index of a string offset, given its ``line_starts``."""
    line = bisect.bisect_right(starts, offset) - 1
    return line, offset - starts[line]
