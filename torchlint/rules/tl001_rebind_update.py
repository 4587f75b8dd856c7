"""TL001 rebind-update: ``w = w - lr * w.grad`` on a leaf that requires grad."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, dotted_name
from torchlint.analysis import torch_api as api
from torchlint.analysis.names import assigned_pairs, names_in, self_attribute
from torchlint.analysis.uses import Sink
from torchlint.analysis.walk import scan, subtree
from torchlint.rule import Fix, FixSafety, FixStyle, Rule

# How an assignment updates a leaf in place: (in-place method, its arguments, augmented operator).
_UpdateForm = tuple[str, list[cst.Arg], "cst.BaseAugOp | None"]


class RebindUpdate(Rule):
    code = "TL001"
    name = "rebind-update"
    summary = "A trainable leaf is rebound to an update of itself and stops being a leaf"
    fix_safety = FixSafety.SAFE
    tokens = (".grad", "autograd", "Parameter")

    def visit_Assign(self, node: cst.Assign) -> None:
        pairs = assigned_pairs([t.target for t in node.targets], node.value)
        # (target, value, update form or None: a plain assignment kept as it is), in order.
        forms: list[tuple[cst.BaseExpression, cst.BaseExpression, _UpdateForm | None]] = []
        updated: list[str] = []
        for target, value in pairs:
            key = dotted_name(target)
            update = None
            if key is not None and value is not None and self.ctx.value_of(target).kind is Kind.LEAF:
                update = self._update_form(value, key)
            if update is None:
                if value is not None:
                    forms.append((target, value, None))
                continue
            assert key is not None
            updated.append(key)
            forms.append((target, value, update))
        if not updated:
            if len(pairs) == 1 and pairs[0][1] is not None:
                self._check_parameter_rebinding(node, *pairs[0])  # type: ignore[arg-type]
            return
        # The fix's statements only now: most assignments update nothing.
        updates: list[fixes.InplaceUpdate | cst.Assign] = [
            fixes.InplaceUpdate(target, *update) if update is not None
            else cst.Assign(targets=[cst.AssignTarget(target)], value=value)
            for target, value, update in forms
        ]
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

    def _check_parameter_rebinding(self, node: cst.Assign, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``self.weight = self.weight * k`` in a method of an ``nn.Module`` whose ``__init__``
        registered ``self.weight = nn.Parameter(...)``: assigning a tensor that is not a
        Parameter to a registered parameter raises TypeError, in grad mode and under no_grad."""
        key = dotted_name(target)
        attr = self_attribute(key)
        function = self.ctx.function
        if attr is None or function is None:
            return
        cls = function.cls
        if cls is None or not cls.is_module or function.name == "__init__":
            return
        init = cls.method("__init__")
        moved = self._registered_in(init.node, key) if init is not None else None
        if moved is None or self._registered_by(value) is not None or not self._plain_tensor(value):
            return  # (`nn.Parameter(...)`, moved or not: on the CPU it assigns a Parameter)
        where = ""
        if moved:
            where = (" on the CPU, where `.to(...)` of the `nn.Parameter(...)` `__init__` assigns is the registered "
                     "parameter itself (on a GPU it is an unregistered copy no optimizer trains)")
        message = (
            f"`{key}` is a parameter registered in `__init__`; assigning it a tensor that is not an `nn.Parameter` "
            f"raises `TypeError: cannot assign 'torch.FloatTensor' as parameter '{attr}' (torch.nn.Parameter or "
            f"None expected)`{where}; update it in place"
        )
        fix = None
        if key in names_in(value) and _elementwise(value):
            fix = fixes.inplace_updates(
                small=node,
                updates=[fixes.InplaceUpdate(target, "copy_", [cst.Arg(fixes.strip_parens(value))], None)],
                no_grad_style=self.fix_style is FixStyle.NO_GRAD,
                grad_disabled_here=self.ctx.grad_mode.statically_disabled,
                line=self.ctx.statement,
                torch_name=self.ctx.torch_name,
            )
        self.report(node, message, fix)

    def _plain_tensor(self, value: cst.BaseExpression) -> bool:
        """A tensor that is not a Parameter: arithmetic on a tensor (whatever the other operand,
        an operator on a tensor returns a plain tensor), or a known tensor value that is not a
        Parameter nor (``.to(device)``) possibly the same object."""
        value = fixes.strip_parens(value)
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)):
            return any(self.ctx.value_of(operand).is_tensor for operand in _operands(value))
        new = self.ctx.value_of(value)
        return new.is_tensor and not new.tags & {"parameter", "device-dependent"}

    def _registered_in(self, init: cst.FunctionDef, key: str) -> bool | None:
        """``_registered_by`` of what ``__init__`` assigns to ``key``: every assignment must be a
        Parameter (True if any is moved by ``.to(...)``); None if it assigns anything else."""
        assigned: list[cst.BaseExpression] = []

        class Finder(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                if any(dotted_name(t.target) == key for t in node.targets):
                    assigned.append(node.value)

        scan(init.body, Finder())
        kinds = [self._registered_by(value) for value in assigned]
        if not kinds or None in kinds:
            return None
        return any(kinds)

    def _registered_by(self, origin: cst.CSTNode | None) -> bool | None:
        """Whether ``origin`` (what ``__init__`` assigned) is an ``nn.Parameter(...)``: False
        if it is one, True if it is one moved by ``.to(...)`` (the same object when nothing
        changes, as on the CPU), None if it is not."""
        moved = False
        while isinstance(origin, cst.Call) and isinstance(origin.func, cst.Attribute):
            if origin.func.attr.value not in api.NOOP_ON_DEFAULT_TENSOR | {"to"}:
                break
            moved = True
            origin = origin.func.value
        if isinstance(origin, cst.Call) and self.ctx.qualify(origin.func) == api.PARAMETER:
            return moved
        return None

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
            at_function_end = function is not None and function.node.body is block
            if at_function_end and not at_loop_end and self._only_used_detached(node, function.node):
                outcome["releafed"] = True  # one FGSM step: the author goes on with `x.detach()`
                return
            if not (at_loop_end or at_function_end):
                self.ctx.at_block_end(check)

        self.ctx.at_block_end(check)
        self.report(node, message, fix, when=lambda: not outcome["releafed"])

    def _only_used_detached(self, node: cst.Assign, function: cst.FunctionDef) -> bool:
        """Every later use of the rebound value cuts its graph (``x.detach()``, ``.item()``):
        nothing reads it as a leaf again, so it being a non-leaf harms nothing."""
        uses = self.ctx.value_flow(function).follow_value(node.value)
        if not uses:
            return False
        here = {id(n) for n in subtree(node)}  # the rebinding itself
        later = [use for use in uses if id(use.node) not in here]
        return bool(later) and all(use.sink in (Sink.DETACHED, Sink.NUMBER) for use in later)

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
    ) -> _UpdateForm | None:
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


def _elementwise(value: cst.BaseExpression) -> bool:
    """Arithmetic on names, attributes and numbers only: the result has the shape of the
    tensor it is copied into (a call could reshape or reduce it)."""
    return all(isinstance(operand, (cst.Name, cst.Attribute, cst.Integer, cst.Float)) for operand in _operands(value))


def _operands(value: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The operands of arithmetic (``a * (b - c)``: a, b, c), left to right; a non-arithmetic
    value is its own operand."""
    value = fixes.strip_parens(value)
    if isinstance(value, cst.BinaryOperation):
        yield from _operands(value.left)
        yield from _operands(value.right)
    elif isinstance(value, cst.UnaryOperation):
        yield from _operands(value.expression)
    else:
        yield value
