"""TL001 rebind-update: ``w = w - lr * w.grad`` on a leaf that requires grad."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, dotted_name
from torchlint.analysis import torch_api as api
from torchlint.analysis.names import assigned_pairs, names_in
from torchlint.rule import Fix, FixSafety, FixStyle, Rule



class RebindUpdate(Rule):
    code = "TL001"
    name = "rebind-update"
    summary = "A trainable leaf is rebound to an update of itself and stops being a leaf"
    fix_safety = FixSafety.SAFE
    tokens = (".grad", "autograd")

    def visit_Assign(self, node: cst.Assign) -> None:
        pairs = assigned_pairs([t.target for t in node.targets], node.value)
        updates: list[fixes.InplaceUpdate | cst.Assign] = []
        updated: list[str] = []
        for target, value in pairs:
            key = dotted_name(target)
            update = None
            if key is not None and value is not None and self.ctx.value_of(target).kind is Kind.LEAF:
                update = self._update_form(value, key)
            if update is None:
                if value is not None:
                    updates.append(cst.Assign(targets=[cst.AssignTarget(target)], value=value))
                continue
            assert key is not None
            updated.append(key)
            method, args, aug_op = update
            updates.append(fixes.InplaceUpdate(target, method, args, aug_op))
        if not updated:
            return
        fix = None
        if self._separable(pairs, node):
            fix = fixes.inplace_updates(
                small=node,
                updates=updates,
                no_grad_style=self.fix_style is FixStyle.NO_GRAD,
                grad_disabled_here=self.ctx.grad_mode.statically_disabled,
                line=self.ctx.statement,
                torch_name=self.ctx.torch_name,
            )
        self._report_unless_releafed(node, updated, self._message(updated), fix)

    def _message(self, keys: list[str]) -> str:
        disabled = self.ctx.grad_mode.statically_disabled
        what = "tensor that no longer requires grad" if disabled else "non-leaf"
        if self._uses_grad_attribute(keys):
            consequence = " (its `.grad` is None next step)"
        elif disabled:
            consequence = ""
        else:
            # Functional training (torch.autograd.grad): no `.grad` is read; the rebound name
            # keeps every step's update in its graph, which grows with each step.
            consequence = " (every step's update stays in its graph, which grows with each step)"
        if len(keys) == 1:
            return (f"`{keys[0]}` is a leaf that requires grad; rebinding it to an update of itself makes it a "
                    f"{what}{consequence}; update it in place")
        names = ", ".join(f"`{key}`" for key in keys)
        return (f"{names} are leaves that require grad; rebinding them to updates of themselves makes each a "
                f"{what}{consequence}; update them in place")

    def _uses_grad_attribute(self, keys: list[str]) -> bool:
        line = self.ctx.statement
        return line is not None and any(f"{key}.grad" in names_in(line) for key in keys)

    @staticmethod
    def _separable(pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]], node: cst.Assign) -> bool:
        """One statement per target keeps the meaning only when no target's new value reads
        another target (a tuple assignment evaluates every value first)."""
        if len(pairs) == 1:
            return True
        if any(value is None for _, value in pairs) or len(node.targets) != 1:
            return False
        keys = [dotted_name(target) for target, _ in pairs]
        if None in keys or len(set(keys)) != len(keys):
            return False
        for index, (_, value) in enumerate(pairs):
            assert value is not None
            mentioned = names_in(value)
            if any(key in mentioned for other, key in enumerate(keys) if other != index):
                return False
        return True

    def _report_unless_releafed(self, node: cst.Assign, keys: list[str], message: str, fix: Fix | None) -> None:
        """Not a finding when every rebound name is a leaf again before its next use (end of
        block or loop body)."""
        outcome = {"releafed": False}
        loop = self.ctx.loops[-1] if self.ctx.loops else None
        function = self.ctx.function

        def check(block: cst.CSTNode) -> None:
            at_loop_end = loop is not None and loop.body is block
            if all(self._leaf_again(key, loop if at_loop_end else None) for key in keys):
                outcome["releafed"] = True
                return
            at_boundary = at_loop_end or (function is not None and function.node.body is block)
            if not at_boundary:
                self.ctx.at_block_end(check)

        self.ctx.at_block_end(check)
        self.report(node, message, fix, when=lambda: not outcome["releafed"])

    def _leaf_again(self, key: str, loop_ending: cst.For | cst.While | None) -> bool:
        """A leaf again; or detached on purpose (``x = clamp(x).detach()``: the author cut
        the graph, FGSM/PGD steps); or, at the end of a loop body, detached and made a leaf
        again by the loop body before it is used (``x.requires_grad_()`` at the top)."""
        value = self.ctx.value_of_key(key)
        if value.kind is Kind.LEAF or (value.kind is Kind.PLAIN and "detach-call" in value.tags):
            return True
        return (
            loop_ending is not None
            and value.kind is Kind.PLAIN
            and "detached" in value.tags
            and self.ctx.made_leaf_in_loop(key, loop_ending)
        )

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
            if method in api.UPDATE_METHODS and dotted_name(value.func.value) == key:
                return f"{method}_", list(value.args), None
            qualified = self.ctx.qualify(value.func)
            if (
                qualified is not None and qualified.startswith("torch.") and qualified[6:] in api.UPDATE_METHODS
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
