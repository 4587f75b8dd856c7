"""Helpers shared by the graph rules (TL004, TL005, TL007): recognising
``backward()`` calls, which tensor a backward starts from, and which names a
function body binds.  Not a rule module (it defines no ``Rule``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import libcst as cst

from torchlint.analysis import Analyzer, dotted_name
from torchlint.analysis.events import EventKind
from torchlint.analysis.walk import scan

# Methods through which a backward() that succeeds proves the receiver requires
# grad: they depend on their receiver only (``y.sum().backward()``).
_SAME_GRAPH_METHODS = frozenset(
    {"sum", "mean", "norm", "square", "abs", "squeeze", "view", "reshape", "float", "double", "clone", "prod",
     "max", "min", "amax", "exp", "log"}
)


@dataclass(frozen=True)
class BackwardCall:
    call: cst.Call
    # Expressions the backward pass starts from (the loss).
    roots: tuple[cst.BaseExpression, ...]
    # ``retain_graph=True`` / ``create_graph=True``: saved tensors stay alive.
    retains_graph: bool


def backward_call(call: cst.Call, ctx: Analyzer) -> BackwardCall | None:
    """The call as a ``backward()`` (the shared recognition, ``ctx.autograd_event``), or None."""
    event = ctx.autograd_event(call)
    if event is None or event.kind is not EventKind.BACKWARD:
        return None
    roots = (event.subject,) if event.subject is not None else ()
    return BackwardCall(call, roots, event.keeps_graph)


def graph_root_key(expr: cst.BaseExpression) -> str | None:
    """``y`` for ``y``, ``y.sum()``, ``y.mean(dim=0)``, ``scaler.scale(y)``: the name whose own
    graph a backward from ``expr`` goes through (backward() succeeding proves it requires grad)."""
    while True:
        key = dotted_name(expr)
        if key is not None:
            return key
        if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
            return None
        method = expr.func.attr.value
        if method in _SAME_GRAPH_METHODS:
            expr = expr.func.value
        elif method == "scale" and len(expr.args) == 1 and expr.args[0].keyword is None:
            expr = expr.args[0].value  # torch.amp GradScaler.scale(loss)
        else:
            return None


@dataclass(frozen=True)
class Bindings:
    """How a name is bound in one function body (or the module body), nested scopes excluded."""

    sites: tuple[cst.CSTNode, ...]  # the Assign/For/With/... statements that bind it
    declared_outside: bool  # a parameter, ``global`` or ``nonlocal``

    def single_assignment(self) -> cst.Assign | None:
        """The one plain ``name = value`` that binds the name, if that is its only binding."""
        if self.declared_outside or len(self.sites) != 1:
            return None
        site = self.sites[0]
        if isinstance(site, cst.Assign) and len(site.targets) == 1 and isinstance(site.targets[0].target, cst.Name):
            return site
        return None


def bindings_in_scope(ctx: Analyzer, name: str) -> Bindings:
    """How ``name`` is bound in the function (or module) the analysis is in."""
    function = ctx.function
    body = function.node.body if function is not None else ctx.module
    found = _binding_table(body).get(name, Bindings((), False))
    if function is not None and name in _parameter_names(function.node):
        return Bindings(found.sites, True)
    return found


def _parameter_names(node: cst.FunctionDef) -> set[str]:
    params = node.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


@lru_cache(maxsize=64)
def _binding_table(body: cst.CSTNode) -> dict[str, Bindings]:
    collector = _BindingCollector()
    scan(body, collector)
    names = set(collector.sites) | collector.declared
    return {
        name: Bindings(tuple(collector.sites.get(name, ())), name in collector.declared) for name in names
    }


class _BindingCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.sites: dict[str, list[cst.CSTNode]] = {}
        self.declared: set[str] = set()
        self._depth = 0  # nested function/class/lambda/comprehension depth

    def _bind(self, target: cst.CSTNode, site: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self.sites.setdefault(target.value, []).append(site)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, site)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, site)

    def _nested(self, node: cst.CSTNode) -> bool:
        if self._depth == 0 and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.sites.setdefault(node.name.value, []).append(node)
        self._depth += 1
        return True

    def _unnest(self, node: cst.CSTNode) -> None:
        self._depth -= 1

    visit_FunctionDef = visit_ClassDef = visit_Lambda = _nested
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _nested
    leave_FunctionDef = leave_ClassDef = leave_Lambda = _unnest
    leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = _unnest

    def visit_Parameters(self, node: cst.Parameters) -> bool:
        return False  # a nested function's parameters are its own

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._depth == 0:
            for target in node.targets:
                self._bind(target.target, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._depth == 0 and node.value is not None:
            self._bind(node.target, node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._depth == 0:
            self._bind(node.target, node)

    def visit_For(self, node: cst.For) -> None:
        if self._depth == 0:
            self._bind(node.target, node)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if self._depth == 0 and node.asname is not None:
            self._bind(node.asname.name, node)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if self._depth == 0 and node.name is not None:
            self._bind(node.name.name, node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, node)  # binds in the enclosing function even inside a comprehension

    def visit_Del(self, node: cst.Del) -> None:
        if self._depth == 0:
            self._bind(node.target, node)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if self._depth == 0:
            bound = node.asname.name if node.asname is not None else node.name
            while isinstance(bound, cst.Attribute):
                bound = bound.value
            self._bind(bound, node)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.declared.add(item.name.value)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self.declared.add(item.name.value)
