"""Tensors made without history from a tensor that has one, and the loss terms they leave graph-less.

- ``numpy_round_trip(ctx, call)``: ``torch.from_numpy(t.data.numpy()[idx])``,
  ``torch.tensor(t.detach().cpu().numpy())``: a copy through NumPy of a graph-cut read of ``t``
  (``.data`` / ``.detach()``, with ``.cpu()`` / ``.clone()`` between) has no history, whatever ``t``
  is (measured with torch 2.13: ``requires_grad=False``, no ``grad_fn``).  Answers ``t``.
- ``graphless_terms(ctx, graph, backward, loss)``: the terms of a backpropagated sum
  (``loss = ce + triplet``) that carry no module forward while another term does: they add
  nothing to the gradient, silently (the sum still has a graph, so ``backward()`` runs).
- ``copies_in(ctx, site)``: the round-trip copies a binding's value is computed from, through the
  names it reads (bounded hops): where such a term lost its graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.names import names_in
from torchlint.analysis.values import Kind

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.module_graph import ModuleGraph

# Constructors of a tensor from NumPy data (``torch.tensor`` copies it too).
_FROM_NUMPY = api.FROM_NUMPY_FUNCTIONS | api.COPY_CONSTRUCTORS | api.SHARING_CONSTRUCTORS
# How many bindings back a graph-less term is followed to the copy it was computed from.
_MAX_HOPS = 2


def numpy_round_trip(ctx: Analyzer, call: cst.Call) -> cst.BaseExpression | None:
    """``t`` when ``call`` makes a tensor from ``t``'s NumPy copy read through ``.data`` / ``.detach()``."""
    if ctx.qualify(call.func) not in _FROM_NUMPY or not call.args or call.args[0].keyword is not None:
        return None
    array = call.args[0].value
    while type(array) is cst.Subscript:  # `...numpy()[hard_triplets]`: some rows of the copy
        array = array.value
    if not _is_method_call(array, api.NUMPY_METHODS):
        return None
    return _graph_cut_source(array.func.value)  # type: ignore[attr-defined]


def _graph_cut_source(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``t`` of ``t.data``, ``t.cpu().data``, ``t.detach().cpu()``, ``t.data.clone()``."""
    cut = False
    while True:
        if _is_method_call(node, api.DETACHING_METHODS):
            cut, node = True, node.func.value  # type: ignore[attr-defined]
        elif _is_method_call(node, api.GRAPH_KEEPING_COPY_METHODS | api.NOOP_ON_DEFAULT_TENSOR):
            node = node.func.value  # type: ignore[attr-defined]
        elif type(node) is cst.Attribute and node.attr.value in api.DETACHING_ATTRIBUTES:
            cut, node = True, node.value
        else:
            return node if cut else None


def _is_method_call(node: cst.BaseExpression, methods: frozenset[str]) -> bool:
    return type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in methods \
        and not node.args


def graphless_terms(ctx: Analyzer, graph: ModuleGraph, backward: cst.Call, loss: cst.BaseExpression) -> list[str]:
    """The names summed into ``loss`` (backpropagated at ``backward``) that carry no forward and do
    not require grad, while ``loss`` itself carries one."""
    if type(loss) is not cst.Name or not _carries_graph(ctx, graph, loss.value):
        return []
    terms = ctx.value_flow(ctx.region).terms(loss) - {loss.value}
    return [term for term in sorted(terms) if not _carries_graph(ctx, graph, term) and not _is_number(ctx, term)]


def _carries_graph(ctx: Analyzer, graph: ModuleGraph, key: str) -> bool:
    return ctx.value_of_key(key).requires_grad or bool(graph.forwards_of(cst.Name(key)))


def _is_number(ctx: Analyzer, key: str) -> bool:
    return ctx.value_of_key(key).kind is Kind.NUMBER


def copies_in(ctx: Analyzer, key: str, reference: cst.CSTNode) -> list[tuple[cst.Call, cst.BaseExpression]]:
    """(copy, its source ``t``) for each NumPy round trip the value of ``key`` at ``reference`` is
    computed from, followed through the names its binding reads (up to ``_MAX_HOPS`` bindings)."""
    flow = ctx.value_flow(ctx.region)
    found: list[tuple[cst.Call, cst.BaseExpression]] = []
    seen: set[int] = set()
    todo = [(key, reference, 0)]
    while todo:
        name, at, hops = todo.pop()
        site = flow.binding_before(name, at)
        if not isinstance(site, cst.Assign) or id(site) in seen:
            continue
        seen.add(id(site))
        for call in _calls_in(site.value):
            source = numpy_round_trip(ctx, call)
            if source is not None:
                found.append((call, source))
        if hops < _MAX_HOPS:
            todo.extend((read, site, hops + 1) for read in sorted(names_in(site.value)))
    return found


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    calls: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            calls.append(call)

        def visit_Lambda(self, lambda_: cst.Lambda) -> bool:
            return False

    node.visit(_Calls())
    return calls
