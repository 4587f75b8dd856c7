"""Dispatch, mixed into the ``Analyzer``: one traversal runs the analyzer's own callbacks
and every enabled rule's ``visit_<Node>`` / ``leave_<Node>`` methods.

What runs for a node of each type: the analyzer's ``_enter_<Type>``, the rules'
``visit_<Type>``, (the children), the rules' ``leave_<Type>``, the analyzer's
``_leave_<Type>``; around a field, ``_enter_<Type>_<field>`` / ``_leave_<Type>_<field>``.
``_walk`` runs them with the fast ``Walker``; ``on_visit`` & co make the analyzer a libcst
visitor with the same callbacks (``node.visit(analyzer)``; the tests compare).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.walk import NodeHooks, Walker, callback_methods, node_types_named, scan

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.rule import Rule


class Dispatch:
    """Mixin of ``Analyzer`` (uses its ``_rules``, ``_hooks`` and ``_walker``)."""

    def _hooks_by_type(self) -> Mapping[type, NodeHooks]:
        if self._hooks is None:
            self._hooks = _BoundHooks(*_hook_plan(type(self), tuple(map(type, self._rules))), self, self._rules)
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


@functools.lru_cache(maxsize=8)  # the analyzer's own methods: one answer for every set of rules
def _handler_names(analyzer_class: type) -> tuple[dict[str, tuple[str, ...]], tuple[tuple[str, str], ...]]:
    """Node type names with ``_enter_<Type>`` / ``_leave_<Type>`` handlers, and the
    (type name, field) pairs with ``_enter_<Type>_<field>`` / ``_leave_<Type>_<field>`` ones."""
    nodes: dict[str, list[str]] = {"_enter_": [], "_leave_": []}
    attributes: set[tuple[str, str]] = set()
    for attr in dir(analyzer_class):
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
def _hook_plan(
    analyzer_class: type, rule_classes: tuple[type, ...]
) -> tuple[dict[type, _TypePlan], frozenset[type]]:
    """The callbacks for each node type, by method name, for rules of these classes (in this
    order), and the node types that have any.  Worked out once per set of rules; each file's
    analyzer binds it to its objects (``_BoundHooks``)."""
    node_handlers, attribute_handlers = _handler_names(analyzer_class)
    by_type: dict[type, _Callbacks] = {}

    def callbacks(name: str) -> Iterator[_Callbacks]:
        return (by_type.setdefault(node_type, _Callbacks()) for node_type in node_types_named(name))

    for name in node_handlers["_enter_"]:
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
    for name in node_handlers["_leave_"]:
        for found in callbacks(name):
            found.exit = f"_leave_{name}"
    for name, field_name in attribute_handlers:
        before, after = f"_enter_{name}_{field_name}", f"_leave_{name}_{field_name}"
        for found in callbacks(name):
            found.attributes.append(
                (field_name, before if hasattr(analyzer_class, before) else None,
                 after if hasattr(analyzer_class, after) else None)
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
