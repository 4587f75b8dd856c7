"""Value evaluation, mixed into the ``Analyzer``: what an expression holds at the current point.

``value_of`` dispatches on the node type to a ``_value_<Type>`` rule; the lattice is in
``values.py`` (leaf, non-leaf, plain, number, module, optimizer, object, collection, unknown,
with tags); the torch spellings are data in ``torch_api``; output and conversion facts
(softmax outputs, graph-cut copies, appended lists) come from ``facts.ValueFacts``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace

import libcst as cst

from torchlint.analysis import method_candidates, summaries
from torchlint.analysis import torch_api as api
from torchlint.analysis.facts import ValueFacts
from torchlint.analysis.module_evidence import treated_as_module
from torchlint.analysis.names import (
    dotted_name, is_basic_indexing, keyword_arg, literal_bool, literal_index, literal_int, positional_args, through_grad,
)
from torchlint.analysis.values import (
    ASSUMED_TAGS, BACKPROPAGATED, COPIED_TO_GPU, LEAF_ON_A_PATH, LEAF_ON_CPU, MOVED_LEAF_ON_A_PATH, NUMBER,
    NUMPY_ARRAY, REQUIRES_GRAD_ON_EVERY_PATH, SUBMODULE_ELEMENT, UNKNOWN, VIEW_OF_LEAF, ZERO, INTEGER, INTEGRAL,
    ZERO_INTEGER, Kind, Value, join,
)

# Tags of a gradient (``p.grad``) and of a value computed from one (``lr * p.grad``).
GRADIENT_TAGS = frozenset({"grad", "from-grad"})
_EMPTY = frozenset({"empty"})
_NUMPY_ARRAY = frozenset({NUMPY_ARRAY})


class Evaluation(ValueFacts):
    """Mixin of ``Analyzer`` (uses its ``scope``, ``qualify``, ``grad_mode``, ``_resolve_callee``)."""

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

    def builtin_module(self, value: Value) -> tuple[str, cst.Call] | None:
        """(the class name, the constructor call) of a module built from a ``torch.nn`` class
        (``nn.ReLU(inplace=True)``); None for any other value."""
        origin = value.origin
        if value.kind is not Kind.MODULE or value.cls is not None or type(origin) is not cst.Call:
            return None
        qualified = self.qualify(origin.func) or ""  # type: ignore[attr-defined]
        if not qualified.startswith("torch.nn.") or qualified.count(".") != 2:
            return None
        return qualified.rsplit(".", 1)[-1], origin  # type: ignore[return-value]

    def holds_module(self, node: cst.BaseExpression) -> bool:
        """``node`` holds an ``nn.Module``: its value is one, or, of unknown value, the file reads a
        parameter below it or calls a module-only method on it (``module_evidence.py``)."""
        value = self.value_of(node)
        if value.kind is Kind.MODULE:
            return True
        if value.kind is not Kind.UNKNOWN or value.cls is not None:
            return False
        key = dotted_name(node)
        return key is not None and treated_as_module(self.source, key)  # type: ignore[attr-defined]

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

    # ---------------------------------------------------------- value rules
    def _value_Name(self, node: cst.Name) -> Value:
        if node.value in ("True", "False", "None"):
            return UNKNOWN
        return self.value_of_key(node.value)

    def _value_Integer(self, node: cst.Integer) -> Value:
        return ZERO_INTEGER if not node.value.strip("0_") else INTEGER

    def _value_Float(self, node: cst.Float | cst.Imaginary) -> Value:
        return ZERO if not node.value.strip("0._") else NUMBER  # (``0.0``, ``0.``)

    _value_Imaginary = _value_Float

    def _value_Attribute(self, node: cst.Attribute) -> Value:
        key = dotted_name(node)
        if key is not None:
            found = self.scope.lookup(key)
            if found is not None:
                return found
        attr = node.attr.value
        if attr == "indices" and self._is_values_and_indices(node.value):
            return Value(Kind.PLAIN, node)
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
        if base.is_tensor and attr in api.VIEW_ATTRIBUTES:
            return _as_view(base, self._derived([base], node))
        if base.kind is Kind.UNKNOWN and attr in api.BUILTIN_PARAMETER_ATTRS and (
            SUBMODULE_ELEMENT in base.tags or self._inside_module(node.value)
        ):
            # ``model.bert.encoder.layer[3].output.dense.weight``: the layer a pretrained model
            # holds deep inside is not known, but a ``weight`` of a submodule is a parameter.
            return Value(Kind.LEAF, node, tags=frozenset({"parameter"}))
        return UNKNOWN

    def _inside_module(self, node: cst.BaseExpression) -> bool:
        """``node`` is an attribute/index chain (``m.a.b[i].c``) reached from a module whose
        links are not known to be anything else."""
        while True:
            kind = type(node)
            if kind is cst.Attribute:
                if node.attr.value in api.NOT_SUBMODULE_ATTRIBUTES:  # type: ignore[attr-defined]
                    return False
                node = node.value  # type: ignore[attr-defined]
            elif kind is cst.Subscript:
                node = node.value  # type: ignore[attr-defined]
            else:
                return False
            value = self.value_of(node)
            if value.kind is Kind.MODULE:
                return value.cls is None
            if SUBMODULE_ELEMENT in value.tags:
                return True
            if value.kind is not Kind.UNKNOWN:
                return False

    def _value_Subscript(self, node: cst.Subscript) -> Value:
        if _is_literal_index(node, 1) and self._is_values_and_indices(node.value):
            return Value(Kind.PLAIN, node)  # `torch.max(probs, 1)[1]`: the int64 indices
        base = self.value_of(node.value)
        if base.kind is Kind.COLLECTION:
            if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Slice:
                return _sliced(base, node.slice[0].slice, node)  # `stats[:4]`: still a tuple
            return (base.entries if base.entries is not None else base.element) or UNKNOWN
        if "softmax" in base.tags:  # `probs[:, -1]`: some of the probabilities
            return self._derived([base], node).tagged("softmax")
        if base.is_tensor:
            result = self._derived([base], node)
            result = _as_view(base, result) if self._is_basic_index(node) else result
            position = literal_index(node)  # (an element of a returned tuple, counted from the front)
            return result if position is None or position < 0 else self._output_element(base, position, result)
        if base.kind is Kind.MODULE:
            entry = base.entries
            return entry if entry is not None and entry.kind is Kind.MODULE else Value(Kind.MODULE, node)
        return UNKNOWN

    def _is_values_and_indices(self, node: cst.BaseExpression) -> bool:
        """``node`` is a call returning a (values, indices) pair: ``torch.sort(t)``, ``t.topk(k)``,
        ``torch.max(t, 1)``, ``t.max(dim=1)`` (not ``torch.max(t)``, nor ``torch.max(a, b)``)."""
        if type(node) is not cst.Call:
            return False
        qualified = self.qualify(node.func)
        if qualified is not None:
            name, dim_position = qualified.rsplit(".", 1)[-1], 1
            if not qualified.startswith("torch."):
                return False
        elif type(node.func) is cst.Attribute:
            name, dim_position = node.func.attr.value, 0
        else:
            return False
        if name in api.VALUES_AND_INDICES:
            return True
        if name not in api.VALUES_AND_INDICES_GIVEN_A_DIM:
            return False
        if keyword_arg(node, "dim") is not None:
            return True
        args = positional_args(node)
        return len(args) > dim_position and self.value_of(args[dim_position]).kind is Kind.NUMBER

    def _is_basic_index(self, node: cst.Subscript) -> bool:
        """``t[0]``, ``t[:, 4]``, ``t[..., i]``: indexing by slices and numbers makes a view (a
        tensor or list index makes a copy)."""
        return is_basic_indexing(node, lambda index: self.value_of(index).kind is Kind.NUMBER)

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

    def _value_Dict(self, node: cst.Dict) -> Value:
        """``{"mse": nn.MSELoss()}``: indexing gives the join of its values (a ``**other``
        entry: unknown); iterating gives its keys, not followed."""
        entries: Value | None = None
        for item in node.elements:
            value = self.value_of(item.value) if type(item) is cst.DictElement else UNKNOWN
            entries = value if entries is None else join(entries, value)
        if entries is None:  # `{}`: its first entry (`_bind_entry`) is all it holds
            return Value(Kind.COLLECTION, node, element=UNKNOWN, tags=_EMPTY).with_entries(UNKNOWN)
        return Value(Kind.COLLECTION, node, element=UNKNOWN).with_entries(entries)

    def _value_ListComp(self, node: cst.ListComp | cst.SetComp | cst.GeneratorExp) -> Value:
        """``[f(x) for x in xs]``: a collection of what the element gives with the loop targets
        bound as a loop over the iterables binds them (the bindings are undone afterwards)."""
        saved = dict(self.scope.values)
        try:
            comp: cst.CompFor | None = node.for_in
            while comp is not None:
                self._bind_loop_target(comp.target, comp.iter)  # type: ignore[attr-defined]
                comp = comp.inner_for_in
            element = self.value_of(node.elt)
        finally:
            self.scope.values = saved
        return Value(Kind.COLLECTION, node, element=element)

    _value_SetComp = _value_GeneratorExp = _value_ListComp

    def _value_Call(self, node: cst.Call) -> Value:
        value = self._value_of_call(node)
        if value is UNKNOWN and self.project is not None:  # perhaps made by a sibling file's code
            return self._project_call_value(node) or value
        return value

    def _value_of_call(self, node: cst.Call) -> Value:
        func = node.func
        qualified = self.qualify(func)
        if qualified is not None:
            return self._value_of_torch_call(node, qualified)
        if type(func) is cst.Name:
            cls = self.scope.find_class(func.value)
            if cls is not None:
                return Value(Kind.MODULE if cls.is_module else Kind.OBJECT, node, cls=cls)
            if func.value in ("float", "int", "bool", "len"):
                return (NUMBER if func.value == "float" else INTEGER).tagged("detached")
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
        if qualified in api.NUMPY_ARRAY_FACTORIES:
            return Value(Kind.UNKNOWN, node, tags=_NUMPY_ARRAY)
        if qualified in api.FACTORIES:
            requires_grad = keyword_arg(node, "requires_grad")
            if requires_grad is None:
                return Value(Kind.PLAIN, node, tags=frozenset({"factory"}))
            flag = literal_bool(requires_grad.value)
            if flag is None:
                return UNKNOWN
            return Value(Kind.LEAF if flag else Kind.PLAIN, node, tags=frozenset({"factory"}))
        if qualified == api.VARIABLE:
            return self._value_of_variable(node)
        if qualified in api.MODULE_KEEPING_WRAPPERS or qualified in api.PARALLEL_WRAPPERS:
            wrapped = positional_args(node)
            module = self.value_of(wrapped[0]) if wrapped else UNKNOWN
            if module.kind is Kind.MODULE:
                return module
            return Value(Kind.MODULE, node) if qualified in api.PARALLEL_WRAPPERS else UNKNOWN
        if qualified == "torch.autograd.grad":
            return Value(Kind.COLLECTION, node, element=_gradients(node))
        if qualified == api.PARAMETER:
            requires_grad = keyword_arg(node, "requires_grad")
            if requires_grad is not None and literal_bool(requires_grad.value) is not True:
                return UNKNOWN if literal_bool(requires_grad.value) is None else Value(Kind.PLAIN, node)
            return Value(Kind.LEAF, node, tags=frozenset({"parameter"}))
        if qualified in api.DEEP_COPYING_FUNCTIONS:
            return self._value_of_deep_copy(node)
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
            module = Value(Kind.MODULE, node, tags=frozenset({"parameterless"} if parameterless else ()))
            return self._module_dict(node, module) if qualified == api.MODULE_DICT else module
        if qualified.startswith("torch.") and last in api.NON_DIFFERENTIABLE:
            return Value(Kind.PLAIN, node)
        if qualified.startswith("torch.") and last[:1].islower() and not qualified.startswith(("torch.optim", "torch.utils")):
            return self._derived([self.value_of(arg.value) for arg in node.args if arg.keyword is None], node)
        return UNKNOWN

    def _value_of_deep_copy(self, node: cst.Call) -> Value:
        """``copy.deepcopy(model)`` is another module of the same class (its own parameters, a
        new identity); of a leaf, another leaf; of a plain tensor, a plain one.  (Of a non-leaf
        it raises; of anything else: unknown.)"""
        args = positional_args(node)
        copied = self.value_of(args[0]) if len(args) == 1 else UNKNOWN
        if copied.kind in (Kind.MODULE, Kind.LEAF, Kind.PLAIN):
            return replace(copied, origin=node)
        return UNKNOWN

    def _module_dict(self, node: cst.Call, module: Value) -> Value:
        """``nn.ModuleDict()`` / ``nn.ModuleDict({"g": G()})``: indexing it gives its entries (a
        literal's, then those assigned, ``_bind_entry``); built from anything else, a module."""
        args = node.args
        if not args:
            return module.tagged("empty").with_entries(UNKNOWN)
        if len(args) == 1 and args[0].keyword is None and type(args[0].value) is cst.Dict:
            entries = self.value_of(args[0].value).entries
            return module.with_entries(entries) if entries is not None else module
        return module

    def _value_of_variable(self, node: cst.Call) -> Value:
        """Legacy ``Variable(t, requires_grad=True)`` is a new leaf; ``Variable(t)`` a plain
        tensor, but of a tensor that requires grad an alias that still does (measured)."""
        requires_grad = keyword_arg(node, "requires_grad")
        if requires_grad is not None:
            flag = literal_bool(requires_grad.value)
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
        receiver = self.value_of(func.value)
        value = self._method_result(node, func, receiver)
        if "softmax" in receiver.tags:  # `probs.unsqueeze(1).bmm(labels)`: probabilities still
            args = [arg.value for arg in node.args if arg.keyword is None]
            other = self.value_of(args[0]) if len(args) == 1 else None
            value = self._probabilities_kept(value, receiver, func.attr.value, other)
        return value

    def _method_result(self, node: cst.Call, func: cst.Attribute, receiver: Value) -> Value:
        method = func.attr.value
        if method in api.PARAMETER_ITERATORS:
            return Value(Kind.COLLECTION, node, element=Value(Kind.LEAF, node, tags=frozenset({"parameter"})))
        if method in api.NAMED_PARAMETER_ITERATORS:
            return Value(Kind.COLLECTION, node, element=UNKNOWN, tags=frozenset({"named-parameters"}))
        if receiver.kind is Kind.MODULE and method in api.MODULE_CALL_METHODS and not (
                method == "__call__" and receiver.cls is not None and receiver.cls.method(method) is not None):
            # `self.forward(x)` / `model.forward(x)` runs what calling the module runs (its
            # hooks aside), `self.__call__(x)` is calling it (unless the class defines its own
            # `__call__`): the same output, asked the same way (not a helper summary).
            return self._value_of_module_call(node, receiver)
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
            return UNKNOWN
        known = self._method_call_fact(node, method, receiver)
        if known is not None:
            return known
        if method == "requires_grad_" and receiver.kind is Kind.UNKNOWN and _cuts_graph(func.value):
            # `p.data.clone().requires_grad_()`: only a tensor has `requires_grad_`, and one read
            # through `.data` / `.detach()` has no graph, so the result is a new leaf.
            receiver = Value(Kind.PLAIN, func.value, tags=frozenset({"detached"}))
        if not receiver.is_tensor:
            if receiver.kind is Kind.UNKNOWN and receiver.cls is None:
                fitted = self._fitted_method_result(node, func)
                if fitted is not None:
                    return fitted
            if LEAF_ON_A_PATH in receiver.tags and self._copies_a_leaf(node, method):
                return Value(Kind.UNKNOWN, node, tags=frozenset({MOVED_LEAF_ON_A_PATH}))
            return UNKNOWN
        if method == "detach":
            # "detach-call": cut on purpose (a no_grad result is "detached" too, by accident).
            return Value(Kind.PLAIN, node, tags=frozenset({"detached", "detach-call"}))
        if method in api.SCALAR_METHODS:
            return NUMBER.tagged("detached")
        if method in api.NON_DIFFERENTIABLE:
            return Value(Kind.PLAIN, node)
        if method == "requires_grad_":
            flag = literal_bool(node.args[0].value) if node.args else True
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
        result = self._derived([receiver] + [self.value_of(a.value) for a in node.args if a.keyword is None], node)
        return _as_view(receiver, result) if method in api.VIEW_METHODS else result

    def _fitted_method_result(self, node: cst.Call, func: cst.Attribute) -> Value | None:
        """``ct, ns, loss = user.test()`` on a receiver of unknown class: the result of the one
        method of that name among the file's classes that returns as many items as the line
        unpacks (``method_candidates.py``); None when no single one fits."""
        arity = method_candidates.unpacking_arity(self.statement, node)
        if arity is None:
            return None
        method = func.attr.value
        cls = method_candidates.unique_fit(self.scope.module.classes.values(), method, arity)
        if cls is None:
            return None
        if self.project is not None and (self.project.stars or not method_candidates.fits_nowhere_else(
                self.project.imported_classes(), method, arity)):
            return None  # (an instance of an imported class may be the receiver as well)
        instance = Value(Kind.MODULE if cls.is_module else Kind.OBJECT, func.value, cls=cls)
        return self._method_result(node, func, instance)

    def _value_of_conversion(self, node: cst.Call, method: str, receiver: Value) -> Value:
        if not receiver.requires_grad:
            return receiver
        if method in api.NOOP_ON_DEFAULT_TENSOR or (method == "to" and self._is_cpu_literal(node)):
            # Same object on a float32 CPU tensor; a non-leaf copy on a GPU.
            return receiver.tagged("device-dependent")
        if self.grad_mode.statically_disabled:
            return Value(Kind.PLAIN, node, tags=frozenset({"detached"}))
        if method == "to" and receiver.kind is Kind.LEAF and self._only_device_given(node):
            # `.to(device)`: a non-leaf copy on a GPU, the leaf itself when `device` is the CPU.
            return Value(Kind.NONLEAF, node, tags=frozenset({"device-dependent", LEAF_ON_CPU}))
        if method == "cuda" and _made_on_the_cpu(receiver):
            # Wherever this runs (elsewhere `.cuda()` raises), a copy of a CPU leaf: a non-leaf.
            return Value(Kind.NONLEAF, node, tags=frozenset({"device-dependent", COPIED_TO_GPU}))
        return Value(Kind.NONLEAF, node, tags=frozenset({"device-dependent"}))

    def _copies_a_leaf(self, node: cst.Call, method: str) -> bool:
        """``leaf.<method>(...)`` is a non-leaf copy, at least on a GPU (``.to(device)``, ``.cuda()``,
        ``.double()``), unlike ``.cpu()`` / ``.float()`` / ``.to("cpu")`` of a float32 CPU tensor."""
        if method not in api.CONVERSION_METHODS or method in api.NOOP_ON_DEFAULT_TENSOR or method == "type":
            return False
        return not (method == "to" and self._is_cpu_literal(node))

    def _only_device_given(self, node: cst.Call) -> bool:
        """``x.to(device)`` with one positional argument that is not a dtype, no keywords but
        ``non_blocking``: the same tensor when the device is the one it is on."""
        args = positional_args(node)
        if len(args) != 1 or any(arg.keyword is not None and arg.keyword.value != "non_blocking" for arg in node.args):
            return False
        qualified = self.qualify(args[0])
        return not (qualified in api.TORCH_DTYPES or self.value_of(args[0]).is_tensor)

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
        grad_inputs = [value for value in inputs if value.requires_grad or REQUIRES_GRAD_ON_EVERY_PATH in value.tags]
        if grad_inputs:
            if self.grad_mode.statically_disabled:
                return Value(Kind.PLAIN, node, tags=frozenset({"detached"}))
            # "assumed": it requires grad only if the assumed leaves it comes from really do.
            assumed = all(ASSUMED_TAGS & value.tags for value in grad_inputs)
            return Value(Kind.NONLEAF, node, tags=frozenset({"assumed"} if assumed else ()))
        if inputs and all(value.kind in (Kind.PLAIN, Kind.NUMBER) for value in inputs):
            if all(value.kind is Kind.NUMBER for value in inputs):
                return INTEGER if _integral_arithmetic(inputs, node) else NUMBER
            detached = any("detached" in value.tags for value in inputs)
            return Value(Kind.PLAIN, node, tags=frozenset({"detached"} if detached else ()))
        if any(BACKPROPAGATED in value.tags for value in inputs) and not self.grad_mode.statically_disabled:
            return _FROM_BACKPROPAGATED  # `lossD = lossD_real + lossD_fake`: it carries their graphs
        return UNKNOWN


# Operators that keep ints ints (``/`` and ``**`` may not: ``2 ** -1``).
_INTEGRAL_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo, cst.Minus, cst.Plus)


