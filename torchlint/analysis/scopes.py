"""Scopes, functions, classes and grad mode as the analysis sees them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.names import dotted_name
from torchlint.analysis.values import Kind, UNKNOWN, Value, join

if TYPE_CHECKING:
    from torchlint.analysis.attributes import AttributeUses


class Mode(enum.Enum):
    ENABLED = "enabled"
    DISABLED = "disabled"
    UNKNOWN = "unknown"


@dataclass(frozen=True, eq=False)
class GradMode:
    """Grad mode at a program point.

    Either a fixed mode (``with torch.no_grad()`` makes it DISABLED), or inherited
    from whoever calls the enclosing function, resolved once every call site in
    the file has been seen.
    """

    fixed: Mode | None = None
    inherited_from: FunctionInfo | None = None
    # Inside torch.inference_mode(), enable_grad() does not make in-place ops on
    # leaves fail again (measured with torch 2.13): it stays effectively disabled.
    inference: bool = False

    def possible(self) -> frozenset[Mode]:
        """Modes this point can run in.  Only meaningful after the file is analysed."""
        if self.fixed is not None:
            return frozenset({self.fixed})
        assert self.inherited_from is not None
        return self.inherited_from.possible_modes()

    def may_be_enabled(self) -> bool:
        """True when some call path definitely runs this point with grad enabled."""
        return Mode.ENABLED in self.possible()

    def is_disabled(self) -> bool:
        return self.possible() == frozenset({Mode.DISABLED})

    @property
    def statically_disabled(self) -> bool:
        return self.fixed is Mode.DISABLED

    @property
    def statically_enabled(self) -> bool:
        return self.fixed is Mode.ENABLED


ENABLED = GradMode(Mode.ENABLED)
DISABLED = GradMode(Mode.DISABLED)
INFERENCE = GradMode(Mode.DISABLED, inference=True)
UNKNOWN_MODE = GradMode(Mode.UNKNOWN)

# Methods the framework calls with grad enabled even when the file also calls them under no_grad.
CALLED_WITH_GRAD_BY_FRAMEWORK = frozenset({"forward", "training_step"})


@dataclass(eq=False)
class FunctionInfo:
    name: str
    node: cst.FunctionDef
    parent_scope: Scope
    cls: ClassInfo | None = None
    # Mode set by a decorator (@torch.no_grad() ...), else None: inherited from callers.
    decorator_mode: GradMode | None = None
    call_modes: list[GradMode] = field(default_factory=list)
    # What each call site seen passes: parameter name -> value (None: not determined there).
    call_arguments: list[dict[str, Value] | None] = field(default_factory=list)
    # A method: the grad modes of the calls ``x.<name>(...)`` whose receiver is not known
    # (``self.optim.step()``), shared by every method of that name; used when no call site
    # resolves to the method itself.
    unresolved_call_modes: list[GradMode] = field(default_factory=list)
    # Whether the body yields (None: not looked at yet; see summaries.py).
    is_generator: bool | None = None
    # What its ``return`` statements return, in the order analysed (complete after the file).
    returns: list[Value] = field(default_factory=list)
    _resolving: bool = False
    _resolved: frozenset[Mode] | None = None

    @property
    def runs_as_forward(self) -> bool:
        """A method of a module class the framework runs with grad: ``forward`` (or the
        ``__call__`` of a class without one), ``training_step``."""
        if self.cls is None or not self.cls.is_module:
            return False
        if self.name == "__call__":
            return self.cls.forward_method() is self
        return self.name in CALLED_WITH_GRAD_BY_FRAMEWORK

    @property
    def is_method(self) -> bool:
        """Bound to an instance: its first parameter is ``self``."""
        return self.cls is not None and not any(
            isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod")
            for d in self.node.decorators
        )

    @property
    def is_property(self) -> bool:
        """Decorated ``@property`` / ``@cached_property`` / ``@<name>.setter``: read as an attribute."""
        for decorator in self.node.decorators:
            expr = decorator.decorator
            name = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else ""
            if name in ("property", "cached_property", "setter", "getter"):
                return True
        return False

    @property
    def entry_mode(self) -> GradMode:
        return self.decorator_mode or GradMode(inherited_from=self)

    def possible_modes(self) -> frozenset[Mode]:
        if self._resolved is not None:
            return self._resolved
        if self._resolving:  # recursion: no information from this path
            return frozenset({Mode.UNKNOWN})
        self._resolving = True
        modes: set[Mode] = set()
        for call_mode in self.call_modes or self.unresolved_call_modes:
            modes |= call_mode.possible()
        if self.runs_as_forward:
            modes.add(Mode.ENABLED)
        if not modes:
            # Nothing in the file calls it (imported and called elsewhere, a method of a
            # class built elsewhere, a test): it runs in grad mode, torch's default.
            # A framework hook known to run without grad is the exception.
            modes.add(Mode.DISABLED if self._called_without_grad_by_framework() else Mode.ENABLED)
        self._resolving = False
        self._resolved = frozenset(modes)
        return self._resolved


    def _called_without_grad_by_framework(self) -> bool:
        from torchlint.analysis.torch_api import CALLED_WITHOUT_GRAD_BY_FRAMEWORK

        return self.cls is not None and self.name in CALLED_WITHOUT_GRAD_BY_FRAMEWORK


@dataclass(eq=False)
class ClassInfo:
    name: str
    node: cst.ClassDef
    bases: list[ClassInfo | str] = field(default_factory=list)
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    # What ``self.<attr>`` holds after __init__ (or, when __init__ does not set it,
    # the join over the other methods that do).
    init_attrs: dict[str, Value] = field(default_factory=dict)
    other_attrs: dict[str, Value] = field(default_factory=dict)
    _attribute_uses: AttributeUses | None = None

    def attribute_uses(self) -> AttributeUses:
        """Which methods assign, change in place and read each ``self.<attr>`` (``analysis/attributes.py``)."""
        if self._attribute_uses is None:
            from torchlint.analysis.attributes import attribute_uses

            self._attribute_uses = attribute_uses(self.node)
        return self._attribute_uses

    @property
    def is_module(self) -> bool:
        from torchlint.analysis.torch_api import NN_MODULE_BASE

        for base in self.bases:
            if isinstance(base, ClassInfo):
                if base.is_module:
                    return True
            elif base == NN_MODULE_BASE or base.startswith("torch.nn."):
                return True
        return False

    def attr(self, name: str) -> Value | None:
        if name in self.init_attrs:
            return self.init_attrs[name]
        if name in self.other_attrs:
            return self.other_attrs[name]
        for base in self.bases:
            if isinstance(base, ClassInfo):
                found = base.attr(name)
                if found is not None:
                    return found
        return None

    def forward_method(self) -> FunctionInfo | None:
        """The method calling an instance of this module class runs: its ``forward``, or the
        ``__call__`` it overrides ``nn.Module.__call__`` with when it defines no ``forward``."""
        return self.method("forward") or self.method("__call__")

    def method(self, name: str) -> FunctionInfo | None:
        if name in self.methods:
            return self.methods[name]
        for base in self.bases:
            if isinstance(base, ClassInfo):
                found = base.method(name)
                if found is not None:
                    return found
        return None

    def record_attr(self, method: str, attr: str, value: Value) -> None:
        if method == "__init__":
            self.init_attrs[attr] = value
        elif attr in self.other_attrs:
            self.other_attrs[attr] = join(self.other_attrs[attr], value)
        else:
            self.other_attrs[attr] = value


@dataclass(eq=False)
class Scope:
    kind: str  # "module" | "function" | "class"
    parent: Scope | None
    function: FunctionInfo | None = None
    cls: ClassInfo | None = None
    # Flow-sensitive state: what each name (or dotted "self.w") holds right now.
    values: dict[str, Value] = field(default_factory=dict)
    # Flow-insensitive join of every binding, for reads from functions defined here.
    summary: dict[str, Value] = field(default_factory=dict)
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    deferred: list[FunctionInfo] = field(default_factory=list)
    mode_stack: list[GradMode] = field(default_factory=list)
    # The module scope: functions defined further down that a function body analysed before
    # their ``def`` (``__init__``, at its class's end) calls, by id of the ``def`` node.
    later_functions: dict[int, FunctionInfo] = field(default_factory=dict)

    @property
    def module(self) -> Scope:
        """The module scope this one is (nested) in."""
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def bind(self, key: str, value: Value) -> None:
        prefix = key + "."
        for stale in [k for k in self.values if k.startswith(prefix)]:
            del self.values[stale]
        self.values[key] = value
        self.summary[key] = join(self.summary[key], value) if key in self.summary else value

    def refine(self, key: str, known: Value, better: Value) -> None:
        """``key`` still holds the object it held (``known``), now known better (a name of
        unknown value that ``.eval()`` was called on is a module): where the flow-insensitive
        summary had only that binding, the summary is refined too."""
        self.values[key] = better
        summarised = self.summary.get(key)
        self.summary[key] = better if summarised is None or summarised == known else join(summarised, better)

    def lookup(self, key: str) -> Value | None:
        found = self.values.get(key)
        if found is not None:
            return found
        scope = self.parent
        while scope is not None:
            if scope.kind != "class":
                found = scope.summary.get(key)
                if found is not None:
                    return found
            scope = scope.parent
        return None

    def find_function(self, name: str) -> FunctionInfo | None:
        scope: Scope | None = self
        while scope is not None:
            if scope.kind != "class" or scope is self:
                if name in scope.functions:
                    return scope.functions[name]
            scope = scope.parent
        return None

    def find_class(self, name: str) -> ClassInfo | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.classes:
                return scope.classes[name]
            scope = scope.parent
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


NOT_BOUND = Bindings((), False)


class BindingTable:
    """What the statements of one body (a function's, the module's, a loop's) bind, nested
    functions and classes excluded; found by one walk (``BindingCollector``)."""

    def __init__(self, collector: BindingCollector) -> None:
        self._sites = collector.sites
        self._declared = collector.declared
        # Every key a statement here binds or changes by assignment: names, ``self.h``, the
        # container of ``h[0] = ...`` (targets of assignments, loops, ``with``, ``del``, ``:=``).
        self.keys: frozenset[str] = frozenset(collector.keys)
        # Keys made a leaf (or cut from the graph) in place here: ``x.requires_grad = ...``,
        # ``x.requires_grad_(...)``, ``x.detach_()`` (nested functions included).
        self.made_leaf: frozenset[str] = frozenset(collector.made_leaf)
        # Keys bound to a new object here: targets of ``=``, ``:=``, an annotated assignment with
        # a value and ``with ... as`` (not ``+=``, which updates, nor ``h[0] = ...``, nor loop targets).
        self.rebound: frozenset[str] = frozenset(collector.rebound)
        # Keys bound by the targets of the ``for`` loops here (nested loops included).
        self.loop_targets: frozenset[str] = frozenset(collector.loop_targets)
        self._bound_only_by: dict[str, tuple[frozenset[type], bool]] = {}  # see ``bound_only_by``

    def of(self, name: str) -> Bindings:
        sites = self._sites.get(name)
        if sites is None and name not in self._declared:
            return NOT_BOUND
        return Bindings(tuple(sites or ()), name in self._declared)

    def bound_only_by(self, name: str, site_types: frozenset[type]) -> bool:
        """Whether ``name`` is bound here, only by sites of ``site_types``, and not declared
        outside: ``of(name)``'s sites and flag, remembered per name (asked at every join)."""
        known = self._bound_only_by.get(name)
        if known is None or known[0] is not site_types:
            sites = self._sites.get(name)
            answer = name not in self._declared and bool(sites) and all(type(site) in site_types for site in sites)
            known = self._bound_only_by[name] = (site_types, answer)
        return known[1]


class BindingCollector(cst.CSTVisitor):
    """Walks a body once for ``BindingTable``."""

    def __init__(self) -> None:
        self.sites: dict[str, list[cst.CSTNode]] = {}
        self.declared: set[str] = set()
        self.keys: set[str] = set()
        self.made_leaf: set[str] = set()
        self.rebound: set[str] = set()
        self.loop_targets: set[str] = set()
        self._depth = 0  # nested function/class/lambda/comprehension depth
        self._function_depth = 0  # nested function/class/lambda depth (``:=`` binds outside comprehensions)

    def _bind(self, target: cst.CSTNode, site: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self.sites.setdefault(target.value, []).append(site)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, site)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, site)

    def _bind_all(self, target: cst.BaseExpression, site: cst.CSTNode) -> None:
        """``target``'s names at ``site``, and the keys it changes."""
        self._bind(target, site)
        self.keys.update(target_keys(target))

    def _rebind(self, target: cst.BaseExpression) -> None:
        if type(target) is cst.Name:
            self.rebound.add(target.value)  # (most targets: no set built)
        else:
            self.rebound.update(target_keys(target, containers=False))

    def _nested(self, node: cst.CSTNode) -> bool:
        if self._depth == 0 and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.sites.setdefault(node.name.value, []).append(node)
            self.keys.add(node.name.value)
        self._depth += 1
        self._function_depth += 1
        return True

    def _unnest(self, node: cst.CSTNode) -> None:
        self._depth -= 1
        self._function_depth -= 1

    def _comprehension(self, node: cst.CSTNode) -> bool:
        self._depth += 1
        return True

    def _leave_comprehension(self, node: cst.CSTNode) -> None:
        self._depth -= 1

    visit_FunctionDef = visit_ClassDef = visit_Lambda = _nested
    leave_FunctionDef = leave_ClassDef = leave_Lambda = _unnest
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension
    leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = _leave_comprehension

    def visit_Parameters(self, node: cst.Parameters) -> bool:
        return False  # a nested function's parameters are its own

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if self._depth == 0:
                self._bind_all(target.target, node)
                self._rebind(target.target)
            if isinstance(target.target, cst.Attribute) and target.target.attr.value == "requires_grad":
                self._made_leaf(target.target.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._depth == 0:
            if node.value is not None:
                self._bind(node.target, node)
                self._rebind(node.target)
            self.keys.update(target_keys(node.target))

    def _binds_its_target(self, node: cst.AugAssign | cst.For | cst.Del) -> None:
        if self._depth == 0:
            self._bind_all(node.target, node)

    visit_AugAssign = visit_Del = _binds_its_target

    def visit_For(self, node: cst.For) -> None:
        if self._depth == 0:
            self._bind_all(node.target, node)
            self.loop_targets.update(target_keys(node.target, containers=False))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if self._depth == 0 and node.asname is not None:
            self._bind_all(node.asname.name, node)
            self._rebind(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if self._depth == 0 and node.name is not None:
            self._bind(node.name.name, node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self._function_depth == 0:  # binds in the enclosing function even inside a comprehension
            self._bind_all(node.target, node)
            self._rebind(node.target)

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

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("requires_grad_", "detach_"):
            self._made_leaf(func.value)

    def _made_leaf(self, receiver: cst.BaseExpression) -> None:
        key = dotted_name(receiver)
        if key is not None:
            self.made_leaf.add(key)


def target_keys(target: cst.BaseExpression, containers: bool = True) -> set[str]:
    """The keys an assignment to ``target`` changes: ``h`` and ``self.h`` for those targets, the
    container ``h`` for ``h[0]`` (changed in place; left out without ``containers``), each
    element's for a tuple target."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return {key for element in target.elements for key in target_keys(element.value, containers)}
    if isinstance(target, cst.StarredElement):
        return target_keys(target.value, containers)
    key = dotted_name(target)
    if key is not None:
        return {key}
    root = subscript_root(target) if containers else None
    return {root} if root else set()


def subscript_root(target: cst.BaseExpression) -> str | None:
    """``h`` for ``h[0][1]`` (and for ``h`` itself)."""
    while isinstance(target, cst.Subscript):
        target = target.value
    return dotted_name(target)


def parameter_names(node: cst.FunctionDef) -> set[str]:
    params = node.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


__all__ = [
    "Bindings", "BindingTable", "ClassInfo", "DISABLED", "ENABLED", "FunctionInfo", "GradMode", "Kind", "Mode", "Scope",
    "UNKNOWN", "UNKNOWN_MODE", "Value",
]
