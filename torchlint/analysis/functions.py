"""Classes, functions and calls, mixed into the ``Analyzer``.

Function bodies run when they are called, so they are analysed after the code that defines
them (module, class body or enclosing function) is finished: free names then read the
flow-insensitive summary of the defining scope, and class methods see what ``__init__`` put
on ``self``.  Every call of a function of this file records its grad mode and the values it
passes (the call graph); a function's parameters are bound to what every call site agrees
on.  A helper's return value at a call site is its summary (``summaries.py``), computed by a
rule-less analyzer made with ``for_summary``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

from torchlint import interrupt
from torchlint.analysis import summaries
from torchlint.analysis.call_sites import CallSiteValues
from torchlint.analysis.importers import values_from_importers
from torchlint.analysis.forward_sites import forward_call_count
from torchlint.analysis.names import count_calls, count_headers, dotted_name, header_counts, names_in_class_bases
from torchlint.analysis.scopes import UNKNOWN_MODE, ClassInfo, FunctionInfo, Scope
from torchlint.analysis.values import UNKNOWN, Kind, Value, join_call_sites
from torchlint.analysis.walk import OwnBodyVisitor, scan

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

_NAME_OR_ATTRIBUTE = frozenset({cst.Name, cst.Attribute})

# What a parameter may be bound to from its call sites: facts a rule can act on.
_CALL_SITE_KINDS = frozenset({Kind.LEAF, Kind.NONLEAF, Kind.PLAIN, Kind.MODULE, Kind.OPTIMIZER})

# Built-ins handed a class or function that never call it: ``super(Net, self).__init__()`` does
# not make ``Net.__init__`` run in an unknown grad mode.
_NEVER_CALL_THEIR_ARGUMENTS = frozenset({"super", "isinstance", "issubclass", "type", "id", "hasattr", "getattr"})

_SUPER_INIT = re.compile(r"\bsuper\s*\([^()]*\)\s*\.\s*__init__\s*\(")
_ASSIGNED_ATTRIBUTE = re.compile(r"\.\s*(\w+)\s*=\s*[A-Za-z_][\w.]*\s*\(")  # `self.sub = Sub(`


class _GradReadCollector(OwnBodyVisitor):
    """Names whose ``.grad`` is read in a function body (nested functions excluded), and
    names the body itself makes require grad (``x.requires_grad = True``, ``x.requires_grad_()``)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.made_to_require_grad: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            if node.attr.value == "grad":
                self.names.add(node.value.value)
            elif node.attr.value in ("requires_grad", "requires_grad_"):
                self.made_to_require_grad.add(node.value.value)

    @property
    def assumed_leaves(self) -> set[str]:
        """Names whose ``.grad`` is read without the body making them a leaf first: a
        parameter among them must be handed in as a leaf that requires grad."""
        return self.names - self.made_to_require_grad



def _assumed_leaves(body: cst.BaseSuite) -> frozenset[str]:
    collector = _GradReadCollector()
    scan(body, collector)
    return frozenset(collector.assumed_leaves)


def _function_of_param(value: Value, table: dict[int, tuple[cst.Param, FunctionInfo]]) -> FunctionInfo | None:
    """For the value a parameter was bound to (still its own, tagged "param"): its function, when
    ``table`` (id(parameter) -> (it, its function)) holds the parameter."""
    origin = value.origin
    if type(origin) is not cst.Param or "param" not in value.tags:
        return None
    known = table.get(id(origin))
    return known[1] if known is not None and known[0] is origin else None


