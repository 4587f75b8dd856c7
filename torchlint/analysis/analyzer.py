"""The analysis pass: one libcst traversal that tracks what names hold and which
grad mode is active, and drives every enabled rule from the same traversal.

Rules see the program state *before* the statement they visit takes effect:
bindings are applied when a statement is left, after the rules' ``visit_*`` and
``leave_*`` hooks for it have run.

Function bodies run when they are called, so they are analysed after the code
that defines them (module, class body or enclosing function) is finished: free
names then read the flow-insensitive summary of the defining scope, and class
methods see what ``__init__`` put on ``self``.  A function's grad mode is
resolved from every call site in the file once the whole file has been seen.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import events, summaries
from torchlint.analysis import torch_api as api
from torchlint.analysis.events import AutogradEvent
from torchlint.analysis.uses import ValueFlow
from torchlint.analysis.flow import Flow
from torchlint.analysis.facts import ValueFacts
from torchlint.analysis.names import ImportTable, dotted_expression, dotted_name, through_grad
from torchlint.analysis.walk import NodeHooks, Walker, callback_methods, node_types_named, scan
from torchlint.analysis.scopes import (
    DISABLED,
    ENABLED,
    INFERENCE,
    UNKNOWN_MODE,
    ClassInfo,
    FunctionInfo,
    GradMode,
    Scope,
)
from torchlint.analysis.values import (
    ASSUMED_TAGS,
    NUMBER,
    UNKNOWN,
    Kind,
    Value,
    join,
    join_states,
)

if TYPE_CHECKING:
    from torchlint.rule import Rule

_BRANCH_STATEMENTS = (cst.If, cst.For, cst.While, cst.Try, cst.TryStar)
_NAME_OR_ATTRIBUTE = frozenset({cst.Name, cst.Attribute})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)



_WORD = re.compile(r"\w")


def _count_after_non_word(pattern: str, source: str) -> int:
    """``len(re.findall(r"(?<!\w)" + pattern, source))`` for a pattern starting with a word
    character, forty times as fast: a pattern that starts with a literal is searched for
    quickly, one that starts with a lookbehind is tried at every position."""
    return sum(
        1 for match in re.finditer(pattern, source)
        if match.start() == 0 or _WORD.match(source, match.start() - 1) is None
    )

class _GradReadCollector(cst.CSTVisitor):
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

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


_OTHER_FRAMEWORK_IMPORT = re.compile(
    r"^[ \t]*(?:import|from)[ \t]+(?:%s)\b" % "|".join(api.OTHER_AUTOGRAD_FRAMEWORKS), re.MULTILINE)
_TORCH_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+torch\b", re.MULTILINE)


def _other_framework_only(source: str) -> bool:
    """The file imports another autograd framework and not torch."""
    if not any(name in source for name in api.OTHER_AUTOGRAD_FRAMEWORKS):
        return False
    return bool(_OTHER_FRAMEWORK_IMPORT.search(source)) and not _TORCH_IMPORT.search(source)


# Tags of a gradient (``p.grad``) and of a value computed from one (``lr * p.grad``).
GRADIENT_TAGS = frozenset({"grad", "from-grad"})

# What a parameter may be bound to from its call sites: facts a rule can act on.
_CALL_SITE_KINDS = frozenset({Kind.LEAF, Kind.NONLEAF, Kind.PLAIN, Kind.MODULE, Kind.OPTIMIZER})


def _literal_bool(node: cst.BaseExpression | None) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional_args(call: cst.Call) -> list[cst.BaseExpression]:
    return [arg.value for arg in call.args if arg.keyword is None and not arg.star]


class Analyzer(ValueFacts, cst.CSTVisitor):
    """Tracks program state and dispatches libcst visits to the enabled rules.

    The public methods (``value_of``, ``qualify``, ``grad_mode``, ...) are the
    questions rules may ask; everything starting with ``_`` is bookkeeping.
    """

    def __init__(self, module: cst.Module, source: str) -> None:
        self.module = module
        self.source = source
        self.imports = ImportTable()
        # Rules ask ``qualify`` about most calls, several times each: one call layer less.
        self.qualify = self.imports.qualify  # type: ignore[method-assign]
        self.scope = Scope("module", None, mode_stack=[ENABLED])
        self.statement: cst.SimpleStatementLine | cst.SimpleStatementSuite | None = None
        self.loops: list[cst.For | cst.While] = []
        # Enclosing compound statements (if/for/while/try/with) of the current function body.
        self.compound: list[cst.CSTNode] = []
        self._grad_reads_enabled = ".grad" in source  # (and torch's: see ``run``)
        self._grad_reads: list[set[str]] = [set()]
        self._block_hooks: list[tuple[cst.CSTNode, list[Callable[[cst.CSTNode], None]]]] = []
        self._branch_states: list[dict[str, object]] = []
        self._comprehension_states: list[dict[str, Value]] = []
        self._rules: list[Rule] = []
        self._hooks: _BoundHooks | None = None  # built on first use, see ``_hooks_by_type``
        self._walker: Walker | None = None
        self._call_counts: dict[str, int] | None = None
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
        self._flows: dict[int, tuple[cst.CSTNode, Flow]] = {}
        self._init_facts()

    # ------------------------------------------------------------------ rules
    def attach(self, rules: Iterable[Rule]) -> None:
        """Register rule hooks: ``visit_<Node>`` / ``leave_<Node>`` methods, and ``finish``."""
        self._rules.extend(rules)
        self._hooks = self._walker = None

    def run(self) -> None:
        self._grad_reads_enabled = self._grad_reads_enabled and not _other_framework_only(self.source)
        if self._grad_reads_enabled:
            collector = _GradReadCollector()
            for statement in self.module.body:
                self._walk(statement, collector)
            self._grad_reads[0] = collector.names
        self._walk(self.module)
        for rule in self._rules:
            rule.finish()

    # --------------------------------------------------------------- questions
    @property
    def grad_mode(self) -> GradMode:
        """The grad mode at the current point (fixed, or inherited from callers)."""
        return self.scope.mode_stack[-1]

    @property
    def function(self) -> FunctionInfo | None:
        scope: Scope | None = self.scope
        while scope is not None and scope.function is None:
            scope = scope.parent
        return scope.function if scope else None

    @property
    def torch_name(self) -> str | None:
        """The local name the ``torch`` module is bound to, if any."""
        return self.imports.local_name_for("torch")

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """Canonical qualified name of an imported object (``T.no_grad`` -> ``torch.no_grad``)."""
        return self.imports.qualify(node)

    def at_block_end(self, hook: Callable[[cst.CSTNode], None]) -> bool:
        """Run ``hook(block)`` when the innermost enclosing block (suite) has been
        analysed.  False when there is no enclosing block left (end of module or
        of a function body being finished)."""
        if not self._block_hooks:
            return False
        self._block_hooks[-1][1].append(hook)
        return True

    def value_of(self, node: cst.BaseExpression) -> Value:
        """What ``node`` evaluates to at the current point."""
        rule = _VALUE_RULES.get(type(node))
        if rule is None:
            return UNKNOWN
        return rule(self, node)

    def value_of_key(self, key: str) -> Value:
        """What a name or dotted ``self.w`` key holds at the current point."""
        found = self.scope.lookup(key)
        return found if found is not None else UNKNOWN

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

    def mentions_gradient(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` reads a gradient: a ``.grad`` attribute, or a name or element
        bound to one (``g = p.grad``, ``d_p = p.grad.data``, ``torch.autograd.grad(...)[0]``)."""
        if isinstance(node, cst.Attribute):
            if node.attr.value == "grad":
                return True
            return self.mentions_gradient(node.value) or self._is_gradient_value(node)
        if isinstance(node, cst.Name):
            return self._is_gradient_value(node)
        if isinstance(node, cst.Subscript):
            return self._is_gradient_value(node) or self.mentions_gradient(node.value)
        if isinstance(node, cst.BinaryOperation):
            return self.mentions_gradient(node.left) or self.mentions_gradient(node.right)
        if isinstance(node, cst.UnaryOperation):
            return self.mentions_gradient(node.expression)
        if isinstance(node, cst.Call):
            return self.mentions_gradient(node.func) or any(self.mentions_gradient(a.value) for a in node.args)
        return False

    def _is_gradient_value(self, node: cst.BaseExpression) -> bool:
        value = self.value_of(node)
        if GRADIENT_TAGS & value.tags:
            return True
        origin = value.origin
        return isinstance(origin, cst.Attribute) and origin is not node and through_grad(origin)

    def autograd_event(self, call: cst.Call) -> AutogradEvent | None:
        """The autograd event (backward, autograd.grad, optimizer step, gradient zeroing)
        that ``call`` is at the current point, or None: one recognition for every rule."""
        return events.event_of_call(self, call)

    def grad_reset_event(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> AutogradEvent | None:
        """``p.grad = None`` (or a zero tensor) assigned at the current point."""
        return events.event_of_assignment(self, target, value)

    def made_leaf_in_loop(self, key: str, loop: cst.For | cst.While) -> bool:
        """Whether the body of ``loop`` (so far) sets ``key.requires_grad`` / calls
        ``key.requires_grad_()``: a value detached at the end of an iteration is made a leaf
        again in the next one."""
        return key in self._made_leaf_in_loop.get(id(loop), ())

    def runs_every_iteration(self, loop: cst.For | cst.While) -> bool:
        """Whether the current point runs on every iteration of the enclosing ``loop``: nothing
        but ``with`` blocks and loops over parameters (``for p in model.parameters()``) stands
        between them (no ``if``, ``try`` or other inner loop)."""
        for index, node in enumerate(self.compound):
            if node is loop:
                return all(
                    type(inner) is cst.With or self._loops_over_parameters(inner)
                    for inner in self.compound[index + 1 :]
                )
        return False

    def _loops_over_parameters(self, node: cst.CSTNode) -> bool:
        if type(node) is not cst.For:
            return False
        iterated = self.value_of(node.iter)  # type: ignore[attr-defined]
        return iterated.kind is Kind.COLLECTION and iterated.element is not None and (
            iterated.element.kind is Kind.LEAF and "parameter" in iterated.element.tags)
    def value_flow(self, region: cst.CSTNode) -> ValueFlow:
        """Escape analysis over ``region`` (a function or the module): where a name's value goes
        (``torchlint.analysis.uses``).  Built once per region and file."""
        flow = self._value_flows.get(id(region))
        if flow is None or flow.region is not region:
            flow = self._value_flows[id(region)] = ValueFlow(self, region)
        return flow
    def flow(self, root: cst.CSTNode) -> Flow:
        """Order, dominance and exits inside ``root`` (a loop: one iteration; a function: one
        call; the module), built once per root on first use (see ``analysis/flow.py``)."""
        known = self._flows.get(id(root))
        if known is None or known[0] is not root:
            known = self._flows[id(root)] = (root, Flow(root))
        return known[1]

    def repeated_body(self) -> cst.For | cst.While | cst.FunctionDef | None:
        """The innermost body around the current point that runs again and again: the
        enclosing loop of this function, else the function itself; None at module level
        outside loops."""
        if self.loops:
            return self.loops[-1]
        function = self.function
        return function.node if function is not None else None

    def is_grad_mode_context(self, node: cst.BaseExpression) -> bool:
        return self._mode_of_context(node) is not None

    def resolve_function(self, func: cst.BaseExpression) -> FunctionInfo | None:
        """The function defined in this file that calling ``func`` at the current point runs:
        ``helper`` (a function in scope), ``self.method`` / ``obj.method`` (a method of a class
        defined here), ``Cls`` (its ``__init__``); None when its body is not in this file.
        Its body is analysed later, so ask about it from a ``when=`` condition or ``finish``."""
        return self._resolve_callee(func)

    # ---------------------------------------------------------- value rules
    def _value_Name(self, node: cst.Name) -> Value:
        if node.value in ("True", "False", "None"):
            return UNKNOWN
        return self.value_of_key(node.value)

    def _value_Integer(self, node: cst.Integer) -> Value:
        return NUMBER

    _value_Float = _value_Integer
    _value_Imaginary = _value_Integer

    def _value_Attribute(self, node: cst.Attribute) -> Value:
        key = dotted_name(node)
        if key is not None:
            found = self.scope.lookup(key)
            if found is not None:
                return found
        attr = node.attr.value
        base = self.value_of(node.value)
        if attr == "grad":
            return Value(Kind.PLAIN, node, tags=frozenset({"grad"}))
        if attr == "data":
            return Value(Kind.PLAIN, node, tags=frozenset({"data"})) if base.is_tensor else UNKNOWN
        if base.kind in (Kind.MODULE, Kind.OBJECT):
            if base.cls is not None:
                return base.cls.attr(attr) or UNKNOWN
            if base.kind is Kind.MODULE and attr in api.BUILTIN_PARAMETER_ATTRS:
                return Value(Kind.LEAF, node, tags=frozenset({"parameter"}))
            if base.kind is Kind.MODULE and not base.tags & {"parameterless"}:
                return UNKNOWN
            return UNKNOWN
        if base.is_tensor and attr in ("T", "mT", "H", "mH", "real", "imag"):
            return self._derived([base], node)
        return UNKNOWN

    def _value_Subscript(self, node: cst.Subscript) -> Value:
        base = self.value_of(node.value)
        if base.kind is Kind.COLLECTION:
            return base.element or UNKNOWN
        if base.is_tensor:
            return self._derived([base], node)
        if base.kind is Kind.MODULE:
            return Value(Kind.MODULE, node)
        return UNKNOWN

    def _value_BinaryOperation(self, node: cst.BinaryOperation) -> Value:
        return self._derived([self.value_of(node.left), self.value_of(node.right)], node)

    def _value_UnaryOperation(self, node: cst.UnaryOperation) -> Value:
        if isinstance(node.operator, cst.Not):
            return UNKNOWN
        return self._derived([self.value_of(node.expression)], node)

    def _value_IfExp(self, node: cst.IfExp) -> Value:
        return join(self.value_of(node.body), self.value_of(node.orelse))

    def _value_List(self, node: cst.List | cst.Tuple) -> Value:
        element: Value | None = None
        values: list[Value] = []
        for item in node.elements:
            value = self.value_of(item.value) if isinstance(item, cst.Element) else UNKNOWN
            values.append(value)
            element = value if element is None else join(element, value)
        # A tuple of fixed size also keeps each position (``return img, opt``).
        starred = any(not isinstance(item, cst.Element) for item in node.elements)
        items = tuple(values) if type(node) is cst.Tuple and not starred else None
        return Value(Kind.COLLECTION, node, element=element or UNKNOWN, items=items,
                     tags=_EMPTY if not node.elements else frozenset())

    _value_Tuple = _value_List

    def _value_Call(self, node: cst.Call) -> Value:
        func = node.func
        qualified = self.qualify(func)
        if qualified is not None:
            return self._value_of_torch_call(node, qualified)
        if type(func) is cst.Name:
            cls = self.scope.find_class(func.value)
            if cls is not None:
                return Value(Kind.MODULE if cls.is_module else Kind.OBJECT, node, cls=cls)
            if func.value in ("float", "int", "bool", "len"):
                return NUMBER.tagged("detached")
            if func.value in ("list", "tuple", "sorted", "reversed") and node.args:
                inner = self.value_of(node.args[0].value)
                return inner if inner.kind is Kind.COLLECTION else UNKNOWN
        if type(func) is cst.Attribute:
            return self._value_of_method_call(node, func)
        helper = self._resolve_callee(func)  # (a Name: a scope lookup)
        if helper is not None and helper.name != "__init__":
            return summaries.returned_value(self, helper, node)
        callee = self.value_of(func)
        if callee.kind is Kind.MODULE:
            return self._value_of_module_call(node, callee)
        return UNKNOWN

    def _value_of_torch_call(self, node: cst.Call, qualified: str) -> Value:
        known = self._torch_call_fact(node, qualified)
        if known is not None:
            return known
        if qualified in api.FACTORIES:
            requires_grad = keyword_arg(node, "requires_grad")
            if requires_grad is None:
                return Value(Kind.PLAIN, node, tags=frozenset({"factory"}))
            flag = _literal_bool(requires_grad.value)
            if flag is None:
                return UNKNOWN
            return Value(Kind.LEAF if flag else Kind.PLAIN, node, tags=frozenset({"factory"}))
        if qualified == api.VARIABLE:
            return self._value_of_variable(node)
        if qualified == "torch.autograd.grad":
            return Value(Kind.COLLECTION, node, element=Value(Kind.PLAIN, node, tags=frozenset({"grad"})))
        if qualified == api.PARAMETER:
            requires_grad = keyword_arg(node, "requires_grad")
            if requires_grad is not None and _literal_bool(requires_grad.value) is not True:
                return UNKNOWN if _literal_bool(requires_grad.value) is None else Value(Kind.PLAIN, node)
            return Value(Kind.LEAF, node, tags=frozenset({"parameter"}))
        last = qualified.rsplit(".", 1)[-1]
        if qualified.startswith(api.OPTIMIZER_PREFIX) and last[:1].isupper():
            if qualified.startswith(api.NON_OPTIMIZER_PREFIXES):
                return Value(Kind.OBJECT, node)  # a scheduler: its step() updates no parameter
            return Value(Kind.OPTIMIZER, node)
        if (
            qualified.startswith("torch.nn.")
            and qualified.count(".") == 2
            and last[:1].isupper()
            and qualified not in api.NN_NON_MODULES
        ):
            parameterless = qualified in api.PARAMETERLESS_MODULES or last.endswith(api.PARAMETERLESS_MODULE_SUFFIXES)
            return Value(Kind.MODULE, node, tags=frozenset({"parameterless"} if parameterless else ()))
        if qualified.startswith("torch.") and last in api.NON_DIFFERENTIABLE:
            return Value(Kind.PLAIN, node)
        if qualified.startswith("torch.") and last[:1].islower() and not qualified.startswith(("torch.optim", "torch.utils")):
            return self._derived([self.value_of(arg.value) for arg in node.args if arg.keyword is None], node)
        return UNKNOWN

    def _value_of_variable(self, node: cst.Call) -> Value:
        """Legacy ``Variable(t, requires_grad=True)`` is a new leaf; ``Variable(t)`` a plain
        tensor, but of a tensor that requires grad an alias that still does (measured)."""
        requires_grad = keyword_arg(node, "requires_grad")
        if requires_grad is not None:
            flag = _literal_bool(requires_grad.value)
            if flag is None:
                return UNKNOWN
            return Value(Kind.LEAF if flag else Kind.PLAIN, node, tags=frozenset({"factory", "variable"}))
        data = positional_args(node)
        inner = self.value_of(data[0]) if data else UNKNOWN
        if inner.kind is Kind.LEAF:
            return self._derived([inner], node)
        return Value(Kind.PLAIN, node, tags=frozenset({"variable"}))

    def _value_of_module_call(self, node: cst.Call, module: Value) -> Value:
        if "parameterless" in module.tags:
            output = self._derived([self.value_of(arg.value) for arg in node.args], node)
        elif self.grad_mode.statically_disabled:
            output = Value(Kind.PLAIN, node, tags=frozenset({"detached"}))
        else:
            output = Value(Kind.NONLEAF, node, tags=frozenset({"model-output"}))
        return self._module_output_fact(node, module, output)

    def _value_of_method_call(self, node: cst.Call, func: cst.Attribute) -> Value:
        method = func.attr.value
        receiver = self.value_of(func.value)
        if method in api.PARAMETER_ITERATORS:
            return Value(Kind.COLLECTION, node, element=Value(Kind.LEAF, node, tags=frozenset({"parameter"})))
        if method in api.NAMED_PARAMETER_ITERATORS:
            return Value(Kind.COLLECTION, node, element=UNKNOWN, tags=frozenset({"named-parameters"}))
        if receiver.kind in (Kind.MODULE, Kind.OBJECT):
            submodule = self._value_Attribute(func)
            if submodule.kind is Kind.MODULE:  # `self.lin(x)`: calling a submodule, not a method
                return self._value_of_module_call(node, submodule)
            helper = receiver.cls.method(method) if receiver.cls is not None else None
            if helper is not None and method != "__init__":  # `self.make_optimizer()`
                return summaries.returned_value(self, helper, node)
        if receiver.kind is Kind.MODULE:
            if method in api.MODULE_SELF_METHODS:
                return receiver
            if method == "forward":
                return self._value_of_module_call(node, receiver)
            return UNKNOWN
        known = self._method_call_fact(node, method, receiver)
        if known is not None:
            return known
        if not receiver.is_tensor:
            return UNKNOWN
        if method == "detach":
            # "detach-call": cut on purpose (a no_grad result is "detached" too, by accident).
            return Value(Kind.PLAIN, node, tags=frozenset({"detached", "detach-call"}))
        if method in api.SCALAR_METHODS:
            return NUMBER.tagged("detached")
        if method in api.NON_DIFFERENTIABLE:
            return Value(Kind.PLAIN, node)
        if method == "requires_grad_":
            flag = _literal_bool(node.args[0].value) if node.args else True
            if flag is None:
                return UNKNOWN
            if not flag:
                return Value(Kind.PLAIN, node) if receiver.kind is not Kind.NONLEAF else receiver
            if receiver.kind is Kind.PLAIN:
                return Value(Kind.LEAF, node, tags=frozenset({"requires_grad_"}))
            return receiver
        if method.endswith("_") and not method.startswith("__"):
            return receiver  # in-place: the same object
        if method in api.CONVERSION_METHODS:
            return self._value_of_conversion(node, method, receiver)
        return self._derived([receiver] + [self.value_of(a.value) for a in node.args if a.keyword is None], node)

    def _value_of_conversion(self, node: cst.Call, method: str, receiver: Value) -> Value:
        if not receiver.requires_grad:
            return receiver
        if method in api.NOOP_ON_DEFAULT_TENSOR or (method == "to" and self._is_cpu_literal(node)):
            # Same object on a float32 CPU tensor; a non-leaf copy on a GPU.
            return receiver.tagged("device-dependent")
        if self.grad_mode.statically_disabled:
            return Value(Kind.PLAIN, node, tags=frozenset({"detached"}))
        return Value(Kind.NONLEAF, node, tags=frozenset({"device-dependent"}))

    def _is_cpu_literal(self, node: cst.Call) -> bool:
        args = positional_args(node)
        return len(args) == 1 and isinstance(args[0], cst.SimpleString) and args[0].evaluated_value == "cpu"

    def _derived(self, inputs: Sequence[Value], node: cst.CSTNode) -> Value:
        """Result of a differentiable op on ``inputs``."""
        result = self._derived_kind(inputs, node)
        if result.kind is not Kind.NONLEAF and any(GRADIENT_TAGS & value.tags for value in inputs):
            # `lr * w.grad`: a step computed from a gradient (what a manual update applies).
            return Value(result.kind if result.kind is not Kind.UNKNOWN else Kind.PLAIN, node,
                         tags=result.tags | {"from-grad"})
        return result

    def _derived_kind(self, inputs: Sequence[Value], node: cst.CSTNode) -> Value:
        if any(value.requires_grad for value in inputs):
            if self.grad_mode.statically_disabled:
                return Value(Kind.PLAIN, node, tags=frozenset({"detached"}))
            # "assumed": it requires grad only if the assumed leaves it comes from really do.
            assumed = all(ASSUMED_TAGS & value.tags for value in inputs if value.requires_grad)
            return Value(Kind.NONLEAF, node, tags=frozenset({"assumed"} if assumed else ()))
        if inputs and all(value.kind in (Kind.PLAIN, Kind.NUMBER) for value in inputs):
            if all(value.kind is Kind.NUMBER for value in inputs):
                return NUMBER
            detached = any("detached" in value.tags for value in inputs)
            return Value(Kind.PLAIN, node, tags=frozenset({"detached"} if detached else ()))
        return UNKNOWN

    # ------------------------------------------------------------ dispatch
    # What runs for a node of each type: the analyzer's ``_enter_<Type>``, the rules'
    # ``visit_<Type>``, (the children), the rules' ``leave_<Type>``, the analyzer's
    # ``_leave_<Type>``; around a field, ``_enter_<Type>_<field>`` / ``_leave_<Type>_<field>``.
    # ``_walk`` runs them with the fast ``Walker``; ``on_visit`` & co make the analyzer a
    # libcst visitor with the same callbacks (``node.visit(analyzer)``; the tests compare).
    def _hooks_by_type(self) -> Mapping[type, NodeHooks]:
        if self._hooks is None:
            self._hooks = _BoundHooks(*_hook_plan(tuple(map(type, self._rules))), self, self._rules)
        return self._hooks

    def on_visit(self, node: cst.CSTNode) -> bool:
        hooks = self._hooks_by_type().get(type(node), _NO_HOOKS)
        descend = hooks.enter(node) if hooks.enter is not None else True
        for hook in hooks.visits:
            hook(node)
        return descend is not False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        hooks = self._hooks_by_type().get(type(original_node), _NO_HOOKS)
        for hook in hooks.leaves:
            hook(original_node)
        if hooks.exit is not None:
            hooks.exit(original_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        before, _ = self._attribute_hooks(node, attribute)
        if before is not None:
            before(node)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        _, after = self._attribute_hooks(original_node, attribute)
        if after is not None:
            after(original_node)

    def _attribute_hooks(self, node: cst.CSTNode, attribute: str) -> tuple[Callable | None, Callable | None]:
        attributes = self._hooks_by_type().get(type(node), _NO_HOOKS).attributes
        return attributes.get(attribute, (None, None)) if attributes else (None, None)

    def _walk(self, node: cst.CSTNode, visitor: cst.CSTVisitor | None = None) -> None:
        """``node.visit(visitor or self)``, faster (see ``walk.py``)."""
        if visitor is not None:
            scan(node, visitor)
            return
        if self._walker is None:
            hooks = self._hooks_by_type()
            self._walker = Walker(hooks, handled=hooks.handled)
        self._walker.walk(node)

    # ------------------------------------------------------------ blocks
    def _enter_Module(self, node: cst.Module) -> None:
        self._block_hooks.append((node, []))

    def _leave_Module(self, node: cst.Module) -> None:
        self._run_block_hooks()
        self._run_deferred(self.scope)

    def _enter_IndentedBlock(self, node: cst.IndentedBlock | cst.SimpleStatementSuite) -> None:
        self._block_hooks.append((node, []))

    def _leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._run_block_hooks()

    _enter_SimpleStatementSuite = _enter_IndentedBlock

    def _leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.statement = None
        self._run_block_hooks()

    def _run_block_hooks(self) -> None:
        block, hooks = self._block_hooks.pop()
        for hook in hooks:
            hook(block)

    def _enter_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def _leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = None

    def _enter_SimpleStatementSuite_body(self, node: cst.SimpleStatementSuite) -> None:
        self.statement = node

    # ------------------------------------------------------------ imports
    def _leave_Import(self, node: cst.Import) -> None:
        self.imports.add_import(node)

    def _leave_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.add_import_from(node)

    # ------------------------------------------------------------ bindings
    def _bind_target(self, target: cst.BaseExpression, value: Value, value_node: cst.BaseExpression | None) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if isinstance(value_node, (cst.Tuple, cst.List)) and len(value_node.elements) == len(elements):
                for sub_target, sub_value in zip(elements, value_node.elements):
                    self._bind_target(sub_target, self.value_of(sub_value.value), sub_value.value)
            elif value.items is not None and len(value.items) == len(elements):
                for sub_target, item in zip(elements, value.items):
                    self._bind_target(sub_target, item, None)
            else:
                element = value.element if value.kind is Kind.COLLECTION and value.element else UNKNOWN
                for sub_target in elements:
                    self._bind_target(sub_target, element, None)
            return
        if isinstance(target, cst.StarredElement):
            self._bind_target(target.value, UNKNOWN, None)
            return
        key = dotted_name(target)
        if key is None:
            return
        if value.kind is Kind.NONLEAF and self.value_of_key(key).kind is Kind.LEAF:
            value = value.tagged("rebound-leaf")  # TL001/TL003 territory
        self.scope.bind(key, value)
        function = self.scope.function
        if self._summarising is not None:
            return  # a look into a helper changes no class facts
        if function is not None and function.cls is not None and key.startswith("self.") and key.count(".") == 1:
            function.cls.record_attr(function.name, key[5:], value)

    def _leave_Assign(self, node: cst.Assign) -> None:
        value = self.value_of(node.value)
        for target in node.targets:
            if self._is_requires_grad_flag(target.target):
                self._note_requires_grad_flag(target.target.value, _literal_bool(node.value))  # type: ignore[attr-defined]
                self._apply_requires_grad_flag(target.target, node.value)
                continue
            self._bind_target(target.target, value, node.value)

    def _is_requires_grad_flag(self, target: cst.BaseExpression) -> bool:
        return isinstance(target, cst.Attribute) and target.attr.value == "requires_grad"

    def _apply_requires_grad_flag(self, target: cst.Attribute, flag_node: cst.BaseExpression) -> None:
        key = dotted_name(target.value)
        if key is not None:
            self._set_requires_grad(key, _literal_bool(flag_node), target)

    def _set_requires_grad(self, key: str, flag: bool | None, node: cst.CSTNode) -> None:
        """``x.requires_grad = flag`` / ``x.requires_grad_(flag)``.  Setting it on a tensor
        of unknown origin only succeeds on a leaf, so afterwards ``x`` is a leaf that
        requires grad; on a non-leaf it raises or is a no-op (TL005) and ``x`` stays as is."""
        current = self.value_of_key(key)
        if current.kind is Kind.UNKNOWN and "." in key:
            # `layer.weight`: an attribute no statement bound, known from what it belongs to
            current = self.value_of(dotted_expression(key))
        if flag is True:
            for loop in self.loops:
                self._made_leaf_in_loop.setdefault(id(loop), set()).add(key)
        if flag is True and (current.kind is Kind.PLAIN or (current.kind is Kind.UNKNOWN and not current.cls)):
            self.scope.bind(key, Value(Kind.LEAF, node, tags=current.tags | {"requires_grad_"}))
        elif flag is False and current.kind is Kind.LEAF:
            self.scope.bind(key, Value(Kind.PLAIN, node))
        elif flag is None and current.kind in (Kind.PLAIN, Kind.LEAF):
            self.scope.bind(key, UNKNOWN)

    def _leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind_target(node.target, self.value_of(node.value), node.value)

    def _leave_AugAssign(self, node: cst.AugAssign) -> None:
        key = dotted_name(node.target)
        if key is None:
            return
        current = self.value_of_key(key)
        operand = self.value_of(node.value)
        if current.kind is Kind.PLAIN and operand.requires_grad and not self.grad_mode.statically_disabled:
            self.scope.bind(key, Value(Kind.NONLEAF, node))
        elif current.kind is Kind.PLAIN and operand.kind is Kind.UNKNOWN and not self.grad_mode.statically_disabled:
            self.scope.bind(key, UNKNOWN)  # `total = torch.zeros(1); total += loss_of(batch)`: may now require grad
        elif current.kind is Kind.NUMBER:
            self.scope.bind(key, self._derived([current, operand], node))

    def _leave_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target, self.value_of(node.value), node.value)

    def _leave_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
        for target in targets:
            target_node = target.value if isinstance(target, cst.Element) else target
            key = dotted_name(target_node)
            if key is not None:
                self.scope.bind(key, UNKNOWN)

    def _leave_Call(self, node: cst.Call) -> None:
        """In-place state changes of a named tensor: ``w.requires_grad_()``, ``w.detach_()``."""
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        flag = (_literal_bool(node.args[0].value) if node.args else True) if method == "requires_grad_" else None
        if method == "requires_grad_":
            self._note_requires_grad_flag(func.value, flag)
        self._note_append(node, func)
        key = dotted_name(func.value)
        if key is None:
            return
        current = self.value_of_key(key)
        if method == "requires_grad_":
            self._set_requires_grad(key, flag, node)
        elif method == "detach_" and current.is_tensor:
            self.scope.bind(key, Value(Kind.PLAIN, node, tags=frozenset({"detached"})))
        elif method == "retain_grad" and current.is_tensor:
            self.scope.bind(key, current.tagged("retains-grad"))

    def _leave_Expr(self, node: cst.Expr) -> None:
        """A bare ``torch.set_grad_enabled(False)`` switches grad mode for the rest of the scope."""
        if isinstance(node.value, cst.Call) and self.qualify(node.value.func) == api.GRAD_SETTING:
            mode = self._mode_of_context(node.value)
            if mode is not None:
                self.scope.mode_stack[-1] = mode

    # ------------------------------------------------------------ control flow
    def _enter_If(self, node: cst.If) -> None:
        self._branch_states.append({"entry": dict(self.scope.values)})
        self.compound.append(node)
        self._forget_guarded(node.test)

    def _leave_If_body(self, node: cst.If) -> None:
        frame = self._branch_states[-1]
        frame["body"] = self.scope.values
        self.scope.values = dict(frame["entry"])  # type: ignore[arg-type]

    def _leave_If(self, node: cst.If) -> None:
        self.compound.pop()
        frame = self._branch_states.pop()
        self.scope.values = join_states(frame["body"], self.scope.values)  # type: ignore[arg-type]

    def _enter_For_body(self, node: cst.For) -> None:
        self._branch_states.append({"entry": dict(self.scope.values)})
        self._bind_loop_target(node.target, node.iter)
        self.loops.append(node)
        self.compound.append(node)

    def _leave_For_body(self, node: cst.For | cst.While) -> None:
        self.loops.pop()
        self.compound.pop()
        frame = self._branch_states.pop()
        self.scope.values = join_states(frame["entry"], self.scope.values)  # type: ignore[arg-type]

    def _enter_While_body(self, node: cst.While) -> None:
        self._branch_states.append({"entry": dict(self.scope.values)})
        self.loops.append(node)
        self.compound.append(node)

    _leave_While_body = _leave_For_body

    def _enter_Try(self, node: cst.Try | cst.TryStar) -> None:
        self._branch_states.append({"entry": dict(self.scope.values), "ends": []})
        self.compound.append(node)

    _enter_TryStar = _enter_Try

    def _leave_Try_body(self, node: cst.Try | cst.TryStar) -> None:
        self._branch_states[-1]["body"] = dict(self.scope.values)

    _leave_TryStar_body = _leave_Try_body

    def _enter_ExceptHandler(self, node: cst.ExceptHandler | cst.ExceptStarHandler) -> None:
        frame = self._branch_states[-1]
        self.scope.values = join_states(frame["entry"], frame["body"])  # type: ignore[arg-type]
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self.scope.bind(node.name.name.value, UNKNOWN)

    _enter_ExceptStarHandler = _enter_ExceptHandler

    def _leave_ExceptHandler(self, node: cst.ExceptHandler | cst.ExceptStarHandler) -> None:
        self._branch_states[-1]["ends"].append(dict(self.scope.values))  # type: ignore[union-attr]

    _leave_ExceptStarHandler = _leave_ExceptHandler

    def _enter_Try_orelse(self, node: cst.Try | cst.TryStar) -> None:
        self.scope.values = dict(self._branch_states[-1]["body"])  # type: ignore[arg-type]

    _enter_TryStar_orelse = _enter_Try_orelse

    def _leave_Try_orelse(self, node: cst.Try | cst.TryStar) -> None:
        self._branch_states[-1]["body"] = dict(self.scope.values)

    _leave_TryStar_orelse = _leave_Try_orelse

    def _merge_try(self) -> None:
        frame = self._branch_states[-1]
        if frame.get("merged"):
            return
        merged = frame["body"]
        for end in frame["ends"]:  # type: ignore[union-attr]
            merged = join_states(merged, end)  # type: ignore[arg-type]
        self.scope.values = dict(merged)  # type: ignore[arg-type]
        frame["merged"] = True

    def _enter_Try_finalbody(self, node: cst.Try | cst.TryStar) -> None:
        self._merge_try()

    _enter_TryStar_finalbody = _enter_Try_finalbody

    def _leave_Try(self, node: cst.Try | cst.TryStar) -> None:
        self._merge_try()
        self._branch_states.pop()
        self.compound.pop()

    _leave_TryStar = _leave_Try

    def _enter_With_body(self, node: cst.With) -> None:
        mode = None
        for item in node.items:
            item_mode = self._mode_of_context(item.item)
            if item_mode is not None:
                mode = item_mode
            if item.asname is not None:
                self._bind_target(item.asname.name, UNKNOWN, None)
        if mode is not None and self.grad_mode.inference and not mode.statically_disabled:
            mode = self.grad_mode
        self.scope.mode_stack.append(mode or self.grad_mode)
        self.compound.append(node)

    def _leave_With_body(self, node: cst.With) -> None:
        self.scope.mode_stack.pop()
        self.compound.pop()

    def _bind_loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        self._bind_target(target, self._element_of(iterable, target), None)

    def _element_of(self, iterable: cst.BaseExpression, target: cst.BaseExpression) -> Value:
        """What a loop over ``iterable`` binds to ``target`` on each iteration."""
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.args:
            wrapper = iterable.func.value
            if wrapper == "enumerate" and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                item = self._element_of(iterable.args[0].value, target.elements[1].value)
                return _pair(NUMBER, item)
            if wrapper == "zip" and isinstance(target, cst.Tuple) and len(target.elements) == len(iterable.args):
                items = [
                    self._element_of(arg.value, element.value)
                    for arg, element in zip(iterable.args, target.elements)
                ]
                return _tuple_of(items)
            if wrapper in ("list", "tuple", "reversed", "sorted", "iter"):
                return self._element_of(iterable.args[0].value, target)
        collection = self.value_of(iterable)
        if "named-parameters" in collection.tags and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            return _pair(UNKNOWN, Value(Kind.LEAF, iterable, tags=frozenset({"parameter"})))
        if collection.kind is Kind.COLLECTION and collection.element is not None:
            return collection.element
        if (
            collection.kind is Kind.UNKNOWN
            and isinstance(target, cst.Name)
            and target.value in self._grad_reads[-1]
        ):
            # ``for p in params: ... p.grad ...``: code that reads a loop variable's
            # .grad iterates over leaves (a non-leaf's .grad is always None).
            return Value(Kind.LEAF, target, tags=frozenset({"assumed-leaf"}))
        return UNKNOWN

    # ------------------------------------------------------------ comprehensions
    def _enter_comprehension(self, node: cst.BaseComp) -> None:
        self._comprehension_states.append(dict(self.scope.values))
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            self._bind_loop_target(comp.target, comp.iter)
            comp = comp.inner_for_in

    def _leave_comprehension(self, node: cst.BaseComp) -> None:
        self.scope.values = self._comprehension_states.pop()

    _enter_ListComp = _enter_SetComp = _enter_DictComp = _enter_GeneratorExp = _enter_comprehension
    _leave_ListComp = _leave_SetComp = _leave_DictComp = _leave_GeneratorExp = _leave_comprehension

    # ------------------------------------------------------------ grad mode
    def _mode_of_context(self, node: cst.BaseExpression) -> GradMode | None:
        """The grad mode a ``with`` item or decorator sets, or None if it sets none."""
        call = node if isinstance(node, cst.Call) else None
        target = call.func if call is not None else node
        qualified = self.qualify(target)
        if qualified in api.GRAD_DISABLING:
            if call is not None and qualified == "torch.inference_mode":
                args = positional_args(call) or [a.value for a in call.args if a.keyword and a.keyword.value == "mode"]
                if args and _literal_bool(args[0]) is False:
                    return None
                return INFERENCE
            if qualified == "torch.inference_mode":
                return INFERENCE
            return DISABLED
        if qualified in api.GRAD_ENABLING:
            return ENABLED
        if qualified == api.GRAD_SETTING:
            flag = _literal_bool(call.args[0].value) if call is not None and call.args else None
            if flag is None:
                return UNKNOWN_MODE
            return ENABLED if flag else DISABLED
        name = dotted_name(target) or ""
        if "grad" in name.lower() or "inference" in name.lower():
            return UNKNOWN_MODE  # something grad-related we cannot see into
        return None

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
            self.scope.functions[info.name] = info
        self.scope.bind(info.name, UNKNOWN)
        self.scope.deferred.append(info)
        return False

    def _enter_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _decorator_mode(self, node: cst.FunctionDef) -> GradMode | None:
        mode = None
        for decorator in node.decorators:
            found = self._mode_of_context(decorator.decorator)
            if found is not None:
                mode = found
        return mode

    def _run_deferred(self, scope: Scope) -> None:
        while scope.deferred:
            self._analyse_function(scope.deferred.pop(0))

    def _analyse_function(self, info: FunctionInfo) -> None:
        outer_scope, outer_statement, outer_loops, outer_compound = self.scope, self.statement, self.loops, self.compound
        # A method's body sees module (not class) names; keep the class for `self`.
        parent = info.parent_scope.parent if info.parent_scope.kind == "class" else info.parent_scope
        scope = Scope("function", parent, function=info, mode_stack=[info.entry_mode])
        self.scope, self.statement, self.loops, self.compound = scope, None, [], []
        grad_reads: set[str] = set()
        if self._grad_reads_enabled:
            collector = _GradReadCollector()
            self._walk(info.node.body, collector)
            grad_reads = collector.assumed_leaves
        self._grad_reads.append(grad_reads)
        self._bind_parameters(info, grad_reads)
        self._walk(info.node.body)
        self._run_deferred(scope)
        self._grad_reads.pop()
        self.scope, self.statement, self.loops, self.compound = outer_scope, outer_statement, outer_loops, outer_compound

    def _bind_parameters(
        self, info: FunctionInfo, grad_reads: set[str], passed: dict[str, Value] | None = None
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
                self.scope.bind(name, Value(value.kind, param, value.cls, value.element, value.items,
                                            value.tags | {"param", "from-call-sites"}))
            elif name in grad_reads:
                self.scope.bind(name, Value(Kind.LEAF, param, tags=frozenset({"param", "assumed-leaf"})))
            else:
                self.scope.bind(name, Value(Kind.UNKNOWN, param, tags=frozenset({"param"})))
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
        if len(sites) != self._call_site_count(info.name):
            return {}  # some call sites are analysed later, or are not calls we resolve
        agreed: dict[str, Value] = {}
        for name in set.intersection(*(set(site) for site in sites if site is not None)):
            value = sites[0][name]  # type: ignore[index]
            for site in sites[1:]:
                value = join(value, site[name])  # type: ignore[index]
            if value.kind in _CALL_SITE_KINDS:
                agreed[name] = value
        return agreed

    def _call_site_count(self, name: str) -> int:
        """How many calls name the function in the source (``f(...)``, ``x.f(...)``), counted
        from the text: comments and strings only add to it (then no call-site binding)."""
        counts = self._call_counts
        if counts is None:
            counts = self._call_counts = {}
        if name not in counts:
            escaped = re.escape(name)
            calls = _count_after_non_word(rf"{escaped}\s*\(", self.source)
            definitions = _count_after_non_word(rf"def\s+{escaped}\s*\(", self.source)
            counts[name] = calls - definitions
        return counts[name]

    # ------------------------------------------------------------ call graph
    # Runs for every call: exact type tests, not ``isinstance`` (slow on libcst's ABCs).
    def _enter_Call(self, node: cst.Call) -> None:
        if self._summarising is not None:
            return  # a look into a helper: the real analysis records its calls
        callee = self._resolve_callee(node.func)
        if callee is not None:
            callee.call_modes.append(self.grad_mode)
            callee.call_arguments.append(self.arguments_passed(node, callee))
        elif type(node.func) is cst.Attribute:
            name = node.func.attr.value
            if not name.startswith("__"):  # `super().__init__()` runs another class's method
                self._unresolved_calls_by_name.setdefault(name, []).append(self.grad_mode)
        else:
            module = self.value_of(node.func)
            forward = module.cls.method("forward") if module.kind is Kind.MODULE and module.cls else None
            if forward is not None:
                forward.call_modes.append(self.grad_mode)
                forward.call_arguments.append(self.arguments_passed(node, forward))
        for arg in node.args:
            # A function handed to someone else may be called in any mode.
            if type(arg.value) in _NAME_OR_ATTRIBUTE:
                passed = self._resolve_callee(arg.value)
                if passed is not None:
                    passed.call_modes.append(UNKNOWN_MODE)

    # ------------------------------------------------------------ helper summaries
    @classmethod
    def for_summary(cls, caller: Analyzer) -> Analyzer:
        """A rule-less analyzer that looks into a helper on behalf of ``caller``."""
        helper = cls(caller.module, caller.source)
        helper.imports = caller.imports
        helper.qualify = caller.qualify  # type: ignore[method-assign]
        helper.summaries = caller.summaries
        helper.summary_depth = caller.summary_depth + 1
        helper._grad_reads_enabled = caller._grad_reads_enabled
        helper._entry_mode = caller.grad_mode
        return helper

    def summarise(self, info: FunctionInfo, passed: dict[str, Value]) -> Value:
        """Analyse ``info``'s body with its parameters bound to ``passed``; the join of what
        its ``return`` statements give."""
        parent = info.parent_scope.parent if info.parent_scope.kind == "class" else info.parent_scope
        mode = info.decorator_mode or self._entry_mode
        self.scope = Scope("function", parent, function=info, mode_stack=[mode])
        self._summarising = info
        self._bind_parameters(info, set(), passed)
        self._walk(info.node.body)
        return summaries.join_returns(self._returns)

    def _leave_Return(self, node: cst.Return) -> None:
        if self._summarising is not None:
            if self.scope.function is self._summarising:
                self._returns.append(self.value_of(node.value) if node.value is not None else UNKNOWN)
            return
        self._note_return(node)  # the file's own analysis: what each function returns (facts.py)

    def arguments_passed(self, call: cst.Call, callee: FunctionInfo) -> dict[str, Value] | None:
        """Parameter name -> the value this call passes for it (None when ``*args`` /
        ``**kwargs`` hide which argument goes where)."""
        if any(arg.star for arg in call.args):
            return None
        params = callee.node.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        if callee.is_method:
            positional = positional[1:]  # `self` (or `cls`) is the receiver
        passed: dict[str, Value] = {}
        index = 0
        for arg in call.args:
            if arg.keyword is not None:
                passed[arg.keyword.value] = self.value_of(arg.value)
            elif index < len(positional):
                passed[positional[index]] = self.value_of(arg.value)
                index += 1
        return passed

    def _resolve_callee(self, func: cst.BaseExpression) -> FunctionInfo | None:
        if type(func) is cst.Name:
            found = self.scope.find_function(func.value)
            if found is not None:
                return found
            cls = self.scope.find_class(func.value)
            return cls.method("__init__") if cls is not None else None
        if type(func) is cst.Attribute:
            receiver = self.value_of(func.value)
            if receiver.cls is not None:
                return receiver.cls.method(func.attr.value)
            return None
        return None


def _handler_names() -> tuple[dict[str, tuple[str, ...]], tuple[tuple[str, str], ...]]:
    """Node type names with ``_enter_<Type>`` / ``_leave_<Type>`` handlers, and the
    (type name, field) pairs with ``_enter_<Type>_<field>`` / ``_leave_<Type>_<field>`` ones."""
    nodes: dict[str, list[str]] = {"_enter_": [], "_leave_": []}
    attributes: set[tuple[str, str]] = set()
    for attr in dir(Analyzer):
        for prefix, names in nodes.items():
            if not attr.startswith(prefix):
                continue
            name, _, field_name = attr[len(prefix):].partition("_")
            if not isinstance(getattr(cst, name, None), type):
                continue
            if field_name:
                attributes.add((name, field_name))
            else:
                names.append(name)
    return {prefix: tuple(names) for prefix, names in nodes.items()}, tuple(sorted(attributes))


_NODE_HANDLERS, _ATTRIBUTE_HANDLERS = _handler_names()
# ``Analyzer._value_<Type>`` by node type, for ``value_of`` (called for most expressions).
_VALUE_RULES: dict[type, Callable[[Analyzer, cst.BaseExpression], Value]] = {
    getattr(cst, attr[len("_value_"):]): getattr(Analyzer, attr)
    for attr in dir(Analyzer)
    if attr.startswith("_value_") and isinstance(getattr(cst, attr[len("_value_"):], None), type)
}


# For one node type: (analyzer ``_enter_`` method name, the rules' ``visit_`` methods as
# (rule index, name), their ``leave_`` methods, analyzer ``_leave_`` method name, and the
# field callbacks as (field, ``_enter_`` name, ``_leave_`` name)).
_TypePlan = tuple[
    "str | None", tuple[tuple[int, str], ...], tuple[tuple[int, str], ...], "str | None",
    tuple[tuple[str, "str | None", "str | None"], ...],
]


@dataclass
class _Callbacks:
    """A node type's callbacks, by method name, while ``_hook_plan`` collects them."""

    enter: str | None = None
    visits: list[tuple[int, str]] = field(default_factory=list)
    leaves: list[tuple[int, str]] = field(default_factory=list)
    exit: str | None = None
    attributes: list[tuple[str, str | None, str | None]] = field(default_factory=list)


@functools.lru_cache(maxsize=64)
def _hook_plan(rule_classes: tuple[type, ...]) -> tuple[dict[type, _TypePlan], frozenset[type]]:
    """The callbacks for each node type, by method name, for rules of these classes (in this
    order), and the node types that have any.  Worked out once per set of rules; each file's
    analyzer binds it to its objects (``_BoundHooks``)."""
    by_type: dict[type, _Callbacks] = {}

    def callbacks(name: str) -> Iterator[_Callbacks]:
        return (by_type.setdefault(node_type, _Callbacks()) for node_type in node_types_named(name))

    for name in _NODE_HANDLERS["_enter_"]:
        for found in callbacks(name):
            found.enter = f"_enter_{name}"
    for index, rule_class in enumerate(rule_classes):
        methods = callback_methods(rule_class)
        if methods is None:
            raise TypeError(f"{rule_class.__name__}: a rule has visit_<Node> / leave_<Node> methods only")
        for node_type, visit, leave in methods:
            found = by_type.setdefault(node_type, _Callbacks())
            if visit is not None:
                found.visits.append((index, visit))
            if leave is not None:
                found.leaves.append((index, leave))
    for name in _NODE_HANDLERS["_leave_"]:
        for found in callbacks(name):
            found.exit = f"_leave_{name}"
    for name, field_name in _ATTRIBUTE_HANDLERS:
        before, after = f"_enter_{name}_{field_name}", f"_leave_{name}_{field_name}"
        for found in callbacks(name):
            found.attributes.append(
                (field_name, before if hasattr(Analyzer, before) else None, after if hasattr(Analyzer, after) else None)
            )
    plan = {
        node_type: (c.enter, tuple(c.visits), tuple(c.leaves), c.exit, tuple(c.attributes))
        for node_type, c in by_type.items()
    }
    return plan, frozenset(plan)


class _BoundHooks(Mapping[type, NodeHooks]):
    """A ``_hook_plan`` bound to one file's analyzer and rules: each node type's ``NodeHooks``
    is made when first asked for (a file meets only some of the types)."""

    def __init__(
        self, plan: Mapping[type, _TypePlan], handled: frozenset[type], analyzer: Analyzer, rules: Sequence[Rule]
    ) -> None:
        self._plan = plan
        self.handled = handled  # the node types with callbacks: ``frozenset(self)``
        self._analyzer = analyzer
        self._rules = rules
        self._bound: dict[type, NodeHooks] = {}

    def __getitem__(self, node_type: type) -> NodeHooks:
        hooks = self._bound.get(node_type)
        if hooks is None:
            hooks = self._bound[node_type] = self._bind(*self._plan[node_type])
        return hooks

    def get(self, node_type: type, default: NodeHooks | None = None) -> NodeHooks | None:  # type: ignore[override]
        return self[node_type] if node_type in self._plan else default

    def _bind(
        self,
        enter: str | None,
        visits: tuple[tuple[int, str], ...],
        leaves: tuple[tuple[int, str], ...],
        exit_: str | None,
        attributes: tuple[tuple[str, str | None, str | None], ...],
    ) -> NodeHooks:
        analyzer, rules = self._analyzer, self._rules
        return NodeHooks(
            getattr(analyzer, enter) if enter else None,
            tuple([getattr(rules[index], attr) for index, attr in visits]),
            tuple([getattr(rules[index], attr) for index, attr in leaves]),
            getattr(analyzer, exit_) if exit_ else None,
            {
                field: (getattr(analyzer, before) if before else None, getattr(analyzer, after) if after else None)
                for field, before, after in attributes
            }
            if attributes
            else None,
        )

    def __iter__(self) -> Iterator[type]:
        return iter(self._plan)

    def __len__(self) -> int:
        return len(self._plan)


_NO_HOOKS = NodeHooks()
_EMPTY = frozenset({"empty"})


def _pair(first: Value, second: Value) -> Value:
    return _tuple_of([first, second])


def _tuple_of(items: list[Value]) -> Value:
    """A fixed-size tuple value, bound element-wise by tuple targets (``for i, p in ...``)."""
    return Value(Kind.COLLECTION, None, items=tuple(items))
