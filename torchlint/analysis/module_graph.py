"""Which modules a value's graph goes through, and which modules an optimizer updates.

A *forward* is a call that runs a module: ``D(x)``, ``self.netD(x)``, a method of a module
(``netD_seq.netG_adv_loss(fake)``), a module's ``forward``.  Every value computed from a forward's
output carries it: through ops, unknown calls (``g_loss_module(fake_tex, ...)``,
``lambda_return(values, ...)``), tuple unpacking of a model's outputs, containers it is stored
in, and the values helpers of this file return from their arguments.  ``.detach()``, ``.item()``
and code under ``no_grad`` cut the graph, so they carry none.

Which modules an optimizer updates is read from what it was built from:
``Adam(M.parameters())``, ``params=M.sub.parameters()``, ``list(a.parameters()) +
list(b.parameters())``, ``itertools.chain``, param groups, a name bound to one of these, and
``self.opt = ...`` in ``__init__`` for the other methods of the class.  Unknown (None) when the
construction is not in the file (a parameter, a factory's result).

Module keys are dotted names, related when one is the other or a part of it: stepping
``net.encoder`` changes weights a forward of ``net`` saved, and stepping ``net`` changes those
of ``net.encoder``.

Tracking is on demand (``Analyzer.track_module_graph``): it costs nothing for files whose rules do not
ask.  The state is updated when a statement's bindings are applied, so a rule asking during the
statement sees the values before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.names import dotted_name
from torchlint.analysis.values import Kind
from torchlint.analysis.walk import children

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

# How deep a name's assigned expression is followed to find what an optimizer was built from.
_MAX_PARAMETER_HOPS = 2


def related(a: str, b: str) -> bool:
    """Module keys naming the same module, or one a submodule of the other."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


@dataclass(frozen=True, eq=False)
class Forward:
    """A call that ran a module; ``serial`` orders forwards (and steps) in analysis order."""

    call: cst.Call
    module: str  # the module's key: ``D``, ``self.netD``, ``net``
    serial: int
    # False for a single built-in layer applied to data: its backward needs its input, not its
    # weight, so a step over the weight changes nothing it saved.
    saves_parameters: bool
    # Known to be a module (its value, or ``D.parameters()`` / ``D.train()`` in the file); else a
    # callable handed in as a parameter (a model, or a loss function).
    is_module: bool = True


_NONE: frozenset[Forward] = frozenset()