class Functions:
    """Mixin of ``Analyzer`` (uses its ``scope``, ``value_of``, ``grad_mode``, ``_walk`` ...)."""

    @property
    def function(self) -> FunctionInfo | None:
        scope: Scope | None = self.scope
        while scope is not None and scope.function is None:
            scope = scope.parent
        return scope.function if scope else None

    @property
    def region(self) -> cst.CSTNode:
        """The function being analysed, or the module outside any (where a name's uses are)."""
        function = self.function
        return function.node if function is not None else self.module  # type: ignore[attr-defined]

    def resolve_function(self, func: cst.BaseExpression) -> FunctionInfo | None:
        """The function defined in this file that calling ``func`` at the current point runs:
        ``helper`` (a function in scope), ``self.method`` / ``obj.method`` (a method of a class
        defined here), ``Cls`` (its ``__init__``); None when its body is not in this file.
        Its body is analysed later, so ask about it from a ``when=`` condition or ``finish``."""
        return self._resolve_callee(func)

    # ------------------------------------------------------------ classes and functions
    def _enter_ClassDef(self, node: cst.ClassDef) -> None:
        bases: list[ClassInfo | str] = []
        for arg in node.bases:
            if arg.keyword is not None:
                continue
            qualified = self.qualify(arg.value)
            if qualified is not None:
                bases.append(qualified)
            elif isinstance(arg.value, cst.Name) and self.scope.find_class(arg.value.value):
                bases.append(self.scope.find_class(arg.value.value))  # type: ignore[arg-type]
            else:
                bases.append(dotted_name(arg.value) or "?")
        info = ClassInfo(node.name.value, node, bases)
        self.scope.classes[info.name] = info
        self.scope.bind(info.name, UNKNOWN)
        self.scope = Scope("class", self.scope, cls=info, mode_stack=[self.grad_mode])

    def _leave_ClassDef(self, node: cst.ClassDef) -> None:
        class_scope = self.scope
        assert class_scope.parent is not None
        self.scope = class_scope.parent
        # Instances are made (and __init__ runs) before the rest of the module uses
        # them, so __init__ is analysed now; other methods run later.
        for method in [m for m in class_scope.deferred if m.name == "__init__"]:
            class_scope.deferred.remove(method)
            self._analyse_function(method)
        self.scope.deferred.extend(class_scope.deferred)

    def _enter_FunctionDef(self, node: cst.FunctionDef) -> bool:
        cls = self.scope.cls if self.scope.kind == "class" else None
        info = FunctionInfo(node.name.value, node, self.scope, cls=cls, decorator_mode=self._decorator_mode(node))
        if cls is not None:
            cls.methods[info.name] = info
            info.unresolved_call_modes = self._unresolved_calls_by_name.setdefault(info.name, [])
        else:
            info = self.scope.later_functions.pop(id(node), info)  # (called before this `def`)
            self.scope.functions[info.name] = info
        self.scope.bind(info.name, UNKNOWN)
        self.scope.deferred.append(info)
        return False

    def _enter_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _run_deferred(self, scope: Scope) -> None:
        """Analyse the functions defined in ``scope``, each after the ones that call it where
        possible: a function whose calls in the file are not all recorded yet waits (once)
        until the others are done, so its parameters and grad mode come from every call site
        (``def train(model, loss): ...`` above ``def main(): train(net, criterion)``)."""
        postponed: set[int] = set()
        deferred = scope.deferred
        while deferred:
            info = deferred.pop(0)
            interrupt.check()  # a function at a time: the language server may give up a stale lint
            if deferred and id(info) not in postponed and self._calls_pending(info):
                postponed.add(id(info))
                deferred.append(info)
                continue
            self._analyse_function(info)

    def _calls_pending(self, info: FunctionInfo) -> bool:
        """A plain function some of whose calls are not recorded yet.  Methods keep the order
        they are written in: one reads what an earlier one left on ``self``."""
        return info.cls is None and len(info.call_arguments) < self._call_site_count(info.name)

    def _analyse_function(self, info: FunctionInfo) -> None:
        outer_scope, outer_statement, outer_loops, outer_compound = self.scope, self.statement, self.loops, self.compound
        # A method's body sees module (not class) names; keep the class for `self`.
        parent = info.parent_scope.parent if info.parent_scope.kind == "class" else info.parent_scope
        scope = Scope("function", parent, function=info, mode_stack=[info.entry_mode])
        self.scope, self.statement, self.loops, self.compound = scope, None, [], []
        grad_reads: frozenset[str] = frozenset()
        if self._grad_reads_enabled:
            grad_reads = self.memo.get("assumed-leaves", info.node.body, _assumed_leaves)
        self._grad_reads.append(grad_reads)
        self._bind_parameters(info, grad_reads)
        self._walk(info.node.body)
        self._run_deferred(scope)
        self._grad_reads.pop()
        self.scope, self.statement, self.loops, self.compound = outer_scope, outer_statement, outer_loops, outer_compound

    def _bind_parameters(
        self, info: FunctionInfo, grad_reads: frozenset[str], passed: dict[str, Value] | None = None
    ) -> None:
        params = info.node.params
        ordered = [*params.posonly_params, *params.params]
        is_method = info.is_method
        if passed is None:
            passed = self._values_from_every_call_site(info)
        for index, param in enumerate([*ordered, *params.kwonly_params]):
            name = param.name.value
            if index == 0 and is_method and info.cls is not None:
                kind = Kind.MODULE if info.cls.is_module else Kind.OBJECT
                self.scope.bind(name, Value(kind, param, cls=info.cls))
            elif name in passed:
                value = passed[name]
                # A module keeps the call that built it (``torch_class`` reads it); an optimizer
                # does not: the module names in its constructor are the caller's.  A module built
                # from one of several classes keeps them (``alternatives``).
                origin = value.origin if value.kind is Kind.MODULE else param
                self.scope.bind(name, Value(value.kind, origin, value.cls, value.element, value.items,
                                            value.tags | {"param", "from-call-sites"}, value.alternatives))
            elif name in grad_reads:
                self.scope.bind(name, Value(Kind.LEAF, param, tags=frozenset({"param", "assumed-leaf"})))
            else:
                self.scope.bind(name, Value(Kind.UNKNOWN, param, tags=frozenset({"param"})))
                if type(param.default) is cst.Call:  # (see ``default_when_never_passed``)
                    self._defaulted_params[id(param)] = (param, info)
                elif info.cls is not None and self._summarising is None:  # (``passed_by_importers``)
                    self._method_params[id(param)] = (param, info)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.scope.bind(star.name.value, UNKNOWN)

    def _values_from_every_call_site(self, info: FunctionInfo) -> dict[str, Value]:
        """Parameter -> what every call site in the file passes for it, when all of them are
        seen and agree on a tensor, module or optimizer (a helper that writes into the
        Parameter it is handed, ``fill(self.emb.weight)``)."""
        sites = info.call_arguments
        if not sites or any(site is None for site in sites):
            return {}
        if len(sites) != self._sites_in_source(info):
            return {}  # some call sites are analysed later, or are not calls we resolve
        agreed: dict[str, Value] = {}
        for name in set.intersection(*(set(site) for site in sites if site is not None)):
            value = join_call_sites([site[name] for site in sites])  # type: ignore[index]
            if value.kind in _CALL_SITE_KINDS:
                agreed[name] = value
        agreed.update(self._defaults_no_site_passes(info, sites))  # type: ignore[arg-type]
        return agreed

    def _sites_in_source(self, info: FunctionInfo) -> int | None:
        """How many calls of ``info`` the source spells (None: not known); a class's ``__init__``
        is called as ``Cls(...)`` too (its ``class Cls(...)`` line aside)."""
        if info.name in ("forward", "__call__") and info.runs_as_forward and info.is_method:
            # A module class's ``forward`` runs when an instance is called (``forward_sites.py``).
            counts = self._forward_counts
            if info.cls.name not in counts:
                counts[info.cls.name] = forward_call_count(self.source, info.cls.name)
            return counts[info.cls.name]
        count = self._call_site_count(info.name, info.cls is not None)
        if info.name != "__init__" or info.cls is None:
            return count
        counts = self._call_counts
        assert counts is not None  # (filled by the count above)
        key = f"class {info.cls.name}"  # (no name has a space)
        if key not in counts:
            if names_in_class_bases(info.cls.name, self.source):
                counts[key] = -1 - count  # a subclass runs it through `super().__init__()`, unresolved
            else:
                # `Cls(...)` (not its `class Cls(` line); the file's `super().__init__()` calls are
                # other classes' (none derives from this one).
                counts[key] = (
                    self._call_site_count(info.cls.name, False)
                    - count_headers("class", info.cls.name, self.source)
                    - len(_SUPER_INIT.findall(self.source))
                )
        return count + counts[key]

    def _defaults_no_site_passes(self, info: FunctionInfo, sites: list[dict[str, Value]]) -> dict[str, Value]:
        """Parameter -> its default's value, for a parameter no call site in the file passes
        (``def run(model, loss_func=nn.CrossEntropyLoss())`` called as ``run(net)``)."""
        params = info.node.params
        found: dict[str, Value] = {}
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            value = self._default_value(param, sites)
            if value is not None:
                found[param.name.value] = value
        return found

    def _default_value(self, param: cst.Param, sites: list[dict[str, Value]]) -> Value | None:
        """What a default built by a call (``nn.CrossEntropyLoss()``) holds, when no site passes
        the parameter; a name as default may be rebound before the call runs: None."""
        if type(param.default) is not cst.Call or any(param.name.value in site for site in sites):
            return None
        value = self.value_of(param.default)
        return value if value.kind in _CALL_SITE_KINDS else None

    def default_when_never_passed(self, value: Value) -> Value | None:
        """For a parameter's value (``self.loss_func = loss_func`` in ``__init__``): its default's
        value when every call in the file is seen and none passes it (``Trainer()``); None
        otherwise.  Ask once the file is analysed (from a ``when=`` condition or ``finish``)."""
        info = _function_of_param(value, self._defaulted_params)
        if info is None:
            return None
        sites = info.call_arguments
        if not sites or any(site is None for site in sites) or len(sites) != self._sites_in_source(info):
            return None
        return self._default_value(value.origin, sites)  # type: ignore[arg-type]

    def passed_by_importers(self, value: Value) -> Value | None:
        """For a method's parameter's value (``self.loss_op = loss_op`` in ``add_loss_op``, read
        as ``self.loss_op`` in another method): the module every call of the method in the files
        importing this one passes (``model.add_loss_op(nn.NLLLoss())`` in train.py), when the
        file never calls the method itself (``importers.py``); None otherwise."""
        info = _function_of_param(value, self._method_params)
        if info is None:
            return None
        passed = self._importer_values.get(id(info))
        if passed is None:
            passed = self._importer_values[id(info)] = values_from_importers(self, info)
        return passed.get(value.origin.name.value)  # type: ignore[union-attr]

    def _call_site_count(self, name: str, method: bool = True) -> int:
        """How many calls name the function in the source (``f(...)``, and for a ``method``
        ``x.f(...)``), counted from the text: comments and strings only add to it (then no
        call-site binding)."""
        counts = self._call_counts
        if counts is None:
            counts = self._call_counts = {}
        key = name if method else f"{name}()"  # (a name is no identifier with parentheses)
        if key not in counts:
            if self._def_headers is None:
                self._def_headers = header_counts("def", self.source)
            counts[key] = count_calls(name, self.source, after_dot=method) - self._def_headers.get(name, 0)
        return counts[key]

    # ------------------------------------------------------------ call graph
    # Runs for every call: exact type tests, not ``isinstance`` (slow on libcst's ABCs).
    def _enter_Call(self, node: cst.Call) -> None:
        if self.event_index is not None:
            self.event_index.note(self, node)  # (a rule asked: ``track_autograd_events``)
        if self._summarising is not None:
            return  # a look into a helper: the real analysis records its calls
        if self.project is not None and self.project.depth:
            self._note_project_call(node)  # (a file read for another: its calls of that one's functions)
        callee = self._resolve_callee(node.func)
        if callee is not None:
            callee.call_modes.append(self.grad_mode)
            callee.call_arguments.append(self.arguments_passed(node, callee))
        elif type(node.func) is not cst.Attribute:
            self._note_forward_call(node)  # `net(x)`
        else:
            name = node.func.attr.value
            recorded = name in self._holders_of_instances() and self._note_forward_call(node)  # `self.hyper(a, w)`
            if not recorded and not name.startswith("__"):  # `super().__init__()` runs another class's method
                self._unresolved_calls_by_name.setdefault(name, []).append(self.grad_mode)
        if type(node.func) is cst.Name and node.func.value in _NEVER_CALL_THEIR_ARGUMENTS:
            return
        for arg in node.args:
            # A function handed to someone else may be called in any mode.
            if type(arg.value) in _NAME_OR_ATTRIBUTE:
                passed = self._resolve_callee(arg.value)
                if passed is not None:
                    passed.call_modes.append(UNKNOWN_MODE)

    def _holders_of_instances(self) -> frozenset[str]:
        """The attributes a module of this file may be called through: a submodule called as
        ``self.<attr>(...)`` was stored as ``self.<attr> = Cls(...)`` (other attribute calls,
        ``x.view(...)``, ``torch.cat(...)``, are not looked at)."""
        if self._forward_holders is None:
            self._forward_holders = frozenset(
                _ASSIGNED_ATTRIBUTE.findall(self.source) if "def forward" in self.source else ())
        return self._forward_holders

    def _note_forward_call(self, node: cst.Call) -> bool:
        """A call of an instance of a module class of this file (``net(x)``, ``self.hyper(a, w)``)
        runs its ``forward``: recorded as a call of it."""
        module = self.value_of(node.func)
        forward = module.cls.forward_method() if module.kind is Kind.MODULE and module.cls else None
        if forward is None:
            return False
        forward.call_modes.append(self.grad_mode)
        forward.call_arguments.append(self.arguments_passed(node, forward))
        return True

    # ------------------------------------------------------------ helper summaries
    @classmethod
    def for_summary(cls, caller: Analyzer) -> Analyzer:
        """A rule-less analyzer that looks into a helper on behalf of ``caller``."""
        helper = cls(caller.module, caller.source)
        helper.imports = caller.imports
        helper.qualify = caller.imports.qualify  # type: ignore[method-assign]
        if caller.qualify != caller.imports.qualify:  # the caller's file binds torch aliases
            helper.qualify = helper._qualify_through_aliases  # type: ignore[method-assign]
        helper.summaries = caller.summaries
        helper.memo = caller.memo
        helper.summary_depth = caller.summary_depth + 1
        helper._grad_reads_enabled = caller._grad_reads_enabled
        helper._entry_mode = caller.grad_mode
        # Values a helper returns were made in it: the caller answers questions about them.
        helper.project = caller.project
        helper._project_makers = caller._project_makers
        helper._project_forwards = caller._project_forwards
        helper._defaulted_params = caller._defaulted_params
        helper._top_level_defs = caller._top_level_defs
        return helper

    def summarise(self, info: FunctionInfo, passed: dict[str, Value]) -> Value:
        """Analyse ``info``'s body with its parameters bound to ``passed``; the join of what
        its ``return`` statements give."""
        parent = info.parent_scope.parent if info.parent_scope.kind == "class" else info.parent_scope
        mode = info.decorator_mode or self._entry_mode
        self.scope = Scope("function", parent, function=info, mode_stack=[mode])
        self._summarising = info
        self._bind_parameters(info, frozenset(), passed)
        self._walk(info.node.body)
        return summaries.join_returns(self._returns)

    def _leave_Return(self, node: cst.Return) -> None:
        if self._summarising is not None:
            if self.scope.function is self._summarising:
                self._returns.append(self.value_of(node.value) if node.value is not None else UNKNOWN)
                graph = self.module_graph
                if graph is not None and node.value is not None:
                    graph.note_return(node.value)  # an effects analysis (``effects.py``)
            return
        self._note_return(node)  # the file's own analysis: what each function returns (facts.py)
        if self.module_graph is not None and node.value is not None:
            self.module_graph.note_return(node.value)  # what a call of it makes again (module_graph.py)

    def value_given_call_sites(self, node: cst.BaseExpression) -> Callable[[], Value | None] | None:
        """What ``node`` (being visited, in a function) holds when the function's parameters are
        bound to what every call site in the file passes: a question to ask once the file is
        analysed (a method is analysed before the later methods that call it), answered None
        when the call sites do not agree or are not all seen (``call_sites.py``)."""
        function = self.function
        if function is None or self._summarising is not None:
            return None
        if self._call_site_values is None:
            self._call_site_values = CallSiteValues(self)
        return self._call_site_values.ask(function, node)

    def arguments_passed(self, call: cst.Call, callee: FunctionInfo) -> dict[str, Value] | None:
        """Parameter name -> the value this call passes for it (None when ``*args`` /
        ``**kwargs`` hide which argument goes where)."""
        expressions = argument_expressions(call, callee)
        if expressions is None:
            return None
        return {name: self.value_of(expression) for name, expression in expressions.items()}

    def _resolve_callee(self, func: cst.BaseExpression) -> FunctionInfo | None:
        if type(func) is cst.Name:
            found = self.scope.find_function(func.value)
            if found is not None:
                return found
            cls = self.scope.find_class(func.value)
            if cls is not None:
                return cls.method("__init__")
            defs = self._top_level_defs
            if defs is None:
                defs = self._top_level_defs = _top_level_functions(self.module)
            return self._later_function(func.value, defs[func.value]) if func.value in defs else None
        if type(func) is cst.Attribute:
            receiver = self.value_of(func.value)
            if receiver.cls is not None:
                return receiver.cls.method(func.attr.value)
            return None
        return None

    def _later_function(self, name: str, node: cst.FunctionDef) -> FunctionInfo | None:
        """The module's one top-level ``def name`` further down, called from a function body
        analysed before it: ``__init__`` runs when an instance is made, after the module has
        defined everything (``self.model = parse_model(cfg)`` above ``def parse_model``).
        None at module level (a call before the ``def`` fails) and when the name is bound
        otherwise (imported, assigned, defined twice)."""
        if self.function is None:
            return None
        module_scope = self.scope.module
        if name in module_scope.values or name in self.imports.aliases:
            return None
        info = module_scope.later_functions.get(id(node))
        if info is None:
            info = FunctionInfo(name, node, module_scope, decorator_mode=self._decorator_mode(node))
            module_scope.later_functions[id(node)] = info
        return info


