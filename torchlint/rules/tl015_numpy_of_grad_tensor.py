"""TL015 numpy-of-grad-tensor: ``.numpy()`` (or NumPy / plotting) of a tensor that requires grad."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Value
from torchlint.analysis import torch_api as api
from torchlint.analysis.values import ASSUMED_TAGS
from torchlint.rule import Fix, FixSafety, Rule

_M6 = "Can't call numpy() on Tensor that requires grad"


class NumpyOfGradTensor(Rule):
    code = "TL015"
    name = "numpy-of-grad-tensor"
    summary = "`.numpy()`, `np.array(...)` or plotting of a tensor that requires grad: raises at run time"
    default = False  # precision on real code below the bar: see the rule's page
    fix_safety = FixSafety.SAFE
    tokens = ("numpy", "np.", "plt.", "pyplot")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value == "numpy" and not node.args:
            self._check_numpy_method(node, func)
            return
        qualified = self.ctx.qualify(func)
        if qualified in api.NUMPY_CONVERSIONS or qualified in api.PLOTTING_FUNCTIONS:
            self._check_conversion(node, qualified, lists_only=False)
        elif qualified in api.NUMPY_LIST_CONVERSIONS:
            self._check_conversion(node, qualified, lists_only=True)

    def _check_numpy_method(self, node: cst.Call, func: cst.Attribute) -> None:
        receiver = func.value
        value = self.ctx.value_of(receiver)
        if not _requires_grad(value):
            return
        condition = self.ctx.requires_grad_when_run(value)
        if condition is None:
            return
        name = fixes.source_of(receiver)
        message = (
            f"`{name}` requires grad: `.numpy()` raises '{_M6}'; use `.detach().numpy()` "
            "(or compute it under `torch.no_grad()`)"
        )
        self.report(node, message, fixes.replace("detach before `.numpy()`", receiver, _detached(receiver)),
                    when=condition)

    def _check_conversion(self, node: cst.Call, qualified: str, *, lists_only: bool) -> None:
        for arg in node.args:
            if arg.keyword is not None or arg.star:
                continue
            value = self.ctx.value_of(arg.value)
            if not value.carries_grad or _assumed(value) or (lists_only and value.is_tensor):
                continue
            condition = self.ctx.requires_grad_when_run(value)
            if condition is None:
                continue
            name = fixes.source_of(arg.value)
            function = qualified.rsplit(".", 1)[-1]
            fix: Fix | None = None
            if value.is_tensor:
                what = "requires grad"
                fix = fixes.replace("detach the tensor", arg.value, _detached(arg.value))
            else:
                what = "holds tensors that require grad"
                # A list of tensors: each element has to be detached (or recorded with `.item()`).
            self.report(
                node,
                f"`{name}` {what}: `{function}(...)` converts it with `.numpy()`, which raises '{_M6}'; "
                "detach it first (`.detach()`, or record `.item()` values)",
                fix,
                when=condition,
            )
            return


def _requires_grad(value: Value) -> bool:
    return value.requires_grad and not _assumed(value)


def _assumed(value: Value) -> bool:
    """Requires grad only by assumption (a parameter guessed to be a leaf because its `.grad` is read)."""
    return value.tagged_within(ASSUMED_TAGS)


def _detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr.detach()``; ``x.cpu()`` becomes ``x.detach().cpu()`` (detach before the copy)."""
    if (
        type(expr) is cst.Call
        and type(expr.func) is cst.Attribute
        and expr.func.attr.value in api.CPU_COPY_METHODS
        and not expr.args
    ):
        inner = expr.func.value
        return expr.with_changes(func=expr.func.with_changes(value=fixes.method_call(inner, "detach", [])))
    return fixes.method_call(fixes.atom(expr), "detach", [])
