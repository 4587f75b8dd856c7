"""TL009 loss-history-accumulation: ``total += loss`` / ``losses.append(loss)`` in a loop
keeps every iteration's autograd graph alive when ``loss`` carries one.

``loss`` carries a graph when the analysis says it is a non-leaf (built from
something that requires grad, grad mode on), or when the same binding is
backpropagated in the loop (``loss.backward()`` only works on a tensor with a graph),
directly or as a term of what is (``ValueFlow.backpropagated_uses``: an alias, a part of
a backpropagated sum, a part a helper returns with its sum).  A method outside any loop
that appends to ``self.<history>`` is judged the same way, its calls being the iterations.
Where the accumulator goes is the analysis's escape analysis (``analysis.uses``): a
history that reaches a ``backward()`` (a multi-part loss, stacked outputs) is not a
finding.  One that escapes (returned, stored, passed to code not seen) is one when each
loss was already backpropagated in the loop (the total cannot be backpropagated again,
so it only keeps the graphs alive), or when it is handed to numpy or a plotting library
(M6); otherwise the caller may still backpropagate it.  The fix (``.item()`` or
``.detach()``) is chosen so that every later use still works.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import libcst as cst

from torchlint import fixes
from torchlint.analysis import torch_api as api
from torchlint.analysis.accumulators import accumulated_arguments
from torchlint.analysis.events import EventKind, has_event
from torchlint.analysis.names import names_in, self_attribute
from torchlint.analysis import Kind, dotted_name, keyword_arg, positional_args
from torchlint.analysis.torch_api import LEAF_SOURCE_TOKENS
from torchlint.analysis.values import BACKPROPAGATED, NUMPY_ARRAY
from torchlint.analysis.uses import Sink, Use, container_key, declares_global
from torchlint.analysis.walk import scan
from torchlint.rule import Fix, FixSafety, Rule

M6 = "Can't call numpy() on Tensor that requires grad"
_METHOD_DEF = re.compile(r"def\s+(\w+)\s*\(\s*self\b")


@dataclass
class _Candidate:
    node: cst.CSTNode  # reported: the AugAssign / Assign / append call
    statement: cst.CSTNode | None
    accumulator: str
    expr: cst.BaseExpression  # the accumulated loss
    by_analysis: bool  # the analysis knows it is a non-leaf (or a value a backward() went through)
    backpropagated: bool  # a backward() went through it, or through what it is computed from
    evidence: set[tuple[str, int]]  # (name, binding) pairs it is built from
    scalar: bool
    region: cst.CSTNode
    when: Callable[[], bool] | None
    scope: cst.CSTNode  # the function (or module) the accumulation is in
    via: str | None = None  # the method that adds it to a running sum (``update`` of a meter)
    parts: bool = False  # a tuple some of whose items carry a graph (``(loss_d, loss_g)``)


@dataclass
class _LoopState:
    candidates: list[_Candidate] = field(default_factory=list)
    # (name, binding) pairs backpropagated in the loop, and those backpropagated without a
    # `gradient` argument (which only works on a scalar).
    backpropagated: set[tuple[str, int]] = field(default_factory=set)
    scalar_backpropagated: set[tuple[str, int]] = field(default_factory=set)
    steps: list[cst.Call] = field(default_factory=list)  # optimizer steps in the loop body


class LossHistoryAccumulation(Rule):
    code = "TL009"
    name = "loss-history-accumulation"
    summary = "A loss that carries its graph is accumulated across loop iterations"
    fix_safety = FixSafety.UNSAFE
    # A graph needs a leaf source or a module call (torch.nn), or is shown by backward().
    tokens = (*LEAF_SOURCE_TOKENS, "nn", "backward")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._loops: dict[int, _LoopState] = {}
        self._bindings: dict[tuple[int, str], int] = {}
        self._methods_defined: frozenset[str] | None = None

    # ------------------------------------------------------------ bindings
    def _binding(self, key: str) -> tuple[str, int]:
        return key, self._bindings.get((id(self.ctx.function), key), 0)

    def _rebind(self, target: cst.BaseExpression) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._rebind(element.value)
            return
        if type(target) is cst.StarredElement:
            self._rebind(target.value)
            return
        key = dotted_name(target)
        if key is not None:
            slot = (id(self.ctx.function), key)
            self._bindings[slot] = self._bindings.get(slot, 0) + 1

    def visit_Assign(self, node: cst.Assign) -> None:
        self._check_assign(node)
        for target in node.targets:
            self._rebind(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._rebind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._rebind(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._rebind(node.asname.name)

    def visit_For(self, node: cst.For) -> None:
        self._loops[id(node)] = _LoopState()
        self._rebind(node.target)

    def visit_While(self, node: cst.While) -> None:
        self._loops[id(node)] = _LoopState()

    # ------------------------------------------------------------ accumulation sites
    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not isinstance(node.operator, cst.AddAssign):
            return
        if type(node.target) is cst.Subscript and NUMPY_ARRAY in self.ctx.value_of(node.target.value).tags:
            return  # `avg[i] += loss`: the array stores a float, no graph
        accumulator = container_key(node.target)
        if accumulator is not None:
            self._candidate(node, accumulator, node.value)

    def _check_assign(self, node: cst.Assign) -> None:
        """``total = total + loss`` (or ``loss + total``)."""
        if len(node.targets) != 1 or not isinstance(node.value, cst.BinaryOperation):
            return
        if not isinstance(node.value.operator, cst.Add):
            return
        key = dotted_name(node.targets[0].target)
        if key is None:
            return
        left, right = node.value.left, node.value.right
        if dotted_name(left) == key:
            self._candidate(node, key, right)
        elif dotted_name(right) == key:
            self._candidate(node, key, left)

    def visit_Call(self, node: cst.Call) -> None:
        event = self.ctx.autograd_event(node) if self.ctx.loops else None
        if event is not None:
            if event.kind is EventKind.BACKWARD and event.subject is not None:
                self._note_backward(node, event.subject)
            elif event.kind is EventKind.STEP:
                for loop in self.ctx.loops:
                    state = self._loops.get(id(loop))
                    if state is not None:
                        state.steps.append(node)
            return
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        if func.attr.value == "append" and len(node.args) == 1:
            accumulator = container_key(func.value)
            if accumulator is not None and node.args[0].keyword is None and not node.args[0].star:
                self._candidate(node, accumulator, node.args[0].value)
        elif node.args and func.attr.value not in api.LIST_METHODS and (self.ctx.loops or self._in_method()):
            self._meter_update(node, func)

    def _may_define(self, method: str) -> bool:
        """A class of this file defines ``method`` (``def method(self``), or the file made objects
        of its project's classes (a sibling's class may): the cheap test before resolving the receiver."""
        if self._methods_defined is None:
            self._methods_defined = frozenset(_METHOD_DEF.findall(self.ctx.source))
        return method in self._methods_defined or self.ctx.made_project_objects()

    def _in_method(self) -> bool:
        function = self.ctx.function
        return function is not None and function.cls is not None and function.is_method

    def _meter_update(self, node: cst.Call, func: cst.Attribute) -> None:
        """``meter.update(loss, n)``: a method of a class of this file or a sibling file that adds
        its argument to a sum the instance keeps (``analysis.accumulators``)."""
        if not self._may_define(func.attr.value):
            return
        accumulator = dotted_name(func.value)
        if accumulator is None or self.ctx.qualify(func) is not None:  # (`torch.cat(...)`, `np.mean(...)`)
            return
        method = self.ctx.method_definition(node)
        if method is None:
            return
        for expr in accumulated_arguments(method, node):
            self._candidate(node, accumulator, expr, f"{func.attr.value}()")

    def _note_backward(self, node: cst.Call, loss: cst.BaseExpression) -> None:
        names = _names_carried(loss)
        if isinstance(node.func, cst.Attribute) and loss is node.func.value:  # loss.backward(gradient?)
            scalar = not positional_args(node) and keyword_arg(node, "gradient") is None
        else:  # accelerator.backward(loss), self.manual_backward(loss), torch.autograd.backward(loss)
            scalar = len(positional_args(node)) <= 1 and keyword_arg(node, "gradient") is None \
                and keyword_arg(node, "grad_tensors") is None
        for loop in self.ctx.loops:
            state = self._loops.get(id(loop))
            if state is None:
                continue
            for name in names:
                state.backpropagated.add(self._binding(name))
                if scalar:
                    state.scalar_backpropagated.add(self._binding(name))

    def _candidate(self, node: cst.CSTNode, accumulator: str, expr: cst.BaseExpression, via: str | None = None) -> None:
        if not self.ctx.loops:
            if self._history_of_calls(accumulator):
                candidate = self._make_candidate(node, accumulator, expr, via)
                if candidate is not None:
                    self._judge_history_of_calls(candidate)
            return
        if id(self.ctx.loops[-1]) not in self._loops:
            return
        if self.ctx.runs_once_per_run_of(self.ctx.loops[-1]):
            return  # `if t == 0: outputs.append(y_pred)`: one value per run of the loop, not a history
        candidate = self._make_candidate(node, accumulator, expr, via)
        if candidate is not None:
            self._loops[id(self.ctx.loops[-1])].candidates.append(candidate)

    def _make_candidate(self, node: cst.CSTNode, accumulator: str, expr: cst.BaseExpression,
                        via: str | None = None, part: bool = False) -> _Candidate | None:
        mode = self.ctx.grad_mode
        if mode.statically_disabled:
            return None
        literal = None if part else self._tuple_literal(expr, node)  # (one level: `t = (t, x)` rebinds t)
        if literal is not None:  # `losses.append((loss_d, loss_g))`: judged by its parts
            for element in literal.elements:
                if type(element) is not cst.Element:
                    continue
                found = self._make_candidate(node, accumulator, element.value, via, part=True)
                if found is not None:
                    return replace(found, expr=expr, parts=True, scalar=False)
            return None
        value = self.ctx.value_of(expr)
        if value.kind in (Kind.PLAIN, Kind.NUMBER, Kind.LEAF) or "detached" in value.tags:
            return None
        if value.kind not in (Kind.NONLEAF, Kind.UNKNOWN):
            return None
        evidence = {self._binding(name) for name in _names_carried(expr)}
        # A non-leaf, or a value a backward() went through (a helper's backpropagated loss).
        backpropagated = BACKPROPAGATED in value.tags
        by_analysis = value.kind is Kind.NONLEAF or backpropagated
        if not by_analysis and not evidence:
            return None
        # A non-leaf in a function whose callers we may not see: only if some call runs it with grad.
        when = mode.may_be_enabled if by_analysis and not backpropagated and not mode.statically_enabled else None
        return _Candidate(
            node, self.ctx.statement, accumulator, expr, by_analysis, backpropagated, evidence,
            self._is_scalar(expr), self._region(accumulator), when,
            self.ctx.region, via,
        )

    def _tuple_literal(self, expr: cst.BaseExpression, node: cst.CSTNode) -> cst.Tuple | cst.List | None:
        """``(fit, size)``, or the literal a name was last bound to (``parts = (fit, size.item())``)."""
        if type(expr) in (cst.Tuple, cst.List):
            return expr  # type: ignore[return-value]
        if type(expr) is not cst.Name:
            return None
        site = self.ctx.value_flow(self.ctx.region).binding_before(expr.value, node)
        if type(site) is cst.Assign and len(site.targets) == 1 and site.targets[0].target.deep_equals(expr):
            return site.value if type(site.value) in (cst.Tuple, cst.List) else None  # type: ignore[return-value]
        return None

    def _history_of_calls(self, accumulator: str) -> bool:
        """``self.cost_his.append(loss)`` in a method, outside any loop: every call of the method
        adds to a history the instance keeps, when the method does not start it afresh and is a
        training step (it steps an optimizer: called once per update) or another method reads
        the history (plots, averages, returns it)."""
        function = self.ctx.function
        if function is None or function.cls is None or not function.is_method or function.name == "__init__":
            return False
        attr = self_attribute(accumulator)
        if attr is None:
            return False
        uses = function.cls.attribute_uses()
        if function.name in uses.assigners(attr):
            return False
        return bool(uses.readers(attr) - {function.name}) or has_event(self.ctx, function.node.body, EventKind.STEP)

    def _region(self, accumulator: str) -> cst.CSTNode:
        """Where the accumulator can be used: its function, or the whole module."""
        function = self.ctx.function
        if function is None or "." in accumulator or declares_global(function.node, accumulator):
            return self.ctx.module
        return function.node

    # ------------------------------------------------------------ judgement
    def leave_For(self, node: cst.For) -> None:
        self._judge(node)

    def leave_While(self, node: cst.While) -> None:
        self._judge(node)

    def _judge(self, loop: cst.For | cst.While) -> None:
        state = self._loops.pop(id(loop), None)
        if state is None:
            return
        for candidate in state.candidates:
            # (a value a helper called in the loop backpropagated counts: ``loss = self._train_batch(...)``)
            backed_by_backward = candidate.backpropagated or bool(candidate.evidence & state.backpropagated) or (
                bool(state.backpropagated) and self._term_of_backward(loop, candidate))
            if not candidate.by_analysis and not backed_by_backward:
                continue
            if backed_by_backward and self._reset_per_update(loop, state, candidate.accumulator):
                # backward() frees each step's saved activations and the reset bounds what is
                # kept to one update (gradient-accumulation logging, e.g. torchtune's recipes).
                continue
            uses = self.ctx.value_flow(candidate.region).follow(candidate.accumulator)
            if uses is None:
                continue  # spreads too far to follow
            sinks = {use.sink for use in uses}
            if Sink.BACKWARD in sinks:
                continue  # a multi-part loss, or outputs stacked and backpropagated
            if Sink.ESCAPES in sinks and not backed_by_backward and Sink.NUMPY not in sinks:
                continue  # whoever receives it may still backpropagate it
            # `loss.backward()` without a gradient argument only works on a scalar
            named = isinstance(candidate.expr, (cst.Name, cst.Attribute))
            scalar = candidate.scalar or bool(named and candidate.evidence & state.scalar_backpropagated)
            when = None if backed_by_backward else candidate.when
            backpropagated = backed_by_backward or candidate.backpropagated
            message = self._message(candidate, sinks, backpropagated)
            fix = None if candidate.parts else self._fix(candidate, scalar, uses)  # (`.item()` of each part)
            self.report(candidate.node, message, fix, when=when, statement=candidate.statement)

    def _judge_history_of_calls(self, candidate: _Candidate) -> None:
        """A history kept across calls of a method: a finding when each value was backpropagated
        in the method (it carries a graph, and the history only keeps it alive)."""
        if not self._term_of_backward(None, candidate):
            return
        uses = self.ctx.value_flow(candidate.region).follow(candidate.accumulator)
        if uses is None:
            return
        sinks = {use.sink for use in uses}
        if Sink.BACKWARD in sinks:
            return
        function = self.ctx.function
        assert function is not None
        message = self._message(candidate, sinks, True, f"`{function.name}()` call")
        fix = None if candidate.parts else self._fix(candidate, candidate.scalar, uses)
        self.report(candidate.node, message, fix, statement=candidate.statement)

    def _term_of_backward(self, loop: cst.For | cst.While | None, candidate: _Candidate) -> bool:
        """What is accumulated is backpropagated (in the loop, else in its function) as (a term of)
        another name's value: ``loss_total = loss; loss_total.backward()``,
        ``loss = r_loss + alpha * d_loss; loss.backward()``."""
        flow = self.ctx.value_flow(candidate.scope)
        body = self.ctx.flow(loop if loop is not None else candidate.scope)
        return any(
            body.contains(use.node)
            for node in _carried_nodes(candidate.expr)
            if isinstance(node, cst.Name)
            for use in flow.backpropagated_uses(node.value, node)
        )

    def _reset_per_update(self, loop: cst.For | cst.While, state: _LoopState, accumulator: str) -> bool:
        """The loop body starts the accumulator afresh on every iteration, or together with an
        optimizer step (one update's losses: gradient accumulation).  A reset on a logging cycle
        (``if i % 200 == 199: ...; running_loss = 0``) still keeps every step's graph until then
        (measured: 0.2 MB per step on a 1M-parameter MLP, 20x less than without backward, but
        growing)."""
        resets = _resets_inside(loop, accumulator)
        if not resets:
            return False
        flow = self.ctx.flow(loop)
        for reset in resets:
            place = flow.place(reset)
            if place is None:
                continue
            if place.unconditional and not place.in_nested_loop:
                return True
            branch = next((frame for frame in reversed(place.frames) if frame.conditional), None)
            if any(branch in step_place.frames for step in state.steps if (step_place := flow.place(step))):
                return True
        return False

    def _message(self, candidate: _Candidate, sinks: set[Sink], backpropagated: bool, every: str = "") -> str:
        loss = fixes.source_of(candidate.expr)
        loss = "the loss" if len(loss) > 40 else f"`{loss}`"
        consequence = ""
        if Sink.NUMPY in sinks:
            consequence = f"; numpy (or plotting) of it raises '{M6}'"
        elif Sink.ESCAPES in sinks:
            consequence = "; passing it on keeps them alive after the loop too"
        # backward() frees the saved activations; the accumulated losses still link the graph nodes
        kept = "graph" if backpropagated else "graph (and its saved activations)"
        kept_of_every = f"the {kept} of every {every}" if every else f"every iteration's {kept}"
        into = f"`{candidate.accumulator}`"
        if candidate.via is not None:
            into += f" (its `{candidate.via}` adds it to a running sum)"
        if candidate.parts:
            return (
                f"{loss} holds losses that still carry their autograd graph; accumulating it into {into} keeps "
                f"{kept_of_every} alive{consequence}; accumulate each part's `.item()` (or `.detach()`) instead"
            )
        return (
            f"{loss} still carries its autograd graph; accumulating it into {into} keeps "
            f"{kept_of_every} alive{consequence}; accumulate `.item()` (or `.detach()`) instead"
        )

    def _fix(self, candidate: _Candidate, scalar: bool, uses: list[Use]) -> Fix:
        """``.item()`` when every later use works on a Python number, else ``.detach()`` (a tensor
        without history: ``.item()``, ``torch.stack``, tensor arithmetic and unseen code keep working)."""
        expr = candidate.expr
        receiver = expr
        if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not getattr(expr, "lpar", None):
            receiver = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        needs_tensor = not scalar or any(use.needs_tensor or use.sink is Sink.ESCAPES for use in uses)
        method = "detach" if needs_tensor else "item"
        new = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(method)))
        return fixes.replace(f"accumulate `{fixes.source_of(new)}`", expr, new)

    # ------------------------------------------------------------ scalars
    def _is_scalar(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > 3:
            return False
        if isinstance(expr, (cst.Name, cst.Attribute)):
            origin = self.ctx.value_of(expr).origin
            return isinstance(origin, cst.BaseExpression) and origin is not expr and self._is_scalar(origin, depth + 1)
        if isinstance(expr, cst.Call):
            return self._is_scalar_call(expr)
        if isinstance(expr, cst.BinaryOperation) and isinstance(
            expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
        ):
            left, right = expr.left, expr.right
            left_scalar, right_scalar = self._is_scalar(left, depth + 1), self._is_scalar(right, depth + 1)
            return (left_scalar and (right_scalar or self._is_number(right))) or (
                right_scalar and self._is_number(left)
            )
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            return self._is_scalar(expr.expression, depth + 1)
        return False

    def _is_scalar_call(self, call: cst.Call) -> bool:
        func = call.func
        qualified = self.ctx.qualify(func)
        if qualified is not None:
            last = qualified.rsplit(".", 1)[-1]
            if qualified in api.FULL_REDUCTION_FUNCTIONS:
                return len(call.args) == 1 and call.args[0].keyword is None
            if qualified.startswith("torch.nn.functional.") and last in api.FUNCTIONAL_LOSSES:
                return _reduces(call)
            return False
        if isinstance(func, cst.Attribute) and func.attr.value in api.FULL_REDUCTION_METHODS:
            return not call.args
        module = self.ctx.value_of(func)
        origin = module.origin
        if module.kind is Kind.MODULE and isinstance(origin, cst.Call):
            name = self.ctx.qualify(origin.func) or ""
            return name.startswith("torch.nn.") and name.endswith("Loss") and _reduces(origin)
        return False

    def _is_number(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if self.ctx.value_of(expr).kind is Kind.NUMBER:
            return True
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
            return expr.value.attr.value == "shape"  # xb.shape[0]
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(expr.args) == 1:
                return True
            if isinstance(func, cst.Name) and func.value == "len":
                return True
        return False


def _names_carried(expr: cst.BaseExpression) -> set[str]:
    """Names whose graph ``expr`` certainly carries (see ``_carried_nodes``)."""
    return {key for node in _carried_nodes(expr) if (key := dotted_name(node)) is not None}


def _carried_nodes(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The names (and ``self.x`` keys) whose graph ``expr`` certainly carries: ``loss``, ``loss * n``,
    ``-loss``, ``scaler.scale(loss)``; of a quotient only the numerator (``loss / self.accum_steps``,
    ``x.item() / self.n``: the divisor is a count, and a backward() through the quotient proves
    nothing about it)."""
    if dotted_name(expr) is not None:
        return [expr]
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return _carried_nodes(expr.left)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply)):
        return _carried_nodes(expr.left) + _carried_nodes(expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _carried_nodes(expr.expression)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "scale":
        return [node for arg in expr.args for node in _carried_nodes(arg.value)]
    return []


def _reduces(call: cst.Call) -> bool:
    """No ``reduction=`` argument, or ``'mean'`` / ``'sum'``."""
    reduction = keyword_arg(call, "reduction")
    if reduction is None:
        return True
    value = reduction.value
    return isinstance(value, cst.SimpleString) and value.evaluated_value in ("mean", "sum")


def _resets_inside(loop: cst.For | cst.While, accumulator: str) -> list[cst.CSTNode]:
    """Where the loop body starts the accumulator afresh (``total = 0``, ``losses = []``, ``losses.clear()``)."""
    found: list[cst.CSTNode] = []

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(dotted_name(t.target) == accumulator for t in node.targets) and accumulator not in names_in(
                node.value
            ):
                found.append(node)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in api.ACCUMULATOR_RESET_METHODS and dotted_name(func.value) == accumulator:
                found.append(node)

    scan(loop.body, Finder())
    return found