def _top_level_functions(module: cst.Module) -> dict[str, cst.FunctionDef]:
    """Name -> the module's top-level ``def`` of it, for names bound by nothing else at top
    level (a second ``def``, an assignment or an import of the same name drops it)."""
    found: dict[str, cst.FunctionDef] = {}
    other: set[str] = set()
    for statement in module.body:
        if type(statement) is cst.FunctionDef:
            name = statement.name.value
            if name in found:
                other.add(name)
            found[name] = statement
        elif type(statement) is cst.ClassDef:
            other.add(statement.name.value)
        elif type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                for target in _bound_names(small):
                    other.add(target)
    for name in other:
        found.pop(name, None)
    return found


def _bound_names(small: cst.BaseSmallStatement) -> list[str]:
    """Names a top-level small statement binds (assignment targets, imports)."""
    if type(small) is cst.Assign:
        return [t.target.value for t in small.targets if type(t.target) is cst.Name]
    if type(small) in (cst.AnnAssign, cst.AugAssign):
        return [small.target.value] if type(small.target) is cst.Name else []  # type: ignore[attr-defined]
    if type(small) in (cst.Import, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):  # type: ignore[attr-defined]
        return [
            (alias.asname.name if alias.asname else alias.name).value  # type: ignore[union-attr]
            for alias in small.names  # type: ignore[attr-defined]
            if type(alias.asname.name if alias.asname else alias.name) is cst.Name  # type: ignore[union-attr]
        ]
    return []


def argument_expressions(call: cst.Call, callee: FunctionInfo) -> dict[str, cst.BaseExpression] | None:
    """Parameter name -> the argument expression ``call`` passes for it (None when ``*args`` /
    ``**kwargs`` hide which argument goes where)."""
    if any(arg.star for arg in call.args):
        return None
    params = callee.node.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if callee.is_method:
        positional = positional[1:]  # `self` (or `cls`) is the receiver
    passed: dict[str, cst.BaseExpression] = {}
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            passed[arg.keyword.value] = arg.value
        elif index < len(positional):
            passed[positional[index]] = arg.value
            index += 1
    return passed
