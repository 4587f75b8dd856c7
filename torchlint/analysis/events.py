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
from torchlint.analysis.names import dotted_name, through_grad
from torchlint.analysis.values import TENSOR_KINDS, Kind
from torchlint.analysis.walk import scan

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.flow import Flow
    from torchlint.analysis.scopes import FunctionInfo


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
    # BACKWARD/GRAD: whether the graph is kept, as literally spelled: ``retain_graph``, else
    # ``create_graph`` (torch's default for retain_graph); None: neither given as a literal.
    retain_graph: bool | None = None
    # BACKWARD/GRAD: the literal value of ``create_graph`` (it keeps the graph too).
    create_graph: bool | None = None

    @property
    def keeps_graph(self) -> bool:
        """The saved tensors stay alive (``retain_graph=True``, or ``create_graph=True``
        without ``retain_graph=False``)."""
        return bool(self.retain_graph)


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


def _retains_graph(call: cst.Call) -> bool | None:
    """``retain_graph=`` (or its old spelling) when given; otherwise torch keeps the graph iff
    ``create_graph=True``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in api.RETAIN_GRAPH_KEYWORDS:
            return _literal_bool_arg(call, arg.keyword.value)
    return _literal_bool_arg(call, "create_graph")


def _graph_flags(call: cst.Call) -> tuple[bool | None, bool | None]:
    """(retain_graph as torch resolves it, create_graph), as literally spelled."""
    return _retains_graph(call), _literal_bool_arg(call, "create_graph")


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


def may_hide_autograd(ctx: Analyzer, call: cst.Call) -> bool:
    """Whether ``call`` (not itself an event) may run code that backpropagates, steps or
    resets gradients out of sight: a function whose body is not in this file, or a method of
    a class of this file.  Not: torch and the other grad-free modules, grad-free builtins,
    a module's forward, methods of tensors, numbers, collections and optimizers, built-in
    module methods (``model.train()``), and the grad-free methods (``append``, ``item`` ...).
    A plain function of this file is the caller's to look into (``ctx.resolve_function``)."""
    func = call.func
    qualified = ctx.qualify(func)
    if qualified is not None:
        return qualified.split(".")[0] not in api.GRAD_FREE_MODULES
    if type(func) is cst.Name:
        if func.value in api.GRAD_FREE_BUILTINS:
            return False
        callee = ctx.value_of(func)
        return not (callee.kind in TENSOR_KINDS or callee.kind in (Kind.MODULE, Kind.NUMBER))
    if type(func) is cst.Attribute:
        name = func.attr.value
        receiver = ctx.value_of(func.value)
        if receiver.kind in TENSOR_KINDS or receiver.kind in (Kind.NUMBER, Kind.COLLECTION, Kind.OPTIMIZER):
            return False
        if receiver.kind is Kind.MODULE and (
            receiver.cls is None or (name in api.MODULE_SELF_METHODS and receiver.cls.method(name) is None)
        ):
            return False  # built-in module methods (``model.to(device)`` on a module class of this file too)
        if name in api.GRAD_FREE_METHODS or (receiver.kind is Kind.UNKNOWN and name in api.TENSOR_LIKE_METHODS):
            return False
        stored = receiver.cls.attr(name) if receiver.cls is not None else None
        if stored is not None:  # `self.model(x)`: an object kept on the instance, not a method
            return not (stored.kind in TENSOR_KINDS or (stored.kind is Kind.MODULE and stored.cls is None))
        return True
    return ctx.value_of(func).kind is not Kind.MODULE


