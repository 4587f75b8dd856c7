"""TL007 saved-tensor-inplace: an in-place change of a tensor that autograd saved for
backward, before that backward runs.

What each op saved, per function in program order, and what a call of the file's own function
or module does to saved tensors (its summary) are the model's (``analysis/saved_state.py``,
whose hooks this rule inherits; which op saves what is data, ``rules/_saved_tensors.toml``).
A change of a saved tensor is reported once a later ``backward()`` in the same function could
reach it (on a path through it), or at once inside an ``nn.Module``'s ``forward`` (the
framework runs backward after it).  In-place modules and functionals (``nn.ReLU(inplace=True)``,
``F.relu_``) are in-place ops whose result *is* their input.

An optimizer step changes the parameters of the models it was built from: a later
``backward()`` through a model call made before the step raises too (the GAN mistake; which
steps a backward() finds stale is the model's ``analysis/stale_steps.py``).  Backward and step
events are the analysis's (``ctx.autograd_event``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchlint import fixes
from torchlint.analysis import dotted_name, keyword_arg, positional_args
from torchlint.analysis.effects import CallEffects
from torchlint.analysis.events import AutogradEvent
from torchlint.analysis.flow import Flow
from torchlint.analysis.module_graph import related
from torchlint.analysis.stale_steps import StaleStep, StaleSteps
from torchlint.analysis.saved_state import FixRecipe, Saved, SavedTensors, is_true, short, strip_data
from torchlint.analysis.torch_api import OUT_OF_PLACE_TWINS, PARAMETER_OVERWRITING_METHODS, TORCH_INPLACE_FUNCTIONS
from torchlint.rule import Diagnostic, Fix, FixSafety, Rule, RuleOptions
from torchlint.saved_tensors import OUT_OF_PLACE, OUTPUT

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

M4 = "one of the variables needed for gradient computation has been modified by an inplace operation"



@dataclass(frozen=True)
class _Change:
    """An in-place change of a saved tensor, reported once a backward() through ``op`` can follow."""

    op: cst.CSTNode
    node: cst.CSTNode
    message: str
    fix: Fix | None
    statement: cst.CSTNode | None


class SavedTensorInplace(SavedTensors, Rule):
    """Queries the model of what autograd saved (``SavedTensors``, whose hooks it inherits): reports
    its in-place changes of saved tensors once a backward() reaches them, and optimizer steps
    between a forward and a backward() through it."""

    code = "TL007"
    name = "saved-tensor-inplace"
    summary = "In-place change of a tensor that autograd saved for backward, before backward runs"
    fix_safety = FixSafety.UNSAFE
    # Findings need a backward() in the same function, a module's forward(), or an
    # in-place nn module in an nn.Sequential.
    tokens = ("backward", "forward", "training_step", "inplace")

    def __init__(self, ctx: Analyzer, sink: list[Diagnostic], options: RuleOptions) -> None:
        Rule.__init__(self, ctx, sink, options)
        SavedTensors.__init__(self, ctx)
        self._changes: dict[object, list[_Change]] = {}  # scope -> changes waiting for a backward()
        self._reported: set[int] = set()  # ids of nodes already reported
        # Optimizer steps: which modules values went through is the model's (``module_graph``).
        self._graph = self.ctx.track_module_graph() if "step" in self.ctx.source else None
        self._follows_calls = self._graph is not None
        # The steps waiting for a backward() through a forward they made stale (the model's).
        self._stale = StaleSteps(self.ctx, self._graph) if self._graph is not None else None

    def _in_forward(self) -> bool:
        function = self.ctx.function
        return function is not None and function.runs_as_forward


    def visit_While(self, node: cst.While) -> None:
        if self._stale is not None:
            self._stale.enter_loop()

    def leave_While(self, node: cst.While) -> None:
        if self._stale is not None:
            self._report_steps(self._stale.leave_loop())

    leave_For = leave_While

    def visit_For(self, node: cst.For) -> None:
        self.visit_While(node)  # type: ignore[arg-type]
        super().visit_For(node)

    # ------------------------------------------------------------ the model's events
    def _on_change(self, saved: Saved, target: cst.BaseExpression, node: cst.CSTNode, how: str,
                   fix: FixRecipe | None, statement: cst.CSTNode | None, via_data: bool) -> None:
        """A change of a saved tensor: reported once a backward() through the op that saved it follows."""
        name = fixes.source_of(strip_data(target))
        op = f"`{short(fixes.source_of(saved.op))}`"
        if saved.inside is not None:
            op += f" (it returns `{saved.inside}`)" if saved.role == OUTPUT else f" (`{saved.inside}` in it)"
        if via_data:
            message = (
                f"{how} changes `{name}` through `.data` after {op} saved "
                f"{'it' if saved.role == OUTPUT else 'it as an input'} for backward: autograd cannot see the "
                "change, so there is no error but backward() computes a wrong gradient from the changed values; "
                "use an out-of-place op, or `.clone()` first"
            )
        else:
            whose = "the output of" if saved.role == OUTPUT else "saved for backward by"
            message = (
                f"{how} changes `{name}`, {whose} {op}: autograd saved it for backward, so backward() raises "
                f"'{M4}'; use an out-of-place op, or `.clone()` first"
            )
        # (out of place under no_grad() the result would lose its graph)
        built = None if fix is None or self.ctx.grad_mode.statically_disabled else self._fix(fix)
        change = _Change(saved.op, node, message, built, statement or self.ctx.statement)
        self._changes.setdefault(self._scope, []).append(change)

    def _on_backward(self, call: cst.Call, reached: frozenset[int]) -> None:
        self._report_changes(reached, call)

    def _after_backward(self, call: cst.Call, event: AutogradEvent) -> None:
        """Report the steps before it that changed parameters its graph saved."""
        if self._stale is not None and event.subject is not None:
            self._report_steps(self._stale.backward(call, event.subject, event.keeps_graph))

    def _on_step(self, call: cst.Call, event: AutogradEvent) -> None:
        if self._stale is not None:
            self._stale.optimizer_step(call, event.subject)

    def _on_overwrite(self, call: cst.Call, modules: frozenset[str]) -> None:
        if self._stale is not None:
            self._stale.overwrite(call, modules)

    def _on_call_effects(self, call: cst.Call, effects: CallEffects) -> None:
        if self._stale is not None:
            self._report_steps(self._stale.call_effects(call, effects))

    def _on_sequential(self, call: cst.Call) -> None:
        self._check_sequential(call)

    def _on_return(self, node: cst.Return) -> None:
        """In ``forward()`` the framework runs backward from what it returns."""
        if node.value is not None and self._in_forward():
            self._report_changes(self.reached_from(node.value), None)

    def _report_changes(self, reached: frozenset[int], backward: cst.CSTNode | None) -> None:
        """Report the waiting changes of what ``reached`` saved; with a ``backward`` call, only those
        on a path through it (not in the other branch of an ``if``: the body's ``ctx.flow``)."""
        waiting = self._changes.get(self._scope, [])
        flow = None
        for change in list(waiting):
            if id(change.op) not in reached:
                continue
            if backward is not None:
                flow = flow or self.ctx.flow(self._scope.node if self._scope is not None else self.ctx.module)
                if not _on_one_path(flow, change.node, backward):
                    continue
            waiting.remove(change)
            if id(change.node) in self._reported:
                continue  # one optimizer step, several model calls it invalidated
            self._reported.add(id(change.node))
            self.report(change.node, change.message, change.fix, statement=change.statement)

    # ------------------------------------------------------------ optimizer steps
    def _report_steps(self, stale: list[StaleStep]) -> None:
        for found in stale:
            self._report_step(found)

    def _report_step(self, found: StaleStep) -> None:
        step, forward, next_iteration, backward = found.step, found.forward, found.next_iteration, found.backward
        node, statement = step.node, step.statement
        # A step in a function this one calls: where the forward sits (the step follows it in
        # the same function), else the call here that runs the step.
        where = self.ctx.function
        for place in step.path:
            if place.function is forward.function and place is not step.path[0]:
                node, statement, where = place.node, place.statement, place.function
        if id(node) in self._reported:
            return
        self._reported.add(id(node))
        call, module = short(fixes.source_of(node)), short(fixes.source_of(forward.call))
        later = "a backward() that runs after the step"
        if node is not step.node and backward:  # (the step is in a function called here): name the backward
            shown = next((place.node for place in reversed(backward) if place.function is where), backward[0].node)
            later = f"the backward() `{short(fixes.source_of(shown))}`, which runs after the step"
        if step.modules is not None:
            stepped = next((m for m in sorted(step.modules) if related(m, forward.module)), forward.module)
            stepped = stepped.rpartition(":")[2]  # (a callee's own name for it: ``effects.py``)
            # (the event at the end of the path: an optimizer step, or a `load_state_dict` copy)
            event = step.path[-1].node if step.path else step.node
            overwrite = step.overwrites or type(event) is cst.Call and type(event.func) is cst.Attribute \
                and event.func.attr.value in PARAMETER_OVERWRITING_METHODS
            advice = ("load the state after every backward() through the graph, or compute the loss again after loading"
                      if overwrite else "call step() after every backward() through the graph, or compute the loss "
                      "again after the step")
            message = (
                f"`{call}` changes the parameters of `{stepped}` in place, but `{module}` saved them "
                f"for {later.replace('the step', 'it') if overwrite else later}"
                f"{' (on the next iteration of the loop)' if next_iteration else ''}: "
                f"backward() raises '{M4}'; {advice}"
            )
        else:
            message = (
                f"`{call}` changes in place the parameters the retained backward() before it reached, and a "
                f"later backward() goes through that graph again (through `{module}`), which saved them: backward() "
                f"raises '{M4}'; call step() after every backward() through the graph, or compute the loss "
                "again after the step"
            )
        self.report(node, message, None, statement=statement)

    # ------------------------------------------------------------ nn.Sequential
    def _check_sequential(self, node: cst.Call) -> None:
        layers = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        for previous, layer in zip(layers, layers[1:]):
            layer_call = self._layer_constructor(layer)
            if layer_call is None:
                continue
            qualified = self.ctx.qualify(layer_call.func) or ""
            inplace = keyword_arg(layer_call, "inplace")
            if not qualified.startswith("torch.nn.") or inplace is None or not is_true(inplace.value):
                continue
            if self._table.inplace_effect(qualified[9:]) == OUT_OF_PLACE:
                continue
            previous_call = self._layer_constructor(previous)
            if previous_call is None or not self._layer_saves_output(previous_call):
                continue
            name, before = qualified[9:], short(fixes.source_of(previous))
            fix = fixes.replace("drop `inplace=True`", layer, _without_keyword(layer, inplace)) if layer is layer_call else None
            self.report(
                layer,
                f"`nn.{name}(inplace=True)` right after `{before}` overwrites that layer's output, which autograd "
                f"saved for backward: backward() raises '{M4}'; drop `inplace=True`",
                fix,
            )


    # ------------------------------------------------------------ fixes
    def _fix(self, recipe: FixRecipe) -> Fix | None:
        """The fix a change's recipe names (``saved_state.FixRecipe``)."""
        kind, *arguments = recipe
        return getattr(self, f"_{kind}_fix")(*arguments)

    def _rebind(self, small: cst.Expr, target: cst.BaseExpression, value: cst.BaseExpression, what: str) -> Fix:
        assign = cst.Assign(targets=[cst.AssignTarget(target)], value=value, semicolon=small.semicolon)
        return fixes.replace(what, small, assign)

    def _method_fix(self, node: cst.Call, target: cst.BaseExpression, method: str) -> Fix | None:
        """``y.mul_(2)`` -> ``y = y.mul(2)`` (also for ``y.data.mul_(2)``)."""
        base = strip_data(target)
        small = self.ctx.expression_statement(node)
        if small is None or dotted_name(base) is None or method[:-1] not in OUT_OF_PLACE_TWINS:
            return None
        call = node.with_changes(func=cst.Attribute(value=base, attr=cst.Name(method[:-1])))
        return self._rebind(small, base, call, f"use out-of-place `{method[:-1]}()`")

    def _torch_function_fix(self, node: cst.Call, namespace: str, name: str) -> Fix | None:
        """``torch.sigmoid_(u)`` -> ``u = torch.sigmoid(u)``."""
        args = positional_args(node)
        small = self.ctx.expression_statement(node)
        if small is None or namespace != "torch" or name[:-1] not in TORCH_INPLACE_FUNCTIONS:
            return None
        if not isinstance(node.func, cst.Attribute) or dotted_name(args[0]) is None:
            return None
        call = node.with_changes(func=node.func.with_changes(attr=cst.Name(name[:-1])))
        return self._rebind(small, args[0], call, f"use out-of-place `{name[:-1]}()`")

    def _functional_fix(self, node: cst.Call, inplace: cst.Arg) -> Fix | None:
        """``F.relu(y, inplace=True)`` -> ``F.relu(y)``; as a statement: ``y = F.relu(y)``."""
        call = _without_keyword(node, inplace)
        small = self.ctx.expression_statement(node)
        if small is None:
            return fixes.replace("drop `inplace=True`", node, call)
        target = positional_args(node)[0]
        if dotted_name(target) is None:
            return None
        return self._rebind(small, target, call, "drop `inplace=True` and rebind")

    def _augassign_fix(self, node: cst.AugAssign) -> Fix | None:
        """``y += 1`` -> ``y = y + 1`` (also for ``y.data += 1``)."""
        operator = fixes.AUG_TO_BINARY.get(type(node.operator))
        base = strip_data(node.target)
        if operator is None or dotted_name(base) is None:
            return None
        right = node.value
        if isinstance(right, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
                              cst.NamedExpr)) and not right.lpar:
            right = right.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        value = cst.BinaryOperation(left=base, operator=operator(), right=right)
        assign = cst.Assign(targets=[cst.AssignTarget(base)], value=value, semicolon=node.semicolon)
        return fixes.replace("assign the out-of-place result", node, assign)




def _on_one_path(flow: Flow, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """One of ``a``, ``b`` sits in every frame the other does (up to the shorter chain): not two
    sibling branches (``if``/``else``, ``try``/``except``).  A node the flow does not place (in a
    lambda) counts as on the path."""
    pa, pb = flow.place(a), flow.place(b)
    if pa is None or pb is None:
        return True
    shorter = min(len(pa.frames), len(pb.frames))
    return pa.frames[:shorter] == pb.frames[:shorter]


def _without_keyword(call: cst.Call, keyword: cst.Arg) -> cst.Call:
    args = [arg for arg in call.args if arg is not keyword]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)




__all__ = ["SavedTensorInplace"]
