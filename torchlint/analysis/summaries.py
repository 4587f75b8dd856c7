"""What a helper defined in the file returns, seen from a call site.

``img, opt = make_param(shape)`` binds ``img`` to the leaf ``make_param`` creates; a helper
that returns a loss or a module output carries the graph to its caller.  The helper's body is
analysed once per call-site signature (the kinds of the values passed), by a rule-less
analyzer that binds the parameters to what the call passes and joins the values of its
``return`` statements.  Depth is bounded and recursion answers unknown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.values import BACKPROPAGATED, UNKNOWN, Kind, Value, join
from torchlint.analysis.walk import scan

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.scopes import FunctionInfo

# Helpers calling helpers: how deep summaries go before answering unknown.
MAX_SUMMARY_DEPTH = 2
# Helper bodies analysed per file at the most (a model file calls its methods a lot).
MAX_SUMMARIES_PER_FILE = 64


def returned_value(caller: Analyzer, info: FunctionInfo, call: cst.Call) -> Value:
    """The value ``call`` (a call of ``info``) returns at the caller's current point."""
    if caller.summary_depth >= MAX_SUMMARY_DEPTH or info.node.asynchronous is not None or _module_forward(info):
        return UNKNOWN  # (a module's forward: calling the module is how its output is known)
    if _is_generator(info):
        return UNKNOWN  # a generator returns a generator
    passed = caller.arguments_passed(call, info) or {}
    signature = (id(info), caller.grad_mode.fixed, tuple(sorted((k, v.kind.value) for k, v in passed.items())))
    cache = caller.summaries
    if signature in cache:
        return cache[signature]
    if len(cache) >= MAX_SUMMARIES_PER_FILE:
        return UNKNOWN
    cache[signature] = UNKNOWN  # recursion: no information from this path
    from torchlint.analysis.analyzer import Analyzer

    helper = Analyzer.for_summary(caller)
    result = helper.summarise(info, passed)
    # The values' origins are nodes of the helper's body: rules only ask what they are.
    cache[signature] = result
    return result


def _module_forward(info: FunctionInfo) -> bool:
    """A ``forward`` method (or a module's ``__call__`` run as one), not a function of that
    name (a tutorial's ``def forward(x): return w * x``)."""
    return (info.name == "forward" and info.cls is not None) or (info.name == "__call__" and info.runs_as_forward)


def join_returns(values: list[Value]) -> Value:
    if not values:
        return UNKNOWN
    result = values[0]
    for value in values[1:]:
        result = join(result, value)
    if result.kind is Kind.UNKNOWN:  # (origins of the helper's body mean nothing to the caller)
        return UNKNOWN.tagged(BACKPROPAGATED) if BACKPROPAGATED in result.tags else UNKNOWN
    return result


def _is_generator(info: FunctionInfo) -> bool:
    """Whether the body yields (nested functions aside); walked once per function."""
    if info.is_generator is None:
        found = False

        class Finder(cst.CSTVisitor):
            def visit_Yield(self, _: cst.Yield) -> None:
                nonlocal found
                found = True

            def visit_FunctionDef(self, _: cst.FunctionDef) -> bool:
                return False

            def visit_Lambda(self, _: cst.Lambda) -> bool:
                return False

        scan(info.node.body, Finder())
        info.is_generator = found
    return info.is_generator
