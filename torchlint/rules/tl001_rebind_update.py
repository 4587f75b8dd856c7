"""TL001 rebind-update: ``w = w - lr * w.grad`` on a leaf that requires grad."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, dotted_name
from torchlint.rule import Fix, FixSafety, FixStyle, Rule

_UPDATE_METHODS = frozenset({"sub", "add", "subtract", "addcmul", "addcdiv", "mul", "div"})


class RebindUpdate(Rule):
    code = "TL001"
    name = "rebind-update"
    summary = "A trainable leaf is rebound to an update of itself and stops being a leaf"
    fix_safety = FixSafety.SAFE
    tokens = (".grad", "autograd")

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        key = dotted_name(target)
        if key is None or self.ctx.value_of(target).kind is not Kind.LEAF:
            return
        update = self._update_form(node.value, key)
        if update is None:
            return
        method, args, aug_op = update
        fix = fixes.inplace_update(
            small=node,
            target=target,
            method=method,
            args=args,
            aug_op=aug_op,
            no_grad_style=self.fix_style is FixStyle.NO_GRAD,
            grad_disabled_here=self.ctx.grad_mode.statically_disabled,
            line=self.ctx.statement,
            torch_name=self.ctx.torch_name,
        )
        message = (
            f"`{key}` is a leaf that requires grad; rebinding it to an update of itself makes it a "
            f"{'tensor that no longer requires grad' if self.ctx.grad_mode.statically_disabled else 'non-leaf'}"
            f" (its `.grad` is None next step); update it in place"
        )
        self._report_unless_releafed(node, key, message, fix)

    def _report_unless_releafed(self, node: cst.Assign, key: str, message: str, fix: Fix) -> None:
        """Not a finding when the name is a leaf again before its next use (end of block or loop body)."""
        outcome = {"releafed": False}
        loop = self.ctx.loops[-1] if self.ctx.loops else None
        function = self.ctx.function

        def check(block: cst.CSTNode) -> None:
            if self.ctx.value_of_key(key).kind is Kind.LEAF:
                outcome["releafed"] = True
                return
            at_boundary = (loop is not None and loop.body is block) or (
                function is not None and function.node.body is block
            )
            if not at_boundary:
                self.ctx.at_block_end(check)

        self.ctx.at_block_end(check)
        self.report(node, message, fix, when=lambda: not outcome["releafed"])

    def _update_form(
        self, value: cst.BaseExpression, key: str
    ) -> tuple[str, list[cst.Arg], cst.BaseAugOp | None] | None:
        """(in-place method, its arguments, augmented operator) if ``value`` updates ``key`` from a gradient."""
        if not self.ctx.mentions_gradient(value):
            return None
        if isinstance(value, cst.BinaryOperation):
            method = fixes.BINARY_TO_METHOD.get(type(value.operator))
            if method and dotted_name(value.left) == key:
                right = fixes.strip_parens(value.right)
                return method, [cst.Arg(right)], fixes.binary_to_aug(value.operator)
            if self._leftmost(value) == key:
                return "copy_", [cst.Arg(fixes.strip_parens(value))], None
            return None
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            method = value.func.attr.value
            if method in _UPDATE_METHODS and dotted_name(value.func.value) == key:
                return f"{method}_", list(value.args), None
            qualified = self.ctx.qualify(value.func)
            if (
                qualified in {f"torch.{m}" for m in _UPDATE_METHODS}
                and value.args
                and value.args[0].keyword is None
                and dotted_name(value.args[0].value) == key
            ):
                return f"{qualified.split('.')[-1]}_", list(value.args[1:]), None
        return None

    @staticmethod
    def _leftmost(value: cst.BaseExpression) -> str | None:
        while isinstance(value, cst.BinaryOperation):
            value = value.left
        return dotted_name(value)
