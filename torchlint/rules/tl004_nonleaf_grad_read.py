"""TL004 nonleaf-grad-read: ``y.grad`` of a computed tensor that never called ``retain_grad()``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, Value, dotted_name
from torchlint.analysis import torch_api as api
from torchlint.analysis.bindings import bindings_in_scope
from torchlint.analysis.events import backward_call, graph_root_key
from torchlint.analysis.values import ASSUMED_TAGS, COPIED_TO_GPU
from torchlint.rule import Fix, FixSafety, Rule
from torchlint.saved_tensors import saved_tensor_table

if TYPE_CHECKING:
    from torchlint.analysis.flow import Flow


@dataclass(frozen=True)
class _Backward:
    call: cst.Call
    line: cst.CSTNode | None  # the statement line holding the call
    roots: frozenset[str]  # names the backward provably goes through


@dataclass(frozen=True)
class _Retain:
    call: cst.Call
    scope: object


class NonleafGradRead(Rule):
    code = "TL004"
    name = "nonleaf-grad-read"
    summary = "`.grad` read on a non-leaf tensor that does not retain its gradient: always None"
    fix_safety = FixSafety.UNSAFE
    tokens = (".grad",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # The events seen, by function (None: the module); their order is asked of ``ctx.flow``.
        self._backwards: dict[object, list[_Backward]] = {}
        self._retains: dict[object, list[_Retain]] = {}  # tensor identity -> retain_grad() calls
        self._escaped: set[object] = set()  # tensors handed to code that might retain them
        self._may_retain_elsewhere = "retain_grad" in self.ctx.source

    # ------------------------------------------------------------ events
    @property
    def _scope(self) -> object:
        return self.ctx.function

    def _flow(self) -> Flow:
        """Order inside the function (or module) the analysis is in."""
        return self.ctx.flow(self.ctx.region)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._may_retain_elsewhere and any(isinstance(t.target, cst.Subscript) for t in node.targets):
            # Stored into a container (`acts[name] = h`): whoever reads it may retain it.
            values = node.value.elements if isinstance(node.value, (cst.Tuple, cst.List)) else [node.value]
            for value in values:
                self._escape(value.value if isinstance(value, cst.BaseElement) else value)

    def visit_Call(self, node: cst.Call) -> None:
        backward = backward_call(node, self.ctx)
        if backward is not None:
            roots = frozenset(key for key in map(graph_root_key, backward.roots) if key is not None)
            self._backwards.setdefault(self._scope, []).append(_Backward(node, self.ctx.statement, roots))
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "retain_grad":
            identity = self._identity(func.value)
            if identity is not None:
                self._retains.setdefault(identity, []).append(_Retain(node, self._scope))
            return
        if self._may_retain_elsewhere and not self._is_inert(node):
            for arg in node.args:
                self._escape(arg.value)

    def _escape(self, expr: cst.BaseExpression) -> None:
        identity = self._identity(expr)
        if identity is not None:
            self._escaped.add(identity)

    def _is_inert(self, call: cst.Call) -> bool:
        """The callee cannot call ``retain_grad()`` on its arguments: torch, tensor methods, builtins."""
        func = call.func
        qualified = self.ctx.qualify(func)
        if qualified is not None and qualified.split(".")[0] == "torch":
            return True
        if isinstance(func, cst.Name) and func.value in api.ARGUMENT_PRESERVING_BUILTINS:
            return True
        if isinstance(func, cst.Attribute) and self.ctx.value_of(func.value).is_tensor:
            return True
        callee = self.ctx.value_of(func)
        return callee.kind is Kind.MODULE and callee.cls is None  # a built-in nn module

    def _identity(self, expr: cst.BaseExpression) -> object | None:
        """Which tensor ``expr`` names: the expression that produced it, or the name itself
        when the analysis has no value (a single-assignment name, see ``_inferred_nonleaf``)."""
        key = dotted_name(expr)
        if key is None:
            return None
        value = self.ctx.value_of(expr)
        if value.origin is not None:
            return id(value.origin)
        return (self._scope, key)

    # ------------------------------------------------------------ reads
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "grad" or self.ctx.is_assignment_target(node):
            return
        base = node.value
        key = dotted_name(base)
        if key is None:
            return
        value = self.ctx.value_of(base)
        inferred = False
        if not self._is_nonleaf(key, value):
            if not self._inferred_nonleaf(base, value):
                return
            inferred = True
        identity = self._identity(base)
        bound_at = self._binding(base, value)
        retains = self._retains.get(identity, [])
        late = False
        if retains or "retains-grad" in value.tags:
            late = self._retained_too_late(retains, bound_at, node)
            if not late:
                return
        elif inferred or (self._may_retain_elsewhere and identity in self._escaped):
            return
        self._report(node, key, self._fix(base, key, bound_at, node), late, _copying_method(value))

    def _binding(self, base: cst.BaseExpression, value: Value) -> cst.CSTNode | None:
        """Where the tensor ``base`` holds was made, in the body the analysis is in (for a name
        with no analysed value: its one assignment); None when not there."""
        origin = value.origin
        if origin is None and isinstance(base, cst.Name):
            assignment = bindings_in_scope(self.ctx, base.value).single_assignment()
            origin = assignment.value if assignment is not None else None
        return origin if origin is not None and self._flow().contains(origin) else None

    def _backwards_between(self, bound_at: cst.CSTNode, read: cst.CSTNode) -> list[_Backward]:
        """The backward calls of this body that run after ``bound_at`` and before ``read``."""
        flow = self._flow()
        return [b for b in self._backwards.get(self._scope, ()) if flow.between(b.call, bound_at, read)]

    def _is_nonleaf(self, key: str, value: Value) -> bool:
        if value.kind is not Kind.NONLEAF:
            return False
        if value.tags & ASSUMED_TAGS and self.ctx.made_leaf_in_scope(key):
            # Computed from tensors only assumed to require grad, then made a leaf on purpose.
            return False
        if "device-dependent" in value.tags:
            # `.to(device)` / `.cuda()` of a leaf is the leaf itself on that device (TL003's finding);
            # a dtype conversion of a default float32 tensor is always a copy.
            origin = value.origin
            return COPIED_TO_GPU in value.tags or (
                isinstance(origin, cst.Call)
                and isinstance(origin.func, cst.Attribute)
                and origin.func.attr.value in api.DTYPE_COPYING_METHODS
            )
        return True

    def _inferred_nonleaf(self, base: cst.BaseExpression, value: Value) -> bool:
        """A name the analysis knows nothing about, bound once to the result of a torch op,
        that ``retain_grad()`` was called on and that a ``backward()`` went through: the
        backward proves it requires grad, and an op result that requires grad is a non-leaf."""
        if value.kind is not Kind.UNKNOWN or not isinstance(base, cst.Name):
            return False
        name = base.value
        if (self._scope, name) not in self._retains:
            return False
        assignment = bindings_in_scope(self.ctx, name).single_assignment()
        if assignment is None or not self._is_op_result(assignment.value):
            return False
        if self.ctx.made_leaf_in_scope(name):
            return False
        return any(name in b.roots for b in self._backwards.get(self._scope, ()))

    def _is_op_result(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.BinaryOperation):
            return type(expr.operator).__name__ in api.OPERATOR_OPS
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.ctx.qualify(expr.func)
        if qualified is not None:
            name = qualified.rsplit(".", 1)[-1]
            return qualified.startswith("torch.") and saved_tensor_table().op(name) is not None
        if isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            return method not in api.MAY_RETURN_SELF_METHODS and saved_tensor_table().op(method) is not None
        return False

    def _retained_too_late(self, retains: list[_Retain], bound_at: cst.CSTNode | None, read: cst.CSTNode) -> bool:
        """True only when the tensor was bound, then backpropagated, and only then retained,
        with no ``backward()`` between the first ``retain_grad()`` and the read (all in this scope)."""
        if not retains or bound_at is None or any(r.scope is not self._scope for r in retains):
            return False
        flow = self._flow()
        backwards = self._backwards_between(bound_at, read)
        return bool(backwards) and all(all(flow.before(b.call, r.call) for r in retains) for b in backwards)

    # ------------------------------------------------------------ report
    def _report(self, node: cst.Attribute, key: str, fix: Fix | None, late: bool, copied_by: str | None) -> None:
        if late:
            message = (
                f"`{key}.retain_grad()` is called after `backward()`: the gradient of this non-leaf "
                f"was never stored and `{key}.grad` is None; call `retain_grad()` before `backward()`"
            )
        elif copied_by is not None:
            message = (
                f"`{key}` is not a leaf: `.{copied_by}()` returned a copy of a tensor that requires grad, so "
                f"`{key}.grad` is None after `backward()` (the gradient goes to the original); create the tensor "
                f"with its device and dtype and `requires_grad=True`, or read the original's `.grad`"
            )
        else:
            message = (
                f"`{key}` is not a leaf (it is computed from tensors that require grad), so `{key}.grad` is "
                f"None after `backward()`; call `{key}.retain_grad()` before `backward()`, or read a leaf's `.grad`"
            )
        self.report(node, message, fix)

    def _fix(self, base: cst.BaseExpression, key: str, bound_at: cst.CSTNode | None, read: cst.CSTNode) -> Fix | None:
        """Insert ``y.retain_grad()`` on its own line right before the ``backward()`` the read follows."""
        if bound_at is None:
            return None
        candidates = self._backwards_between(bound_at, read)
        if not candidates:
            return None
        line = candidates[-1].line
        if not isinstance(line, cst.SimpleStatementLine):
            return None  # `if c: loss.backward()` has no line of its own to insert before
        retain = cst.SimpleStatementLine(
            body=[cst.Expr(fixes.method_call(fixes.strip_parens(base), "retain_grad", []))],
            leading_lines=line.leading_lines,
        )
        moved = line.with_changes(leading_lines=[])
        return Fix(
            f"call `{key}.retain_grad()` before `backward()`",
            ((line, cst.FlattenSentinel([retain, moved])),),
            FixSafety.UNSAFE,
        )


def _copying_method(value: Value) -> str | None:
    """``cuda`` / ``double`` ... when ``value`` is the device or dtype copy such a call made."""
    origin = value.origin
    if "device-dependent" in value.tags and type(origin) is cst.Call and type(origin.func) is cst.Attribute:
        return origin.func.attr.value
    return None
