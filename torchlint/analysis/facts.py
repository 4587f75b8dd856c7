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
from torchlint.analysis.values import CLASS_PER_CALL_SITE, MODEL_OUTPUT_ITEM, NUMBER, UNKNOWN, Kind, Value, join

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
        # ids of those module calls whose classes are what different call sites pass (every one
        # must return a softmax for the output to be probabilities: ``CLASS_PER_CALL_SITE``).
        self._every_alternative: set[int] = set()
        self._may_freeze = False
        # id(unpacking target) -> (the module call whose output it is an element of, its position).
        self._output_items: dict[int, tuple[cst.Call, int]] = {}

    # ------------------------------------------------------------ questions
    def forward_returns(self, value: Value) -> Value:
        """For the output of a module class defined in this file or a sibling (``model(x)``):
        the join of what its ``forward`` returns (of every class it may be built from, and for
        the join of outputs on different paths, of each).  Only complete once the file is
        analysed: ask from ``when=``/``finish``."""
        returned = [found for origin in _output_origins(value) for _, found in self._returns_at(origin) or [(None, None)]]
        return _join_all(returned, None)

    def softmax_classes(self, value: Value) -> tuple[str, ...] | None:
        """Whether ``value`` is softmax probabilities: None when not (or not known), ``()`` when
        it is whichever path ran, else the names of the classes it is the output of a softmax
        for -- a module built from one of several project classes on different paths
        (``net = CNN() if args.model == "cnn" else MLP()``), some of whose ``forward`` ends in a
        softmax: run with one of those, the value is probabilities.  For a join of module
        outputs on different paths, each path's output must be (one of its classes').  Only
        complete once the file is analysed."""
        if "softmax" in value.tags:
            return ()
        origins = _output_origins(value)
        if not origins:
            return None
        names: list[str] = []
        for origin in origins:
            candidates = self._returns_at(origin)
            if not candidates:
                return None
            softmax = [name for name, returned in candidates if returned is not None and "softmax" in returned.tags]
            if not softmax:
                return None
            if len(softmax) < len(candidates):
                if self._per_call_site(origin):
                    return None  # which class runs depends on the caller: not all of them do
                names.extend(name for name in softmax if name is not None and name not in names)
        return tuple(names)

    def is_softmax_output(self, value: Value) -> bool:
        """``value`` is a softmax output whichever path ran (for a module of this file or a
        sibling: ask once the file is analysed)."""
        return self.softmax_classes(value) == ()

    def _per_call_site(self, origin: cst.CSTNode) -> bool:
        call, _ = self._output_items.get(id(origin), (origin, None))
        return id(call) in self._every_alternative

    def _returns_at(self, origin: cst.CSTNode) -> list[tuple[str | None, Value | None]] | None:
        """For the output of a module call (or an element of one, by the unpacking target or
        subscript it was bound from): what the ``forward`` of each class the module may be
        returns there, with the class's name when it is one of several.  None: not known."""
        call, position = self._output_items.get(id(origin), (origin, None))
        alternatives = self._alternative_forwards.get(id(call))
        if alternatives is not None:
            found = [_class_forward_returns(cls) for cls in alternatives]
            return [(cls.name, None if returned is None else returned_item(returned, position))
                    for cls, returned in zip(alternatives, found)]
        forward = self._forwards.get(id(call))
        if forward is not None:
            return [(None, _join_all(forward.returns, position) if forward.returns else None)]
        module = self._project_forwards.get(id(call))
        if module is not None:
            returned = module.project.forward_returns()
            return [(None, None if returned is None else returned_item(returned, position))]
        return None

    def output_item(self, call: cst.Call, position: int, target: cst.BaseExpression) -> Value:
        """Element ``position`` of what the module call ``call`` returns, bound to ``target``
        (``validity, label = discriminator(x)``).  Nothing is known of it yet (a forward may return
        a tensor together with one-hot codes or counts); ``forward_returns`` tells the rest."""
        self._output_items[id(target)] = (call, position)
        item = Value(Kind.UNKNOWN, target, tags=frozenset({MODEL_OUTPUT_ITEM}))
        return item.with_outputs((target,)) if self._knows_forward(call) else item

    def _output_element(self, base: Value, position: int, element: Value) -> Value:
        """``out[1]`` of a module call's output ``out``: ``element`` (what indexing a tensor
        gives), also known as element ``position`` of what the module's forward returns, for
        ``forward_returns`` to tell once the file is analysed."""
        if "model-output" not in base.tags or type(base.origin) is not cst.Call or element.origin is None:
            return element
        self._output_items[id(element.origin)] = (base.origin, position)
        element = element.tagged(MODEL_OUTPUT_ITEM)
        return element.with_outputs((element.origin,)) if self._knows_forward(base.origin) else element

    def _knows_forward(self, call: cst.CSTNode) -> bool:
        """The module called by ``call`` is of a class (or one of several) whose forward is read."""
        key = id(call)
        return key in self._forwards or key in self._project_forwards or key in self._alternative_forwards

    def torch_class(self, value: Value) -> str | None:
        """The torch class (``torch.nn.CrossEntropyLoss``) a MODULE/OPTIMIZER value was built from."""
        if value.torch_class is not None:
            return value.torch_class  # (built in another file)
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
            if CLASS_PER_CALL_SITE in module.tags:
                self._every_alternative.add(id(node))
        elif type(module.cls) is ProjectClassInfo:
            self._project_forwards[id(node)] = module.cls
        elif module.cls is not None:
            forward = module.cls.forward_method()
            if forward is None:
                return output
            self._forwards[id(node)] = forward
        else:
            return output
        return output.with_outputs((node,))

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


def _output_origins(value: Value) -> tuple[cst.CSTNode, ...]:
    """Where a module output came from: each path's module call (or element), else its origin."""
    if value.outputs:
        return value.outputs
    return (value.origin,) if value.origin is not None else ()


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
