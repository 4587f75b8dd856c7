"""Which tensor an expression is, and which saving ops its value was computed from.

A tensor is identified by the expression that produced it (the ``origin`` of its analysed
value, or the expression last assigned to a name whose value has no origin).  Views,
``.data``, ``.detach()`` and in-place methods (which return their receiver) share their base's
version counter, so they resolve to the base (``resolve``).

The *graph ancestry* of a value (``deps_of``) is the set of saving ops (ops that saved a
tensor for backward: the owner says which, ``note_saving``) it was computed from: a
``backward()`` from it runs, and checks, those ops.  Names carry what was added to the object
they hold (``add_deps``: ``losses.append(loss)``, ``total += loss``).

Kept by the rule that decides which ops save (TL007) as it visits the file, like
``events.EventLog``: ``bind``/``unbind``/``note_alias``/``alias`` at the bindings it sees,
in program order, before the analysis binds the target.  Names are per function
(``ctx.function``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.module_graph import value_children
from torchlint.analysis.names import dotted_name, is_basic_indexing
from torchlint.analysis.values import Kind
from torchlint.analysis.walk import node_types_under

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

Identity = object  # id() of the expression that produced a value, or (id, index) for unpacked tuples
NO_DEPS: frozenset[int] = frozenset()
_NAMES = node_types_under(cst.Name, cst.Attribute)
# Expressions whose value depends on no other value.
_WITHOUT_DEPS = node_types_under(cst.Name, cst.BaseNumber, cst.BaseString, cst.Lambda)
# Expressions that produce a new tensor.
_OP_RESULTS = node_types_under(cst.Call, cst.BinaryOperation, cst.UnaryOperation)
# Kinds that are never tensors: no version counter to bump.
_NOT_TENSORS = frozenset({Kind.NUMBER, Kind.COLLECTION, Kind.MODULE, Kind.OPTIMIZER, Kind.OBJECT})


class TensorIdentities:
    """Tensor identities and graph ancestry of one file (see the module docstring)."""

    def __init__(self, ctx: Analyzer) -> None:
        self._ctx = ctx
        self._saving_ops: set[int] = set()  # ids of ops that saved something
        self._aliases: dict[Identity, tuple[Identity, bool]] = {}  # view expression -> (base, via .data)
        # Names whose analysed value has no origin (results of unknown calls): the expression last assigned.
        self._bound: dict[tuple[object, str], Identity] = {}
        # Which saving ops a value was computed from: a backward() from it runs (and checks) them.
        self._deps: dict[Identity, frozenset[int]] = {}
        # (function, name) -> the object the name's latest binding in program order holds: after a
        # loop (or an ``if``) the analysed value is the join of the paths, and the binding made in
        # the loop's body is one of them (``for ...: x = block(x); x += s`` then ``return x``).
        self._last_holder: dict[tuple[object, str], Identity] = {}

    # ------------------------------------------------------------ questions
    def resolve(self, expr: cst.BaseExpression, tensors_only: bool = True) -> tuple[Identity | None, bool]:
        """(the object ``expr`` is, or is a view of; whether it goes through ``.data``)."""
        # Exact type tests here and in ``deps_of``: they run for most expressions.
        via_data = False
        while True:
            kind = type(expr)
            if kind is cst.Attribute:
                attr = expr.attr.value  # type: ignore[attr-defined]
                if attr == "data":
                    via_data, expr = True, expr.value  # type: ignore[attr-defined]
                    continue
                if attr in api.VERSION_SHARING_ATTRIBUTES:
                    expr = expr.value  # type: ignore[attr-defined]
                    continue
            elif kind is cst.Call and type(expr.func) is cst.Attribute:  # type: ignore[attr-defined]
                method = expr.func.attr.value  # type: ignore[attr-defined]
                if method in api.VERSION_SHARING_METHODS or api.is_inplace_method(method):
                    expr = expr.func.value  # type: ignore[attr-defined]  # a view, or an in-place method's receiver
                    continue
            elif kind is cst.Subscript and is_basic_indexing(expr):  # type: ignore[arg-type]
                expr = expr.value  # type: ignore[attr-defined]
                continue
            break
        if type(expr) in _OP_RESULTS:
            alias = self._aliases.get(id(expr))  # `F.relu(y, inplace=True)` is `y`
            if alias is not None:
                return alias[0], via_data or alias[1]
            return id(expr), via_data  # the tensor this op produces
        key = dotted_name(expr)
        if key is None:
            return None, via_data
        value = self._ctx.value_of(expr)
        if tensors_only and value.kind in _NOT_TENSORS:
            return None, via_data
        identity: Identity | None = id(value.origin) if value.origin is not None else None
        if identity is None:
            identity = self._bound.get((self._ctx.function, key))
        if identity in self._aliases:
            base, aliased_data = self._aliases[identity]
            return base, via_data or aliased_data
        return identity, via_data

    def latest(self, key: str) -> Identity | None:
        """The object the latest binding of ``key`` in this function (in program order) holds."""
        return self._last_holder.get((self._ctx.function, key))

    def holder(self, expr: cst.BaseExpression) -> Identity | None:
        """The object (tensor, list, number ...) ``expr`` names, for dependency tracking."""
        return self.resolve(expr, tensors_only=False)[0]

    def deps_of(self, expr: cst.CSTNode) -> frozenset[int]:
        """The saving ops ``expr``'s value was computed from (ids of the op nodes)."""
        if not self._saving_ops:
            return NO_DEPS  # every dependency is on a saving op: none yet
        kind = type(expr)
        if kind in _NAMES and (key := dotted_name(expr)) is not None:  # type: ignore[arg-type]
            holder = self.holder(expr)  # type: ignore[arg-type]
            found = self._deps.get(holder, NO_DEPS) if holder is not None else NO_DEPS
            last = self._last_holder.get((self._ctx.function, key))
            if last is not None and last != holder:
                found = found | self._deps.get(last, NO_DEPS)
            if kind is cst.Attribute:
                found = found | self.deps_of(expr.value)  # type: ignore[attr-defined]  # `outputs.loss`
            return found
        if kind in _WITHOUT_DEPS:
            return NO_DEPS
        found = frozenset({id(expr)}) if id(expr) in self._saving_ops else NO_DEPS
        for child in value_children(expr):
            found = found | self.deps_of(child)
        return found

    # ------------------------------------------------------------ updates (from the owner's visits)
    def note_saving(self, op: cst.CSTNode) -> None:
        """``op`` saved a tensor for backward."""
        self._saving_ops.add(id(op))

    def add_deps(self, holder: Identity | None, deps: frozenset[int]) -> None:
        """The object ``holder`` now also holds values computed from ``deps``."""
        if holder is not None and deps:
            self._deps[holder] = self._deps.get(holder, NO_DEPS) | deps

    def alias(self, node: cst.CSTNode, base: Identity, via_data: bool) -> None:
        """``node``'s result is ``base`` itself (an in-place op returning its input)."""
        self._aliases[id(node)] = (base, via_data)

    def note_alias(self, value: cst.BaseExpression) -> None:
        """``a = y.detach()`` / ``a = y[0]`` / ``a = y.data``: ``a`` changes ``y``'s memory."""
        if not isinstance(value, (cst.Call, cst.Attribute, cst.Subscript)):
            return
        base, via_data = self.resolve(value)
        if base is not None and base != id(value):
            self._aliases[id(value)] = (base, via_data)

    def bind(self, target: cst.BaseExpression, value: cst.BaseExpression, deps: frozenset[int]) -> None:
        """Record what ``target`` will hold once the assignment is done (the analysis binds it next)."""
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [element.value for element in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
                for sub_target, sub_value in zip(elements, value.elements):
                    self.bind(sub_target, sub_value.value, self.deps_of(sub_value.value))
                return
            for index, sub_target in enumerate(elements):
                self._bind_key(sub_target, None, (id(value), index), deps)
            return
        self._bind_key(target, self._ctx.value_of(value).origin, id(value), deps)

    def _bind_key(
        self, target: cst.BaseExpression, origin: cst.CSTNode | None, fallback: Identity, deps: frozenset[int]
    ) -> None:
        key = dotted_name(target)
        if key is None:
            return
        scope = self._ctx.function
        if origin is not None:
            self._bound.pop((scope, key), None)
            holder: Identity = id(origin)
        else:
            self._bound[(scope, key)] = holder = fallback
        self._last_holder[(scope, key)] = holder
        self.add_deps(holder, deps)

    def unbind(self, target: cst.CSTNode | None) -> None:
        """``target`` is rebound to something not followed (a loop target, ``del``, ``as`` names)."""
        if type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self.unbind(element.value)
        elif type(target) is cst.StarredElement:
            self.unbind(target.value)
        elif type(target) in (cst.Name, cst.Attribute):
            key = dotted_name(target)
            if key is not None:
                self._bound.pop((self._ctx.function, key), None)
                self._last_holder.pop((self._ctx.function, key), None)
