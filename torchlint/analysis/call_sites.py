"""What an expression in a function holds given what every call site in the file passes, asked
once the whole file is analysed.

Plain functions are analysed after their callers, so their parameters come from the call sites
(``functions.py``).  Methods keep the order they are written in — a method reads what an earlier
one left on ``self`` — so a method called only from a later method is analysed with its parameters
unknown.  A rule that meets an unknown value there asks ``ctx.value_given_call_sites(node)`` while
it visits ``node`` and gets a question to ask later (from a ``Diagnostic.when`` or ``finish``):
by then every call site is recorded, and the function body is walked once more by a rule-less
analyzer with the parameters bound to what the call sites agree on.  One walk per function
answers every node asked about in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.importers import values_from_importers
from torchlint.analysis.values import Value

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.scopes import FunctionInfo

# Function bodies walked again per file at the most.
MAX_WALKS_PER_FILE = 16


class CallSiteValues:
    """The questions asked in one file's analysis, and their answers once walked."""

    def __init__(self, ctx: Analyzer) -> None:
        self._ctx = ctx
        self._asked: dict[int, tuple[FunctionInfo, set[int]]] = {}
        self._answers: dict[int, dict[int, Value]] = {}

    def ask(self, function: FunctionInfo, node: cst.BaseExpression) -> Callable[[], Value | None]:
        entry = self._asked.setdefault(id(function), (function, set()))
        entry[1].add(id(node))
        return lambda: self._answer(function, node)

    def _answer(self, function: FunctionInfo, node: cst.BaseExpression) -> Value | None:
        answers = self._answers.get(id(function))
        if answers is None:
            answers = self._answers[id(function)] = self._walk(function)
        return answers.get(id(node))

    def _walk(self, function: FunctionInfo) -> dict[int, Value]:
        ctx = self._ctx
        passed = ctx._values_from_every_call_site(function) or values_from_importers(ctx, function)
        if not passed or len(self._answers) >= MAX_WALKS_PER_FILE:
            return {}
        from torchlint.analysis.analyzer import Analyzer

        walker = Analyzer.for_summary(ctx)
        probe = _Probe(walker, self._asked[id(function)][1])
        walker.attach([probe])  # type: ignore[list-item]
        walker.summarise(function, passed)
        return probe.found


class _Probe:
    """Records what the asked-about nodes hold when the walk reaches them."""

    def __init__(self, ctx: Analyzer, wanted: set[int]) -> None:
        self._ctx = ctx
        self._wanted = wanted
        self.found: dict[int, Value] = {}

    def _note(self, node: cst.BaseExpression) -> None:
        if id(node) in self._wanted and id(node) not in self.found:
            self.found[id(node)] = self._ctx.value_of(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._note(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._note(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._note(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._note(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._note(node)

    def finish(self) -> None:
        pass
