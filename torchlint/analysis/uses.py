"""Where a name is used in its scope, and where the value it holds goes from each use.

Two queries, for any rule:

- ``references(region, key)``: every ``Name`` (or ``x.attr`` for a dotted key) in ``region``
  that reads or writes ``key``; nested functions and lambdas with their own binding of the
  name are skipped.
- ``changed_in_place(ctx, node)``: the keys code in ``node`` may change in place (``x.op_()``,
  or handing ``x`` to code that may).
- ``ValueFlow(ctx, region).follow(key)``: escape analysis.  Starting at every reference of
  ``key``, the value is followed up the expression tree — through arithmetic, indexing, torch
  ops, containers, and assignments to other names (whose later references are followed in
  turn) — to where it ends: a ``Sink`` (backpropagated, made a number or text, converted by
  numpy, detached, dropped, or escaping to code that is not seen).  Each ``Use`` also says
  whether the way the value is used there needs a tensor (``.item()``, ``torch.stack``,
  ``.shape`` ...) or works as well on a Python number.

What calls do with their arguments (numpy, plotting, logging, builtins) is data in ``torch_api``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.displayed_arguments import constructor_displays_argument
from torchlint.analysis.events import EventKind
from torchlint.analysis.names import dotted_name, positional_args
from torchlint.analysis.plots import plots_on_axes
from torchlint.analysis.sibling_functions import sibling_function_flow
from torchlint.analysis.values import Kind
from torchlint.analysis.walk import children, scan
from torchlint.saved_tensors import saved_tensor_table

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.bindings import BindingTable


class Sink(enum.Enum):
    BACKWARD = "backward"  # backpropagated: x.backward(), torch.autograd.backward/grad(x), accelerator.backward(x)
    NUMBER = "number"  # made a Python number or text: .item(), float(), print(), f-strings, str.format, %
    NUMPY = "numpy"  # converted by numpy / a plotting or data-frame library: M6 on a tensor that requires grad
    DETACHED = "detached"  # .detach(), .data, torch.tensor(x): the graph is cut there
    DROPPED = "dropped"  # tested, compared, a statement that discards it, the accumulation itself, a rebinding
    ESCAPES = "escapes"  # returned, yielded, stored in an object, passed to code that is not seen


@dataclass(frozen=True)
class Use:
    sink: Sink
    node: cst.CSTNode  # the reference the value was followed from
    needs_tensor: bool  # on the way, the value (or an element of it) is used as only a tensor can be
    through_unknown_call: bool = False  # it went through the result of a call whose body is not seen


# ---------------------------------------------------------------- changes in place
def changed_in_place(ctx: Analyzer, node: cst.CSTNode) -> set[str]:
    """Keys code in ``node`` (nested functions excluded) may change in place: receivers of
    ``x.op_()``, and what is handed to code that is not torch (a helper may ``detach_()`` its
    argument), or is the receiver of a call of such code."""
    keys: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                receiver = dotted_name(func.value)
                if receiver is not None and method.endswith("_") and not method.startswith("__"):
                    keys.add(receiver)
            if leaves_arguments_alone(ctx, call):
                return
            for arg in call.args:
                key = dotted_name(arg.value)
                if key is not None:
                    keys.add(key)
            if isinstance(func, cst.Attribute) and dotted_name(func.value) is not None:
                keys.add(dotted_name(func.value))  # type: ignore[arg-type]

        def visit_FunctionDef(self, function: cst.FunctionDef) -> bool:
            return False

    scan(node, Finder())
    return keys


def leaves_arguments_alone(ctx: Analyzer, call: cst.Call) -> bool:
    """``call`` changes neither its arguments nor its receiver in place: torch functions, pure
    builtins, built-in torch modules, tensor ops and the methods in ``torch_api``."""
    func = call.func
    qualified = ctx.qualify(func)
    if qualified is not None:
        return qualified.startswith("torch.")
    if isinstance(func, cst.Name):
        if func.value in api.ARGUMENT_PRESERVING_BUILTINS:
            return True
        value = ctx.value_of(func)
        return value.kind is Kind.MODULE and value.cls is None
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method in api.ARGUMENT_PRESERVING_METHODS or method in saved_tensor_table().ops:
            return True
        value = ctx.value_of(func)
        return value.kind is Kind.MODULE and value.cls is None
    return False


# ---------------------------------------------------------------- references
def references(region: cst.CSTNode, key: str) -> list[cst.CSTNode]:
    """Every expression in ``region`` that reads or writes ``key`` (a name, or ``x.attr``: then
    every ``.attr`` in ``region`` counts), in source order."""
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
            return node is region or not (simple and binds_locally(node, key))

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return not (simple and any(p.name.value == key for p in node.params.params))

    scan(region, Finder())
    return found


def declares_global(function: cst.FunctionDef, name: str) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Global(self, node: cst.Global) -> None:
            nonlocal found
            found = found or any(item.name.value == name for item in node.names)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

    scan(function, Finder())
    return found


def binds_locally(function: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter of ``function`` or assigned in its body (and not declared global)."""
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
            bound = bound or name in target_names(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal bound
            bound = bound or name in target_names(node.target)

        def visit_For(self, node: cst.For) -> None:
            nonlocal bound
            bound = bound or name in target_names(node.target)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

    scan(function.body, Finder())
    return bound and not declares_global(function, name)


def target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in target_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


def container_key(target: cst.BaseExpression) -> str | None:
    """``total``, ``self.total``; ``history`` for ``history["train"]``."""
    while isinstance(target, cst.Subscript):
        target = target.value
    return dotted_name(target)


# ---------------------------------------------------------------- escape analysis
@dataclass(frozen=True)
class _Step:
    """Where the walk up from a use goes next."""

    sink: Sink | None = None  # it ends here
    up: cst.CSTNode | None = None  # the value continues as this expression's value
    aliases: tuple[str, ...] = ()  # the value is bound to these names (followed after ``bound_at``)
    bound_at: cst.CSTNode | None = None  # where the aliases are bound (default: the use)
    needs_tensor: bool = False
    unknown_call: bool = False


_ATTRIBUTE_READS_WITHOUT_TENSOR = frozenset({"real", "imag"})
# Arithmetic that keeps a loss weight a weight: ``1 - alpha``, ``beta / 2``.
_WEIGHT_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


class ValueFlow:
    """Escape analysis over one region (a function body, or the module)."""

    def __init__(self, ctx: Analyzer, region: cst.CSTNode) -> None:
        self.ctx = ctx
        self.region = region
        self._combines: Callable[[cst.BaseExpression], bool] | None = None  # see follow_value
        self._terms_only = False  # see backpropagated_uses
        self._references: dict[str, list[cst.CSTNode]] = {}  # references(region, key), by key
        self._parents: dict[int, cst.CSTNode] = {}
        self._order: dict[int, int] = {}
        self._names: dict[str, list[cst.Name]] = {}  # every Name node by its value, in source order
        stack = [region]
        while stack:
            node = stack.pop()
            self._order[id(node)] = len(self._order)
            if type(node) is cst.Name:
                self._names.setdefault(node.value, []).append(node)
            for child in reversed(children(node)):
                self._parents[id(child)] = node
                stack.append(child)

    def follow(self, key: str, max_names: int = 20) -> list[Use] | None:
        """Every use the value of ``key`` reaches (None: it spreads to more than ``max_names`` names)."""
        return self._follow_names([(key, -1, False, False)], [], max_names)

    def follow_value(self, node: cst.BaseExpression, max_names: int = 20,
                     combines: Callable[[cst.BaseExpression], bool] | None = None) -> list[Use] | None:
        """Every use the value of the expression ``node`` (in the region) reaches, through the
        names it is bound to (None: it spreads to more than ``max_names`` names).  With
        ``combines``, arithmetic with an operand it rejects ends the walk there (``DROPPED``):
        the value is followed only as long as it decides what the result is."""
        self._combines = combines
        try:
            todo: list[tuple[str, int, bool, bool]] = []
            first = self._walk(node, False, False, todo)
            return self._follow_names(todo, [] if todo else [first], max_names)
        finally:
            self._combines = None

    def backpropagated_uses(self, key: str, reference: cst.CSTNode) -> list[Use]:
        """The ``backward()`` calls the value ``key`` holds at ``reference`` reaches as a *term* of
        what is backpropagated: itself, an alias (``loss_total = loss``), or a term of a sum,
        difference, product or the numerator of a quotient (``loss = r_loss + alpha * d_loss``)
        bound to a name that is backpropagated.  ``backward()`` works only on a tensor with a graph,
        and a term a sum is backpropagated through was computed with grad.  The value is taken from
        the nearest binding of ``key`` before ``reference``; any other use ends the walk."""
        site = self._binding_before(key, reference)
        if site is None:
            return []
        # `loss, loss_kl = compute_loss(batch)` where the helper returns `loss_a + loss_kl, loss_kl`:
        # the name bound to the sum carries `loss_kl` too.
        carriers = [key, *self._sums_returned_with(key, site)]
        at = self._order[id(site)]
        self._terms_only = True
        try:
            uses = self._follow_names([(name, at, False, False) for name in carriers], [], 20)
        finally:
            self._terms_only = False
        return [use for use in uses or () if use.sink is Sink.BACKWARD]

    def _sums_returned_with(self, key: str, site: cst.CSTNode) -> list[str]:
        """For ``a, b, c = helper(...)`` (a helper in this file returning a tuple): the targets
        bound to a returned value of which ``key``'s returned value is a term."""
        if not (isinstance(site, cst.Assign) and len(site.targets) == 1 and isinstance(site.value, cst.Call)):
            return []
        target = site.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return []
        names = [element.value.value if isinstance(element.value, cst.Name) else None for element in target.elements]
        if key not in names:
            return []
        callee = self._callee_flow(site.value.func, site)
        if callee is None:
            return []
        flow, definition = callee
        position = names.index(key)
        found: list[str] = []
        for returned in _returned_tuples(definition, len(names)):
            mine = flow.reduced_operand(returned[position]) or returned[position]  # `return loss, kl.mean()`
            if not isinstance(mine, cst.Name):
                continue
            for index, item in enumerate(returned):
                name = names[index]
                if index != position and name is not None and name not in found and mine.value in flow.terms(item):
                    found.append(name)
        return found

    def _callee_flow(self, func: cst.BaseExpression, site: cst.CSTNode) -> tuple[ValueFlow, cst.FunctionDef] | None:
        """The value flow of the function ``func`` names and its ``def``: a function of this
        file, or of a sibling file it is imported from (``from loss import my_loss``, also
        through an alias ``loss_fn = my_loss`` bound before ``site``), read in that file's
        own analysis (``project.py``)."""
        callee = self.ctx.resolve_function(func)
        if callee is not None:
            return self.ctx.value_flow(callee.node), callee.node
        if isinstance(func, cst.Name):
            alias = self._binding_before(func.value, site)
            if isinstance(alias, cst.Assign) and isinstance(alias.value, cst.Name):
                func = alias.value  # `loss_fn = my_loss`
            elif alias is not None and not isinstance(alias, (cst.ImportFrom, cst.Import, cst.ImportAlias)):
                return None
        return sibling_function_flow(self.ctx, func)

    def terms(self, expr: cst.BaseExpression, depth: int = 0) -> set[str]:
        """The names whose values ``expr`` (in the region) is a sum of: itself for a name, and the
        terms of what it was bound to (``loss = rec + beta * kl`` -> rec, beta's factor kl ...),
        through sums, differences, products by a weight and numerators."""
        if depth > 6:  # name hops
            return set()
        if isinstance(expr, cst.Name):
            return {expr.value} | self._terms_bound(expr.value, self._binding_before(expr.value, expr), depth + 1)
        if isinstance(expr, cst.UnaryOperation) and type(expr.operator) is cst.Minus:
            return self.terms(expr.expression, depth)
        if isinstance(expr, cst.Call):
            operand = self.reduced_operand(expr)  # `(rec + kl).mean()`, `torch.sum(rec * w, dim=1)`
            return self.terms(operand, depth) if operand is not None else set()
        if isinstance(expr, cst.BinaryOperation):
            operator = type(expr.operator)
            if operator in (cst.Add, cst.Subtract):
                return self.terms(expr.left, depth) | self.terms(expr.right, depth)
            if operator is cst.Divide:
                return self.terms(expr.left, depth)
            if operator is cst.Multiply:
                found = set()
                if self._is_weight(expr.left):
                    found |= self.terms(expr.right, depth)
                if self._is_weight(expr.right):
                    found |= self.terms(expr.left, depth)
                return found
        return set()

    def reduced_operand(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """``x`` for a mean or sum of it that keeps its terms: ``x.mean(...)``, ``torch.sum(x, ...)``."""
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        qualified = self.ctx.qualify(func)
        if qualified is None:
            methods = api.TERM_KEEPING_REDUCTION_METHODS
            return func.value if isinstance(func, cst.Attribute) and func.attr.value in methods else None
        args = positional_args(expr) if qualified in api.TERM_KEEPING_REDUCTION_FUNCTIONS else ()
        return args[0] if args else None

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node ``node`` (in the region) sits in."""
        return self._parents.get(id(node))

    def references_of(self, key: str) -> list[cst.CSTNode]:
        """The nodes in the region that read or write the name (or ``self.x`` key) ``key``."""
        return self._references_of(key)

    def binding_before(self, key: str, reference: cst.CSTNode) -> cst.CSTNode | None:
        """The binding site of the name ``key`` that comes last before ``reference``."""
        return self._binding_before(key, reference)

    def _terms_bound(self, key: str, site: cst.CSTNode | None, depth: int) -> set[str]:
        """The terms of what the binding ``site`` of ``key`` gives it (``loss = a + b``; ``loss += c``:
        ``c`` and the terms of the binding before it)."""
        if depth > 6:
            return set()
        if isinstance(site, cst.Assign) and len(site.targets) == 1 and isinstance(site.targets[0].target, cst.Name):
            return self.terms(site.value, depth)
        if isinstance(site, cst.AugAssign) and type(site.operator) in (cst.AddAssign, cst.SubtractAssign):
            # (the binding before the statement: its own target comes after it in the order)
            return self._terms_bound(key, self._binding_before(key, site), depth + 1) | self.terms(site.value, depth)
        return set()

    def _binding_before(self, key: str, reference: cst.CSTNode) -> cst.CSTNode | None:
        """The binding site of ``key`` in the region that comes last before ``reference``."""
        region = self.region
        body = region.body if isinstance(region, cst.FunctionDef) else region
        limit = self._order.get(id(reference))
        if limit is None or "." in key:
            return None
        before = [site for site in self.ctx.binding_table(body).of(key).sites
                  if self._order.get(id(site), limit) < limit]
        return max(before, key=lambda site: self._order[id(site)], default=None)

    def _term_step(self, child: cst.CSTNode) -> _Step | None:
        """In ``backpropagated_uses``: where the walk stops because ``child`` stops being a term of
        the value (None: the usual step)."""
        parent = self._parents.get(id(child))
        kind = type(parent)
        if kind is cst.BinaryOperation:
            operator = type(parent.operator)
            other = parent.right if parent.left is child else parent.left
            if operator in (cst.Add, cst.Subtract) or (operator is cst.Divide and parent.left is child):
                return None
            if operator is cst.Multiply and self._is_weight(other):
                return None  # `alpha * d_loss`; in `-log_prob * reward` the reward is no term
            return _Step(Sink.DROPPED)
        if kind is cst.UnaryOperation:
            return None if type(parent.operator) is cst.Minus else _Step(Sink.DROPPED)
        if kind in (cst.Assign, cst.AugAssign, cst.AnnAssign):
            return None  # an alias, or `loss += aux`
        if kind is cst.Attribute and parent.value is child:
            call = self._parents.get(id(parent))
            backward = isinstance(call, cst.Call) and call.func is parent and parent.attr.value == "backward"
            if backward or (isinstance(call, cst.Call) and self.reduced_operand(call) is child):
                return None  # `loss.backward()`; `(rec + kl).mean()` keeps the terms
            return _Step(Sink.DROPPED)
        if kind is cst.Arg:
            call = self._parents.get(id(parent))
            event = self.ctx.autograd_event(call) if isinstance(call, cst.Call) else None
            backward = event is not None and event.kind is EventKind.BACKWARD and event.subject is child
            if not backward and isinstance(call, cst.Call) and self.reduced_operand(call) is child:
                return None  # `torch.mean(rec + kl)`
            return _Step(Sink.BACKWARD) if backward else _Step(Sink.DROPPED)
        return _Step(Sink.DROPPED)

    def _is_weight(self, factor: cst.BaseExpression) -> bool:
        """A factor that scales a loss term: a number, or a hyperparameter read from an object
        (``args.alpha``, ``self.beta``, ``config.value_weight``)."""
        if isinstance(factor, cst.UnaryOperation):
            return self._is_weight(factor.expression)
        if isinstance(factor, cst.Attribute):
            return dotted_name(factor) is not None
        if isinstance(factor, (cst.Integer, cst.Float)):
            return True
        if isinstance(factor, cst.BinaryOperation) and type(factor.operator) in _WEIGHT_ARITHMETIC:
            return self._is_weight(factor.left) and self._is_weight(factor.right)  # `(1 - alpha)`
        if isinstance(factor, cst.Name) and self._bound_only_to_numbers(factor.value):
            return True  # `alpha = 0.5` in the region (read from another scope's analysis too)
        return self.ctx.value_of(factor).kind is Kind.NUMBER

    def _bound_only_to_numbers(self, name: str) -> bool:
        region = self.region
        body = region.body if isinstance(region, cst.FunctionDef) else region
        sites = self.ctx.binding_table(body).of(name).sites
        return bool(sites) and all(
            isinstance(site, cst.Assign) and isinstance(site.value, (cst.Integer, cst.Float)) for site in sites)

    def _follow_names(self, todo: list[tuple[str, int, bool, bool]], uses: list[Use],
                      max_names: int) -> list[Use] | None:
        """``todo``: (name, followed after this order, needs tensor, through an unknown call)."""
        # name -> the earliest order it was followed from: a name bound again earlier (the
        # same name bound in two loops, reached from the later binding first) is followed
        # again for the references between the two bindings.
        seen: dict[str, int] = {}
        while todo:
            name, after, needs, unknown = todo.pop()
            followed_from = seen.get(name)
            if followed_from is not None and followed_from <= after:
                continue
            if followed_from is None:
                seen[name] = after
                if len(seen) > max_names:
                    return None
                if name.split(".")[0] in self._parameters():
                    # A parameter's value (or what is stored on it: `strategy.loss += penalty`)
                    # belongs to the caller, who sees every change made to it.
                    uses.append(Use(Sink.ESCAPES, self.region, needs, unknown))
            seen[name] = after
            for reference in self._references_of(name):
                order = self._order.get(id(reference), 0)
                if order <= after or (followed_from is not None and order > followed_from):
                    continue  # an alias is followed from where it is bound on (once)
                uses.append(self._walk(reference, needs, unknown, todo))
        return uses

    def _references_of(self, key: str) -> list[cst.CSTNode]:
        """``references(self.region, key)``, from the index of names built with the tree."""
        found = self._references.get(key)
        if found is not None:
            return found
        if "." in key:
            found = references(self.region, key)
        else:
            found = []
            for node in self._names.get(key, ()):
                parent = self._parents.get(id(node))
                if not (type(parent) is cst.Attribute and parent.attr is node) and not self._rebound_inside(node, key):
                    found.append(node)
        self._references[key] = found
        return found

    def _rebound_inside(self, node: cst.CSTNode, key: str) -> bool:
        """``node`` sits in a nested function (or lambda) with its own binding of ``key``."""
        ancestor = self._parents.get(id(node))
        while ancestor is not None and ancestor is not self.region:
            kind = type(ancestor)
            if kind is cst.FunctionDef and binds_locally(ancestor, key):
                return True
            if kind is cst.Lambda and any(p.name.value == key for p in ancestor.params.params):
                return True
            ancestor = self._parents.get(id(ancestor))
        return False

    def _parameters(self) -> set[str]:
        region = self.region
        if not isinstance(region, cst.FunctionDef):
            return set()
        params = region.params
        return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}

    def _walk(self, use: cst.CSTNode, needs: bool, unknown: bool, todo: list) -> Use:
        child = use
        while True:
            step = (self._terms_only and self._term_step(child)) or self._step(child)
            needs = needs or step.needs_tensor
            unknown = unknown or step.unknown_call
            if step.aliases:
                at = self._order.get(id(step.bound_at or child), 0)
                todo.extend((alias, at, needs, unknown) for alias in step.aliases)
                return Use(Sink.DROPPED, use, needs, unknown)
            if step.sink is not None:
                sink = step.sink
                if unknown and sink is not Sink.BACKWARD:
                    sink = Sink.ESCAPES  # the unseen call may keep what it was given
                return Use(sink, use, needs, unknown)
            assert step.up is not None
            child = step.up

    # One level up from ``child``: what its parent does with its value.
    def _step(self, child: cst.CSTNode) -> _Step:  # noqa: C901 - one case per node type
        parent = self._parents.get(id(child))
        if parent is None:
            return _Step(Sink.ESCAPES)
        kind = type(parent)
        if kind is cst.Attribute and parent.value is child:
            return self._attribute_step(parent)
        if kind is cst.BinaryOperation:
            if type(parent.operator) is cst.Modulo and isinstance(parent.left, (cst.SimpleString, cst.ConcatenatedString)):
                return _Step(Sink.NUMBER)  # "%s" % total
            other = parent.right if parent.left is child else parent.left
            if self._combines is not None and not self._combines(other):
                return _Step(Sink.DROPPED)
            return _Step(up=parent)
        if kind in (cst.UnaryOperation, cst.BooleanOperation, cst.Element, cst.StarredElement, cst.DictElement,
                    cst.StarredDictElement, cst.List, cst.Tuple, cst.Set, cst.Dict):
            return _Step(up=parent)
        if kind is cst.IfExp:
            return _Step(Sink.DROPPED) if parent.test is child else _Step(up=parent)
        if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            return _Step(up=parent)  # the element expression (the `for` part is a CompFor)
        if kind is cst.Subscript:
            return _Step(up=parent) if parent.value is child else _Step(Sink.DROPPED)
        if kind in (cst.SubscriptElement, cst.Index, cst.Slice, cst.Comparison, cst.ComparisonTarget):
            return _Step(Sink.DROPPED)
        if kind is cst.FormattedStringExpression:
            return _Step(Sink.NUMBER)
        if kind is cst.Arg:
            if parent.keyword is child:
                return _Step(Sink.DROPPED)  # f(total=...) names a parameter
            call = self._parents.get(id(parent))
            if not isinstance(call, cst.Call):
                return _Step(Sink.ESCAPES)
            step = self._argument_step(call, child)
            if step.unknown_call and constructor_displays_argument(self.ctx, call, parent):
                return _Step(Sink.NUMPY)  # `history(train_losses, val_losses)` of a class that plots them
            if step.unknown_call and parent.keyword is not None:
                # `tqdm(loader, total=n)`: an unseen call keeps an option, it does not return it
                return _Step(Sink.ESCAPES)
            return step
        if kind in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            return self._assignment_step(parent, child)
        if kind is cst.For or kind is cst.CompFor:
            names = tuple(sorted(target_names(parent.target)))
            if parent.iter is not child or not names:
                return _Step(Sink.DROPPED)
            # a comprehension's element expression comes before its `for` in the source
            comprehension = self._parents.get(id(parent)) if kind is cst.CompFor else None
            while type(comprehension) is cst.CompFor:
                comprehension = self._parents.get(id(comprehension))
            return _Step(aliases=names, bound_at=comprehension)
        if kind in (cst.AssignTarget, cst.Del, cst.NameItem, cst.Global, cst.Nonlocal, cst.FunctionDef, cst.ClassDef,
                    cst.ImportAlias, cst.AsName, cst.Param, cst.Expr, cst.If, cst.While, cst.Assert):
            return _Step(Sink.DROPPED)
        return _Step(Sink.ESCAPES)  # returned, yielded, in a lambda, a with item ...

    def _attribute_step(self, attribute: cst.Attribute) -> _Step:
        name = attribute.attr.value
        call = self._parents.get(id(attribute))
        if not (isinstance(call, cst.Call) and call.func is attribute):
            if name in api.DETACHING_ATTRIBUTES:
                return _Step(Sink.DETACHED, needs_tensor=True)
            return _Step(Sink.DROPPED, needs_tensor=name not in _ATTRIBUTE_READS_WITHOUT_TENSOR)  # .shape
        if name == "backward":
            return _Step(Sink.BACKWARD)
        if name in api.LIST_MUTATORS:
            return _Step(Sink.DROPPED)  # losses.append(...), history["train"].append(...)
        if name in api.NUMPY_METHODS:
            return _Step(Sink.NUMPY, needs_tensor=True)
        if name in api.SCALAR_METHODS:
            return _Step(Sink.NUMBER, needs_tensor=True)
        if name in api.DETACHING_METHODS:
            return _Step(Sink.DETACHED, needs_tensor=True)
        return _Step(up=call, needs_tensor=name not in api.LIST_METHODS)

    def _argument_step(self, call: cst.Call, child: cst.CSTNode) -> _Step:
        event = self.ctx.autograd_event(call)
        if event is not None and event.kind in (EventKind.BACKWARD, EventKind.GRAD) and event.subject is child:
            return _Step(Sink.BACKWARD)
        func = call.func
        qualified = self.ctx.qualify(func)
        if qualified is not None:
            if qualified.startswith(api.NUMPY_LIKE_PREFIXES):
                return _Step(Sink.NUMPY)
            if qualified.startswith(api.NUMBER_MODULE_PREFIXES):
                return _Step(Sink.NUMBER)
            if qualified in api.GRAPH_CUTTING_FACTORIES:
                return _Step(Sink.DETACHED)
            if qualified.startswith("torch.") and qualified not in api.STORING_FUNCTIONS:
                return _Step(up=call, needs_tensor=True)
            return _Step(up=call, unknown_call=True)
        if isinstance(func, cst.Name):
            if func.value in api.NUMBER_BUILTINS:
                return _Step(Sink.NUMBER)
            if func.value in api.PASS_THROUGH_BUILTINS:
                return _Step(up=call)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "format" and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)):
                return _Step(Sink.NUMBER)
            if method in api.FORMATTING_METHODS:
                return _Step(Sink.NUMBER)
            if method in api.AXES_PLOTTING_METHODS and plots_on_axes(self.ctx, call, self._binding_table()):
                return _Step(Sink.NUMPY)  # `ax.plot(history)`
        return _Step(up=call, unknown_call=True)

    def _binding_table(self) -> BindingTable:
        region = self.region
        return self.ctx.binding_table(region.body if isinstance(region, cst.FunctionDef) else region)

    def _assignment_step(self, statement: cst.CSTNode, child: cst.CSTNode) -> _Step:
        if isinstance(statement, cst.Assign):
            if statement.value is not child:
                return _Step(Sink.DROPPED)
            targets = [target.target for target in statement.targets]
        else:
            assert isinstance(statement, (cst.AnnAssign, cst.AugAssign))
            if statement.target is child or statement.value is not child:
                return _Step(Sink.DROPPED)  # `total += ...`: the accumulation itself
            targets = [statement.target]
        keys: list[str] = []
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)):
                keys.extend(sorted(target_names(target)))
                continue
            key = container_key(target)
            if key is None:
                return _Step(Sink.ESCAPES)
            keys.append(key)
        return _Step(aliases=tuple(keys))


def _returned_tuples(function: cst.FunctionDef, size: int) -> list[list[cst.BaseExpression]]:
    """The ``return a, b, ...`` tuples of ``size`` items in ``function`` (nested functions excluded)."""
    found: list[list[cst.BaseExpression]] = []

    class Finder(cst.CSTVisitor):
        def visit_Return(self, node: cst.Return) -> None:
            value = node.value
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == size:
                if all(isinstance(element, cst.Element) for element in value.elements):
                    found.append([element.value for element in value.elements])

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    scan(function, Finder())
    return found


__all__ = [
    "Sink", "Use", "ValueFlow", "binds_locally", "container_key", "declares_global", "references", "target_names",
]