class EventLog:
    """The autograd events of a file and the calls that may hide one, recorded as a rule visits
    them (``record``), for rules that judge order once the file is analysed (``finish``):
    which backward calls — seen, or hidden in a helper or in code not in this file — run
    inside a body (see ``analysis/flow.py``)."""

    def __init__(self, ctx: Analyzer) -> None:
        self._ctx = ctx
        self.backwards: list[cst.Call] = []
        # Gradients written other than by backward: ``p.grad = g``, ``p.grad.copy_(g)``.
        self.writes: list[cst.CSTNode] = []
        # Calls that are not events but may run one: (call, the helper of this file it runs, if any).
        self._hidden: list[tuple[cst.Call, FunctionInfo | None]] = []

    def record(self, call: cst.Call) -> AutogradEvent | None:
        """The event ``call`` is (at the current point), noting backward calls and hidden ones."""
        ctx = self._ctx
        event = ctx.autograd_event(call)
        if event is None:
            helper = ctx.resolve_function(call.func)
            if helper is not None or may_hide_autograd(ctx, call):
                self._hidden.append((call, helper))
        elif event.kind is EventKind.BACKWARD:
            self.backwards.append(call)
        func = call.func
        if (
            event is None
            and type(func) is cst.Attribute
            and func.attr.value.endswith("_")
            and func.attr.value not in api.NON_MUTATING_UNDERSCORE
            and through_grad(func.value)
        ):
            self.writes.append(call)  # p.grad.copy_(g), p.grad.add_(g)
        return event

    def record_assignment(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``p.grad = <a tensor>`` writes a gradient (``= None`` resets it: not a write)."""
        if type(target) is cst.Attribute and target.attr.value == "grad" and not (
            type(value) is cst.Name and value.value == "None"
        ):
            self.writes.append(target)

    def gradient_writes_in(self, flow: Flow) -> list[cst.CSTNode]:
        """Gradient writes other than backward in ``flow``'s body."""
        return [node for node in self.writes if flow.contains(node)]

    def hidden_calls_in(self, flow: Flow) -> list[cst.Call]:
        """Calls in ``flow``'s body that are not events but may run one out of sight."""
        return [call for call, _ in self._hidden if flow.contains(call)]

    def backward_calls_in(self, flow: Flow) -> list[cst.Call]:
        """Calls in ``flow``'s body that are, or may run, a ``backward()`` (after the file is analysed)."""
        found = [call for call in self.backwards if flow.contains(call)]
        found += [call for call, helper in self._hidden if flow.contains(call) and self._may_backward(helper, set())]
        return found

    def _may_backward(self, helper: FunctionInfo | None, seen: set[int]) -> bool:
        """A call of ``helper`` (None: code not in this file) may run ``backward()``."""
        if helper is None:
            return True
        if id(helper) in seen:
            return False  # recursion: the other path decides
        seen.add(id(helper))
        flow = self._ctx.flow(helper.node)
        if any(flow.contains(call) for call in self.backwards):
            return True
        return any(flow.contains(call) and self._may_backward(inner, seen) for call, inner in self._hidden)


def gradient_reads(node: cst.CSTNode) -> list[cst.Attribute]:
    """Every ``x.grad`` in ``node``'s subtree, in source order (asked where a rule judges one
    body, not for every file)."""
    finder = _GradientReads()
    scan(node, finder)
    return finder.found


class _GradientReads(cst.CSTVisitor):
    """For ``gradient_reads`` (a class made once: making one on every call cost more than the scan)."""

    def __init__(self) -> None:
        self.found: list[cst.Attribute] = []

    def visit_Attribute(self, attribute: cst.Attribute) -> None:
        if attribute.attr.value == "grad":
            self.found.append(attribute)


def frees_graph(event: AutogradEvent) -> bool:
    """A backward (or ``autograd.grad``) that certainly frees the saved tensors of the graph it
    goes through: ``retain_graph`` and ``create_graph`` absent or literally False/None, no
    ``inputs=``, and at most one positional argument besides the loss (its gradient: a second
    one could be ``retain_graph``)."""
    call = event.node
    if type(call) is not cst.Call:
        return False
    positional = 0
    for arg in call.args:
        if arg.star:
            return False
        if arg.keyword is None:
            positional += arg.value is not event.subject
        elif arg.keyword.value in api.RETAIN_GRAPH_KEYWORDS or arg.keyword.value == "create_graph":
            value = arg.value
            if not (type(value) is cst.Name and value.value in ("False", "None")):
                return False
        elif arg.keyword.value == "inputs":
            return False
    return positional <= 1


@dataclass(frozen=True)
class BackwardCall:
    call: cst.Call
    # Expressions the backward pass starts from (the loss).
    roots: tuple[cst.BaseExpression, ...]
    # ``retain_graph=True`` / ``create_graph=True``: saved tensors stay alive.
    retains_graph: bool


def backward_call(call: cst.Call, ctx: Analyzer) -> BackwardCall | None:
    """The call as a ``backward()`` (the shared recognition, ``ctx.autograd_event``), or None."""
    event = ctx.autograd_event(call)
    if event is None or event.kind is not EventKind.BACKWARD:
        return None
    roots = (event.subject,) if event.subject is not None else ()
    return BackwardCall(call, roots, event.keeps_graph)


def graph_root_key(expr: cst.BaseExpression) -> str | None:
    """``y`` for ``y``, ``y.sum()``, ``y.mean(dim=0)``, ``scaler.scale(y)``: the name whose own
    graph a backward from ``expr`` goes through (backward() succeeding proves it requires grad)."""
    while True:
        key = dotted_name(expr)
        if key is not None:
            return key
        if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
            return None
        method = expr.func.attr.value
        if method in api.SAME_GRAPH_METHODS:
            expr = expr.func.value
        elif method in api.LOSS_SCALING_METHODS and len(expr.args) == 1 and expr.args[0].keyword is None:
            expr = expr.args[0].value  # torch.amp GradScaler.scale(loss)
        else:
            return None


def has_backward(ctx: Analyzer, body: cst.CSTNode) -> bool:
    """``body`` calls backward (any spelling; nested functions excluded), as seen from the
    current point."""
    return has_event(ctx, body, EventKind.BACKWARD)


def has_event(ctx: Analyzer, body: cst.CSTNode, kind: EventKind) -> bool:
    """``body`` has an autograd event of ``kind`` (an optimizer step, a backward ...; nested
    functions excluded), as seen from the current point."""
    return bool(event_calls(ctx, body, kind, first_only=True))


def event_calls(ctx: Analyzer, body: cst.CSTNode, kind: EventKind, first_only: bool = False) -> list[cst.Call]:
    """The calls in ``body`` that are autograd events of ``kind``, in source order (nested
    functions excluded; only the first with ``first_only``), as seen from the current point."""
    found: list[cst.Call] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if not (first_only and found):
                event = ctx.autograd_event(node)
                if event is not None and event.kind is kind:
                    found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    scan(body, Finder())
    return found
