"""Lists of losses that carry their graph, found from how the lists are built.

``epoch_losses.append(loss_part)``, where ``loss_part`` is a term of the loss a ``backward()``
goes through (``ValueFlow.backpropagated_uses``: ``backward()`` only works on a tensor with a
graph, and a term a sum is backpropagated through was computed with grad), then
``history.append(sum(epoch_losses) / len(epoch_losses))`` once per epoch: every element of
``history`` is a tensor with a graph, so it requires grad, and NumPy (or a plot) of the list
raises M6.  The values of the analysis cannot say so where the list is built (the backward
comes after the append), so this walks back from the list to what is appended to it.

A list qualifies when every binding of it in the region is an empty list literal, nothing but
``append`` adds to it, and every appended value carries a graph: a backpropagated term, or a
name bound to ``sum(other)`` (over a count) of a list that qualifies, outside any context that
changes the grad mode (a sum under ``no_grad`` has no graph).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.uses import ValueFlow

# Lists of epoch means of lists ...: how many levels are followed.
MAX_LEVELS = 3


def holds_graph_carrying_losses(ctx: Analyzer, region: cst.CSTNode, key: str, level: int = 0) -> bool:
    """Every value appended to the list ``key`` (a name bound in ``region``) carries a graph."""
    if not _imports_torch(ctx):
        return False  # a `backward()` of another framework's values (micrograd-like)
    flow = ctx.value_flow(region)
    appended = _appended(flow, key)
    return bool(appended) and all(_carries_graph(ctx, flow, region, value, level) for value in appended)


def _imports_torch(ctx: Analyzer) -> bool:
    return any(full == "torch" or full.startswith("torch.") for full in ctx.imports.aliases.values())


def _appended(flow: ValueFlow, key: str) -> list[cst.BaseExpression]:
    """What ``key.append(...)`` adds, or [] when the list is bound or filled another way."""
    appended: list[cst.BaseExpression] = []
    for reference in flow.references_of(key):
        parent = flow.parent(reference)
        if type(parent) is cst.AssignTarget:
            statement = flow.parent(parent)
            if not (type(statement) is cst.Assign and type(statement.value) is cst.List
                    and not statement.value.elements):
                return []
            continue
        if type(parent) in (cst.Element, cst.StarredElement) and _in_target(flow, parent):
            if not _empty_lists_assigned(flow, parent):
                return []  # `losses, accs = load()`
            continue
        if type(parent) is not cst.Attribute or parent.value is not reference:
            if type(parent) in (cst.AugAssign, cst.For, cst.CompFor, cst.AnnAssign, cst.NamedExpr, cst.Del):
                return []  # bound (or changed) another way
            continue  # read
        call = flow.parent(parent)
        if type(call) is not cst.Call or call.func is not parent:
            continue
        method = parent.attr.value
        if method == "append" and len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
            appended.append(call.args[0].value)
        elif method in ("extend", "insert", "__setitem__", "__iadd__"):
            return []
    return appended


def _in_target(flow: ValueFlow, element: cst.CSTNode) -> bool:
    node: cst.CSTNode | None = element
    while type(node) in (cst.Element, cst.StarredElement, cst.Tuple, cst.List):
        node = flow.parent(node)  # type: ignore[arg-type]
    return type(node) in (cst.AssignTarget, cst.For, cst.CompFor)


def _empty_lists_assigned(flow: ValueFlow, element: cst.CSTNode) -> bool:
    """``train_losses, val_losses = [], []``: every value of the statement is an empty list."""
    node: cst.CSTNode | None = element
    while node is not None and type(node) is not cst.Assign:
        node = flow.parent(node)
    if node is None or len(node.targets) != 1 or type(node.value) not in (cst.Tuple, cst.List):  # type: ignore[attr-defined]
        return False
    return all(type(item) is cst.Element and type(item.value) is cst.List and not item.value.elements
               for item in node.value.elements)  # type: ignore[attr-defined]


def _carries_graph(ctx: Analyzer, flow: ValueFlow, region: cst.CSTNode, value: cst.BaseExpression,
                   level: int) -> bool:
    if level >= MAX_LEVELS or _under_grad_context(ctx, flow, region, value):
        return False
    summed = _summed_list(value)  # `history.append(sum(batch_losses) / len(batch_losses))`
    if summed is not None:
        return holds_graph_carrying_losses(ctx, region, summed, level + 1)
    name = _numerator(value)
    if name is None:
        return False
    if flow.backpropagated_uses(name.value, name):
        return True
    site = flow.binding_before(name.value, name)  # `mean = sum(batch_losses) / len(batch_losses)`
    if not (type(site) is cst.Assign and len(site.targets) == 1 and type(site.targets[0].target) is cst.Name):
        return False
    summed = _summed_list(site.value)
    return (summed is not None and not _under_grad_context(ctx, flow, region, site)
            and holds_graph_carrying_losses(ctx, region, summed, level + 1))


def _numerator(expr: cst.BaseExpression) -> cst.Name | None:
    """``loss``, ``loss * n``, ``loss / n``: the name whose graph the value carries."""
    while type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Divide, cst.Multiply):
        if type(expr.operator) is cst.Multiply and type(expr.left) is not cst.Name:
            expr = expr.right
        else:
            expr = expr.left
    return expr if type(expr) is cst.Name else None


def _summed_list(expr: cst.BaseExpression) -> str | None:
    """``sum(items)`` or ``sum(items) / len(items)`` (any divisor): the name ``items``."""
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Divide:
        expr = expr.left
    if (type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "sum"
            and len(expr.args) == 1 and type(expr.args[0].value) is cst.Name and expr.args[0].keyword is None):
        return expr.args[0].value.value
    return None


def _under_grad_context(ctx: Analyzer, flow: ValueFlow, region: cst.CSTNode, node: cst.CSTNode) -> bool:
    """``node`` sits in a ``with`` block (inside ``region``) that sets a grad mode, whichever."""
    ancestor = flow.parent(node)
    while ancestor is not None and ancestor is not region:
        if type(ancestor) is cst.With and any(ctx.context_mode(item.item) is not None for item in ancestor.items):
            return True
        ancestor = flow.parent(ancestor)
    return False
