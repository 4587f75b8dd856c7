"""TL011 prefer-no-grad-over-data (opt-in): ``X.data`` hides changes from autograd's version
counter; prefer ``torch.no_grad()`` for updates and ``.detach()`` for reads.

Reported when ``X`` is known to be a tensor (the analysis says so, or ``X`` is a ``.grad``),
or when what is done through ``.data`` only makes sense on a tensor (an in-place method
``X.data.add_(...)``, ``X.data -= ...``).  Other receivers -- ``args.data``, ``batch.data``,
module paths, ``self.data``, values from NumPy/scikit-learn/dataset classes -- stay silent:
``data`` is a common attribute name.  Fixes are offered only for known tensors.
"""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Value
from torchlint.analysis.torch_api import is_inplace_method
from torchlint.analysis.values import NON_TENSOR_KINDS
from torchlint.rule import Fix, FixSafety, FixStyle, Rule

INPLACE, AUG, INDEX_WRITE, STORAGE, READ = "in-place", "augmented", "indexed write", "storage swap", "read"


class PreferNoGradOverData(Rule):
    code = "TL011"
    name = "prefer-no-grad-over-data"
    summary = "`.data` hides changes from autograd; prefer torch.no_grad() for updates and .detach() for reads"
    default = False
    fix_safety = FixSafety.UNSAFE
    tokens = ("data",)
    # The "data" fix style writes `.data`: with this rule enabled, fixes update under no_grad.
    preferred_fix_style = FixStyle.NO_GRAD

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # id(`X.data` node) -> (how it is used, the statement that uses it, if it is one)
        self._contexts: dict[int, tuple[str, cst.BaseSmallStatement | None]] = {}
        # (function id, name) of names bound to objects from non-torch libraries
        self._foreign: set[tuple[int, str]] = set()

    # ------------------------------------------------------------ how `.data` is used
    def visit_Assign(self, node: cst.Assign) -> None:
        foreign = self._is_foreign(node.value)
        for target in node.targets:
            expr = target.target
            if foreign and isinstance(expr, cst.Name):
                self._foreign.add((id(self.ctx.function), expr.value))
            if _is_data(expr):
                self._contexts[id(expr)] = (STORAGE, node)
            elif isinstance(expr, cst.Subscript) and _is_data(expr.value):
                self._contexts[id(expr.value)] = (INDEX_WRITE, node if len(node.targets) == 1 else None)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if _is_data(node.target):
            self._contexts[id(node.target)] = (AUG, node)
        elif isinstance(node.target, cst.Subscript) and _is_data(node.target.value):
            self._contexts[id(node.target.value)] = (INDEX_WRITE, node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or not _is_data(func.value):
            return
        method = func.attr.value
        # requires_grad_() & co change no data: nothing is hidden (and PackedSequence.data has them too).
        if is_inplace_method(method):
            on_own_line = isinstance(self.ctx.statement, cst.SimpleStatementLine)
            self._contexts[id(func.value)] = (INPLACE, self.ctx.expression_statement(node) if on_own_line else None)

    # ------------------------------------------------------------ the finding
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "data":
            return
        receiver = node.value
        if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
            return
        if self.ctx.qualify(receiver) is not None:
            return  # a module path: torch.utils.data
        value = self.ctx.value_of(receiver)
        if value.kind in NON_TENSOR_KINDS:
            return
        known = self._known_tensor(receiver, value)
        usage, statement = self._contexts.get(id(node), (READ, None))
        if not known and (usage not in (INPLACE, AUG) or self._is_foreign(receiver)):
            return
        name = fixes.source_of(receiver)
        fix = self._fix(node, receiver, value, usage, statement) if known else None
        self.report(node, _message(name, usage, _is_grad(receiver, value)), fix)

    def _known_tensor(self, receiver: cst.BaseExpression, value: Value) -> bool:
        """A tensor for sure -- not an object merely assumed to be one because its ``.grad`` is
        read (torch's own ``MetaTensorDesc`` has ``.grad`` and ``.data`` fields)."""
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == "grad":
            owner = self.ctx.value_of(receiver.value)
            return owner.is_tensor and "assumed-leaf" not in owner.tags
        return value.is_tensor and "assumed-leaf" not in value.tags

    def _is_foreign(self, expr: cst.BaseExpression) -> bool:
        """Made by (or reached from) a library that is not torch: NumPy, scikit-learn, torchvision datasets."""
        while True:
            if isinstance(expr, cst.Call):
                qualified = self.ctx.qualify(expr.func)
                if qualified is not None:
                    return not qualified.startswith("torch.")
                expr = expr.func
            elif isinstance(expr, (cst.Attribute, cst.Subscript)):
                expr = expr.value
            elif isinstance(expr, cst.Name):
                function = self.ctx.function
                return (id(function), expr.value) in self._foreign or (id(None), expr.value) in self._foreign
            else:
                return False

    # ------------------------------------------------------------ fixes
    def _fix(
        self,
        node: cst.Attribute,
        receiver: cst.BaseExpression,
        value: Value,
        usage: str,
        statement: cst.BaseSmallStatement | None,
    ) -> Fix | None:
        name = fixes.source_of(receiver)
        if usage == STORAGE:
            return None  # w.copy_(new) is only equivalent when shapes and dtypes match
        if _is_grad(receiver, value):
            # .grad is not tracked by autograd: drop the .data
            return fixes.replace(f"use `{name}` directly", node, receiver)
        if usage == READ:
            detached = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("detach")))
            return fixes.replace(f"read `{name}.detach()`", node, detached)
        if statement is None:
            return None
        new_statement = statement.deep_replace(node, receiver)
        if not isinstance(new_statement, cst.BaseSmallStatement):
            return None
        if self.ctx.grad_mode.statically_disabled:
            return fixes.replace(f"update `{name}` directly (grad mode is off here)", statement, new_statement)
        line = self.ctx.statement
        torch_name = self.ctx.torch_name
        if torch_name is None or not isinstance(line, cst.SimpleStatementLine):
            return None
        if not fixes.can_wrap_statement(line, statement):
            return None  # the statement shares its line
        wrapped = fixes.wrap_in_no_grad(line, new_statement, torch_name)
        return fixes.replace(f"update `{name}` under `torch.no_grad()`", line, wrapped)


def _is_data(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "data"


def _is_grad(receiver: cst.BaseExpression, value: Value) -> bool:
    return (isinstance(receiver, cst.Attribute) and receiver.attr.value == "grad") or "grad" in value.tags


def _message(name: str, usage: str, grad: bool) -> str:
    if grad:
        return f"`{name}.data`: `.grad` is not tracked by autograd, so `.data` only hides what happens; use `{name}`"
    if usage == READ:
        return (
            f"`{name}.data` is a tensor autograd does not track; read `{name}.detach()` instead (it shares "
            "the version counter, so a later in-place change is checked)"
        )
    if usage == STORAGE:
        return (
            f"assigning `{name}.data` swaps the storage behind autograd's back; prefer `{name}.copy_(...)` "
            "under `torch.no_grad()`"
        )
    return (
        f"{usage} change through `{name}.data` is invisible to autograd: a value saved for backward is silently "
        f"corrupted instead of raising; change `{name}` under `torch.no_grad()`"
    )
