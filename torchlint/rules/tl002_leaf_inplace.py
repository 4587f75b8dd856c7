"""TL002 leaf-inplace: an in-place op on a leaf that requires grad while grad mode is on."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, Value, dotted_name
from torchlint.analysis.names import root_name
from torchlint.analysis.torch_api import LEAF_SOURCE_TOKENS, is_inplace_method
from torchlint.analysis.values import LEAF_ON_CPU, VIEW_OF_LEAF
from torchlint.rule import Fix, FixSafety, FixStyle, Rule

_MESSAGE = (
    "in-place {what} on `{name}`, a {leaf} that requires grad, raises "
    "'a {leaf} Variable that requires grad is being used in an in-place operation' "
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
        value = self.ctx.value_of(target)
        if key is None or not self._is_leaf(value):
            return
        if _leaf_on_cpu(value):
            self._report_leaf_on_cpu(node, "update", key, value)
            return
        method = fixes.aug_method(node.operator)
        fix = None
        if method is not None:
            fix = self._update_fix(node, target, method, [cst.Arg(node.value)], node.operator)
        self._report(node, "update", key, fix, value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self._check_subscript_write(node, target.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if not is_inplace_method(method):
            return
        value = self.ctx.value_of(func.value)
        if not self._is_leaf(value):
            return
        name = fixes.source_of(func.value)
        if _leaf_on_cpu(value):
            self._report_leaf_on_cpu(node, f"`{method}()`", name, value)
            return
        fix = None
        statement = self.ctx.statement
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        # Only a call whose result is unused can be rewritten: `w.data.add_()` returns the data tensor.
        if dotted_name(func.value) is not None and isinstance(small, cst.Expr) and small.value is node:
            fix = self._update_fix(small, func.value, method, list(node.args), None)
        self._report(node, f"`{method}()`", name, fix, value)

    def _check_subscript_write(self, node: cst.Assign | cst.AugAssign, target: cst.Subscript) -> None:
        base = target.value
        value = self.ctx.value_of(base)
        if root_name(base) is None or not (value.kind is Kind.LEAF or _is_view_of_leaf(value)):
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
        self._report(node, "indexed write", fixes.source_of(base), fix, value)

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
        return value.kind is Kind.LEAF or _leaf_on_cpu(value) or _is_view_of_leaf(value)

    def _report_leaf_on_cpu(self, node: cst.CSTNode, what: str, name: str, value: Value) -> None:
        """``loss = torch.tensor(0., requires_grad=True).to(device); loss += part``: no fix -- the
        leaf is an accumulator, and neither `.data` nor no_grad would keep the parts' graphs."""
        moved = _short(fixes.source_of(value.origin)) if value.origin is not None else f"{name}.to(device)"
        mode = self.ctx.grad_mode
        if mode.statically_disabled:
            return
        self.report(
            node,
            f"in-place {what} on `{name}` = `{moved}`: on the CPU `.to()` returns the leaf that requires grad "
            "itself (on a GPU a copy), so this raises 'a leaf Variable that requires grad is being used in an "
            f"in-place operation'; accumulate out of place (`{name} = {name} + ...`) or start from 0",
            None,
            when=None if mode.statically_enabled else mode.may_be_enabled,
        )

    def _report(self, node: cst.CSTNode, what: str, name: str, fix: Fix | None, value: Value) -> None:
        mode = self.ctx.grad_mode
        if mode.statically_disabled:
            return
        remedy = "update `.data` or wrap it in `torch.no_grad()`"
        leaf = "view of a leaf" if _is_view_of_leaf(value) else "leaf"
        self.report(
            node,
            _MESSAGE.format(what=what, name=name, leaf=leaf, remedy=remedy),
            fix,
            when=None if mode.statically_enabled else mode.may_be_enabled,
        )


def _leaf_on_cpu(value: Value) -> bool:
    """``leaf.to(device)``: a copy on a GPU, the leaf itself on the CPU."""
    return value.kind is Kind.NONLEAF and LEAF_ON_CPU in value.tags


def _is_view_of_leaf(value: Value) -> bool:
    """``b = w.view(2, -1)``, ``w[0]``: writing into a view writes into the leaf."""
    return value.kind is Kind.NONLEAF and VIEW_OF_LEAF in value.tags


def _short(source: str, limit: int = 60) -> str:
    source = " ".join(source.split())
    return source if len(source) <= limit else source[: limit - 3] + "..."
