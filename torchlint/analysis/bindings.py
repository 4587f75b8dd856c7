"""Bindings, mixed into the ``Analyzer``: what assignments, loops, comprehensions and in-place
calls (``w.requires_grad_()``, ``w.detach_()``) bind names and ``self.x`` keys to.

Bindings are applied when a statement is left, after the rules' hooks for it have run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.events import EventKind
from torchlint.analysis.names import dotted_expression, dotted_name, literal_bool
from torchlint.analysis.scopes import BindingCollector, Bindings, BindingTable, parameter_names
from torchlint.analysis.values import BACKPROPAGATED, LEAF_ON_CPU, NUMBER, SUBMODULE_ELEMENT, UNKNOWN, Kind, Value, join
from torchlint.analysis.walk import scan, subtree

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

# Method names of the backward spellings (``loss.backward()``, ``self.manual_backward(loss)``).
_BACKWARD_SPELLINGS = frozenset({"backward", *api.DELEGATED_BACKWARD_METHODS})
# Expressions whose value may differ between two evaluations with the same names in scope.
_CALLING_TYPES = frozenset({cst.Call, cst.Await, cst.Yield, cst.NamedExpr})

# Tags of a module known only from the module-only methods called on it; of an unknown parameter.
_USED_AS_MODULE = frozenset({"used-as-module"})
_PARAMETER_TAGS = frozenset({"param"})


def _binding_table(body: cst.CSTNode) -> BindingTable:
    collector = BindingCollector()
    scan(body, collector)
    return BindingTable(collector)


class BindingState:
    """Mixin of ``Analyzer`` (uses its ``scope``, ``value_of``, ``loops``, ``grad_mode`` ...)."""

    def binding_table(self, body: cst.CSTNode) -> BindingTable:
        """What the statements of ``body`` (a function's body, the module, a loop, a statement)
        bind, nested functions and classes excluded: walked once per body (``memo.py``)."""
        return self.memo.get("bindings", body, _binding_table)

    def scope_bindings(self) -> BindingTable:
        """The ``binding_table`` of the function (or module) the analysis is in."""
        function = self.function
        return self.binding_table(function.node.body if function is not None else self.module)

    def made_leaf_in_scope(self, key: str) -> bool:
        """Whether the function (or module) the analysis is in makes ``key`` a leaf or cuts it
        from the graph in place somewhere: ``key.requires_grad = ...``, ``key.requires_grad_()``,
        ``key.detach_()``."""
        return key in self.scope_bindings().made_leaf

    def is_assignment_target(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` is written, not read, by the current statement: a target of ``=``
        (or an element of a tuple target), of an annotated assignment or of ``del``."""
        line = self.statement
        if line is None:
            return False
        for small in line.body:
            kind = type(small)
            if kind is cst.Assign:
                if any(_is_target_or_element(node, target.target) for target in small.targets):  # type: ignore[attr-defined]
                    return True
            elif kind is cst.AnnAssign or kind is cst.Del:
                if _is_target_or_element(node, small.target):  # type: ignore[attr-defined]
                    return True
        return False

    def invariant_in(self, expr: cst.BaseExpression, loop: cst.For | cst.While) -> bool:
        """Whether ``expr`` has the same value on every iteration of ``loop``: it calls nothing
        and reads no name or attribute the loop (its target included) binds or changes."""
        changed = self.binding_table(loop).keys
        for node in subtree(expr):
            kind = type(node)
            if kind in _CALLING_TYPES:
                return False
            if kind is cst.Name or kind is cst.Attribute:
                key = dotted_name(node)  # type: ignore[arg-type]
                if key is not None and (key in changed or key.split(".", 1)[0] in changed):
                    return False
        return True

    def made_leaf_in_loop(self, key: str, loop: cst.For | cst.While) -> bool:
        """Whether the body of ``loop`` (so far) sets ``key.requires_grad`` / calls
        ``key.requires_grad_()``: a value detached at the end of an iteration is made a leaf
        again in the next one."""
        return key in self._made_leaf_in_loop.get(id(loop), ())

    # ------------------------------------------------------------ bindings
    def _bind_entry(self, target: cst.Subscript, value: Value) -> None:
        """``losses["val"] = x`` on a dict literal (or ``nn.ModuleDict``) bound in this scope:
        indexing it may give ``x`` from now on (a dict bound elsewhere, or changed by other code,
        is not followed); the first entry of an empty one is all it holds."""
        key = dotted_name(target.value)
        held = self.scope.values.get(key) if key is not None else None
        if held is None or held.entries is None:
            return
        if "empty" in held.tags:
            held = replace(held, tags=held.tags - {"empty"}).with_entries(value)
        else:
            held = held.with_entries(join(held.entries, value))
        self._rebind_dict(key, held)

    def _rebind_dict(self, key: str, held: Value) -> None:
        self.scope.values[key] = held
        function = self.scope.function
        if self._summarising is None and function is not None and function.cls is not None and _is_self_attribute(key):
            function.cls.record_attr(function.name, key[5:], held)  # `self.nets["g"] = G()`

    def _forget_entries(self, node: cst.Call, func: cst.BaseExpression) -> None:
        """A dict whose entries are known, changed by other means than ``d[k] = v`` (``d.update(o)``,
        ``fill(d)``): indexing it may give anything from now on."""
        if type(func) is cst.Attribute and func.attr.value in api.DICT_FILLING_METHODS:  # type: ignore[attr-defined]
            self._forget_entries_of(dotted_name(func.value))  # type: ignore[attr-defined]
        for arg in node.args:
            if type(arg.value) is cst.Name:
                self._forget_entries_of(arg.value.value)  # type: ignore[attr-defined]

    def _forget_entries_of(self, key: str | None) -> None:
        held = self.scope.values.get(key) if key is not None else None
        if held is not None and held.entries is not None:
            self._rebind_dict(key, replace(held, tags=held.tags - {"empty"}))  # type: ignore[arg-type]

    def _bind_target(self, target: cst.BaseExpression, value: Value, value_node: cst.BaseExpression | None) -> None:
        if type(target) in (cst.Tuple, cst.List):
            elements = [e.value for e in target.elements]
            if type(value_node) in (cst.Tuple, cst.List) and len(value_node.elements) == len(elements):
                for sub_target, sub_value in zip(elements, value_node.elements):
                    self._bind_target(sub_target, self.value_of(sub_value.value), sub_value.value)
            elif value.items is not None and len(value.items) == len(elements):
                for sub_target, item in zip(elements, value.items):
                    self._bind_target(sub_target, item, None)
            elif type(value_node) is cst.Call and "model-output" in value.tags and not any(
                type(e) is cst.StarredElement for e in target.elements
            ):
                for position, sub_target in enumerate(elements):  # `validity, label = discriminator(x)`
                    self._bind_target(sub_target, self.output_item(value_node, position, sub_target), None)
            else:
                element = value.element if value.kind is Kind.COLLECTION and value.element else UNKNOWN
                for sub_target in elements:
                    self._bind_target(sub_target, element, None)
            return
        if type(target) is cst.StarredElement:
            self._bind_target(target.value, UNKNOWN, None)
            return
        if type(target) is cst.Subscript:
            self._bind_entry(target, value)
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
        if function is not None and function.cls is not None and _is_self_attribute(key):
            function.cls.record_attr(function.name, key[5:], value)

    def _leave_Assign(self, node: cst.Assign) -> None:
        if type(node.value) is cst.Dict and self.scope.parent is None and len(node.targets) == 1:
            target = node.targets[0].target
            if type(target) is cst.Name:  # `ACT = {"relu": nn.ReLU, ...}`: its lookups name the classes
                self.imports.add_class_table(target.value, node.value, self.source)
        value = self.value_of(node.value)
        if value.kind is Kind.UNKNOWN and type(node.value) in (cst.Name, cst.Attribute):
            value = self.torch_alias(node.value) or value  # `self.softmax = F.softmax`, `nn = torch.nn`
        graph = self.module_graph
        if graph is not None:
            for target in node.targets:
                graph.bind(target.target, node.value)
        for target in node.targets:
            if self._is_requires_grad_flag(target.target):
                self._note_requires_grad_flag(target.target.value, literal_bool(node.value))  # type: ignore[attr-defined]
                self._apply_requires_grad_flag(target.target, node.value)
                continue
            self._bind_target(target.target, value, node.value)

    def _is_requires_grad_flag(self, target: cst.BaseExpression) -> bool:
        return isinstance(target, cst.Attribute) and target.attr.value == "requires_grad"

    def _apply_requires_grad_flag(self, target: cst.Attribute, flag_node: cst.BaseExpression) -> None:
        key = dotted_name(target.value)
        if key is not None:
            self._set_requires_grad(key, literal_bool(flag_node), target)

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
        if node.value is not None and self.module_graph is not None:
            self.module_graph.bind(node.target, node.value)
        if node.value is not None:
            self._bind_target(node.target, self.value_of(node.value), node.value)

    def _leave_AugAssign(self, node: cst.AugAssign) -> None:
        if self.module_graph is not None:
            self.module_graph.add(node.target, node.value)  # `total += loss`
        key = dotted_name(node.target)
        if key is None:
            return
        if type(node.operator) is cst.BitOrAssign:
            self._forget_entries_of(key)  # `d |= other`
        current = self.value_of_key(key)
        operand = self.value_of(node.value)
        if LEAF_ON_CPU in current.tags:
            # the in-place op raised (on the CPU: TL002), or it changed the GPU copy
            self.scope.bind(key, Value(Kind.NONLEAF, node, tags=frozenset({"device-dependent"})))
        elif current.kind is Kind.PLAIN and operand.requires_grad and not self.grad_mode.statically_disabled:
            self.scope.bind(key, Value(Kind.NONLEAF, node))
        elif current.kind is Kind.PLAIN and operand.kind is Kind.UNKNOWN and not self.grad_mode.statically_disabled:
            self.scope.bind(key, UNKNOWN)  # `total = torch.zeros(1); total += loss_of(batch)`: may now require grad
        elif current.kind is Kind.NUMBER:
            self.scope.bind(key, self._derived([current, operand], node))

    def _leave_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self.module_graph is not None:
            self.module_graph.bind(node.target, node.value)
        self._bind_target(node.target, self.value_of(node.value), node.value)

    def _leave_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
        for target in targets:
            target_node = target.value if isinstance(target, cst.Element) else target
            key = dotted_name(target_node)
            if key is not None:
                self.scope.bind(key, UNKNOWN)
            if self.module_graph is not None:
                self.module_graph.unbind(target_node)

    def _leave_Call(self, node: cst.Call) -> None:
        """In-place state changes of a named tensor: ``w.requires_grad_()``, ``w.detach_()``."""
        func = node.func
        graph = self.module_graph
        if graph is not None:
            graph.note_call(node)
        if node.args or type(func) is cst.Attribute:
            self._forget_entries(node, func)
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if graph is not None:
            if method in api.STORING_METHODS:
                for arg in node.args:
                    graph.add(func.value, arg.value)  # `outputs.append(D(x))`
        if method in _BACKWARD_SPELLINGS:
            self._note_backpropagated(node)
        elif method in api.MODULE_EVIDENCE_METHODS:
            self._note_module_use(func.value)
        flag = (literal_bool(node.args[0].value) if node.args else True) if method == "requires_grad_" else None
        if method == "requires_grad_":
            self._note_requires_grad_flag(func.value, flag)
        self._note_append(node, func)
        if method in api.SEQUENTIAL_LAYER_METHODS:
            self._note_added_layer(node, func, api.SEQUENTIAL_LAYER_METHODS[method])
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

    def _note_module_use(self, receiver: cst.BaseExpression) -> None:
        """``net.parameters()``, ``net.eval()``: only a module answers these, so a name of unknown
        value they are called on holds one (a parameter, ``self.Net(...)``, an import's product);
        calling it then computes a module output."""
        key = dotted_name(receiver)
        if key is None:
            return
        known = self.value_of_key(key)
        if known.kind is Kind.UNKNOWN and known.cls is None and known.tags <= _PARAMETER_TAGS:
            self.scope.refine(key, known, Value(Kind.MODULE, known.origin, tags=known.tags | _USED_AS_MODULE))

    def _note_added_layer(self, node: cst.Call, func: cst.Attribute, position: int) -> None:
        """``model.add_module("softmax", nn.Softmax())`` on an ``nn.Sequential``: its output is
        now the added layer's (a softmax output, or no longer one)."""
        key = dotted_name(func.value)
        args = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if key is None or len(args) <= position:
            return
        sequential = self.value_of_key(key)
        if sequential.kind is not Kind.MODULE or self.torch_class(sequential) not in api.SEQUENTIAL_MODULES:
            return
        layer = self.value_of(args[position].value)
        tags = sequential.tags - {"softmax-output"}
        if layer.kind is Kind.MODULE and "softmax-output" in layer.tags:
            tags = tags | {"softmax-output"}
        self.scope.refine(key, sequential, Value(Kind.MODULE, sequential.origin, sequential.cls, tags=tags))

    def _note_backpropagated(self, node: cst.Call) -> None:
        """``loss.backward()`` only works on a tensor with a graph: a name of unknown value that was
        backpropagated (a loss returned by a helper, computed by a model the file does not build)
        carries a graph from here on.  It stays UNKNOWN, tagged "backpropagated" (the object may
        also be another framework's, micrograd-like): rules that judge graphs ask for the tag.  A
        non-leaf gets the tag too: a helper that backpropagates the loss it returns tells its callers."""
        event = self.autograd_event(node)
        if event is None or event.kind is not EventKind.BACKWARD or event.subject is None:
            return
        key = dotted_name(event.subject)
        if key is None:
            return
        current = self.value_of_key(key)
        if current.kind in (Kind.UNKNOWN, Kind.NONLEAF) and current.cls is None and BACKPROPAGATED not in current.tags:
            self.scope.bind(key, current.tagged(BACKPROPAGATED))

    def _bind_loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        if self.module_graph is not None:
            self.module_graph.bind_loop_target(target, iterable)
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
        if self._holds_submodules(iterable, collection):
            return Value(Kind.UNKNOWN, target, tags=frozenset({SUBMODULE_ELEMENT}))
        if (
            collection.kind is Kind.UNKNOWN
            and isinstance(target, cst.Name)
            and target.value in self._grad_reads[-1]
        ):
            # ``for p in params: ... p.grad ...``: code that reads a loop variable's
            # .grad iterates over leaves (a non-leaf's .grad is always None).
            return Value(Kind.LEAF, target, tags=frozenset({"assumed-leaf"}))
        return UNKNOWN

    def _holds_submodules(self, iterable: cst.BaseExpression, collection: Value) -> bool:
        """A built-in container module (``self.convs``, an ``nn.ModuleList``), or an attribute of
        a module whose links are unknown (``m.m`` of ``m = self.model[-1]``): what a loop over it
        yields are submodules (or, for ``m.stride``, tensors -- which have no ``weight``)."""
        if collection.kind is Kind.MODULE:
            return collection.cls is None
        return collection.kind is Kind.UNKNOWN and type(iterable) is cst.Attribute and self._inside_module(iterable)

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


def _is_self_attribute(key: str) -> bool:
    return key.startswith("self.") and key.count(".") == 1


def _pair(first: Value, second: Value) -> Value:
    return _tuple_of([first, second])


def _tuple_of(items: list[Value]) -> Value:
    """A fixed-size tuple value, bound element-wise by tuple targets (``for i, p in ...``)."""
    return Value(Kind.COLLECTION, None, items=tuple(items))


def _is_target_or_element(node: cst.CSTNode, target: cst.BaseExpression) -> bool:
    if node is target:
        return True
    return type(target) in (cst.Tuple, cst.List) and any(element.value is node for element in target.elements)  # type: ignore[attr-defined]


def bindings_in_scope(ctx: Analyzer, name: str) -> Bindings:
    """How ``name`` is bound in the function (or module) the analysis is in; a parameter of
    that function counts as declared outside."""
    found = ctx.scope_bindings().of(name)
    function = ctx.function
    if function is not None and name in parameter_names(function.node):
        return Bindings(found.sites, True)
    return found
