"""Autograd events, recognised in one place for every rule.

A call (or an assignment) is one of:

- ``BACKWARD``: gradients are accumulated into the leaves' ``.grad`` —
  ``loss.backward()``, ``torch.autograd.backward(loss)``, ``scaler.scale(loss).backward()``,
  ``self.manual_backward(loss)``, ``accelerator.backward(loss)``, ``fabric.backward(loss)``;
- ``GRAD``: gradients are computed and returned, ``.grad`` is untouched — ``torch.autograd.grad``;
- ``STEP``: an optimizer updates its parameters in place — ``opt.step()``, ``scaler.step(opt)``;
- ``ZERO_GRAD``: gradients are reset — ``opt.zero_grad()``, ``model.zero_grad()``,
  ``p.grad.zero_()``, ``p.grad.data.zero_()``, ``p.grad = None``, ``setattr(p, "grad", None)``,
  ``torch._foreach_zero_(grads)``.

The spellings are data (``torch_api``); the subject of an event (the loss that is
backpropagated, the optimizer that steps, the tensor whose gradient is reset) is the
expression rules ask further questions about.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.names import through_grad
from torchlint.analysis.values import TENSOR_KINDS, Kind

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer


class EventKind(enum.Enum):
    BACKWARD = "backward"
    GRAD = "grad"
    STEP = "step"
    ZERO_GRAD = "zero_grad"


@dataclass(frozen=True, eq=False)
class AutogradEvent:
    kind: EventKind
    node: cst.CSTNode  # the call, or the assignment target ``p.grad``
    # BACKWARD/GRAD: the loss; STEP: the optimizer; ZERO_GRAD: what owns the gradients
    # (``opt``, ``model``, ``p``), or None when it cannot be told (``torch._foreach_zero_``).
    subject: cst.BaseExpression | None
    # BACKWARD/GRAD: the literal value of ``retain_graph`` (None: not given or not a literal).
    retain_graph: bool | None = None
    # BACKWARD/GRAD: the literal value of ``create_graph`` (it keeps the graph too).
    create_graph: bool | None = None

    @property
    def keeps_graph(self) -> bool:
        """``retain_graph=True`` or ``create_graph=True``: the saved tensors stay alive."""
        return bool(self.retain_graph or self.create_graph)


_OPTIMIZER_NAME = re.compile(r"^(opt[a-z]?\d*|optim\w*|optimi[sz]er\w*)$")


def looks_like_optimizer(name: str) -> bool:
    """``opt``, ``optG``, ``optimizer_d``, ``g_optim``, ``self.optimizer`` -- not ``opts``/``options``."""
    lowered = name.lower()
    if lowered in ("opts", "options", "optional"):
        return False
    return any(_OPTIMIZER_NAME.match(part) for part in lowered.split("_") if part) or bool(
        _OPTIMIZER_NAME.match(lowered)
    )


def last_name(expr: cst.BaseExpression) -> str:
    """``optimizer`` for ``self.optimizer`` / ``optimizers[0]``; "" for other expressions."""
    while type(expr) is cst.Subscript:
        expr = expr.value  # type: ignore[attr-defined]
    if type(expr) is cst.Attribute:
        return expr.attr.value  # type: ignore[attr-defined]
    if type(expr) is cst.Name:
        return expr.value  # type: ignore[attr-defined]
    return ""


def is_optimizer(ctx: Analyzer, expr: cst.BaseExpression) -> bool:
    """An optimizer: built from ``torch.optim``, a class of this file with ``step`` and
    ``zero_grad`` (or derived from ``torch.optim``), or an unknown value named like one."""
    value = ctx.value_of(expr)
    if value.kind is Kind.OPTIMIZER:
        return True
    if value.kind is Kind.OBJECT and value.cls is not None:
        cls = value.cls
        return (cls.method("step") is not None and cls.method("zero_grad") is not None) or any(
            isinstance(base, str) and base.startswith(api.OPTIMIZER_PREFIX) for base in cls.bases
        )
    return value.kind is Kind.UNKNOWN and looks_like_optimizer(last_name(expr))


def _literal_bool_arg(call: cst.Call, keyword: str) -> bool | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            value = arg.value
            if type(value) is cst.Name and value.value in ("True", "False"):
                return value.value == "True"
            return None
    return None


def _graph_flags(call: cst.Call) -> tuple[bool | None, bool | None]:
    return _literal_bool_arg(call, "retain_graph"), _literal_bool_arg(call, "create_graph")


def _first_positional(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
    return None


def _argument(call: cst.Call, keyword: str) -> cst.BaseExpression | None:
    """The first positional argument, or the one passed as ``keyword=``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return _first_positional(call)


