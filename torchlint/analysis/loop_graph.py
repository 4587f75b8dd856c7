"""The autograd graph of a loop, over its first two iterations: which autograd nodes each
``backward()`` goes through, and which of them an earlier ``backward()`` freed.

The loop body is executed symbolically twice, as the first and the second iteration, over
straight-line code: each value is "no graph", "requires grad, and its graph certainly
contains these autograd nodes", or unknown.  A node is identified by the expression that
created it and the iteration (0 = before the loop).  Whether an op saves tensors for
backward comes from the measured table ``rules/_saved_tensors.toml``; what a name holds
before the loop, what the body may change in place, which calls are backward and which
``with`` items set a grad mode are the model's answers (``value_of``, ``uses``, ``events``,
``grad_modes``).  Certain only: statements that are not straight-line (branches, nested
loops, ``try``) make what they may change unknown.

Asked as ``ctx.loop_graph(loop)`` when the loop is reached (the values before the loop are
the current point's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.events import AutogradEvent, EventKind, event_calls, frees_graph, has_backward
from torchlint.analysis.names import dotted_expression, dotted_name, is_basic_indexing, keyword_arg, literal_index
from torchlint.analysis.scopes import parameter_names, subscript_root, target_keys
from torchlint.analysis.uses import changed_in_place
from torchlint.analysis.values import Kind, Value
from torchlint.analysis.walk import children
from torchlint.saved_tensors import saved_tensor_table

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

_MAX_PRELOOP_DEPTH = 4


def _op_saves(name: str) -> bool | None:
    return saved_tensor_table().certainly_saves(name)


@dataclass(frozen=True)
class GraphNode:
    """An autograd node: the expression that made it, in which iteration (0 = before the loop)."""

    expr: int
    iteration: int
    saves: bool | None


NONE, GRAD, UNKNOWN, MODULE, TUPLE = "none", "grad", "unknown", "module", "tuple"


@dataclass(frozen=True)
class _Sym:
    kind: str
    # GRAD: the value certainly requires grad and its graph certainly contains these nodes.
    nodes: frozenset[GraphNode] = frozenset()
    items: tuple[_Sym, ...] = ()  # TUPLE
    module: str | None = None  # MODULE: the class name of a built-in torch.nn module
    # MODULE of a class not known here whose parameters an optimizer of the file trains.
    trained: bool = False
    # GRAD from a module call: every output of it (``out, (h, c) = lstm(...)``) hangs off its nodes.
    multi_output: bool = False
    # GRAD from a call of a module of an unknown class: what its items are is not known.
    opaque: bool = False

    def flat(self) -> list[_Sym]:
        if self.kind == TUPLE:
            return [leaf for item in self.items for leaf in item.flat()]
        return [self]


S_NONE, S_UNKNOWN = _Sym(NONE), _Sym(UNKNOWN)
S_LEAF = _Sym(GRAD)


@dataclass
class LoopBackward:
    call: cst.Call
    line: cst.CSTNode | None
    frees: bool
    nodes: frozenset[GraphNode] = frozenset()
    loss: cst.BaseExpression | None = None  # what is backpropagated


@dataclass
class _Run:
    """One symbolic iteration of the loop body (iteration 0: an expression before the loop)."""

    iteration: int
    env: dict[str, _Sym]
    depth: int = 0  # how deep the evaluation of values from before the loop is nested
    backwards: list[LoopBackward] = field(default_factory=list)
    stopped: bool = False  # `continue`: the rest of the body does not run


class _LoopOnlyOnce(Exception):
    """An unconditional break/return/raise: the body runs at most once."""


@dataclass
class LoopGraph:
    """What the first and the second iteration of a loop backpropagate through."""

    first: list[LoopBackward]
    second: list[LoopBackward]
    # The expressions that made the nodes, in the order they were first evaluated (outer first).
    expressions: dict[int, cst.CSTNode]
    # A built-in module's parameters were assumed to require grad: ask, once the file is
    # analysed, whether the file freezes parameters (``ctx.parameters_may_be_frozen``).
    assumes_trainable_modules: bool

    def freed_reached(self) -> list[tuple[LoopBackward, frozenset[GraphNode]]]:
        """Each second-iteration backward with the nodes it reaches that save tensors and that a
        first-iteration backward (without ``retain_graph``) freed."""
        freed = {node for b in self.first if b.frees for node in b.nodes if node.saves}
        found = []
        for backward in self.second:
            hit = backward.nodes & freed
            if hit:
                found.append((backward, frozenset(hit)))
        return found

    def freed_earlier_in_iteration(self) -> list[tuple[LoopBackward, frozenset[GraphNode], LoopBackward]]:
        """Each backward of the first iteration with the nodes it reaches that save tensors and
        that an earlier backward of the same iteration (without ``retain_graph``, named third)
        freed: two losses sharing a subgraph, backpropagated one after the other."""
        found = []
        for index, backward in enumerate(self.first):
            for earlier in self.first[:index]:
                hit = backward.nodes & {node for node in earlier.nodes if node.saves} if earlier.frees else set()
                if hit:
                    found.append((backward, frozenset(hit), earlier))
                    break
        return found


def loop_graph(ctx: Analyzer, loop: cst.For | cst.While) -> LoopGraph | None:
    """The graph of ``loop``, None when there is nothing to follow: grad mode off, no backward
    in the body, or a body that runs at most once (an unconditional break/return/raise)."""
    if ctx.grad_mode.statically_disabled or not isinstance(loop.body, cst.IndentedBlock):
        return None
    if not has_backward(ctx, loop.body):
        return None
    return _LoopInterpreter(ctx).graph(loop)


def body_graph(ctx: Analyzer, body: cst.IndentedBlock) -> LoopGraph | None:
    """The graph of a body that runs once (a function's), its backwards in ``first`` in program
    order; None when there is nothing to follow: grad mode off, fewer than two backwards."""
    if ctx.grad_mode.statically_disabled or len(event_calls(ctx, body, EventKind.BACKWARD)) < 2:
        return None
    return _LoopInterpreter(ctx, runs_once=True).once(body)


class _LoopInterpreter:
    def __init__(self, ctx: Analyzer, runs_once: bool = False) -> None:
        self.ctx = ctx
        self._runs_once = runs_once  # a body that runs once: ``return``/``raise`` only end it
        self._preloop: dict[str, _Sym] = {}
        self._exprs: dict[int, cst.CSTNode] = {}
        self._assumed_trainable = False
        # What each statement the interpreter cannot execute may change (see ``_forget``): both
        # symbolic iterations ask, at the same program point.
        self._forgotten: dict[int, set[str]] = {}

    def graph(self, loop: cst.For | cst.While) -> LoopGraph | None:
        carried = set(self.ctx.binding_table(loop.body).keys)
        if isinstance(loop, cst.For):
            carried |= target_keys(loop.target)
        volatile = changed_in_place(self.ctx, loop.body)
        try:
            first = self._run(loop, 1, {key: self._pre(key, volatile) for key in carried}, volatile)
            second = self._run(loop, 2, dict(first.env), volatile)
        except _LoopOnlyOnce:
            return None
        return LoopGraph(first.backwards, second.backwards, self._exprs, self._assumed_trainable)

    def once(self, body: cst.IndentedBlock) -> LoopGraph:
        run = _Run(1, {})
        self._block(run, body.body, changed_in_place(self.ctx, body), grad_enabled=True)
        return LoopGraph(run.backwards, [], self._exprs, self._assumed_trainable)

    def _run(self, loop: cst.For | cst.While, iteration: int, entry: dict[str, _Sym], volatile: set[str]) -> _Run:
        run = _Run(iteration, dict(entry))
        if isinstance(loop, cst.For):
            for key in target_keys(loop.target):
                run.env[key] = S_UNKNOWN  # a fresh element of the iterable
        self._block(run, loop.body.body, volatile, grad_enabled=True)  # type: ignore[union-attr]
        return run

    def _block(
        self, run: _Run, statements: Sequence[cst.BaseStatement], volatile: set[str], *, grad_enabled: bool
    ) -> None:
        for statement in statements:
            if run.stopped:
                return
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self._small(run, small, statement, volatile, grad_enabled)
                    if run.stopped:
                        return
            elif isinstance(statement, cst.With) and isinstance(statement.body, cst.IndentedBlock):
                mode = self._with_mode(statement)
                if mode == "unknown":
                    self._forget(run, statement)
                    continue
                for item in statement.items:
                    self._eval(run, item.item, volatile, grad_enabled)
                    if item.asname is not None:
                        for key in target_keys(item.asname.name):
                            run.env[key] = S_UNKNOWN
                self._block(run, statement.body.body, volatile, grad_enabled=grad_enabled and mode != "disabled")
            else:
                self._forget(run, statement)  # branches, nested loops, try: not straight-line

    def _forget(self, run: _Run, statement: cst.CSTNode) -> None:
        """After code we do not execute symbolically: what it may rebind or change is unknown."""
        keys = self._forgotten.get(id(statement))
        if keys is None:
            keys = self._forgotten[id(statement)] = set(self.ctx.binding_table(statement).keys)
            keys |= changed_in_place(self.ctx, statement)
        for key in keys:
            run.env[key] = S_UNKNOWN

    def _with_mode(self, statement: cst.With) -> str:
        """"disabled" (``no_grad``, ``inference_mode``, ``set_grad_enabled(False)``), "plain"
        (no grad-mode context, or ``enable_grad``) or "unknown" (a mode not known statically)."""
        mode = "plain"
        for item in statement.items:
            found = self.ctx.context_mode(item.item)
            if found is None or found.statically_enabled:
                continue
            if not found.statically_disabled:
                return "unknown"
            mode = "disabled"
        return mode

    def _small(
        self, run: _Run, small: cst.BaseSmallStatement, line: cst.CSTNode, volatile: set[str], grad: bool
    ) -> None:
        if isinstance(small, (cst.Break, cst.Return, cst.Raise)):
            if self._runs_once:
                run.stopped = True
                return
            raise _LoopOnlyOnce
        if isinstance(small, cst.Continue):
            run.stopped = True
        elif isinstance(small, cst.Assign):
            value = self._eval(run, small.value, volatile, grad)
            for target in small.targets:
                self._bind(run, target.target, value)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self._bind(run, small.target, self._eval(run, small.value, volatile, grad))
        elif isinstance(small, cst.AugAssign):
            key = dotted_name(small.target)
            op = api.AUGMENTED_OPERATOR_OPS.get(type(small.operator).__name__)
            if key is None or op is None:
                self._forget(run, small)
                return
            current = self._lookup(run, key, volatile)
            operand = self._eval(run, small.value, volatile, grad)
            run.env[key] = self._op([current, operand], small, _op_saves(op), grad, run.iteration)
        elif isinstance(small, cst.Expr):
            value = small.value
            event = self.ctx.autograd_event(value) if isinstance(value, cst.Call) else None
            if event is not None and event.kind is EventKind.BACKWARD:
                self._backward(run, event, line, volatile, grad)
            else:
                self._eval(run, value, volatile, grad)
        elif isinstance(small, (cst.Pass, cst.Global, cst.Nonlocal, cst.Import, cst.ImportFrom)):
            return
        else:
            self._forget(run, small)

    def _backward(self, run: _Run, event: AutogradEvent, line: cst.CSTNode, volatile: set[str], grad: bool) -> None:
        call = event.node
        assert isinstance(call, cst.Call)
        target = self._eval(run, event.subject, volatile, grad) if event.subject is not None else S_UNKNOWN
        for arg in call.args:
            if arg.value is not event.subject:
                self._eval(run, arg.value, volatile, grad)
        nodes = frozenset(n for s in target.flat() if s.kind == GRAD for n in s.nodes)
        run.backwards.append(LoopBackward(call, line, frees_graph(event), nodes, event.subject))

    def _bind(self, run: _Run, target: cst.BaseExpression, value: _Sym) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if value.kind == TUPLE and len(value.items) == len(elements):
                for element, item in zip(elements, value.items):
                    self._bind(run, element, item)
            else:
                # `out, state = lstm(x, state)`: every output of one module call hangs off its node(s).
                shared = value if value.kind == GRAD and value.multi_output else S_UNKNOWN
                for element in elements:
                    self._bind(run, element, shared)
            return
        if isinstance(target, cst.StarredElement):
            self._bind(run, target.value, S_UNKNOWN)
            return
        key = dotted_name(target)
        if key is not None:
            for stale in [k for k in run.env if k.startswith(key + ".")]:
                run.env[stale] = S_UNKNOWN
            run.env[key] = value
        else:
            root = subscript_root(target)
            if root is not None:
                run.env[root] = S_UNKNOWN  # h[0] = ...: an in-place change we do not model

    # ------------------------------------------------------------ expressions
    def _lookup(self, run: _Run, key: str, volatile: set[str]) -> _Sym:
        if key in run.env:
            return run.env[key]
        return self._pre(key, volatile, run.depth)

    def _eval(self, run: _Run, expr: cst.BaseExpression, volatile: set[str], grad: bool) -> _Sym:
        self._exprs.setdefault(id(expr), expr)  # insertion order: outer expressions first
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                             cst.FormattedString, cst.Comparison, cst.BooleanOperation)):
            self._eval_children(run, expr, volatile, grad)
            return S_NONE
        if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
            return S_NONE
        key = dotted_name(expr)
        if key is not None:
            if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
                return S_NONE
            return self._lookup(run, key, volatile)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = []
            for element in expr.elements:
                if isinstance(element, cst.StarredElement):
                    return S_UNKNOWN
                items.append(self._eval(run, element.value, volatile, grad))
            return _Sym(TUPLE, items=tuple(items))
        if isinstance(expr, cst.BinaryOperation):
            op = api.OPERATOR_OPS.get(type(expr.operator).__name__)
            left = self._eval(run, expr.left, volatile, grad)
            right = self._eval(run, expr.right, volatile, grad)
            if op is None:
                return S_UNKNOWN
            if op == "pow" and left.kind == NONE and right.kind == GRAD:
                op = "__rpow__"
            return self._op([left, right], expr, _op_saves(op), grad, run.iteration)
        if isinstance(expr, cst.UnaryOperation):
            inner = self._eval(run, expr.expression, volatile, grad)
            if isinstance(expr.operator, cst.Minus):
                return self._op([inner], expr, _op_saves("neg"), grad, run.iteration)
            if isinstance(expr.operator, cst.Plus):
                return inner
            return S_NONE if isinstance(expr.operator, cst.Not) else S_UNKNOWN
        if isinstance(expr, cst.Subscript):
            base = self._eval(run, expr.value, volatile, grad)
            simple = is_basic_indexing(expr)
            for element in expr.slice:
                self._eval_children(run, element, volatile, grad)
            if base.kind == TUPLE:
                index = literal_index(expr)
                if index is None or not -len(base.items) <= index < len(base.items):
                    return S_UNKNOWN
                return base.items[index]
            if base.kind == GRAD and (base.multi_output or base.opaque):
                return S_UNKNOWN  # which output of the module call is unknown
            return self._op([base], expr, _op_saves("__getitem__") if simple else None, grad, run.iteration)
        if isinstance(expr, cst.Call):
            return self._call(run, expr, volatile, grad)
        self._eval_children(run, expr, volatile, grad)
        return S_UNKNOWN

    def _eval_children(self, run: _Run, node: cst.CSTNode, volatile: set[str], grad: bool) -> None:
        """Evaluate nested calls for their side effects (``h.detach_()`` inside an expression)."""
        for child in children(node):
            if isinstance(child, cst.BaseExpression):
                self._eval(run, child, volatile, grad)
            elif not isinstance(child, (cst.BaseParenthesizableWhitespace, cst.Comma)):
                self._eval_children(run, child, volatile, grad)

    def _op(self, inputs: list[_Sym], expr: cst.CSTNode, saves: bool | None, grad: bool, iteration: int) -> _Sym:
        """A differentiable op on ``inputs``."""
        flat = [leaf for value in inputs for leaf in value.flat()]
        with_grad = [value for value in flat if value.kind == GRAD]
        if not with_grad:
            return S_UNKNOWN if any(value.kind != NONE for value in flat) else S_NONE
        if not grad:
            return S_NONE
        nodes = frozenset(n for value in with_grad for n in value.nodes)
        self._exprs.setdefault(id(expr), expr)
        return _Sym(GRAD, nodes | {GraphNode(id(expr), iteration, saves)})

    def _call(self, run: _Run, call: cst.Call, volatile: set[str], grad: bool) -> _Sym:
        func = call.func
        args = [self._eval(run, arg.value, volatile, grad) for arg in call.args]
        qualified = self.ctx.qualify(func)
        if qualified is not None:
            return self._torch_call(call, qualified, args, grad, run.iteration)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver_key = dotted_name(func.value)
            receiver = self._eval(run, func.value, volatile, grad)
            stored = self._module_attribute(run, func, volatile) if receiver.kind == UNKNOWN else None
            if stored is not None:  # `self.G(x)`: a module kept on an object
                return self._module_call(call, stored, args, grad, run.iteration)
            if receiver.kind == MODULE:
                if method == "forward":
                    return self._module_call(call, receiver, args, grad, run.iteration)
                return S_UNKNOWN
            if method == "detach_" and receiver_key is not None:
                run.env[receiver_key] = S_NONE
                return S_NONE
            if method.endswith("_") and not method.startswith("__"):
                if receiver_key is not None:
                    run.env[receiver_key] = S_UNKNOWN
                return S_UNKNOWN
            if method in api.GRAPH_FREE_RESULT_METHODS:
                return S_NONE if receiver.kind in (GRAD, NONE) else S_UNKNOWN
            if receiver.kind not in (GRAD, NONE):
                self._unknown_call_effects(run, call)
                return S_UNKNOWN
            if method in api.GRAPH_CONVERSION_METHODS:
                return self._op([receiver], call, None, grad, run.iteration) if receiver.kind == GRAD else S_NONE
            if method in saved_tensor_table().ops:
                return self._op([receiver, *args], call, _op_saves(method), grad, run.iteration)
            return S_UNKNOWN
        callee = self._eval(run, func, volatile, grad)
        if callee.kind == MODULE:
            return self._module_call(call, callee, args, grad, run.iteration)
        if isinstance(func, cst.Name) and func.value in api.GRAPH_FREE_RESULT_BUILTINS:
            return S_NONE
        self._unknown_call_effects(run, call)
        return S_UNKNOWN

    def _module_attribute(self, run: _Run, func: cst.Attribute, volatile: set[str]) -> _Sym | None:
        """``self.G`` of ``self.G(x)`` when it holds a module (None: not known to)."""
        key = dotted_name(func)
        if key is None:
            return None
        if key in run.env:
            value = run.env[key]
        elif self.ctx.value_of(func).kind is Kind.MODULE or self._trained(key):
            value = self._pre(key, volatile, run.depth)
        else:
            return None
        return value if value.kind == MODULE else None

    def _unknown_call_effects(self, run: _Run, call: cst.Call) -> None:
        """Code we cannot see may change (``detach_()``) what it is handed."""
        keys = [dotted_name(arg.value) for arg in call.args]
        if isinstance(call.func, cst.Attribute):
            keys.append(dotted_name(call.func.value))
        for key in keys:
            if key is None:
                continue
            for known in list(run.env):
                if known == key or known.startswith(key + "."):
                    run.env[known] = S_UNKNOWN

    def _torch_call(self, call: cst.Call, qualified: str, args: list[_Sym], grad: bool, iteration: int) -> _Sym:
        if qualified in api.FACTORIES or qualified == api.PARAMETER:
            flag = keyword_arg(call, "requires_grad")
            if qualified == api.PARAMETER and (flag is None or _is_literal(flag.value, "True")):
                return S_LEAF
            if flag is None or _is_literal(flag.value, "False"):
                return S_NONE
            return S_LEAF if _is_literal(flag.value, "True") else S_UNKNOWN
        if qualified == api.VARIABLE:
            # Legacy ``Variable(t, requires_grad=True)``: a new leaf; ``Variable(t)``: ``t``'s alias.
            flag = keyword_arg(call, "requires_grad")
            if flag is not None and _is_literal(flag.value, "True", "False"):
                return S_LEAF if _is_literal(flag.value, "True") else S_NONE
            return S_UNKNOWN
        last = qualified.rsplit(".", 1)[-1]
        if qualified.startswith("torch.nn.") and qualified.count(".") == 2 and last[:1].isupper():
            return _Sym(MODULE, module=last)
        if qualified.startswith(("torch.nn.functional.", "torch.")) and last in saved_tensor_table().ops:
            if qualified.count(".") > 1 and not qualified.startswith("torch.nn.functional."):
                return S_UNKNOWN  # torch.linalg.norm & co: not the op in the table
            return self._op(args, call, _op_saves(last), grad, iteration)
        return S_UNKNOWN

    def _module_call(self, call: cst.Call, module: _Sym, args: list[_Sym], grad: bool, iteration: int) -> _Sym:
        name = module.module or ""
        if not grad:
            return S_NONE
        if module.trained:
            # Its parameters require grad unless the file freezes some, and an op applying a weight
            # saves what it is applied to (the input, for the weight's gradient).  Whether the
            # output depends on the input is not known: only the call's own node.
            self._assumed_trainable = True
            return _Sym(GRAD, self._op([S_LEAF], call, True, grad, iteration).nodes, opaque=True)
        if name in api.SAVING_PARAMETER_MODULES:
            # Its parameters require grad unless the file freezes some (asked once it is analysed).
            self._assumed_trainable = True
            inputs = [] if name in api.NOT_DIFFERENTIABLE_IN_INPUT_MODULES else args
            result = self._op([S_LEAF, *inputs], call, True, grad, iteration)
            return _Sym(GRAD, result.nodes, multi_output=True)
        saves = saved_tensor_table().module_certainly_saves(name)
        if saves is not None and f"torch.nn.{name}" in api.PARAMETERLESS_MODULES:
            return self._op(args, call, saves, grad, iteration)
        return S_UNKNOWN

    # ------------------------------------------------------------ before the loop
    def _pre(self, key: str, volatile: set[str], depth: int = 0) -> _Sym:
        """What ``key`` holds before the loop, with the nodes its graph certainly contains."""
        if key in volatile:
            return S_UNKNOWN
        if key in self._preloop:
            return self._preloop[key]
        self._preloop[key] = S_UNKNOWN  # cycles
        value = self.ctx.value_of(dotted_expression(key))
        result = S_UNKNOWN
        if value.kind is Kind.LEAF:
            # "assumed-leaf": only inferred from a `.grad` read -- not certain to require grad
            result = S_LEAF if "assumed-leaf" not in value.tags else S_UNKNOWN
        elif value.kind in (Kind.PLAIN, Kind.NUMBER):
            result = S_NONE
        elif value.kind is Kind.MODULE and (built := self.ctx.builtin_module(value)) is not None:
            result = _Sym(MODULE, module=built[0])
        elif value.kind in (Kind.MODULE, Kind.UNKNOWN, Kind.OBJECT) and self._trained(key):
            result = _Sym(MODULE, trained=True)
        elif depth < _MAX_PRELOOP_DEPTH and (origin := self._origin(key, value)) is not None:
            result = self._eval(_Run(0, {}, depth + 1), origin, volatile, True)
            if result.kind != GRAD:
                result = S_UNKNOWN
        self._preloop[key] = result
        return result

    def _origin(self, key: str, value: Value) -> cst.BaseExpression | None:
        """The expression that made what ``key`` holds before the loop: a non-leaf's origin, or
        the one assignment of a name the analysis knows nothing about but that went through a
        module's forward with grad enabled (``out = G(x)``, G of a class it cannot see; bound once
        in the function, so that is its value; not under ``no_grad``, not detached)."""
        if value.kind is Kind.NONLEAF:
            return value.origin if isinstance(value.origin, cst.BaseExpression) else None
        graph = self.ctx.module_graph
        if value.kind is not Kind.UNKNOWN or "." in key or graph is None:
            return None
        if not graph.forwards_of(dotted_expression(key)):
            return None
        function = self.ctx.function
        if function is not None and key in parameter_names(function.node):
            return None
        site = self.ctx.scope_bindings().of(key).single_assignment()
        return site.value if site is not None else None

    def _trained(self, key: str) -> bool:
        """An optimizer built in the file updates the module ``key`` holds (or one it is part of).
        Keys are names: a parameter of the function may hold another module than the optimizer's."""
        graph = self.ctx.module_graph
        function = self.ctx.function
        if graph is None or (function is not None and key in parameter_names(function.node)):
            return False
        return any(key == trained or key.startswith(trained + ".") for trained in graph.optimized_keys)


def _is_literal(node: cst.BaseExpression, *names: str) -> bool:
    return isinstance(node, cst.Name) and node.value in names
