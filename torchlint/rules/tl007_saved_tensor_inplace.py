"""TL007 saved-tensor-inplace: an in-place change of a tensor that autograd saved for
backward, before that backward runs.

Which op saves what is data (``rules/_saved_tensors.toml``, see ``torchlint.saved_tensors``).
A tensor is identified by the expression that produced it (the ``origin`` of its
analysed value); views and ``.detach()`` share their base's version counter, so
they are followed back to the base (the model's ``TensorIdentities``, which also
follows which saving ops a value was computed from).  Saved tensors are tracked per function in
program order and forgotten at every ``backward()`` (unless it retains the graph).
A change is reported once a later ``backward()`` in the same function could
reach it, or at once inside an ``nn.Module``'s ``forward`` (the framework runs
backward after it).

In-place modules and functionals (``nn.ReLU(inplace=True)``, ``F.relu_``) are in-place
ops whose result *is* their input; what their in-place form saves is data too (the
``[inplace]`` table).  An optimizer step changes the parameters of the models it was
built from: model calls made before the step are pending changes that a later
``backward()`` through them reports (the GAN mistake).  Backward and step events are
the analysis's (``ctx.autograd_event``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint import fixes
from torchlint.analysis import dotted_name, keyword_arg, positional_args
from torchlint.analysis.effects import CallEffects, Place
from torchlint.analysis.events import AutogradEvent, EventKind
from torchlint.analysis.flow import Flow
from torchlint.analysis.module_graph import Forward, related
from torchlint.analysis.saved_state import FixRecipe, Saved, SavedTensors, is_true, short, strip_data
from torchlint.analysis.scopes import CALLED_WITH_GRAD_BY_FRAMEWORK
from torchlint.analysis.torch_api import OUT_OF_PLACE_TWINS, TORCH_INPLACE_FUNCTIONS
from torchlint.rule import Diagnostic, Fix, FixSafety, Rule, RuleOptions
from torchlint.saved_tensors import OUT_OF_PLACE, OUTPUT

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

M4 = "one of the variables needed for gradient computation has been modified by an inplace operation"

_NO_FORWARDS: frozenset[Forward] = frozenset()


@dataclass(frozen=True)
class _Change:
    """An in-place change of a saved tensor, reported once a backward() through ``op`` can follow."""

    op: cst.CSTNode
    node: cst.CSTNode
    message: str
    fix: Fix | None
    statement: cst.CSTNode | None


@dataclass(frozen=True)
class _Step:
    """An optimizer step, reported once a backward() through a forward it made stale follows."""

    node: cst.Call  # the step, or the call of this function's that runs it
    serial: int  # the module graph's serial at the step: forwards up to it ran before it
    modules: frozenset[str] | None  # the modules it updates; None: not known
    retained: frozenset[Forward]  # (not known) the graph the retained backward() before it reached
    statement: cst.CSTNode | None
    # A step in a function this one calls: the call, the nested calls, the step (effects.py).
    path: tuple[Place, ...] = ()


@dataclass
class _Loop:
    """A loop being analysed: its steps and the graphs its retained backward() calls reached."""

    scope: object
    serial: int  # the module graph's serial before the loop: forwards up to it were made before it
    bindings: int  # the module graph's binding count before the loop
    steps: list[_Step] = field(default_factory=list)
    retained: list[frozenset[Forward]] = field(default_factory=list)


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
        self._steps: dict[object, list[_Step]] = {}  # scope -> steps waiting for a backward()
        self._freed: dict[object, set[int]] = {}  # scope -> forwards (call ids) a backward() freed
        self._retained: dict[object, frozenset[Forward]] = {}  # scope -> the graph the last backward() kept
        self._loops: list[_Loop] = []  # the loops being analysed, innermost last

    def _in_forward(self) -> bool:
        function = self.ctx.function
        return (
            function is not None
            and function.cls is not None
            and function.cls.is_module
            and function.name in CALLED_WITH_GRAD_BY_FRAMEWORK
        )


    def visit_While(self, node: cst.While) -> None:
        if self._graph is not None:
            self._loops.append(_Loop(self._scope, self._graph.serial, self._graph.bindings))

    def leave_While(self, node: cst.While) -> None:
        if self._graph is not None:
            self._second_iteration(self._loops.pop())

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
        if self._graph is not None and event.subject is not None:
            self._backward_reaching(call, self._graph.forwards_of(event.subject), event.keeps_graph)

    def _on_step(self, call: cst.Call, event: AutogradEvent) -> None:
        self._optimizer_step(call, event.subject)

    def _on_call(self, call: cst.Call) -> None:
        effects = self._graph.effects_of(call) if self._graph is not None else None
        if effects is not None:
            self._call_effects(call, effects)

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
    def _optimizer_step(self, node: cst.Call, optimizer: cst.BaseExpression | None) -> None:
        """``opt.step()`` changes the parameters of the modules it was built from in place: a later
        backward() through a forward of one of them made before the step raises M4 (the GAN mistake).
        When what it updates is not known, it updates what the backward() just before reached."""
        if optimizer is None or self._graph is None:
            return
        self._add_step(node, self._graph.serial, self._graph.optimized_modules(optimizer), ())

    def _add_step(self, node: cst.Call, serial: int, modules: frozenset[str] | None, path: tuple[Place, ...]) -> None:
        retained = self._retained.get(self._scope, _NO_FORWARDS) if modules is None else _NO_FORWARDS
        if modules is not None and not modules or modules is None and not retained:
            return
        step = _Step(node, serial, modules, retained, self.ctx.statement, path)
        self._steps.setdefault(self._scope, []).append(step)
        for loop in self._loops:
            if loop.scope is self._scope:
                loop.steps.append(step)

    def _call_effects(self, node: cst.Call, effects: CallEffects) -> None:
        """A call of a function of this file: its backward() calls and steps, in order."""
        here = Place(node, self.ctx.function, self.ctx.statement)
        for effect in effects.effects:
            if effect.kind is EventKind.STEP:
                self._add_step(node, effect.serial, effect.modules, (here, *effect.path))
            else:
                self._backward_reaching(node, effect.reached, effect.keeps_graph, (here, *effect.path))

    def _backward_reaching(
        self, node: cst.Call, reached: frozenset[Forward], keeps_graph: bool, path: tuple[Place, ...] = ()
    ) -> None:
        """A backward() (``node``, or a call running it: ``path`` down to it) through the forwards ``reached``."""
        freed = self._freed.setdefault(self._scope, set())
        pending = self._steps.get(self._scope, [])
        for step in list(pending):
            stale = [f for f in reached if f.serial <= step.serial and id(f.call) not in freed and f.saves_parameters]
            hit = self._stale_forward(step, stale, reached)
            if hit is None or self._exclusive(step.node, node):
                continue
            pending.remove(step)
            self._report_step(step, hit, backward=path or (Place(node, self.ctx.function, None),))
        for loop in self._loops:
            if keeps_graph and loop.scope is self._scope:
                loop.retained.append(reached)
        if keeps_graph:
            self._retained[self._scope] = reached
        else:
            freed.update(id(forward.call) for forward in reached)
            self._retained.pop(self._scope, None)

    def _stale_forward(self, step: _Step, stale: list[Forward], reached: frozenset[Forward]) -> Forward | None:
        """The forward made before ``step`` whose saved parameters ``step`` changed, if any."""
        if step.modules is not None:
            hits = [f for f in stale if any(related(f.module, module) for module in step.modules)]
        else:
            # Not known what it updates: what the retained backward() before it reached, but not a
            # module with an optimizer of its own.  One of those run again after the step is
            # probably the one stepped: silent.
            graph = self._graph
            assert graph is not None
            stepped = {f.module for f in step.retained
                       if not any(related(f.module, key) for key in graph.optimized_keys)}
            if any(f.serial > step.serial and any(related(f.module, m) for m in stepped) for f in reached):
                return None
            hits = [f for f in stale if f in step.retained and f.module in stepped]
        # The first forward of the stepped module itself (or of a part of it), else of a whole it is part of.
        inside = step.modules or frozenset(f.module for f in step.retained)
        return min(hits, key=lambda f: (not any(_within(f.module, m) for m in inside), f.serial)) if hits else None

    def _second_iteration(self, loop: _Loop) -> None:
        """A retained backward() in a loop through a forward made before the loop runs again on
        the next iteration, after the loop's step changed that forward's module (SinGAN's G steps
        over one ``fake``)."""
        graph = self._graph
        assert graph is not None
        for step in loop.steps:
            if step.modules is None:
                continue
            for reached in loop.retained:
                hits = [f for f in reached if f.serial <= loop.serial and f.saves_parameters
                        and any(related(f.module, m) for m in step.modules)
                        and graph.held_since(f, loop.bindings)]  # (not rebound in the loop)
                if hits:
                    self._report_step(step, min(hits, key=lambda forward: forward.serial), next_iteration=True)
                    break

    def _exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        return self.ctx.flow(self.ctx.region).exclusive(a, b)

    def _report_step(
        self, step: _Step, forward: Forward, next_iteration: bool = False, backward: tuple[Place, ...] = ()
    ) -> None:
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
            message = (
                f"`{call}` changes the parameters of `{stepped}` in place, but `{module}` saved them "
                f"for {later}{' (on the next iteration of the loop)' if next_iteration else ''}: "
                f"backward() raises '{M4}'; call step() after every "
                "backward() through the graph, or compute the loss again after the step"
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




def _within(key: str, module: str) -> bool:
    """``key`` names ``module`` or one of its parts."""
    return key == module or key.startswith(module + ".")




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