def _integral_arithmetic(inputs: Sequence[Value], node: cst.CSTNode) -> bool:
    """``n + 1`` of ints (or ``-n``): an int."""
    operator = getattr(node, "operator", None)
    return isinstance(operator, _INTEGRAL_OPERATORS) and all(INTEGRAL in value.tags for value in inputs)


def _is_literal_index(node: cst.Subscript, number: int) -> bool:
    """``x[number]``: one element, a literal integer."""
    return literal_index(node) == number


def _sliced(base: Value, part: cst.Slice, node: cst.Subscript) -> Value:
    """``seq[a:b]`` of a collection: a collection of the same elements; of a fixed-size tuple
    with literal integer bounds (``stats[:4]``, ``t[1:]``) the tuple of those positions."""
    items = None
    if base.items is not None and part.step is None:
        bounds = [literal_int(bound) for bound in (part.lower, part.upper)]
        if all(bound is not None or given is None for bound, given in zip(bounds, (part.lower, part.upper))):
            items = base.items[bounds[0]:bounds[1]]
    element = functools.reduce(join, items) if items else base.element
    return Value(Kind.COLLECTION, node, element=element or UNKNOWN, items=items, tags=base.tags)


def _as_view(base: Value, result: Value) -> Value:
    """``result``, a view of ``base``: tagged a view of a leaf when ``base`` is one (or a view of
    one) that certainly requires grad and the view was made in grad mode (a NONLEAF result)."""
    is_leaf = base.kind is Kind.LEAF or VIEW_OF_LEAF in base.tags
    if is_leaf and base.certainly_requires_grad and result.kind is Kind.NONLEAF:
        return result.tagged(VIEW_OF_LEAF)
    return result


