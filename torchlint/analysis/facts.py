"""Value facts about outputs and conversions, mixed into the ``Analyzer``:

- softmax outputs: ``F.softmax(x, 1)``, ``torch.softmax``, ``x.softmax(1)``, an ``nn.Softmax``
  called, an ``nn.Sequential`` whose last layer is one, a module of this file whose ``forward``
  returns one (known once the file is analysed: ``forward_returns``), also one element of what
  it returns, unpacked (``validity, label = discriminator(x)``: ``output_item``);
- graph-cut copies: ``torch.tensor(t)`` of a tensor that requires grad (or of values without a
  graph) has no graph; ``torch.as_tensor(t)`` is ``t`` itself; ``torch.from_numpy(a)`` has none;
- lists built by ``append``: ``losses = []; losses.append(loss)`` is a list of losses;
- what functions return (``FunctionInfo.returns``), and whether the file may freeze parameters
  (then a module's output need not require grad).

The torch spellings are data in ``torch_api``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.names import dotted_name
from torchlint.analysis.project import ProjectClassInfo
from torchlint.analysis.values import MODEL_OUTPUT_ITEM, NUMBER, UNKNOWN, Kind, Value, join

if TYPE_CHECKING:
    from torchlint.analysis.scopes import ClassInfo, FunctionInfo

_MODULE_OUTPUT = frozenset({"model-output"})
# Receivers whose ``requires_grad = False`` may freeze a module's parameters.
_MAY_FREEZE = frozenset({Kind.MODULE, Kind.LEAF, Kind.UNKNOWN, Kind.OBJECT, Kind.COLLECTION})


class ValueFacts:
    """Mixin of ``Analyzer`` (uses its ``value_of``, ``qualify``, ``scope``, ``_derived`` ...)."""

    def _init_facts(self) -> None:
        # id(module call node) -> the ``forward`` of this file's module class it runs.
        self._forwards: dict[int, FunctionInfo] = {}
        # id(module call node) -> the class of a sibling file whose module it calls (``project.py``).
        self._project_forwards: dict[int, ProjectClassInfo] = {}
        # id(module call node) -> the classes (of this file or a sibling) one of whose ``forward``s it
        # runs, for a module built from different classes on different paths.
        self._alternative_forwards: dict[int, tuple[ClassInfo, ...]] = {}
        self._may_freeze = False
        # id(unpacking target) -> (the module call whose output it is an element of, its position).
        self._output_items: dict[int, tuple[cst.Call, int]] = {}

    # ------------------------------------------------------------ questions
    def forward_returns(self, value: Value) -> Value:
        """For the output of a module class defined in this file (``model(x)``): the join of what
        its ``forward`` returns.  Only complete once the file is analysed: ask from ``when=``/``finish``."""
        origin, position = self._output_position(value)
        if origin is None:
            return UNKNOWN
        alternatives = self._alternative_forwards.get(id(origin))
        if alternatives is not None:
            return _join_all([_class_forward_returns(cls) for cls in alternatives], position)
        forward = self._forwards.get(id(origin))
        if forward is None or not forward.returns:
            return UNKNOWN
        return _join_all(forward.returns, position)

    def output_item(self, call: cst.Call, position: int, target: cst.BaseExpression) -> Value:
        """Element ``position`` of what the module call ``call`` returns, bound to ``target``
        (``validity, label = discriminator(x)``).  Nothing is known of it yet (a forward may return
        a tensor together with one-hot codes or counts); ``forward_returns`` tells the rest."""
        self._output_items[id(target)] = (call, position)
        return Value(Kind.UNKNOWN, target, tags=frozenset({MODEL_OUTPUT_ITEM}))

    def _output_element(self, base: Value, position: int, element: Value) -> Value:
        """``out[1]`` of a module call's output ``out``: ``element`` (what indexing a tensor
        gives), also known as element ``position`` of what the module's forward returns, for
        ``forward_returns`` to tell once the file is analysed."""
        if "model-output" not in base.tags or type(base.origin) is not cst.Call or element.origin is None:
            return element
        self._output_items[id(element.origin)] = (base.origin, position)
        return element.tagged(MODEL_OUTPUT_ITEM)

    def _output_position(self, value: Value) -> tuple[cst.CSTNode | None, int | None]:
        """The module call whose output ``value`` is, and the element it is (None: all of it)."""
        if value.origin is None:
            return None, None
        item = self._output_items.get(id(value.origin)) if MODEL_OUTPUT_ITEM in value.tags else None
        return item if item is not None else (value.origin, None)

    def is_softmax_output(self, value: Value) -> bool:
        """``value`` is a softmax output (for a module of this file: ask once the file is analysed)."""
        if "softmax" in value.tags or "softmax" in self.forward_returns(value).tags:
            return True
        returned = self._project_forward_returns(value)  # a module class of a sibling file
        return returned is not None and "softmax" in returned.tags

    def torch_class(self, value: Value) -> str | None:
        """The torch class (``torch.nn.CrossEntropyLoss``) a MODULE/OPTIMIZER value was built from."""
        origin = value.origin
        if value.kind in (Kind.MODULE, Kind.OPTIMIZER) and type(origin) is cst.Call:
            return self.qualify(origin.func)  # type: ignore[attr-defined]
        return None

    def requires_grad_when_run(self, value: Value) -> Callable[[], bool] | None:
        """For a value the analysis says requires grad (or holds such tensors), used here: None
        when it certainly does not at this point (grad mode statically off), else a condition
        to ask once the file is analysed -- some caller runs this point in grad mode, and a
        module's output is not from a file that freezes parameters (then it may be a leaf)."""
        mode = self.grad_mode
        if mode.statically_disabled:
            return None
        module_output = value.tagged_within(_MODULE_OUTPUT)
        return lambda: not mode.is_disabled() and not (module_output and self._may_freeze)

    @property
    def parameters_may_be_frozen(self) -> bool:
        """Something in the file sets ``requires_grad`` to False (or to a non-literal) on a module,
        parameter or unknown value: a module's output may then not require grad.  Complete once
        the file is analysed."""
        return self._may_freeze

    # ------------------------------------------------------------ value rules (called by Analyzer)
    def _torch_call_fact(self, node: cst.Call, qualified: str) -> Value | None:
        """The value of a torch call these facts know better than the generic rules, or None."""
        if qualified in api.SOFTMAX_FUNCTIONS:
            return self._softmax_of([self.value_of(a.value) for a in node.args if a.keyword is None], node)
        if qualified in api.LABEL_MIXING_FUNCTIONS:
            operands = [self.value_of(a.value) for a in node.args if a.keyword is None]
            if len(operands) == 2:
                value = self._derived(operands, node)
                return self._probabilities_kept(value, operands[0], "matmul", operands[1])
        if qualified in api.COPY_CONSTRUCTORS:
            return self._copy_value(node)
        if qualified in api.SHARING_CONSTRUCTORS:
            data = data_argument(node)
            if data is not None and self.value_of(data).is_tensor and _keyword(node, "requires_grad") is None:
                return self._derived([self.value_of(data)], node)  # the tensor itself, or a conversion
            return None
        if qualified in api.FROM_NUMPY_FUNCTIONS:
            return Value(Kind.PLAIN, node, tags=frozenset({"factory", "detached"}))
        if qualified in api.SOFTMAX_MODULES:
            return Value(Kind.MODULE, node, tags=frozenset({"parameterless", "softmax-output"}))
        if qualified in api.SEQUENTIAL_MODULES:
            layers = [arg.value for arg in node.args if arg.keyword is None]
            if node.args and not node.args[-1].star and layers and layers[-1] is node.args[-1].value:
                last = self.value_of(layers[-1])
                if last.kind is Kind.MODULE and "softmax-output" in last.tags:
                    return Value(Kind.MODULE, node, tags=frozenset({"softmax-output"}))
        return None

    def _softmax_of(self, inputs: list[Value], node: cst.CSTNode) -> Value:
        return self._derived(inputs, node).tagged("softmax")

    def _probabilities_kept(self, value: Value, receiver: Value, method: str, other: Value | None) -> Value:
        """``value`` (what ``receiver.<method>(other)`` gives) tagged "softmax" when the receiver
        is probabilities and the op keeps them so (``torch_api.PROBABILITY_KEEPING_METHODS``,
        ``LABEL_MIXING_METHODS`` with an operand that carries no graph)."""
        if "softmax" not in receiver.tags or "softmax" in value.tags:
            return value
        if method in api.PROBABILITY_KEEPING_METHODS or (
                method in api.LABEL_MIXING_METHODS and other is not None and not other.requires_grad):
            return value.tagged("softmax")
        return value

    def _copy_value(self, node: cst.Call) -> Value | None:
        """``torch.tensor(data)``: a new tensor without history.  It has no graph when its data
        had one (a graph-cut copy) or had lost it (``.item()``, ``.detach()``, NumPy)."""
        data = data_argument(node)
        if data is None:
            return None
        source = self.value_of(data)
        requires_grad = _keyword(node, "requires_grad")
        if requires_grad is not None:
            flag = requires_grad.value
            if type(flag) is cst.Name and flag.value == "True":
                return Value(Kind.LEAF, node, tags=frozenset({"factory"}))
            if not (type(flag) is cst.Name and flag.value == "False"):
                return UNKNOWN
        if source.carries_grad or _without_graph(source):
            return Value(Kind.PLAIN, node, tags=frozenset({"factory", "detached"}))
        return None


    def _method_call_fact(self, node: cst.Call, method: str, receiver: Value) -> Value | None:
        """``x.softmax(dim)`` (on any receiver that is not a module or object of this file);
        ``t.size()``, ``t.dim()``, ``t.numel()`` ... of a tensor are numbers, not tensors."""
        if method in api.SOFTMAX_METHODS and receiver.kind not in (Kind.MODULE, Kind.OBJECT):
            return self._softmax_of([receiver], node)
        if method in api.METADATA_METHODS and receiver.is_tensor:
            return NUMBER
        return None

    def _module_output_fact(self, node: cst.Call, module: Value, output: Value) -> Value:
        """Tag what calling ``module`` returns; remember which ``forward`` of this file it runs."""
        if "softmax-output" in module.tags:
            return output.tagged("softmax")
        if module.alternatives:
            self._alternative_forwards[id(node)] = module.alternatives
        elif type(module.cls) is ProjectClassInfo:
            self._project_forwards[id(node)] = module.cls
        elif module.cls is not None:
            forward = module.cls.forward_method()
            if forward is not None:
                self._forwards[id(node)] = forward
        return output

    # ------------------------------------------------------------ state changes
    def _note_return(self, node: cst.Return) -> None:
        """Record what ``return`` gives in ``FunctionInfo.returns`` (the file's own analysis only;
        the analyzers that summarise helpers keep theirs)."""
        function = self.function
        if function is not None:
            function.returns.append(self.value_of(node.value) if node.value is not None else UNKNOWN)

    def _note_append(self, node: cst.Call, func: cst.Attribute) -> None:
        """``xs.append(v)``: the list named ``xs`` now also holds ``v``."""
        if func.attr.value not in api.APPEND_METHODS or len(node.args) != 1 or node.args[0].keyword is not None:
            return
        key = dotted_name(func.value)
        if key is None:
            return
        current = self.value_of_key(key)
        if current.kind is not Kind.COLLECTION or current.items is not None:
            return
        added = self.value_of(node.args[0].value)
        element = added if "empty" in current.tags else join(current.element, added)
        held = Value(Kind.COLLECTION, current.origin, element=element)
        self.scope.bind(key, held)
        function = self.scope.function
        if function is not None and function.name == "__init__" and function.cls is not None \
                and key.startswith("self.") and self._summarising is None:
            function.cls.record_attr(function.name, key[5:], held)  # `self.agents.append(Agent())` in `__init__`

    def _forget_guarded(self, test: cst.BaseExpression) -> None:
        """``if loss.requires_grad:`` / ``if y.grad_fn is not None:``: the body runs only when the
        run decides so; there the tested names hold what the run says (unknown), not what the
        analysis guessed.  (The ``else`` branch starts from the state before the test.)"""
        for key in _guarded_keys(test):
            self.scope.bind(key, UNKNOWN)

    def _note_requires_grad_flag(self, receiver: cst.BaseExpression, flag: bool | None) -> None:
        """``x.requires_grad = False`` / ``x.requires_grad_(flag)``: parameters may get frozen."""
        if flag is not True and self.value_of(receiver).kind in _MAY_FREEZE:
            self._may_freeze = True


