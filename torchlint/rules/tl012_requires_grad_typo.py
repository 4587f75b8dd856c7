"""TL012 requires-grad-typo: ``x.require_grad = True`` silently sets a useless attribute."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, TENSOR_KINDS
from torchlint.rule import FixSafety, Rule

TYPOS = frozenset({"require_grad", "requires_grads", "require_grads", "requieres_grad", "requires_gradient",
                   "require_gradient", "requiresgrad", "requires_gard"})


class RequiresGradTypo(Rule):
    code = "TL012"
    name = "requires-grad-typo"
    summary = "Misspelled requires_grad silently sets an unused attribute"
    fix_safety = FixSafety.SAFE
    tokens = ("require_grad", "requires_grads", "requieres", "requires_gradient", "requiresgrad", "requires_gard")

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not isinstance(target, cst.Attribute) or target.attr.value not in TYPOS:
            return
        receiver = self.ctx.value_of(target.value)
        typo = target.attr.value
        if receiver.kind in TENSOR_KINDS:
            fix = fixes.replace("spell it requires_grad", target.attr, cst.Name("requires_grad"))
            self.report(target, f"`{typo}` is not a tensor attribute: this sets a new, unused attribute; "
                                "did you mean `requires_grad`?", fix)
        elif receiver.kind is Kind.MODULE:
            call = fixes.method_call(target.value, "requires_grad_", [cst.Arg(node.value)])
            fix = fixes.replace("call requires_grad_() on the module", node, cst.Expr(call, semicolon=node.semicolon))
            self.report(target, f"`{typo}` is not an nn.Module attribute: this sets a new, unused attribute; "
                                "use `module.requires_grad_(...)`", fix)
