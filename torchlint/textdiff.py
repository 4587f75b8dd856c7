"""The smallest single text edit between two versions of a source."""

from __future__ import annotations


def changed_span(old: str, new: str) -> tuple[int, int, int]:
    """``(start, end_old, end_new)``: ``old[start:end_old]`` becomes ``new[start:end_new]``;
    everything before ``start`` and after the ends is the common prefix and suffix."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return start, end_old, end_new
