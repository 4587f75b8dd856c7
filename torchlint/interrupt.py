"""Giving up a lint whose result nobody wants any more: the language server's worker,
when a newer text of the document it lints arrives, calls ``request()`` (from a signal
handler); the analysis calls ``check()`` between units of work (functions), which then
raises ``Interrupted``.  Nothing else ever requests it, so for the CLI ``check()`` is a
flag test."""

from __future__ import annotations


class Interrupted(BaseException):
    """Raised by ``check()`` once requested (a BaseException: no ``except Exception`` swallows it)."""


_requested = False


def request() -> None:
    global _requested
    _requested = True


def clear() -> None:
    global _requested
    _requested = False


def check() -> None:
    if _requested:
        raise Interrupted