# What an op on a value that a backward() went through gives (see ``Bindings._note_backpropagated``).
_FROM_BACKPROPAGATED = UNKNOWN.tagged(BACKPROPAGATED)


def _gradients(node: cst.Call) -> Value:
    """What ``torch.autograd.grad(...)`` returns: gradients without a graph, unless
    ``create_graph=True``: then they carry one (a gradient penalty, MAML's inner step), which
    is left unknown (sums of them are usually backpropagated, through paths not followed)."""
    create_graph = keyword_arg(node, "create_graph")
    if create_graph is None or literal_bool(create_graph.value) is False:
        return Value(Kind.PLAIN, node, tags=frozenset({"grad"}))
    return UNKNOWN


def _made_on_the_cpu(value: Value) -> bool:
    """A leaf this code made with a factory (or ``Variable``) given no device: on the CPU
    (unless a default device is set, which ``torch.set_default_device`` files are not
    expected to combine with ``.cuda()``)."""
    origin = value.origin
    return (
        value.kind is Kind.LEAF and "factory" in value.tags and type(origin) is cst.Call
        and keyword_arg(origin, "device") is None
    )


def _cuts_graph(node: cst.BaseExpression) -> bool:
    """``x.data`` / ``x.detach()``, possibly copied (``.clone()``): a tensor without a graph."""
    while type(node) is cst.Call and type(node.func) is cst.Attribute and not node.args:
        method = node.func.attr.value
        if method in api.DETACHING_METHODS:
            return True
        if method not in api.GRAPH_KEEPING_COPY_METHODS:
            return False
        node = node.func.value
    return type(node) is cst.Attribute and node.attr.value in api.DETACHING_ATTRIBUTES


# ``Evaluation._value_<Type>`` by node type, for ``value_of`` (called for most expressions).
_VALUE_RULES: dict[type, Callable[[Evaluation, cst.BaseExpression], Value]] = {
    getattr(cst, attr[len("_value_"):]): getattr(Evaluation, attr)
    for attr in dir(Evaluation)
    if attr.startswith("_value_") and isinstance(getattr(cst, attr[len("_value_"):], None), type)
}
