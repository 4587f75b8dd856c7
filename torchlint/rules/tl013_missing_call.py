"""TL013 missing-call: a method or a grad-mode context manager named but not called.

``opt.zero_grad`` / ``opt.step`` / ``loss.backward`` / ``model.eval`` / ``model.train`` /
``scheduler.step`` as a statement of its own evaluates the bound method and throws it
away; ``with torch.no_grad:`` hands ``with`` a class instead of an instance.  Only the
bare statement is reported: a method stored or passed on (``fn = opt.step``,
``callbacks.append(opt.zero_grad)``) is a value, and is called later.
"""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind
from torchlint.analysis.events import is_optimizer
from torchlint.analysis.torch_api import ACTION_METHODS, GRAD_MODE_CLASSES
from torchlint.rule import FixSafety, Rule


class MissingCall(Rule):
    code = "TL013"
    name = "missing-call"
    summary = "A method or grad-mode context manager is named but not called (missing `()`)"
    fix_safety = FixSafety.SAFE
    # `.eval`, not `eval`: the bare statement is an attribute ("train" alone is in nearly every file).
    tokens = (*(f".{method}" for method in ACTION_METHODS), "no_grad", "enable_grad", "inference_mode")

    def visit_Expr(self, node: cst.Expr) -> None:
        expr = node.value
        if type(expr) is not cst.Attribute or expr.attr.value not in ACTION_METHODS:
            return
        if self._not_a_method(expr):
            return
        method = expr.attr.value
        receiver = fixes.source_of(expr.value)
        effect = ACTION_METHODS[method]
        if method == "step" and is_optimizer(self.ctx, expr.value):
            effect = "the optimizer never updates the parameters"
        elif method == "step":
            effect = "the step never runs: a scheduler keeps its learning rate"
        elif self.ctx.value_of(expr.value).kind is Kind.UNKNOWN:
            effect = f"it never runs; for a torch object, {effect}"  # maybe not a torch object at all
        message = f"`{receiver}.{method}` names the method but does not call it: {effect}; add `()`"
        call = cst.Call(func=expr)
        self.report(expr, message, fixes.replace(f"call it: `{receiver}.{method}()`", expr, call))

    def _not_a_method(self, expr: cst.Attribute) -> bool:
        """An attribute read for its own sake: a property, or data kept on an object of a class of
        this file; or a name in an imported module (not a bound method of an object)."""
        if self.ctx.qualify(expr.value) is not None:
            return True
        receiver = self.ctx.value_of(expr.value)
        if receiver.kind not in (Kind.MODULE, Kind.OBJECT) or receiver.cls is None:
            return False
        name = expr.attr.value
        if receiver.cls.attr(name) is not None:
            return True
        method = receiver.cls.method(name)
        return method is not None and method.is_property

    def visit_WithItem(self, node: cst.WithItem) -> None:
        item = node.item
        if type(item) not in (cst.Name, cst.Attribute) or self.ctx.qualify(item) not in GRAD_MODE_CLASSES:
            return
        shown = fixes.source_of(item)
        message = (
            f"`with {shown}:` uses the class, not an instance: this raises `TypeError: 'type' object does "
            f"not support the context manager protocol`; write `with {shown}():`"
        )
        self.report(item, message, fixes.replace(f"call it: `{shown}()`", item, cst.Call(func=item)))
