"""TL002 leaf-inplace: an in-place op on a leaf that requires grad while grad mode is on."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, Value, dotted_name
from torchlint.analysis.torch_api import LEAF_SOURCE_TOKENS, NON_MUTATING_UNDERSCORE
from torchlint.rule import Fix, FixSafety, FixStyle, Rule

_MESSAGE = (
    "in-place {what} on `{name}`, a leaf that requires grad, raises "
    "'a leaf Variable that requires grad is being used in an in-place operation' "
    "while grad mode is on; {remedy}"
)


class LeafInplace(Rule):
    code = "TL002"
    name = "leaf-inplace"
    summary = "In-place op on a leaf that requires grad while grad mode is on"
    fix_safety = FixSafety.SAFE
    tokens = LEAF_SOURCE_TOKENS

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        target = node.target
        if isinstance(target, cst.Subscript):
            self._check_subscript_write(node, target)
            return
        key = dotted_name(target)
        if key is None or not self._is_leaf(self.ctx.value_of(target)):
            return
        method = fixes.aug_method(node.operator)
        fix = None
        if method is not None:
            fix = self._update_fix(node, target, method, [cst.Arg(node.value)], node.operator)
        self._report(node, "update", key, fix)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self._check_subscript_write(node, target.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if not method.endswith("_") or method.startswith("__") or method in NON_MUTATING_UNDERSCORE:
            return
        if not self._is_leaf(self.ctx.value_of(func.value)):
            return
        name = fixes.source_of(func.value)
        fix = None
        statement = self.ctx.statement
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        # Only a call whose result is unused can be rewritten: `w.data.add_()` returns the data tensor.
        if dotted_name(func.value) is not None and isinstance(small, cst.Expr) and small.value is node:
            fix = self._update_fix(small, func.value, method, list(node.args), None)
        self._report(node, f"`{method}()`", name, fix)

    def _check_subscript_write(self, node: cst.Assign | cst.AugAssign, target: cst.Subscript) -> None:
        base = target.value
        if dotted_name(base) is None or not self._is_leaf(self.ctx.value_of(base)):
            return
        line = self.ctx.statement
        if (
            self.fix_style is FixStyle.NO_GRAD
            and self.ctx.torch_name
            and isinstance(line, cst.SimpleStatementLine)
            and fixes.can_wrap_statement(line, node)
        ):
            fix = fixes.replace(
                "write under `torch.no_grad()`", line, fixes.wrap_in_no_grad(line, node, self.ctx.torch_name)
            )
        else:
            new_target = target.with_changes(value=fixes.data_of(base))
            fix = fixes.replace(f"write into `{fixes.source_of(base)}.data`", target, new_target)
        self._report(node, "indexed write", fixes.source_of(base), fix)

    def _update_fix(
        self,
        small: cst.BaseSmallStatement,
        target: cst.BaseExpression,
        method: str,
        args: list[cst.Arg],
        aug_op: cst.BaseAugOp | None,
    ) -> Fix:
        return fixes.inplace_update(
            small=small,
            target=target,
            method=method,
            args=args,
            aug_op=aug_op,
            no_grad_style=self.fix_style is FixStyle.NO_GRAD,
            grad_disabled_here=False,
            line=self.ctx.statement,
            torch_name=self.ctx.torch_name,
        )

    @staticmethod
    def _is_leaf(value: Value) -> bool:
        return value.kind is Kind.LEAF

    def _report(self, node: cst.CSTNode, what: str, name: str, fix: Fix | None) -> None:
        mode = self.ctx.grad_mode
        if mode.statically_disabled:
            return
        remedy = "update `.data` or wrap it in `torch.no_grad()`"
        self.report(
            node,
            _MESSAGE.format(what=what, name=name, remedy=remedy),
            fix,
            when=None if mode.statically_enabled else mode.may_be_enabled,
        )
