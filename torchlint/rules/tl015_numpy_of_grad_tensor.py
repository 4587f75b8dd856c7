"""TL015 numpy-of-grad-tensor: ``.numpy()`` (or NumPy / plotting) of a tensor that requires grad."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, Value
from torchlint.analysis import torch_api as api
from torchlint.analysis.histories import holds_graph_carrying_losses
from torchlint.analysis.plots import plots_on_axes
from torchlint.analysis.uses import Sink
from torchlint.analysis.values import ASSUMED_TAGS, REQUIRES_GRAD_ON_EVERY_PATH
from torchlint.rule import Fix, FixSafety, Rule

_M6 = "Can't call numpy() on Tensor that requires grad"
_MODULE_OUTPUT = frozenset({"model-output"})


class NumpyOfGradTensor(Rule):
    code = "TL015"
    name = "numpy-of-grad-tensor"
    summary = "`.numpy()`, `np.array(...)` or plotting of a tensor that requires grad: raises at run time"
    fix_safety = FixSafety.SAFE
    tokens = ("numpy", "np.", "plt.", "pyplot")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in api.NUMPY_METHODS and not node.args:
            self._check_numpy_method(node, func)
            return
        qualified = self.ctx.qualify(func)
        if qualified in api.NUMPY_CONVERSIONS or qualified in api.PLOTTING_FUNCTIONS:
            self._check_conversion(node, qualified, lists_only=False)
        elif qualified in api.NUMPY_LIST_CONVERSIONS:
            self._check_conversion(node, qualified, lists_only=True)
        elif plots_on_axes(self.ctx, node, self.ctx.scope_bindings()):
            self._check_conversion(node, f"Axes.{func.attr.value}", lists_only=False)  # type: ignore[attr-defined]

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
            if lists_only and value.kind is Kind.COLLECTION and self._result_backpropagated(node, value):
                self._report_backpropagated_reduction(node, qualified)
                return
            holds = _holds_grad(value)
            if value.kind is Kind.COLLECTION and not holds and self._graph_history(arg.value):
                condition: Callable[[], bool] | None = None  # (a backward() went through them)
            elif value.kind is Kind.COLLECTION and not holds and (
                    later := self._holds_grad_given_call_sites(arg.value)) is not None:
                condition = later
            elif not holds or _assumed(value) or (lists_only and value.is_tensor):
                continue
            else:
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
            remedy = "detach it first (`.detach()`, or record `.item()` values)"
            if lists_only and function in ("sum", "mean"):  # (a forward may mean its result to keep the graph)
                remedy += f", or reduce with `torch.stack(...).{function}(0)`, which keeps the graph"
            self.report(
                node,
                f"`{name}` {what}: `{function}(...)` converts it with `.numpy()`, which raises '{_M6}'; {remedy}",
                fix,
                when=condition,
            )
            return

    def _graph_history(self, expr: cst.BaseExpression) -> bool:
        """A list of backpropagated losses, or of epoch sums of them (``analysis.histories``)."""
        if type(expr) is not cst.Name:
            return False
        region = self.ctx.region
        return holds_graph_carrying_losses(self.ctx, region, expr.value)

    def _holds_grad_given_call_sites(self, expr: cst.BaseExpression) -> Callable[[], bool] | None:
        """A list built in a method analysed before the methods that call it (a module's
        ``forward`` called from another module's ``forward``): a condition -- with the
        parameters bound to what every call site passes, it holds tensors that require grad
        (``final = [embedding]`` where the caller passes ``self.embedding.weight``)."""
        mode = self.ctx.grad_mode
        later = self.ctx.value_given_call_sites(expr) if not mode.statically_disabled else None
        if later is None:
            return None

        def holds() -> bool:
            found = later()
            return (found is not None and found.kind is Kind.COLLECTION and _holds_grad(found)
                    and not _assumed(found) and not mode.is_disabled()
                    and not (found.tagged_within(_MODULE_OUTPUT) and self.ctx.parameters_may_be_frozen))

        return holds

    def _result_backpropagated(self, node: cst.Call, collection: Value) -> bool:
        """``loss = np.sum([criterion(out[j], y) for j in ...]); loss.backward()``: the result
        only has a ``backward`` if the elements are tensors that require grad, and then numpy
        has already converted each with ``.numpy()`` (M6); with numbers, backward fails too."""
        element = collection.element
        if element is None or element.kind is not Kind.UNKNOWN or self.ctx.grad_mode.statically_disabled:
            return False
        region = self.ctx.region
        uses = self.ctx.value_flow(region).follow_value(node, combines=self._graph_free_operand)
        return uses is not None and any(use.sink is Sink.BACKWARD for use in uses)

    def _graph_free_operand(self, operand: cst.BaseExpression) -> bool:
        """An operand that cannot be what gives the sum its graph: a number, or a name bound only
        to such reductions (``loss = loss_char + 0.05 * loss_edge``).  With a tensor operand
        (``mse + np.sum(penalties)``) the reduction may be of numbers and backward works."""
        if self.ctx.value_of(operand).kind is Kind.NUMBER:
            return True
        if isinstance(operand, cst.BinaryOperation):
            return self._graph_free_operand(operand.left) and self._graph_free_operand(operand.right)
        if isinstance(operand, cst.UnaryOperation):
            return self._graph_free_operand(operand.expression)
        if not isinstance(operand, cst.Name):
            return False
        sites = self.ctx.scope_bindings().of(operand.value).sites
        return bool(sites) and all(
            isinstance(site, cst.Assign) and isinstance(site.value, cst.Call)
            and self.ctx.qualify(site.value.func) in api.NUMPY_LIST_CONVERSIONS
            for site in sites
        )

    def _report_backpropagated_reduction(self, node: cst.Call, qualified: str) -> None:
        function = qualified.rsplit(".", 1)[-1]
        spelled = fixes.source_of(node.func)
        self.report(
            node,
            f"the result of `{spelled}(...)` is backpropagated, so its list holds tensors that require grad: "
            f"`{spelled}` converts each with `.numpy()`, which raises '{_M6}'; "
            f"reduce with `torch.stack(...).{function}(0)` (or `sum(...)`), which keeps the graph",
        )


def _holds_grad(value: Value) -> bool:
    """Requires grad, or holds tensors that do: also a list whose items are a leaf that requires
    grad and non-leaves made from it (``final = [h]``, then ``h = A @ h; final.append(h)``)."""
    if value.carries_grad:
        return True
    element = value.element if value.kind is Kind.COLLECTION and value.items is None else None
    return element is not None and REQUIRES_GRAD_ON_EVERY_PATH in element.tags


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
