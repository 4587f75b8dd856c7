"""The lint worker: a persistent process that parses and analyses for the language server.

libcst's parser holds the GIL for the whole parse (measured: a lint in a thread
stalls the server's event loop for 0.44 s on a 6,000-line module), so the server
lints in this separate process and stays free to answer hover and code-action
requests meanwhile.  The process imports the engine and the rules once, at start.

It keeps the last analysis of each target (with its libcst tree), so that the
edit of a code action the user picks is computed without parsing again, and each
target's ``IncrementalParser``, so that a new version of a document parses only the
top-level statements that changed.  At start it lints a small program (imports, caches:
the first lint is not a cold one).  On ``SIGUSR1`` (sent by the server when a newer text
of the document being linted arrives) the lint in progress stops at the next function
it would analyse and is answered ``(False, INTERRUPTED)``.

Protocol, over the process's stdin and stdout: each message is a 4-byte
big-endian length followed by a pickle.  A request is ``(kind, key, *arguments)``;
the reply is ``(True, value)``, or ``(False, traceback)`` when the request
itself failed.  The worker exits when its stdin closes (the server is gone).
"""

from __future__ import annotations

import gc
import pickle
import select
import signal
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from torchlint import interrupt
from torchlint.lsp.program import Analysis, CellEdits, Outcome, Program, action_edits, analyse
from torchlint.settings import Settings

if TYPE_CHECKING:
    from torchlint.incremental import IncrementalParser

LINT, EDITS, FORGET, PING = "lint", "edits", "forget", "ping"
INTERRUPTED = "interrupted"  # the reply's value for a lint given up (see ``interrupt``)
# The signal that interrupts a lint (None: no such signal here; the server kills the worker instead).
INTERRUPT_SIGNAL: signal.Signals | None = getattr(signal, "SIGUSR1", None)
# Linted once at start: every rule's code runs once before the first real lint.
WARM_UP = """import torch


def train(model, loader, epochs=2):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for inputs, targets in loader:
            outputs = model(inputs)
            loss = torch.nn.functional.mse_loss(outputs, targets)
            loss.backward()
            optimizer.step()
    return loss.item()


w = torch.randn(3, requires_grad=True)
w -= 0.1 * w.grad
"""
HEADER = 4  # bytes of the length prefix
# The worker collects garbage itself, between requests (see ``Collector``).
IDLE_BEFORE_COLLECTING = 0.05  # seconds without a request
COLLECT_ALL_EVERY = 20  # requests: then also the trees kept from earlier ones
MAX_UNCOLLECTED = 8  # requests served back to back: then collect even though the next one waits

# The last analysis of each target, by the target's key (its uri).
analyses: dict[str, Analysis] = {}
parsers: dict[str, IncrementalParser] = {}  # by target: the statements of its last version
# Analyses replaced or forgotten: freed after the reply is sent (a big tree takes milliseconds to free).
garbage: list[Analysis] = []


def lint(key: str, program: Program, settings: Settings) -> Outcome:
    analysis = analyse(program, settings, build=_builder(key))
    _keep(key, analysis)
    return analysis.outcome()


def _builder(key: str) -> IncrementalParser:
    if (parser := parsers.get(key)) is None:
        from torchlint import incremental  # libcst: imported by the worker process, not the server

        parser = parsers[key] = incremental.IncrementalParser()
    return parser


def edits(key: str, program: Program, settings: Settings, data: dict[str, Any]) -> CellEdits:
    """A code action's edits on ``program`` (analysed again only if it is not the one kept)."""
    analysis = analyses.get(key)
    if analysis is None or analysis.program.cells != program.cells:
        analysis = analyse(program, settings, build=_builder(key))
        _keep(key, analysis)
    return action_edits(analysis, data, settings)


def forget(key: str) -> None:
    parsers.pop(key, None)
    if (analysis := analyses.pop(key, None)) is not None:
        garbage.append(analysis)


def _keep(key: str, analysis: Analysis) -> None:
    if (previous := analyses.get(key)) is not None:
        garbage.append(previous)
    analyses[key] = analysis


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
    except interrupt.Interrupted:
        return False, INTERRUPTED
    except Exception:  # noqa: BLE001 - reported to the server, which keeps serving
        return False, traceback.format_exc()


class Collector:
    """Garbage collection off the path from a change to its diagnostics.

    A lint allocates a libcst tree of millions of objects, kept for code actions.
    Python's automatic collector scans all of them once the lint is done (measured on
    a loaded 2-core machine: 20-40 ms after each lint of 1,000 lines, and a 116 ms
    older-generation pass every few lints).  Here automatic collection is off; once
    the worker has been idle a
    moment, it collects what the last requests allocated and freezes the survivors
    (a frozen object is never scanned again), and every ``COLLECT_ALL_EVERY``
    requests it also collects among the frozen ones (the replaced trees' cycles).
    """

    def __init__(self) -> None:
        self.requests = 0  # since everything was last collected
        self.uncollected = 0  # requests since the last collection
        gc.disable()

    def served(self) -> None:
        garbage.clear()  # mostly freed by reference counting, at once
        self.requests += 1
        self.uncollected += 1

    def when_idle(self, stream: BinaryIO) -> None:
        """Collect, unless a request comes within ``IDLE_BEFORE_COLLECTING`` seconds."""
        if not self.uncollected:
            return
        if self.uncollected < MAX_UNCOLLECTED and _readable(stream, IDLE_BEFORE_COLLECTING):
            return
        self.uncollected = 0
        if self.requests >= COLLECT_ALL_EVERY:
            self.requests = 0
            gc.unfreeze()
        gc.collect()
        gc.freeze()


def _readable(stream: BinaryIO, timeout: float) -> bool:
    try:
        return bool(select.select([stream], [], [], timeout)[0])
    except (OSError, ValueError):  # not a selectable stream: collect now
        return False


def main() -> None:
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the replies
    warm_up()
    if INTERRUPT_SIGNAL is not None:
        signal.signal(INTERRUPT_SIGNAL, lambda number, frame: interrupt.request())
    collector = Collector()
    while True:
        collector.when_idle(requests)
        if (request := read_message(requests)) is None:
            break
        write_message(replies, handle(request))
        # Cleared once the reply is out: a signal that came too late for this lint may stop the
        # next one, which the server then sends again.
        interrupt.clear()
        collector.served()


def warm_up() -> None:
    """Import every rule and run the engine once, so that the first lint is not slower
    than the others (imports, caches built on first use)."""
    from torchlint.rules import all_rules

    all_rules()
    analyse(Program.of_file("warm-up.py", "", WARM_UP), Settings())


if __name__ == "__main__":
    main()