def data_argument(node: cst.Call) -> cst.BaseExpression | None:
    """The data a tensor constructor is given: its first positional argument or ``data=``."""
    for arg in node.args:
        if (arg.keyword is None and not arg.star) or (arg.keyword is not None and arg.keyword.value == "data"):
            return arg.value
    return None


def _keyword(node: cst.Call, name: str) -> cst.Arg | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _without_graph(value: Value) -> bool:
    """A value that lost its graph: a detached tensor, a number from ``.item()``/``float()``/NumPy,
    or a list of those."""
    if value.kind is Kind.COLLECTION:
        return value.element is not None and _without_graph(value.element)
    return value.kind in (Kind.PLAIN, Kind.NUMBER) and "detached" in value.tags


# ``x.requires_grad`` / ``x.grad_fn`` / ``x.is_leaf`` in a branch condition: the code asks the run.
_GRAPH_QUESTIONS = frozenset({"requires_grad", "grad_fn", "is_leaf"})


def _guarded_keys(test: cst.BaseExpression) -> list[str]:
    if type(test) is cst.Attribute:
        key = dotted_name(test.value) if test.attr.value in _GRAPH_QUESTIONS else None
        return [key] if key is not None else []
    if type(test) is cst.BooleanOperation:
        return _guarded_keys(test.left) + _guarded_keys(test.right)
    if type(test) is cst.UnaryOperation:
        return _guarded_keys(test.expression)
    if type(test) is cst.Comparison:
        return _guarded_keys(test.left)
    return []


def _class_forward_returns(cls: ClassInfo) -> Value | None:
    """The join of what the ``forward`` of ``cls`` (of this file or a sibling file) returns."""
    if type(cls) is ProjectClassInfo:
        return cls.project.forward_returns()
    forward = cls.forward_method()
    return functools.reduce(join, forward.returns) if forward is not None and forward.returns else None


def _join_all(returns: Sequence[Value | None], position: int | None) -> Value:
    """The join of element ``position`` of every returned value; unknown if one is not known."""
    if not returns or any(returned is None for returned in returns):
        return UNKNOWN
    return functools.reduce(join, [returned_item(returned, position) for returned in returns])  # type: ignore[arg-type]


def returned_item(returned: Value, position: int | None) -> Value:
    """Element ``position`` of a returned value (None: the value itself)."""
    if position is None:
        return returned
    if returned.items is not None and position < len(returned.items):
        return returned.items[position]
    return UNKNOWN