def _backpropagated(ctx: Analyzer, call: cst.Call, func: cst.Attribute) -> cst.BaseExpression | None:
    """What ``<receiver>.backward(...)`` backpropagates: the receiver (``loss.backward()``),
    the scaled loss (``scaler.scale(loss).backward()``), or the argument of a delegate
    (``accelerator.backward(loss)``)."""
    receiver = func.value
    if type(receiver) is cst.Call and type(receiver.func) is cst.Attribute:
        if receiver.func.attr.value in api.LOSS_SCALING_METHODS and receiver.args:
            return _first_positional(receiver) or receiver
    if ctx.value_of(receiver).kind in TENSOR_KINDS:
        return receiver
    argument = _first_positional(call)
    if argument is not None and last_name(receiver).lower() in api.BACKWARD_DELEGATE_NAMES:
        return argument
    return receiver


def event_of_call(ctx: Analyzer, call: cst.Call) -> AutogradEvent | None:
    """The autograd event ``call`` is, or None."""
    func = call.func
    method = func.attr.value if type(func) is cst.Attribute else None  # type: ignore[attr-defined]
    if method is None:
        qualified = ctx.qualify(func)
        if qualified in api.BACKWARD_FUNCTIONS:
            return AutogradEvent(EventKind.BACKWARD, call, _argument(call, "tensors"),
                                 *_graph_flags(call))
        if qualified in api.GRAD_FUNCTIONS:
            return AutogradEvent(EventKind.GRAD, call, _argument(call, "outputs"),
                                 *_graph_flags(call))
        if qualified in api.ZERO_GRAD_FUNCTIONS:
            return AutogradEvent(EventKind.ZERO_GRAD, call, None)
        if type(func) is cst.Name and func.value == "setattr" and _sets_grad_attribute(ctx, call):
            return AutogradEvent(EventKind.ZERO_GRAD, call, call.args[0].value)
        return None
    assert type(func) is cst.Attribute
    if method == "backward":
        qualified = ctx.qualify(func)
        if qualified in api.BACKWARD_FUNCTIONS:
            return AutogradEvent(EventKind.BACKWARD, call, _argument(call, "tensors"),
                                 *_graph_flags(call))
        return AutogradEvent(EventKind.BACKWARD, call, _backpropagated(ctx, call, func),
                             *_graph_flags(call))
    if method in api.DELEGATED_BACKWARD_METHODS:
        return AutogradEvent(EventKind.BACKWARD, call, _first_positional(call),
                             *_graph_flags(call))
    if method == "grad" and ctx.qualify(func) in api.GRAD_FUNCTIONS:
        return AutogradEvent(EventKind.GRAD, call, _argument(call, "outputs"),
                             *_graph_flags(call))
    if method.startswith("_foreach_zero") and ctx.qualify(func) in api.ZERO_GRAD_FUNCTIONS:
        return AutogradEvent(EventKind.ZERO_GRAD, call, None)
    if method in api.ZERO_GRAD_METHODS:
        return AutogradEvent(EventKind.ZERO_GRAD, call, func.value)
    if method in api.GRAD_ZEROING_METHODS and through_grad(func.value):
        return AutogradEvent(EventKind.ZERO_GRAD, call, _grad_owner(func.value))
    if method in api.STEP_METHODS:
        for candidate in (func.value, *(arg.value for arg in call.args if arg.keyword is None)):
            if is_optimizer(ctx, candidate):
                return AutogradEvent(EventKind.STEP, call, candidate)
    return None


def event_of_assignment(
    ctx: Analyzer, target: cst.BaseExpression, value: cst.BaseExpression | None
) -> AutogradEvent | None:
    """``p.grad = None`` (or ``= torch.zeros_like(p)``): the gradient is reset."""
    if type(target) is cst.Attribute and target.attr.value == "grad" and _is_reset_value(ctx, value):
        return AutogradEvent(EventKind.ZERO_GRAD, target, target.value)
    return None


def _is_reset_value(ctx: Analyzer, value: cst.BaseExpression | None) -> bool:
    if type(value) is cst.Name:
        return value.value == "None"
    return type(value) is cst.Call and ctx.qualify(value.func) in api.ZERO_FACTORIES


def _sets_grad_attribute(ctx: Analyzer, call: cst.Call) -> bool:
    """``setattr(p, "grad", None)``."""
    args = [arg.value for arg in call.args if arg.keyword is None]
    return (
        len(args) >= 3
        and type(args[1]) is cst.SimpleString
        and args[1].evaluated_value == "grad"
        and _is_reset_value(ctx, args[2])
    )


def _grad_owner(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``p`` for ``p.grad`` / ``p.grad.data``."""
    while type(expr) is cst.Attribute:
        if expr.attr.value == "grad":  # type: ignore[attr-defined]
            return expr.value  # type: ignore[attr-defined]
        expr = expr.value  # type: ignore[attr-defined]
    return None
