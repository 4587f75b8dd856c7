"""``# noqa`` handling, compatible with flake8: ``# noqa`` silences every code on
the line, ``# noqa: TL001,TL002`` only those; ``# torchlint: noqa`` anywhere in a
file skips the file."""

from __future__ import annotations

import re

NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
FILE_NOQA = re.compile(r"#\s*torchlint\s*:\s*noqa\b(?!\s*:)", re.IGNORECASE)
_SPLIT = re.compile(r"[,\s]+")


def file_is_exempt(source: str) -> bool:
    return "torchlint" in source and FILE_NOQA.search(source) is not None


def noqa_codes(line: str) -> frozenset[str] | None:
    """None: no noqa comment; empty set: a bare ``# noqa``; else the codes listed."""
    if "noqa" not in line.lower():
        return None
    match = NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return frozenset()
    return frozenset(code.upper() for code in _SPLIT.split(codes.strip()) if code)


def is_suppressed(code: str, lines: list[str], line_numbers: tuple[int, ...]) -> bool:
    """True when a noqa comment on any of the (1-based) ``line_numbers`` covers ``code``."""
    for number in line_numbers:
        if not 1 <= number <= len(lines):
            continue
        codes = noqa_codes(lines[number - 1])
        if codes is None:
            continue
        if not codes or any(code.startswith(listed) for listed in codes):
            return True
    return False
