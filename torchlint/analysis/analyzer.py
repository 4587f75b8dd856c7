"""The analysis pass: one libcst traversal that tracks what names hold and which
grad mode is active, and drives every enabled rule from the same traversal.

Rules see the program state *before* the statement they visit takes effect:
bindings are applied when a statement is left, after the rules' ``visit_*`` and
``leave_*`` hooks for it have run.

The ``Analyzer`` is the semantic model rules query (``ctx.<question>``); its parts are
mixins, one module each:

- ``evaluate.Evaluation``: what an expression holds (``value_of``, ``mentions_gradient``),
  with ``facts.ValueFacts`` for output and conversion facts;
- ``grad_modes.GradModes``: the grad mode at the current point (``grad_mode``);
- ``bindings.BindingState``: what assignments, loops and in-place calls bind (flow-sensitive
  values), and each body's binding table (``binding_table``: sites of each name, keys changed);
- ``branches.ControlFlow``: statements, loops, blocks and the joins where branches meet;
- ``functions.Functions``: classes, functions, the call graph, parameters bound from call
  sites and helper summaries (``resolve_function``, ``arguments_passed``);
- ``dispatch.Dispatch``: running the analyzer's and the rules' callbacks in one walk.

Autograd events (``events.py``), order and dominance (``flow.py``), where values go
(``uses.py``) and a loop's graph over two iterations (``loop_graph.py``) are built on demand
from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import events
from torchlint.analysis import torch_api as api
from torchlint.analysis.bindings import BindingState
from torchlint.analysis.call_sites import CallSiteValues
from torchlint.analysis.branches import ControlFlow
from torchlint.analysis.dispatch import Dispatch, _BoundHooks
from torchlint.analysis.evaluate import GRADIENT_TAGS, Evaluation
from torchlint.analysis.event_index import AutogradEventIndex
from torchlint.analysis.events import AutogradEvent
from torchlint.analysis.flow import Flow
from torchlint.analysis.functions import Functions, _GradReadCollector
from torchlint.analysis.grad_modes import GradModes
from torchlint.analysis.importers import ProjectCall
from torchlint.analysis.loop_graph import LoopGraph, body_graph, loop_graph
from torchlint.analysis.memo import NodeMemo
from torchlint.analysis.module_graph import ModuleGraph
from torchlint.analysis.names import TORCH_IMPORT, ImportTable, keyword_arg, positional_args
from torchlint.analysis.project import (
    ProjectClass, ProjectClassInfo, ProjectFunction, ProjectImports, ProjectMethod, ProjectObject,
)
from torchlint.analysis.scopes import ENABLED, FunctionInfo, GradMode, Scope
from torchlint.analysis.uses import ValueFlow
from torchlint.analysis.values import TORCH_NAME, Kind, Value, torch_name_of
from torchlint.analysis.walk import Walker, scan

if TYPE_CHECKING:
    from torchlint.rule import Rule

__all__ = ["GRADIENT_TAGS", "Analyzer", "keyword_arg", "positional_args"]

_OTHER_FRAMEWORK_IMPORT = re.compile(
    r"^[ \t]*(?:import|from)[ \t]+(?:%s)\b" % "|".join(api.OTHER_AUTOGRAD_FRAMEWORKS), re.MULTILINE)
# ``from edutorch.nn import Linear, Module``: the tensor-and-module vocabulary taken from a
# package that is not torch (a teaching or numpy autograd of its own).
_OWN_AUTOGRAD_IMPORT = re.compile(
    r"^[ \t]*from[ \t]+(?!torch\b)[\w.]+[ \t]+import[ \t]+[^\n#]*\b(?:%s)\b" % "|".join(api.AUTOGRAD_VOCABULARY),
    re.MULTILINE,
)


def _other_framework_only(source: str) -> bool:
    """The file imports another autograd framework (a known one, or ``Module``/``Tensor``/
    ``Parameter``/``Variable`` from a package that is not torch) and never imports torch:
    its ``.grad``, ``backward()`` and ``step()`` are not torch's."""
    if TORCH_IMPORT.search(source):
        return False
    if any(name in source for name in api.OTHER_AUTOGRAD_FRAMEWORKS) and _OTHER_FRAMEWORK_IMPORT.search(source):
        return True
    return bool(_OWN_AUTOGRAD_IMPORT.search(source))


def _grad_reads(statement: cst.CSTNode) -> frozenset[str]:
    """The names whose ``.grad`` ``statement`` reads (the functions it defines aside)."""
    collector = _GradReadCollector()
    scan(statement, collector)
    return frozenset(collector.names)


