"""Did-you-mean suggestions for mistyped options, rule codes, config keys and commands."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice most like ``word`` (case-insensitive), or None when none is close."""
    import difflib  # only when something was mistyped

    by_lower = {choice.lower(): choice for choice in choices}
    matches = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[matches[0]] if matches else None


def did_you_mean(word: str, choices: Iterable[str], *, quote: str = "'") -> str:
    """`` (did you mean 'x'?)`` or the empty string."""
    match = closest(word, choices)
    return f" (did you mean {quote}{match}{quote}?)" if match else ""
