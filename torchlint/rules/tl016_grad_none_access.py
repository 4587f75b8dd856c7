"""TL016 grad-none-access: ``w.grad`` is used before any ``backward()`` has filled it.

A leaf's ``.grad`` is None until the first ``backward()`` through it.  Zeroing it at the top
of the loop body (``w.grad.zero_()``, ``w.grad.data.zero_()``), reading ``w.grad.item()`` or
computing ``lr * w.grad`` before that raises on the first iteration.

Reported only when certain, on the shared model: the leaf is created in the same body
(a factory with ``requires_grad=True``, ``nn.Parameter``, ``requires_grad_()``, or the
parameters of a module built there); its creation dominates the access (``ctx.flow``); no
``backward()`` — seen, or possibly hidden in a call (``events.EventLog``) — and no assignment
to the gradient runs in between; and the first pass that reaches the access cannot have
skipped it before (no ``if`` around it inside the loops entered since, no ``continue``
before it, no ``try`` that catches the error).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind
from torchlint.analysis.events import EventLog
from torchlint.analysis.torch_api import BUILTIN_PARAMETER_ATTRS, NAMED_PARAMETER_ITERATORS, PARAMETER_ITERATORS
from torchlint.rule import Rule


@dataclass(eq=False)
class _Access:
    grad: cst.Attribute  # the ``w.grad`` expression
    use: str  # what is done with it: "attribute zero_", "subscript", "operand"
    owner: str  # ``w``, as written
    created: cst.CSTNode  # the call that made the leaf (or the module that owns it)
    root: cst.CSTNode  # the body both are in (function or module)
    loops: tuple[cst.For | cst.While, ...]  # loops around the access, outermost first
    statement: cst.CSTNode | None


def _is_grad(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Attribute and expr.attr.value == "grad"  # type: ignore[attr-defined]


class GradNoneAccess(Rule):
    code = "TL016"
    name = "grad-none-access"
    summary = "A leaf's .grad is used before any backward() has filled it (it is still None)"
    # Opt-in: the mistake crashes on the first run, so it rarely survives into committed code;
    # one real instance was found (see the rule page), too few to turn it on.
    default = False
    tokens = (".grad",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._log = EventLog(self.ctx)
        self._accesses: list[_Access] = []
        self._seen: set[int] = set()

    # ------------------------------------------------------------ events
    def visit_Call(self, node: cst.Call) -> None:
        self._log.record(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._log.record_assignment(target.target, node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if _is_grad(node.value):
            self._access(node.value, f"attribute {node.attr.value}")  # type: ignore[arg-type]

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if _is_grad(node.value):
            self._access(node.value, "subscript")  # type: ignore[arg-type]

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        for side in (node.left, node.right):
            if _is_grad(side):
                self._access(side, "operand")  # type: ignore[arg-type]

    def _access(self, grad: cst.Attribute, use: str) -> None:
        if id(grad) in self._seen:
            return
        self._seen.add(id(grad))
        created = self._creation(grad.value)
        if created is None:
            return
        root = self.ctx.region
        self._accesses.append(
            _Access(grad, use, fixes.source_of(grad.value), created, root, tuple(self.ctx.loops), self.ctx.statement)
        )

    def _creation(self, owner: cst.BaseExpression) -> cst.CSTNode | None:
        """Where the leaf ``owner`` was made, when that is certain: the factory/Parameter call or
        ``requires_grad_`` that made it, or, for a module's parameters, the module's construction."""
        value = self.ctx.value_of(owner)
        if value.kind is not Kind.LEAF or "assumed-leaf" in value.tags or value.origin is None:
            return None
        origin = value.origin
        module: cst.BaseExpression | None = None
        if type(origin) is cst.Call and type(origin.func) is cst.Attribute:
            if origin.func.attr.value in PARAMETER_ITERATORS | NAMED_PARAMETER_ITERATORS:
                module = origin.func.value  # ``for p in model.parameters()``
        elif type(origin) is cst.Attribute and origin.attr.value in BUILTIN_PARAMETER_ATTRS:
            module = origin.value  # ``model.weight``
        if module is None:
            return origin
        owner_module = self.ctx.value_of(module)
        if owner_module.kind is not Kind.MODULE or type(owner_module.origin) is not cst.Call:
            return None
        return owner_module.origin

    # ------------------------------------------------------------ judgement
    def finish(self) -> None:
        for access in self._accesses:
            if self._none_at_first_use(access):
                self._report(access)

    def _none_at_first_use(self, access: _Access) -> bool:
        flow = self.ctx.flow(access.root)
        grad, created = access.grad, access.created
        if not flow.dominates(created, grad):
            return False
        place, origin = flow.place(grad), flow.place(created)
        assert place is not None and origin is not None
        if place.errors_handled:
            return False
        # Only loops entered after the creation may run again; in them the access must not be
        # skippable on the first pass.
        new_frames = place.frames[len(origin.frames):]
        if any(frame.conditional and not frame.loop for frame in new_frames):
            return False
        outer = {frame.node_id for frame in origin.frames}
        for loop in access.loops:
            if id(loop) not in outer and self.ctx.flow(loop).exits_between(None, grad):
                return False
        filled = (*self._log.backward_calls_in(flow), *self._log.gradient_writes_in(flow))
        return not any(flow.between(node, created, grad) for node in filled)

    def _report(self, access: _Access) -> None:
        owner = access.owner
        kind, _, attribute = access.use.partition(" ")
        if kind == "attribute":
            error = f"AttributeError: 'NoneType' object has no attribute '{attribute}'"
        elif kind == "subscript":
            error = "TypeError: 'NoneType' object is not subscriptable"
        else:
            error = "TypeError: unsupported operand type(s) ... 'NoneType'"
        message = (
            f"`{owner}.grad` is still None here: no `backward()` has run since `{owner}` was created, so this "
            f"raises `{error}`; zero or read the gradient after `backward()` (or guard it with "
            f"`if {owner}.grad is not None:`)"
        )
        self.report(access.grad, message, statement=access.statement)