class ModuleGraph:
    """The forwards each name's value went through, per function (see the module docstring)."""

    def __init__(self, ctx: Analyzer) -> None:
        self._ctx = ctx
        self._through: dict[tuple[object, str], frozenset[Forward]] = {}
        self._assigned: dict[tuple[object, str], cst.BaseExpression] = {}
        self._forwards: dict[int, Forward] = {}  # call id -> its forward (one per call node)
        self._module_keys: set[str] = set()  # names with module evidence (``D.parameters()``, ``D.train()``)
        # Modules some ``torch.optim`` optimizer built in the file updates.
        self.optimized_keys: set[str] = set()
        self.serial = 0
        self.bindings = 0  # counts bindings: ``_bound_at`` tells when a name was last bound
        self._bound_at: dict[tuple[object, str], int] = {}

    # ------------------------------------------------------------ questions
    def forwards_of(self, expr: cst.CSTNode) -> frozenset[Forward]:
        """The forwards ``expr``'s value (at the current point) was computed through."""
        kind = type(expr)
        if kind is cst.Name or kind is cst.Attribute:
            key = dotted_name(expr)  # type: ignore[arg-type]
            if key is not None:
                found = self._through.get((self._ctx.function, key), _NONE)
                if kind is cst.Attribute:
                    if expr.attr.value == "data":  # type: ignore[attr-defined]
                        return _NONE
                    found = found | self.forwards_of(expr.value)  # type: ignore[attr-defined]  # `outputs.loss`
                return found
        if kind is cst.Call:
            return self._forwards_of_call(expr)  # type: ignore[arg-type]
        if kind in (cst.Lambda, cst.SimpleString, cst.Integer, cst.Float, cst.Name):
            return _NONE
        found = _NONE
        for child in value_children(expr):
            found = found | self.forwards_of(child)
        return found

    def optimized_modules(self, optimizer: cst.BaseExpression) -> frozenset[str] | None:
        """The module keys ``optimizer`` was built from; None when that is not known."""
        constructor = self._ctx.value_of(optimizer).origin
        if not isinstance(constructor, cst.Call):
            key = dotted_name(optimizer)
            constructor = self.assigned(key) if key is not None else None
        if not isinstance(constructor, cst.Call):
            return None
        return self._modules_in(constructor, _MAX_PARAMETER_HOPS)

    def assigned(self, key: str) -> cst.BaseExpression | None:
        """The expression last assigned to ``key`` in this function (``self.x``: in this method,
        else in the class's ``__init__`` or another method)."""
        function = self._ctx.function
        found = self._assigned.get((function, key))
        if found is None and key.startswith("self.") and function is not None and function.cls is not None:
            found = self._assigned.get((function.cls, key))
        return found

    def held_since(self, forward: Forward, bindings: int) -> bool:
        """Some name of this function bound no later than binding number ``bindings`` (the start of
        a loop) still holds a value computed through ``forward``."""
        function = self._ctx.function
        return any(
            slot[0] is function and forward in forwards and self._bound_at.get(slot, 0) <= bindings
            for slot, forwards in self._through.items()
        )

    def is_module_key(self, key: str) -> bool:
        """Something in the file treats ``key`` as a module (its parameters, ``train()`` ...)."""
        return key in self._module_keys or self._ctx.value_of_key(key).kind is Kind.MODULE

    # ------------------------------------------------------------ updates (from the analyzer)
    def bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """``target = value``: what ``target`` goes through from now on."""
        if value is None:
            return
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                and len(target.elements) == len(value.elements):
            pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
            computed = [(t, self.forwards_of(v), v) for t, v in pairs]  # all before any binds
            for sub_target, forwards, sub_value in computed:
                self._set(sub_target, forwards, sub_value)
            return
        self._set(target, self.forwards_of(value), value)

    def bind_loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        self._set(target, self.forwards_of(iterable), None)

    def add(self, holder: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``holder`` now also holds ``value``: ``losses.append(loss)``, ``total += loss``, ``x[i] = y``."""
        key = dotted_name(holder)
        forwards = self.forwards_of(value)
        if key is not None and forwards:
            slot = (self._ctx.function, key)
            self._through[slot] = self._through.get(slot, _NONE) | forwards

    def unbind(self, target: cst.BaseExpression) -> None:
        self._set(target, _NONE, None)

    def note_call(self, call: cst.Call) -> None:
        """Every call: ``D.parameters()`` / ``D.train()`` make ``D`` a module key; a
        ``torch.optim`` optimizer's construction tells which modules have one."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in api.MODULE_GRAPH_EVIDENCE_METHODS:
            key = dotted_name(func.value)
            if key is not None:
                self._module_keys.add(key)
            return
        qualified = self._ctx.qualify(func)
        if qualified is not None and qualified.startswith(api.OPTIMIZER_PREFIX) \
                and not qualified.startswith(api.NON_OPTIMIZER_PREFIXES):
            self.optimized_keys |= self._modules_in(call, _MAX_PARAMETER_HOPS) or frozenset()

    # ------------------------------------------------------------ bookkeeping
    def _set(self, target: cst.BaseExpression, forwards: frozenset[Forward], value: cst.BaseExpression | None) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:  # a model's outputs unpacked: each carries the graph
                self._set(element.value, forwards, None)
            return
        if isinstance(target, cst.StarredElement):
            self._set(target.value, forwards, None)
            return
        if isinstance(target, cst.Subscript):
            if value is not None:
                self.add(target.value, value)  # `outputs[i] = D(x)`
            return
        key = dotted_name(target)
        if key is None:
            return
        function = self._ctx.function
        slot = (function, key)
        self.bindings += 1
        self._bound_at[slot] = self.bindings
        if forwards:
            self._through[slot] = forwards
        else:
            self._through.pop(slot, None)
        if value is not None:
            self._assigned[slot] = value
            if key.startswith("self.") and function is not None and function.cls is not None:
                self._assigned[(function.cls, key)] = value
        else:
            self._assigned.pop(slot, None)

    def _forwards_of_call(self, call: cst.Call) -> frozenset[Forward]:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in api.GRAPH_CUTTING_METHODS:
            return _NONE
        if self._ctx.grad_mode.statically_disabled:
            return _NONE  # no graph under no_grad()
        found = _NONE
        if type(func) is cst.Attribute:
            found = self.forwards_of(func.value)
        for arg in call.args:
            found = found | self.forwards_of(arg.value)
        forward = self._forward(call)
        return found | {forward} if forward is not None else found

    def _forward(self, call: cst.Call) -> Forward | None:
        """The forward ``call`` is, if it runs a module."""
        known = self._forwards.get(id(call))
        if known is not None:
            return known
        module = self._module_called(call)
        if module is None:
            return None
        key, saves, is_module = module
        self.serial += 1
        forward = self._forwards[id(call)] = Forward(call, key, self.serial, saves, is_module)
        return forward

    def _module_called(self, call: cst.Call) -> tuple[str, bool, bool] | None:
        """(the module's key, whether its graph saves its parameters, whether it is known to be a
        module) when ``call`` runs a module, or may (a callable parameter)."""
        ctx, func = self._ctx, call.func
        key = dotted_name(func)
        if key is None or ctx.qualify(func) is not None:
            return None
        value = ctx.value_of(func)
        if value.kind is Kind.MODULE:
            if "parameterless" in value.tags:
                return None
            return key, self._saves_parameters(call, value.origin if value.cls is None else None), True
        if value.kind is not Kind.UNKNOWN:
            return None
        if key in self._module_keys:
            return key, True, True
        if type(func) is cst.Name and "param" in value.tags:
            return key, True, False
        if type(func) is cst.Attribute and func.attr.value not in api.NOT_FORWARD_METHODS:
            receiver = dotted_name(func.value)
            if receiver is not None and self.is_module_key(receiver):
                return receiver, True, True  # `netD_seq.netG_adv_loss(fake)`: a method of the module
        return None

    def _saves_parameters(self, call: cst.Call, constructor: cst.CSTNode | None) -> bool:
        """A single built-in layer (``nn.Linear``) on data saves its input, not its weight."""
        if not isinstance(constructor, cst.Call):
            return True
        layer = self._ctx.qualify(constructor.func) or ""
        if layer in api.CONTAINER_MODULES or not layer.startswith("torch.nn."):
            return True
        return any(self._ctx.value_of(arg.value).certainly_requires_grad for arg in call.args)

    def _modules_in(self, node: cst.CSTNode, hops: int) -> frozenset[str] | None:
        """Module keys whose parameters ``node`` (an optimizer's construction) hands over;
        names are followed to what they were assigned (``params = list(G.parameters()) + ...``)."""
        keys: set[str] = set()
        unresolved = False
        todo: list[cst.CSTNode] = [node]
        while todo:
            current = todo.pop()
            kind = type(current)
            if kind is cst.Call:
                func = current.func  # type: ignore[attr-defined]
                if type(func) is cst.Attribute and func.attr.value in api.PARAMETER_SOURCES:
                    key = dotted_name(func.value)
                    unresolved = unresolved or key is None
                    keys.update([key] if key is not None else [])
                else:  # `Adam(...)`, `list(...)`, `chain(...)`: what they are handed
                    todo.extend(arg.value for arg in current.args if not _is_option(arg))  # type: ignore[attr-defined]
            elif kind is cst.Name:
                if self._ctx.value_of(current).kind is Kind.LEAF:  # type: ignore[arg-type]
                    continue  # `Adam([w])`: a tensor, not a module
                assigned = self.assigned(current.value) if hops > 0 else None  # type: ignore[attr-defined]
                inner = self._modules_in(assigned, hops - 1) if assigned is not None else None
                if inner is None:
                    unresolved = True
                else:
                    keys |= inner
            elif kind is not cst.Lambda:
                todo.extend(children(current))
        if unresolved and not keys:
            return None
        return frozenset(keys)


def _is_option(arg: cst.Arg) -> bool:
    """A keyword argument of an optimizer that is not its parameters."""
    return arg.keyword is not None and arg.keyword.value not in ("params", "param_groups")


def value_children(expr: cst.CSTNode) -> list[cst.CSTNode]:
    """The sub-expressions whose values flow into ``expr``'s value."""
    if isinstance(expr, cst.Call):
        func = expr.func
        receiver = [func.value] if isinstance(func, cst.Attribute) else []
        return [*receiver, *(arg.value for arg in expr.args)]
    if isinstance(expr, cst.BinaryOperation):
        return [expr.left, expr.right]
    if isinstance(expr, cst.UnaryOperation):
        return [expr.expression]
    if isinstance(expr, cst.BooleanOperation):
        return [expr.left, expr.right]
    if isinstance(expr, cst.Comparison):
        return [expr.left, *(target.comparator for target in expr.comparisons)]
    if isinstance(expr, cst.IfExp):
        return [expr.body, expr.orelse]
    if isinstance(expr, cst.Subscript):
        return [expr.value]
    if isinstance(expr, cst.Attribute):
        return [expr.value]
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return [element.value for element in expr.elements]
    if isinstance(expr, cst.Dict):
        return [element.value for element in expr.elements]
    if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return [expr.elt, expr.for_in.iter]
    if isinstance(expr, (cst.StarredElement, cst.Await)):
        return [expr.value if isinstance(expr, cst.StarredElement) else expr.expression]
    return []


__all__ = ["Forward", "ModuleGraph", "related", "value_children"]
