"""The lint worker: a persistent process that parses and analyses for the language server.

libcst's parser holds the GIL for the whole parse (measured: a lint in a thread
stalls the server's event loop for 0.44 s on a 6,000-line module), so the server
lints in this separate process and stays free to answer hover and code-action
requests meanwhile.  The process imports the engine and the rules once, at start.

It keeps the last analysis of each target (with its libcst tree), so that the
edit of a code action the user picks is computed without parsing again.

Protocol, over the process's stdin and stdout: each message is a 4-byte
big-endian length followed by a pickle.  A request is ``(kind, key, *arguments)``;
the reply is ``(True, value)``, or ``(False, traceback)`` when the request
itself failed.  The worker exits when its stdin closes (the server is gone).
"""

from __future__ import annotations

import pickle
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from torchlint.lsp.program import Analysis, CellEdits, Outcome, Program, action_edits, analyse
from torchlint.rule import Rule, RuleOptions

LINT, EDITS, FORGET, PING = "lint", "edits", "forget", "ping"
HEADER = 4  # bytes of the length prefix

# The last analysis of each target, by the target's key (its uri).
analyses: dict[str, Analysis] = {}


def lint(key: str, program: Program, rules: Sequence[type[Rule]], options: RuleOptions) -> Outcome:
    analysis = analyse(program, rules, options)
    analyses[key] = analysis
    return analysis.outcome()


def edits(
    key: str, program: Program, rules: Sequence[type[Rule]], options: RuleOptions, data: dict[str, Any]
) -> CellEdits:
    """A code action's edits on ``program`` (analysed again only if it is not the one kept)."""
    analysis = analyses.get(key)
    if analysis is None or analysis.program.cells != program.cells:
        analysis = analyses[key] = analyse(program, rules, options)
    return action_edits(analysis, data, rules, options)


def forget(key: str) -> None:
    analyses.pop(key, None)


def ping() -> None:
    """Answered once the worker is ready: the server measures how long a worker takes to start."""


HANDLERS: dict[str, Callable[..., Any]] = {LINT: lint, EDITS: edits, FORGET: forget, PING: ping}


def encode(message: object) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(HEADER, "big") + data


def write_message(stream: BinaryIO, message: object) -> None:
    stream.write(encode(message))
    stream.flush()


def read_message(stream: BinaryIO) -> Any | None:
    """The next message; None at the end of the stream."""
    header = stream.read(HEADER)
    if len(header) < HEADER:
        return None
    data = stream.read(int.from_bytes(header, "big"))
    return pickle.loads(data)


def handle(request: tuple[Any, ...]) -> tuple[bool, Any]:
    kind, *arguments = request
    try:
        return True, HANDLERS[kind](*arguments)
    except Exception:  # noqa: BLE001 - reported to the server, which keeps serving
        return False, traceback.format_exc()


def main() -> None:
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the replies
    from torchlint.rules import all_rules

    all_rules()  # import every rule now, not during the first lint
    while (request := read_message(requests)) is not None:
        write_message(replies, handle(request))


if __name__ == "__main__":
    main()
