"""Grad mode, mixed into the ``Analyzer``: which mode the current point runs in.

``with torch.no_grad()`` / ``enable_grad`` / ``inference_mode`` / ``set_grad_enabled(flag)``
blocks, the same as decorators, and a bare ``torch.set_grad_enabled(False)`` statement.  A
function's mode from its call sites is resolved in ``scopes.FunctionInfo.entry_mode``.
"""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.names import dotted_name, literal_bool, positional_args
from torchlint.analysis.scopes import DISABLED, ENABLED, INFERENCE, UNKNOWN_MODE, GradMode
from torchlint.analysis.values import UNKNOWN


class GradModes:
    """Mixin of ``Analyzer`` (uses its ``scope``, ``qualify``, ``compound``, ``_bind_target``)."""

    @property
    def grad_mode(self) -> GradMode:
        """The grad mode at the current point (fixed, or inherited from callers)."""
        return self.scope.mode_stack[-1]

    def is_grad_mode_context(self, node: cst.BaseExpression) -> bool:
        return self._mode_of_context(node) is not None

    def context_mode(self, node: cst.BaseExpression) -> GradMode | None:
        """The grad mode a ``with`` item or decorator sets (``UNKNOWN_MODE``: grad-related, but
        which mode is not known), or None if it sets none."""
        return self._mode_of_context(node)

    def _leave_Expr(self, node: cst.Expr) -> None:
        """A bare ``torch.set_grad_enabled(False)`` switches grad mode for the rest of the scope."""
        if isinstance(node.value, cst.Call) and self.qualify(node.value.func) == api.GRAD_SETTING:
            mode = self._mode_of_context(node.value)
            if mode is not None:
                self.scope.mode_stack[-1] = mode

    def _enter_With_body(self, node: cst.With) -> None:
        mode = None
        for item in node.items:
            item_mode = self._mode_of_context(item.item)
            if item_mode is not None:
                mode = item_mode
            if item.asname is not None:
                self._bind_target(item.asname.name, UNKNOWN, None)
        if mode is not None and self.grad_mode.inference and not mode.statically_disabled:
            mode = self.grad_mode
        self.scope.mode_stack.append(mode or self.grad_mode)
        self.compound.append(node)

    def _leave_With_body(self, node: cst.With) -> None:
        self.scope.mode_stack.pop()
        self.compound.pop()

    def _mode_of_context(self, node: cst.BaseExpression) -> GradMode | None:
        """The grad mode a ``with`` item or decorator sets, or None if it sets none."""
        call = node if isinstance(node, cst.Call) else None
        target = call.func if call is not None else node
        qualified = self.qualify(target)
        if qualified in api.GRAD_DISABLING:
            if call is not None and qualified == "torch.inference_mode":
                args = positional_args(call) or [a.value for a in call.args if a.keyword and a.keyword.value == "mode"]
                if args and literal_bool(args[0]) is False:
                    return None
                return INFERENCE
            if qualified == "torch.inference_mode":
                return INFERENCE
            return DISABLED
        if qualified in api.GRAD_ENABLING:
            return ENABLED
        if qualified == api.GRAD_SETTING:
            flag = literal_bool(call.args[0].value) if call is not None and call.args else None
            if flag is None:
                return UNKNOWN_MODE
            return ENABLED if flag else DISABLED
        name = dotted_name(target) or ""
        if "grad" in name.lower() or "inference" in name.lower():
            return UNKNOWN_MODE  # something grad-related we cannot see into
        return None

    def _decorator_mode(self, node: cst.FunctionDef) -> GradMode | None:
        mode = None
        for decorator in node.decorators:
            found = self._mode_of_context(decorator.decorator)
            if found is not None:
                mode = found
        return mode

