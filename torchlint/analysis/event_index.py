"""The backward() calls of a file, indexed by the loops and the function around them, recorded
by the analyzer as its walk meets each call (``Analyzer.track_autograd_events``).

Rules that judge a loop once the file is analysed (TL008: a loop that calls backward() and
updates but never resets the gradients) ask the index instead of keeping their own list.
Recognition is ``events.event_of_call`` (one for every rule); the event of the call being
visited is kept (``event_at``) so a rule's ``visit_Call`` does not recognise it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.events import AutogradEvent, EventKind, event_of_call

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.flow import Flow
    from torchlint.analysis.scopes import FunctionInfo


class AutogradEventIndex:
    def __init__(self) -> None:
        self.backwards: list[cst.Call] = []  # every backward() (any spelling), in walk order
        self._in_loops: set[int] = set()  # ids of the loops whose body calls backward() (nested ones too)
        self._outside_loops: set[int] = set()  # ids of the functions calling backward() outside their loops
        self._call: cst.Call | None = None  # the call being visited, and its event
        self._event: AutogradEvent | None = None

    def note(self, ctx: Analyzer, call: cst.Call) -> None:
        """(The analyzer, entering ``call``) recognise it and index it if it is a backward()."""
        event = event_of_call(ctx, call)
        self._call, self._event = call, event
        if event is None or event.kind is not EventKind.BACKWARD:
            return
        self.backwards.append(call)
        loops = ctx.loops
        if loops:
            self._in_loops.update(id(loop) for loop in loops)
        elif ctx.function is not None:
            self._outside_loops.add(id(ctx.function))

    def event_at(self, ctx: Analyzer, call: cst.Call) -> AutogradEvent | None:
        """The event of ``call`` at the current point; asked while it is visited (a rule's
        ``visit_Call``), the one recognised on entering it."""
        return self._event if call is self._call else event_of_call(ctx, call)

    def loop_calls_backward(self, loop: cst.For | cst.While) -> bool:
        return id(loop) in self._in_loops

    def calls_backward_outside_loops(self, function: FunctionInfo) -> bool:
        return id(function) in self._outside_loops

    def backwards_in(self, flow: Flow) -> list[cst.Call]:
        """The backward() calls in ``flow``'s body (one iteration of a loop, a function)."""
        return [call for call in self.backwards if flow.contains(call)]


__all__ = ["AutogradEventIndex"]
