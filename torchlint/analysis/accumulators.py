"""Methods that keep a running total of what they are given: meters.

``losses.update(loss, n)`` of an ``AverageMeter`` (``self.sum += val * n``), a meter of several
values (``for i, v in enumerate(values): self._sum[i] += v``): every call adds its argument to a
sum the instance keeps, so a call in a loop accumulates it like ``total += loss`` does.  The
question is answered from the method's body (a class of this file, or of a sibling file:
``project.py``): a parameter is *accumulated* when a ``+=`` (or ``x = x + ...``) on an attribute
of ``self`` adds it (a term of the sum: itself, times a count, over a count), and the body never
rebinds it
(``val = val.item()`` first is no accumulation); *element-wise* when what is accumulated is the
variable of a loop over the parameter (``for v in values``, ``for i, v in enumerate(values)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint.analysis.names import dotted_name
from torchlint.analysis.walk import scan


@dataclass(frozen=True)
class Accumulation:
    """The parameters a method accumulates, by name, in the order they are declared."""

    parameters: tuple[str, ...]  # every parameter but ``self``
    direct: frozenset[str]  # added as they are
    elementwise: frozenset[str]  # iterated over, each element added

    @property
    def any(self) -> bool:
        return bool(self.direct or self.elementwise)


_NOTHING = Accumulation((), frozenset(), frozenset())
_cache: dict[int, tuple[cst.FunctionDef, Accumulation]] = {}


def accumulation(method: cst.FunctionDef) -> Accumulation:
    """What ``method`` (a method: its first parameter is the instance) accumulates."""
    known = _cache.get(id(method))
    if known is not None and known[0] is method:
        return known[1]
    result = _analyse(method)
    if len(_cache) > 1024:
        _cache.clear()
    _cache[id(method)] = (method, result)
    return result


def _analyse(method: cst.FunctionDef) -> Accumulation:
    params = method.params
    ordered = [p.name.value for p in (*params.posonly_params, *params.params)]
    if not ordered:
        return _NOTHING
    receiver, parameters = ordered[0], tuple(ordered[1:] + [p.name.value for p in params.kwonly_params])
    finder = _Finder(receiver, set(parameters))
    scan(method.body, finder)
    rebound = finder.rebound
    direct = frozenset(name for name in finder.added if name in parameters and name not in rebound)
    elementwise = frozenset(
        iterated for name in finder.added if (iterated := finder.loop_over.get(name)) is not None
        and iterated not in rebound and name not in finder.rebound_in_body
    )
    if not direct and not elementwise:
        return _NOTHING
    return Accumulation(parameters, direct, elementwise)


class _Finder(cst.CSTVisitor):
    def __init__(self, receiver: str, parameters: set[str]) -> None:
        self.receiver = receiver
        self.parameters = parameters
        self.added: set[str] = set()  # names a `self.<x> += ...` adds
        self.loop_over: dict[str, str] = {}  # loop variable -> the parameter it iterates over
        self.rebound: set[str] = set()  # parameters bound again in the body
        self.rebound_in_body: set[str] = set()  # loop variables bound again inside their loop

    def _on_self(self, target: cst.BaseExpression) -> bool:
        while isinstance(target, cst.Subscript):
            target = target.value
        key = dotted_name(target)
        return key is not None and key.startswith(self.receiver + ".")

    def _bound(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bound(element.value)
        elif isinstance(target, cst.Name):
            if target.value in self.parameters:
                self.rebound.add(target.value)
            if target.value in self.loop_over:
                self.rebound_in_body.add(target.value)

    def visit_For(self, node: cst.For) -> None:
        iterated = node.iter
        if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Name) and iterated.func.value == "enumerate":
            iterated = iterated.args[0].value if iterated.args else iterated
        target = node.target
        if isinstance(target, cst.Tuple) and isinstance(node.iter, cst.Call) and len(target.elements) == 2:
            target = target.elements[1].value  # `for i, v in enumerate(values)`
        if isinstance(iterated, cst.Name) and iterated.value in self.parameters and isinstance(target, cst.Name):
            if target.value in self.loop_over:
                self.rebound_in_body.add(target.value)  # two loops: keep it simple
            self.loop_over[target.value] = iterated.value
        else:
            self._bound(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.AddAssign) and self._on_self(node.target):
            self.added.update(_terms(node.value))
        else:
            self._bound(node.target)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bound(node.target)

    def visit_Assign(self, node: cst.Assign) -> None:
        # `self.total = self.total + val`
        value = node.value
        if len(node.targets) == 1 and isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            key = dotted_name(node.targets[0].target)
            if key is not None and self._on_self(node.targets[0].target):
                if dotted_name(value.left) == key:
                    self.added.update(_terms(value.right))
                elif dotted_name(value.right) == key:
                    self.added.update(_terms(value.left))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bound(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bound(node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _terms(expr: cst.BaseExpression) -> set[str]:
    """The names ``expr`` adds as they are: ``val``, ``val * n``, ``n * val``, ``val / n``, ``-val``."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Multiply):
            return _terms(expr.left) | _terms(expr.right)
        if isinstance(expr.operator, cst.Divide):
            return _terms(expr.left)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _terms(expr.expression)
    return set()


def accumulated_arguments(method: cst.FunctionDef, call: cst.Call) -> list[cst.BaseExpression]:
    """The argument expressions of ``call`` (a call of ``method`` on an instance) that the
    method adds to the instance's state: an accumulated argument, or the elements of a list
    or tuple literal handed to a parameter it accumulates element-wise."""
    found = accumulation(method)
    if not found.any:
        return []
    passed: dict[str, cst.BaseExpression] = {}
    position = 0
    for arg in call.args:
        if arg.star:
            return []  # which parameter gets what is not known
        if arg.keyword is not None:
            passed[arg.keyword.value] = arg.value
        elif position < len(found.parameters):
            passed[found.parameters[position]] = arg.value
            position += 1
    result: list[cst.BaseExpression] = []
    for name, expr in passed.items():
        if isinstance(expr, (cst.List, cst.Tuple)):
            if name in found.elementwise:
                result.extend(element.value for element in expr.elements if isinstance(element, cst.Element))
        elif name in found.direct:
            result.append(expr)
    return result
