"""TL009 loss-history-accumulation: ``total += loss`` / ``losses.append(loss)`` in a loop
keeps every iteration's autograd graph alive when ``loss`` carries one.

``loss`` carries a graph when the analysis says it is a non-leaf (built from
something that requires grad, grad mode on), or when the same binding is
backpropagated in the loop (``loss.backward()`` only works on a tensor with a graph).
The accumulator must never reach a ``backward()``: every use of it in its scope is
followed through arithmetic, ``torch.stack`` and plain assignments; a use that could
lead anywhere else (returned, passed to a function, stored) keeps the rule silent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from torchlint import fixes
from torchlint.analysis.names import names_in
from torchlint.analysis import Kind, dotted_name, keyword_arg, positional_args
from torchlint.analysis.torch_api import LEAF_SOURCE_TOKENS
from torchlint.analysis.walk import children, scan
from torchlint.rule import Fix, FixSafety, Rule

# Uses of the accumulator that end its life as a tensor.
_TERMINAL_METHODS = frozenset({"item", "tolist", "numpy", "detach", "__float__", "__int__"})
_TERMINAL_BUILTINS = frozenset("print float int len str repr round format bool isinstance type id".split())
_TERMINAL_MODULES = ("numpy.", "math.")
# Calls whose result is built from the argument (may still carry its graph).
_PASS_THROUGH_BUILTINS = frozenset({"sum", "list", "tuple", "max", "min", "sorted", "reversed", "abs"})
# List methods that only add to / clear the accumulator.
_MUTATORS = frozenset({"append", "extend", "insert", "clear", "remove"})
# Full reductions: a tensor method called with no arguments returns a scalar.
_REDUCTIONS = frozenset({"mean", "sum", "norm", "std", "var", "prod", "amax", "amin", "logsumexp"})
_FUNCTIONAL_LOSSES = frozenset(
    "cross_entropy binary_cross_entropy binary_cross_entropy_with_logits nll_loss kl_div mse_loss l1_loss "
    "smooth_l1_loss huber_loss poisson_nll_loss gaussian_nll_loss hinge_embedding_loss margin_ranking_loss "
    "soft_margin_loss multilabel_soft_margin_loss cosine_embedding_loss triplet_margin_loss".split()
)
_MAX_FOLLOWED = 20

BACKPROP, OK, ESCAPE = "backprop", "ok", "escape"


@dataclass
class _Candidate:
    node: cst.CSTNode  # reported: the AugAssign / Assign / append call
    statement: cst.CSTNode | None
    accumulator: str
    expr: cst.BaseExpression  # the accumulated loss
    by_analysis: bool  # the analysis knows it is a non-leaf
    evidence: set[tuple[str, int]]  # (name, binding) pairs it is built from
    scalar: bool
    region: cst.CSTNode
    when: Callable[[], bool] | None


@dataclass
class _LoopState:
    candidates: list[_Candidate] = field(default_factory=list)
    # (name, binding) pairs backpropagated in the loop, and those backpropagated without a
    # `gradient` argument (which only works on a scalar).
    backpropagated: set[tuple[str, int]] = field(default_factory=set)
    scalar_backpropagated: set[tuple[str, int]] = field(default_factory=set)


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
        self._parents: dict[int, dict[int, cst.CSTNode]] = {}

    # ------------------------------------------------------------ bindings
    def _binding(self, key: str) -> tuple[str, int]:
        return key, self._bindings.get((id(self.ctx.function), key), 0)

    def _rebind(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._rebind(element.value)
            return
        if isinstance(target, cst.StarredElement):
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
        accumulator = _accumulator_key(node.target)
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
        func = node.func
        if not isinstance(func, cst.Attribute) or not self.ctx.loops:
            return
        if func.attr.value == "backward":
            self._note_backward(node, func)
        elif func.attr.value == "append" and len(node.args) == 1 and node.args[0].keyword is None:
            accumulator = _accumulator_key(func.value)
            if accumulator is not None and not node.args[0].star:
                self._candidate(node, accumulator, node.args[0].value)

    def _note_backward(self, node: cst.Call, func: cst.Attribute) -> None:
        names = _names_carried(func.value)
        scalar = not positional_args(node) and keyword_arg(node, "gradient") is None
        for loop in self.ctx.loops:
            state = self._loops.get(id(loop))
            if state is None:
                continue
            for name in names:
                state.backpropagated.add(self._binding(name))
                if scalar:
                    state.scalar_backpropagated.add(self._binding(name))

    def _candidate(self, node: cst.CSTNode, accumulator: str, expr: cst.BaseExpression) -> None:
        if not self.ctx.loops or id(self.ctx.loops[-1]) not in self._loops:
            return
        mode = self.ctx.grad_mode
        if mode.statically_disabled:
            return
        value = self.ctx.value_of(expr)
        if value.kind in (Kind.PLAIN, Kind.NUMBER, Kind.LEAF) or "detached" in value.tags:
            return
        if value.kind not in (Kind.NONLEAF, Kind.UNKNOWN):
            return
        evidence = {self._binding(name) for name in _names_carried(expr)}
        by_analysis = value.kind is Kind.NONLEAF
        if not by_analysis and not evidence:
            return
        # A non-leaf in a function whose callers we may not see: only if some call runs it with grad.
        when = mode.may_be_enabled if by_analysis and not mode.statically_enabled else None
        self._loops[id(self.ctx.loops[-1])].candidates.append(
            _Candidate(
                node, self.ctx.statement, accumulator, expr, by_analysis, evidence,
                self._is_scalar(expr), self._region(accumulator), when,
            )
        )

    def _region(self, accumulator: str) -> cst.CSTNode:
        """Where the accumulator can be used: its function, or the whole module."""
        function = self.ctx.function
        if function is None or "." in accumulator or _declares_global(function.node, accumulator):
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
            backed_by_backward = bool(candidate.evidence & state.backpropagated)
            if not candidate.by_analysis and not backed_by_backward:
                continue
            if backed_by_backward and _reset_inside(loop, candidate.accumulator):
                # backward() frees each step's saved activations and the reset bounds what
                # is kept (gradient-accumulation logging, e.g. torchtune's recipes): no leak.
                continue
            if self._reaches_backward_or_escapes(candidate):
                continue
            # `loss.backward()` without a gradient argument only works on a scalar
            named = isinstance(candidate.expr, (cst.Name, cst.Attribute))
            scalar = candidate.scalar or bool(named and candidate.evidence & state.scalar_backpropagated)
            when = None if backed_by_backward else candidate.when
            self.report(candidate.node, self._message(candidate), self._fix(candidate, scalar), when=when,
                        statement=candidate.statement)

    def _message(self, candidate: _Candidate) -> str:
        loss = fixes.source_of(candidate.expr)
        if len(loss) > 40:
            loss = "the loss"
        else:
            loss = f"`{loss}`"
        return (
            f"{loss} still carries its autograd graph; accumulating it into `{candidate.accumulator}` keeps every "
            f"iteration's graph (and its saved activations) alive; accumulate `.item()` (or `.detach()`) instead"
        )

    def _fix(self, candidate: _Candidate, scalar: bool) -> Fix | None:
        if not scalar:
            return None
        expr = candidate.expr
        receiver = expr
        if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not getattr(expr, "lpar", None):
            receiver = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        new = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("item")))
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
            if qualified in ("torch.mean", "torch.sum", "torch.norm"):
                return len(call.args) == 1 and call.args[0].keyword is None
            if qualified.startswith("torch.nn.functional.") and last in _FUNCTIONAL_LOSSES:
                return _reduces(call)
            return False
        if isinstance(func, cst.Attribute) and func.attr.value in _REDUCTIONS:
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

    # ------------------------------------------------------------ where the accumulator goes
    def _reaches_backward_or_escapes(self, candidate: _Candidate) -> bool:
        parents = self._parents_of(candidate.region)
        todo, seen = [candidate.accumulator], set()
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > _MAX_FOLLOWED:
                return True
            for use in _uses(candidate.region, key):
                outcome = self._follow(use, parents)
                if outcome in (BACKPROP, ESCAPE):
                    return True
                if isinstance(outcome, list):
                    todo.extend(outcome)
        return False

    def _parents_of(self, region: cst.CSTNode) -> dict[int, cst.CSTNode]:
        found = self._parents.get(id(region))
        if found is None:
            found = self._parents[id(region)] = {}
            stack = [region]
            while stack:
                node = stack.pop()
                for child in children(node):
                    found[id(child)] = node
                    stack.append(child)
        return found

    def _follow(self, use: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> str | list[str]:
        """Where the value at ``use`` goes: OK (dropped or made a number), BACKPROP,
        ESCAPE (somewhere we cannot follow), or the names it is assigned to."""
        child = use
        while True:
            parent = parents.get(id(child))
            if parent is None:
                return ESCAPE
            if isinstance(parent, cst.Attribute) and parent.value is child:
                call = parents.get(id(parent))
                if not (isinstance(call, cst.Call) and call.func is parent):
                    return OK  # .shape, .grad_fn, .requires_grad ...
                method = parent.attr.value
                if method == "backward":
                    return BACKPROP
                if method in _TERMINAL_METHODS:
                    return OK
                if method in _MUTATORS and (child is use or isinstance(child, cst.Subscript)):
                    return OK  # losses.append(...), history["train"].append(...)
                child = call
                continue
            if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation)):
                if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Modulo) and isinstance(
                    parent.left, (cst.SimpleString, cst.ConcatenatedString)
                ):
                    return OK  # "%s" % total
                child = parent
                continue
            if isinstance(parent, cst.IfExp):
                if parent.test is child:
                    return OK
                child = parent
                continue
            if isinstance(parent, cst.Subscript):
                if parent.value is not child:
                    return OK
                child = parent
                continue
            if isinstance(parent, (cst.SubscriptElement, cst.Index, cst.Slice, cst.Comparison, cst.ComparisonTarget)):
                return OK
            if isinstance(parent, (cst.Element, cst.StarredElement, cst.DictElement, cst.StarredDictElement)):
                child = parent
                continue
            if isinstance(parent, (cst.List, cst.Tuple, cst.Set, cst.Dict)):
                child = parent
                continue
            if isinstance(parent, cst.FormattedStringExpression):
                return OK
            if isinstance(parent, cst.Arg) and parent.keyword is child:
                return OK  # f(total=...) names a parameter
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName)):
                return OK
            if isinstance(parent, cst.Arg):
                call = parents.get(id(parent))
                if not isinstance(call, cst.Call):
                    return ESCAPE
                verdict = self._call_verdict(call)
                if verdict == "through":
                    child = call
                    continue
                return verdict
            if isinstance(parent, cst.Assign):
                return _assigned_keys(t.target for t in parent.targets) if parent.value is child else OK
            if isinstance(parent, (cst.AssignTarget, cst.Del, cst.NameItem, cst.Global, cst.Nonlocal)):
                return OK
            if isinstance(parent, cst.AugAssign):
                return OK if parent.target is child else _assigned_keys([parent.target])
            if isinstance(parent, cst.AnnAssign):
                return OK if parent.target is child else _assigned_keys([parent.target])
            if isinstance(parent, cst.For):
                return _assigned_keys([parent.target]) if parent.iter is child else OK
            if isinstance(parent, (cst.Expr, cst.If, cst.While, cst.Assert)):
                return OK
            return ESCAPE

    def _call_verdict(self, call: cst.Call) -> str:
        func = call.func
        qualified = self.ctx.qualify(func)
        if qualified is not None:
            if qualified in ("torch.autograd.backward", "torch.autograd.grad"):
                return BACKPROP
            if qualified.startswith(_TERMINAL_MODULES):
                return OK
            if qualified.startswith("torch."):
                return "through"
            return ESCAPE
        if isinstance(func, cst.Name):
            if func.value in _TERMINAL_BUILTINS:
                return OK
            if func.value in _PASS_THROUGH_BUILTINS:
                return "through"
            return ESCAPE
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            return BACKPROP  # accelerator.backward(total)
        return ESCAPE


def _accumulator_key(target: cst.BaseExpression) -> str | None:
    """``total``, ``self.total``; ``history`` for ``history["train"]``."""
    while isinstance(target, cst.Subscript):
        target = target.value
    return dotted_name(target)


def _names_carried(expr: cst.BaseExpression) -> set[str]:
    """Names whose graph ``expr`` certainly carries: ``loss``, ``loss * n``, ``-loss``, ``scaler.scale(loss)``."""
    key = dotted_name(expr)
    if key is not None:
        return {key}
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
    ):
        return _names_carried(expr.left) | _names_carried(expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _names_carried(expr.expression)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "scale":
        return {name for arg in expr.args for name in _names_carried(arg.value)}
    return set()


def _reduces(call: cst.Call) -> bool:
    """No ``reduction=`` argument, or ``'mean'`` / ``'sum'``."""
    reduction = keyword_arg(call, "reduction")
    if reduction is None:
        return True
    value = reduction.value
    return isinstance(value, cst.SimpleString) and value.evaluated_value in ("mean", "sum")


def _assigned_keys(targets) -> list[str] | str:  # type: ignore[no-untyped-def]
    keys: list[str] = []
    for target in targets:
        key = _accumulator_key(target)
        if key is None:
            return ESCAPE
        keys.append(key)
    return keys


def _declares_global(function: cst.FunctionDef, name: str) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Global(self, node: cst.Global) -> None:
            nonlocal found
            found = found or any(item.name.value == name for item in node.names)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

    scan(function, Finder())
    return found


def _uses(region: cst.CSTNode, key: str) -> list[cst.CSTNode]:
    """Every expression in ``region`` that reads or writes ``key`` (a name, or ``x.attr``:
    then every ``.attr`` in the file counts).  Nested functions that bind the name
    locally have their own variable and are skipped."""
    simple = "." not in key
    attr = key.rsplit(".", 1)[-1]
    found: list[cst.CSTNode] = []

    class Finder(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if simple and node.value == key:
                found.append(node)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if not simple and node.attr.value == attr:
                found.append(node)
            return True

        def leave_Attribute(self, node: cst.Attribute) -> None:
            if simple and found and found[-1] is node.attr:
                found.pop()  # `x.total` is not the name `total`

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is region or not (simple and _binds_locally(node, key))

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return not (simple and any(p.name.value == key for p in node.params.params))

    scan(region, Finder())
    return found


def _binds_locally(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return True
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param) and star.name.value == name:
            return True
    bound = False

    class Finder(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal bound
            bound = bound or name in _target_names(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal bound
            bound = bound or name in _target_names(node.target)

        def visit_For(self, node: cst.For) -> None:
            nonlocal bound
            bound = bound or name in _target_names(node.target)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

    scan(function.body, Finder())
    return bound and not _declares_global(function, name)


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in _target_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def _reset_inside(loop: cst.For | cst.While, accumulator: str) -> bool:
    """Whether the loop body starts the accumulator afresh (``total = 0``, ``losses = []``, ``losses.clear()``)."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            if any(dotted_name(t.target) == accumulator for t in node.targets) and accumulator not in names_in(
                node.value
            ):
                found = True

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "clear" and dotted_name(func.value) == accumulator:
                found = True

    scan(loop.body, Finder())
    return found
