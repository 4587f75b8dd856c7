"""TL012 requires-grad-typo: ``x.require_grad = True`` silently sets a useless attribute, and so does
``module.requires_grad = False`` on an ``nn.Module`` (its parameters keep their flag)."""

from __future__ import annotations

import libcst as cst

import re

from torchlint import fixes
from torchlint.analysis import Kind, TENSOR_KINDS, dotted_name
from torchlint.rule import FixSafety, Rule

TYPOS = frozenset({"require_grad", "requires_grads", "require_grads", "requieres_grad", "requires_gradient",
                   "require_gradient", "requiresgrad", "requires_gard"})


class RequiresGradTypo(Rule):
    code = "TL012"
    name = "requires-grad-typo"
    summary = "Misspelled requires_grad silently sets an unused attribute"
    fix_safety = FixSafety.SAFE
    tokens = ("require_grad", "requires_grad", "requieres", "requiresgrad", "requires_gard")

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not isinstance(target, cst.Attribute):
            return
        if target.attr.value == "requires_grad":
            self._module_flag(node, target)
            return
        if target.attr.value not in TYPOS:
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

    def _module_flag(self, node: cst.Assign, target: cst.Attribute) -> None:
        """``model.outc.requires_grad = False``: on a module a plain attribute (measured: the
        parameters keep ``requires_grad=True`` and train).  Not a module's own field that it
        reads back (``self.requires_grad = flag`` in its ``__init__``, ``if net.requires_grad:``)."""
        receiver = target.value
        if type(receiver) is cst.Name and receiver.value == "self" or not self.ctx.holds_module(receiver):
            return
        cls = self.ctx.value_of(receiver).cls
        if cls is not None and cls.node is not None and cls.attribute_uses().assigners("requires_grad"):
            return  # a class of this file with a `requires_grad` field of its own
        key = dotted_name(receiver)
        if key is not None and _read_back(self.ctx.source, key):
            return
        call = fixes.method_call(receiver, "requires_grad_", [cst.Arg(node.value)])
        # Unsafe: it really changes the flags, which may unfreeze parameters frozen one by one before.
        fix = fixes.replace("call requires_grad_() on the module", node, cst.Expr(call, semicolon=node.semicolon),
                            FixSafety.UNSAFE)
        self.report(target, "`requires_grad` is a plain attribute of an nn.Module: assigning it does not change "
                            "the module's parameters, which keep their own `requires_grad` (a module meant to be "
                            "frozen keeps training); use `module.requires_grad_(...)`", fix)


def _read_back(source: str, key: str) -> bool:
    """``key.requires_grad`` appears in ``source`` other than as an assignment target."""
    return any(
        not (match.start() and (source[match.start() - 1].isalnum() or source[match.start() - 1] in "_."))
        for match in re.finditer(re.escape(key) + r"\s*\.\s*requires_grad\b(?!\s*=[^=])", source)
    )