class Analyzer(Dispatch, Functions, BindingState, ControlFlow, GradModes, Evaluation, cst.CSTVisitor):
    """Tracks program state and dispatches libcst visits to the enabled rules.

    The public methods (``value_of``, ``qualify``, ``grad_mode``, ...) are the
    questions rules may ask; everything starting with ``_`` is bookkeeping.
    """

    def __init__(
        self, module: cst.Module, source: str, project: ProjectImports | None = None, memo: NodeMemo | None = None
    ) -> None:
        self.module = module
        self.source = source
        # Facts of subtrees (``memo.py``): the language server's worker keeps them across versions.
        self.memo = NodeMemo() if memo is None else memo
        self.imports = ImportTable()
        # What the file imports from its own project (``project.py``); None: no project lookups.
        self.project = project
        # id(call node) -> the project function or class that made the value (``_project_maker``).
        self._project_makers: dict[int, tuple[cst.CSTNode, ProjectObject]] = {}
        # id(call node) -> a call of a sibling file's function and the values it passes
        # (``importers.py`` binds that function's parameters from them).
        self.project_calls: dict[int, ProjectCall] = {}
        # Rules ask ``qualify`` about most calls, several times each: one call layer less.
        self.qualify = self.imports.qualify  # type: ignore[method-assign]
        self._resolving_alias = False  # see ``torch_alias``
        self.scope = Scope("module", None, mode_stack=[ENABLED])
        self.statement: cst.SimpleStatementLine | cst.SimpleStatementSuite | None = None
        self.loops: list[cst.For | cst.While] = []
        # Enclosing compound statements (if/for/while/try/with) of the current function body.
        self.compound: list[cst.CSTNode] = []
        self._grad_reads_enabled = ".grad" in source  # (and torch's: see ``run``)
        self._grad_reads: list[frozenset[str]] = [frozenset()]
        self._block_hooks: list[tuple[cst.CSTNode, list[Callable[[cst.CSTNode], None]]]] = []
        self._branch_states: list[dict[str, object]] = []
        self._comprehension_states: list[dict[str, Value]] = []
        self._loop_exits: list = []  # names the loops just left bind (branches._note_loop_exit)
        self._rules: list[Rule] = []
        self._hooks: _BoundHooks | None = None  # built on first use, see ``_hooks_by_type``
        self._walker: Walker | None = None
        self._call_counts: dict[str, int] | None = None
        self._def_headers: dict[str, int] | None = None  # ``names.header_counts`` of the source's ``def``s
        self._forward_holders: frozenset[str] | None = None  # see functions._note_forward_call
        self._forward_counts: dict[str, int | None] = {}  # class -> calls of its instances (forward_sites.py)
        # Method name -> grad modes of the calls of that name on receivers not known.
        self._unresolved_calls_by_name: dict[str, list[GradMode]] = {}
        # Loop id -> names some statement in its body makes require grad (``x.requires_grad_()``).
        self._made_leaf_in_loop: dict[int, set[str]] = {}
        # Helper summaries (see summaries.py): shared with the summarising analyzers.
        self.summaries: dict[tuple, Value] = {}
        self.summary_depth = 0
        self._summarising: FunctionInfo | None = None
        self._returns: list[Value] = []
        self._value_flows: dict[int, ValueFlow] = {}  # escape analysis per region, see ``value_flow``
        # Which modules values went through (``module_graph.py``), tracked once a rule asks.
        self.module_graph: ModuleGraph | None = None
        # The backward() calls by loop and function (``event_index.py``), indexed once a rule asks.
        self.event_index: AutogradEventIndex | None = None
        self._call_site_values: CallSiteValues | None = None  # see ``value_given_call_sites``
        # id(parameter) -> (it, its function), for parameters with a call as default left unknown.
        self._defaulted_params: dict[int, tuple[cst.Param, FunctionInfo]] = {}
        # id(parameter) -> (it, its method), for methods' parameters left unknown (``passed_by_importers``).
        self._method_params: dict[int, tuple[cst.Param, FunctionInfo]] = {}
        self._importer_values: dict[int, dict[str, Value]] = {}  # id(method) -> its parameters' values
        # The module's top-level functions by name, for calls before their `def` (functions.py).
        self._top_level_defs: dict[str, cst.FunctionDef] | None = None
        self._init_facts()

    # ------------------------------------------------------------------ rules
    def attach(self, rules: Iterable[Rule]) -> None:
        """Register rule hooks: ``visit_<Node>`` / ``leave_<Node>`` methods, and ``finish``."""
        self._rules.extend(rules)
        self._hooks = self._walker = None

    def run(self) -> None:
        if _other_framework_only(self.source):
            for rule in self._rules:  # torch's rules say nothing about another framework's code
                rule.finish()
            return
        if self._grad_reads_enabled:
            self._grad_reads[0] = frozenset(
                name for statement in self.module.body for name in self.memo.get("grad-reads", statement, _grad_reads)
            )
        self._walk(self.module)
        for rule in self._rules:
            rule.finish()

    # --------------------------------------------------------------- questions
    @property
    def torch_name(self) -> str | None:
        """The local name the ``torch`` module is bound to, if any."""
        return self.imports.local_name_for("torch")

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """Canonical qualified name of an imported object (``T.no_grad`` -> ``torch.no_grad``)."""
        return self.imports.qualify(node)

    def torch_alias(self, expr: cst.BaseExpression) -> Value | None:
        """The value of a name bound to ``expr`` when it names a torch object itself
        (``F.softmax``, ``torch.nn``, ``nn.ReLU``): from then on ``qualify`` also answers for
        names bound to one (``self.softmax(x, 1)`` is ``F.softmax``).  Files without such an
        assignment keep the import table's ``qualify``."""
        qualified = self.qualify(expr)
        if qualified is None or not qualified.startswith("torch."):
            return None
        if self.qualify == self.imports.qualify:
            self.qualify = self._qualify_through_aliases  # type: ignore[method-assign]
        return Value(Kind.UNKNOWN, expr, tags=frozenset({TORCH_NAME + qualified}))

    def _qualify_through_aliases(self, node: cst.BaseExpression) -> str | None:
        qualified = self.imports.qualify(node)
        if qualified is not None or self._resolving_alias:
            return qualified
        self._resolving_alias = True
        try:
            return self._aliased(node)
        finally:
            self._resolving_alias = False

    def _aliased(self, node: cst.BaseExpression) -> str | None:
        """``torch.nn.Linear`` for ``nn.Linear`` after ``nn = torch.nn``; ``F.softmax`` for
        ``self.softmax`` bound to it (also in ``__init__``, read in ``forward``)."""
        if type(node) is cst.Name:
            return torch_name_of(self.value_of_key(node.value))
        if type(node) is not cst.Attribute:
            return None
        found = torch_name_of(self.value_of(node))
        if found is not None:
            return found
        base = self._aliased(node.value)
        if base is None:
            return None
        full = f"{base}.{node.attr.value}"
        return api.CANONICAL.get(full, full)

    def at_block_end(self, hook: Callable[[cst.CSTNode], None]) -> bool:
        """Run ``hook(block)`` when the innermost enclosing block (suite) has been
        analysed.  False when there is no enclosing block left (end of module or
        of a function body being finished)."""
        if not self._block_hooks:
            return False
        self._block_hooks[-1][1].append(hook)
        return True

    def expression_statement(self, call: cst.Call) -> cst.Expr | None:
        """The expression statement of the current line that is exactly ``call``
        (its result unused), or None."""
        line = self.statement
        if line is None:
            return None
        for small in line.body:
            if isinstance(small, cst.Expr) and small.value is call:
                return small
        return None

    def autograd_event(self, call: cst.Call) -> AutogradEvent | None:
        """The autograd event (backward, autograd.grad, optimizer step, gradient zeroing)
        that ``call`` is at the current point, or None: one recognition for every rule."""
        return events.event_of_call(self, call)

    def grad_reset_event(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> AutogradEvent | None:
        """``p.grad = None`` (or a zero tensor) assigned at the current point."""
        return events.event_of_assignment(self, target, value)

    def value_flow(self, region: cst.CSTNode) -> ValueFlow:
        """Escape analysis over ``region`` (a function or the module): where a name's value goes
        (``torchlint.analysis.uses``).  Built once per region and file."""
        flow = self._value_flows.get(id(region))
        if flow is None or flow.region is not region:
            flow = self._value_flows[id(region)] = ValueFlow(self, region)
        return flow

    def track_module_graph(self) -> ModuleGraph:
        """Start tracking which modules values go through and which modules optimizers update
        (``analysis/module_graph.py``); call before the walk (from a rule's ``__init__``)."""
        if self.module_graph is None:
            self.module_graph = ModuleGraph(self)
        return self.module_graph

    def track_autograd_events(self) -> AutogradEventIndex:
        """Start indexing the file's backward() calls by loop and function (``event_index.py``);
        call before the walk (from a rule's ``__init__``)."""
        if self.event_index is None:
            self.event_index = AutogradEventIndex()
        return self.event_index

    def flow(self, root: cst.CSTNode) -> Flow:
        """Order, dominance and exits inside ``root`` (a loop: one iteration; a function: one
        call; the module), built once per root on first use (see ``analysis/flow.py``)."""
        return self.memo.get("flow", root, Flow)

    def loop_graph(self, loop: cst.For | cst.While) -> LoopGraph | None:
        """What the first two iterations of ``loop`` backpropagate through (see
        ``analysis/loop_graph.py``); ask when the loop is reached (``visit_For``/``visit_While``)."""
        return loop_graph(self, loop)

    def body_graph(self, body: cst.IndentedBlock) -> LoopGraph | None:
        """What the backwards of a body that runs once (a function's) go through, in order (see
        ``analysis/loop_graph.py``); ask when the body is reached."""
        return body_graph(self, body)

    # ------------------------------------------------------------ imports
    def _leave_Import(self, node: cst.Import) -> None:
        self.imports.add_import(node)
        if self.project is not None:
            self.project.add_import(node)

    def _leave_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.add_import_from(node)
        if type(node.names) is cst.ImportStar:
            self.imports.add_star_import(node, self.source)
        if self.project is not None:
            self.project.add_import_from(node)

    # ------------------------------------------------------------ project files
    def _project_call_value(self, node: cst.Call) -> Value | None:
        """A call of a class or function imported from a sibling file (``project.py``)."""
        head = node.func
        while type(head) is cst.Attribute:
            head = head.value  # type: ignore[attr-defined]
        if type(head) is not cst.Name or not self.project.may_name(head.value):  # type: ignore[union-attr]
            return None
        if self.scope.lookup(head.value) is not None:
            return None  # the name is bound here, not the import
        found = self.project.object_of(node.func)  # type: ignore[union-attr]
        if found is None:
            return None
        self._project_makers[id(node)] = (node, found)
        if isinstance(found, ProjectClass) and found.is_module:
            return Value(Kind.MODULE, node, cls=found.info())
        return Value(Kind.UNKNOWN, node)

    def _note_project_call(self, node: cst.Call) -> None:
        """In a file read on behalf of another (``project.depth`` > 0): a call of a sibling
        file's function and what it passes (``importers.py``)."""
        head = node.func
        if type(head) is cst.Attribute:
            receiver = self.value_of(head.value)
            if type(receiver.cls) is ProjectClassInfo:  # `model.add_loss_op(nn.NLLLoss())`
                found = receiver.cls.project
                method = ProjectMethod(found.file, head.attr.value, found.depth, found.name)
                self.project_calls[id(node)] = ProjectCall.of(self, node, method)
                return
            head = head.value  # `train.fit(...)` (one module level, as `import train` binds)
        if type(head) is not cst.Name or not self.project.may_name(head.value):  # type: ignore[union-attr]
            return
        if self.scope.lookup(head.value) is not None or id(node) in self.project_calls:
            return
        found = self.project.object_of(node.func)  # type: ignore[union-attr]
        if type(found) is ProjectFunction:
            self.project_calls[id(node)] = ProjectCall.of(self, node, found)

    def made_project_objects(self) -> bool:
        """Some call so far made an object of a sibling file's class or function."""
        return bool(self._project_makers)

    def method_definition(self, call: cst.Call) -> cst.FunctionDef | None:
        """The ``def`` that ``receiver.method(...)`` runs, when the receiver is an instance of a
        class of this file or of a sibling file (``project.py``)."""
        func = call.func
        if type(func) is not cst.Attribute:
            return None
        receiver = self.value_of(func.value)  # type: ignore[attr-defined]
        name = func.attr.value  # type: ignore[attr-defined]
        if receiver.cls is not None and receiver.cls.node is not None:
            info = receiver.cls.method(name)
            return info.node if info is not None else None
        maker = self._project_maker(receiver.origin)
        return maker.method_node(name) if isinstance(maker, ProjectClass) else None

    @property
    def in_comprehension(self) -> bool:
        """The walk is inside a comprehension (its loop variables are bound)."""
        return bool(self._comprehension_states)

    def project_class_of(self, node: cst.BaseExpression) -> ProjectClass | None:
        """The class of a sibling file (``project.py``) whose instance ``node`` holds, if known."""
        value = self.value_of(node)  # type: ignore[attr-defined]
        project = getattr(value.cls, "project", None) if value.cls is not None and value.cls.node is None else None
        if project is not None:
            return project
        maker = self._project_maker(value.origin)
        return maker if isinstance(maker, ProjectClass) else None

    def _project_maker(self, origin: cst.CSTNode | None) -> ProjectObject | None:
        """The class or function of a sibling file whose call ``origin`` is (``_project_call_value``)."""
        maker = self._project_makers.get(id(origin)) if origin is not None else None
        return maker[1] if maker is not None and maker[0] is origin else None

    def step_may_zero_gradients(self, optimizer: cst.BaseExpression) -> bool:
        """``optimizer`` was made by a class or function of a sibling file whose ``step``
        resets the gradients (an optimizer of the project's own, ``project.py``)."""
        found = self._project_maker(self.value_of(optimizer).origin)
        if isinstance(found, ProjectClass):
            return found.step_zeroes()
        return isinstance(found, ProjectFunction) and found.may_return_zeroing_optimizer()

