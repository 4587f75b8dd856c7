"""A fast read-only traversal: the same callbacks, in the same order, as
``node.visit(visitor)`` for a ``libcst.CSTVisitor``, without rebuilding nodes.

libcst's ``visit`` is written for transformers: every node's
``_visit_and_replace_children`` constructs (and validates) a copy of the node,
which costs more than the visitor's own work.  Here each node class's visited
fields, in visiting order, are read once from the string constants of its
``_visit_and_replace_children`` (each field is passed by name to one of libcst's
``visit_required/optional/sentinel/sequence`` helpers), and children are walked
directly.  ``tests/test_prefilter.py`` and ``tests/test_walk.py`` check that the
callback sequence equals libcst's on the fixtures and a corpus sample.

The ``Walker`` takes the callbacks per node type (``NodeHooks``).  Knowing which
types have callbacks, it skips every subtree in which no node can have one (a
``Name``, a string literal, whitespace ...), judged from the fields' type
annotations (``tests/test_walk.py`` checks them against real trees), and never
reads fields that can only hold such subtrees: on typical code it touches half
the nodes.  On top of it:

- ``scan(node, visitor)`` for a ``CSTVisitor`` with ``visit_<Node>``/``leave_<Node>``
  methods (the rules' finders);
- ``walk(node, visitor)`` for any visitor with ``on_visit``/``on_leave``/
  ``on_visit_attribute``/``on_leave_attribute`` (every node type has callbacks).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple, Protocol

import libcst as cst


def _subclasses(cls: type) -> set[type]:
    # Not issubclass() over all of libcst: first-time ABC checks cost tens of ms at import.
    found: set[type] = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


# Node types whose subtrees contain only whitespace, comments and punctuation.
TRIVIA_TYPES: frozenset[type[cst.CSTNode]] = frozenset(
    {
        cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline,
        cst.Comment, cst.EmptyLine, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual,
        cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
        cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.ImportStar, cst.Asynchronous,
    }
    | {
        cls
        for base in (cst.BaseUnaryOp, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseAugOp)
        for cls in _subclasses(base)
    }
)

TRIVIA_NAMES: frozenset[str] = frozenset(cls.__name__ for cls in TRIVIA_TYPES)

# Fields that ``_visit_and_replace_children`` skips entirely (no attribute callbacks) when None.
_SKIPPED_WHEN_NONE = frozenset({"format_spec"})

_FIELDS: dict[type, tuple[str, ...]] = {}


class Visitor(Protocol):
    def on_visit(self, node: cst.CSTNode) -> bool: ...
    def on_leave(self, original_node: cst.CSTNode) -> None: ...
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None: ...
    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None: ...


def visited_fields(cls: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields libcst visits on ``cls``, in order."""
    fields = _FIELDS.get(cls)
    if fields is None:
        names = {field.name for field in dataclasses.fields(cls)}
        constants = cls._visit_and_replace_children.__code__.co_consts
        ordered: list[str] = []
        for constant in constants:
            if isinstance(constant, str) and constant in names and constant not in ordered:
                ordered.append(constant)
        fields = _FIELDS[cls] = tuple(ordered)
    return fields


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` (every direct child node, whitespace too, in order), without
    libcst rebuilding ``node`` to find them."""
    found: list[cst.CSTNode] = []
    for name in _FIELDS.get(type(node)) or visited_fields(type(node)):
        value = getattr(node, name)
        if type(value) in (tuple, list):
            found.extend(value)
        elif value is not None and _is_node(value):
            found.append(value)
    return found


def contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    """``node`` is ``tree`` or inside it."""
    stack = [tree]
    while stack:
        current = stack.pop()
        if current is node:
            return True
        stack.extend(children(current))
    return False


def walk(
    node: cst.CSTNode,
    visitor: Visitor,
    *,
    skip_trivia: bool = False,
    attribute_types: frozenset[type] | None = None,
) -> None:
    """``node.visit(visitor)`` for a read-only visitor (any object with libcst's four callbacks).

    ``skip_trivia``: the visitor ignores every node in ``TRIVIA_TYPES`` (and
    attribute callbacks on them), so those subtrees are not walked.
    ``attribute_types``: the only node types whose attribute callbacks the
    visitor acts on (None: all).
    """
    Walker(_VisitorHooks(visitor, skip_trivia, attribute_types)).walk_once(node)


_NODE_TYPES: dict[type, bool] = {}


def _is_node(value: object) -> bool:
    cls = type(value)
    known = _NODE_TYPES.get(cls)
    if known is None:
        known = _NODE_TYPES[cls] = isinstance(value, cst.CSTNode)
    return known


# ---------------------------------------------------------------- typed walker
NodeCallback = Callable[[cst.CSTNode], object]


class NodeHooks(NamedTuple):
    """The callbacks for one node type, called in this order: ``enter`` (it returns
    False: the children are not walked), each of ``visits`` (results ignored), the
    children, each of ``leaves``, ``exit``.  ``attributes`` maps a field to the
    callbacks libcst's ``on_visit_attribute``/``on_leave_attribute`` would make
    around it (either may be None)."""

    enter: NodeCallback | None = None
    visits: tuple[NodeCallback, ...] = ()
    leaves: tuple[NodeCallback, ...] = ()
    exit: NodeCallback | None = None
    attributes: Mapping[str, tuple[NodeCallback | None, NodeCallback | None]] | None = None


def _is_real(cls: type) -> bool:
    # libcst's slots decorator replaces each class; the replaced one still shows up in
    # ``__subclasses__`` but is never instantiated.
    return getattr(sys.modules.get(cls.__module__), cls.__name__, None) is cls


# Every node class a tree can hold (not ``inspect.isabstract``: importing inspect takes milliseconds).
NODE_TYPES: frozenset[type[cst.CSTNode]] = frozenset(
    cls for cls in _subclasses(cst.CSTNode) if _is_real(cls) and not getattr(cls, "__abstractmethods__", None)
)
_NOT_NODES = (type(None), cst.MaybeSentinel, str)


def _node_types_under() -> dict[type, frozenset[type[cst.CSTNode]]]:
    # Read from the MROs: ``issubclass`` on libcst's ABCs is slow the first time.
    under: dict[type, set[type[cst.CSTNode]]] = {}
    for cls in NODE_TYPES:
        for base in cls.__mro__:
            under.setdefault(base, set()).add(cls)
    return {base: frozenset(types) for base, types in under.items()}


# Each class (abstract ones too) with the node classes that are it or derive from it.
_NODE_TYPES_UNDER = _node_types_under()


def subtree(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node under it."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def node_types_under(*bases: type) -> frozenset[type[cst.CSTNode]]:
    """The node classes that are one of ``bases`` or derive from one: ``type(node) in
    node_types_under(A, B)`` is ``isinstance(node, (A, B))``, several times faster on
    libcst's classes (they are ABCs)."""
    return frozenset().union(*(_NODE_TYPES_UNDER.get(base, ()) for base in bases))


def _node_types_of(hint: object) -> frozenset[type] | None:
    """The node classes a field annotated ``hint`` can hold (None: cannot tell)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        found: set[type] = set()
        for arg in typing.get_args(hint):
            types = _node_types_of(arg)
            if types is None:
                return None
            found |= types
        return frozenset(found)
    if origin in (collections.abc.Sequence, list, tuple):
        args = [arg for arg in typing.get_args(hint) if arg is not Ellipsis]
        return _node_types_of(typing.Union[tuple(args)]) if args else None  # type: ignore[misc]
    if isinstance(hint, type):
        if hint in _NODE_TYPES_UNDER:
            return _NODE_TYPES_UNDER[hint]
        if hint in _NOT_NODES:
            return frozenset()
    return None


# Fields whose libcst annotation is narrower than what the parser puts there.
_ANNOTATION_FIXES: dict[type, dict[str, object]] = {
    cst.AsName: {"name": cst.BaseExpression},  # `with x as self.y:` holds an Attribute
}


@functools.cache
def field_types(cls: type[cst.CSTNode]) -> tuple[tuple[str, frozenset[type] | None], ...]:
    """Each visited field of ``cls`` with the node classes it can hold (None: any)."""
    # The dataclass fields' annotations are the classes themselves, except for the odd
    # forward reference; ``typing.get_type_hints`` resolves those (at ten times the cost).
    hints: dict[str, object] = {field.name: field.type for field in dataclasses.fields(cls)}
    hints.update(_ANNOTATION_FIXES.get(cls, {}))
    found = _field_types(cls, hints)
    if any(types is None for _, types in found):
        try:
            found = _field_types(cls, {**typing.get_type_hints(cls), **_ANNOTATION_FIXES.get(cls, {})})
        except (NameError, TypeError, AttributeError):  # an annotation that does not resolve: keep "any"
            pass
    return found


def _field_types(cls: type[cst.CSTNode], hints: Mapping[str, object]) -> tuple[tuple[str, frozenset[type] | None], ...]:
    return tuple((name, _node_types_of(hints[name]) if name in hints else None) for name in visited_fields(cls))


@functools.lru_cache(maxsize=256)
def inert_types(handled: frozenset[type]) -> frozenset[type]:
    """Node classes in whose subtrees no node is of a ``handled`` class: walking them calls nothing."""
    # The largest set closed under "every field holds only inert nodes": a class leaves it when a
    # field may hold anything, or a class that is not (or no longer) in it.
    contents, holders = _field_contents()
    inert = set(NODE_TYPES - handled)
    unknown = [cls for cls in inert if contents[cls] is None]
    inert.difference_update(unknown)
    left = unknown + [held for held in holders if held not in inert]
    while left:
        for holder in holders.get(left.pop(), ()):
            if holder in inert:
                inert.discard(holder)
                left.append(holder)
    return frozenset(inert)


@functools.lru_cache(maxsize=1)
def _field_contents() -> tuple[dict[type, frozenset[type] | None], dict[type, list[type]]]:
    """Each node class -> the classes its fields can hold (None: a field may hold anything), and
    each class -> the node classes with a field that can hold it."""
    contents: dict[type, frozenset[type] | None] = {}
    holders: dict[type, list[type]] = {}
    for cls in NODE_TYPES:
        held: set[type] | None = set()
        for _, types in field_types(cls):
            if types is None:
                held = None
                break
            held |= types  # type: ignore[operator]
        contents[cls] = frozenset(held) if held is not None else None
        for kind in held or ():
            holders.setdefault(kind, []).append(cls)
    return contents, holders


@functools.lru_cache(maxsize=256)
def _skipped(inert: frozenset[type]) -> frozenset[type]:
    """What a ``Walker`` steps over: inert nodes, and field values that are no node."""
    return inert | {type(None), cst.MaybeSentinel}


@functools.lru_cache(maxsize=4096)
def walked_fields(cls: type[cst.CSTNode], inert: frozenset[type]) -> tuple[str, ...]:
    """The fields of ``cls`` that can hold a node that is not ``inert``."""
    return tuple(name for name, types in field_types(cls) if types is None or not types <= inert)


@functools.lru_cache(maxsize=4096)
def _plain_plan(cls: type, inert: frozenset[type]) -> _Plan:
    """The plan for a node type without callbacks: walk its children."""
    if not issubclass(cls, cst.CSTNode):
        return (None, (), (), None, (), None)  # a value that is no node (defensive)
    return (None, (), (), None, walked_fields(cls, inert), None)


# How a plan reads one node: (enter, visits, leaves, exit, fields, attribute callbacks).
# ``fields`` are the fields that can hold a node worth walking; with attribute
# callbacks (``attributes`` not None) every visited field, as (name, before, after).
_Plan = tuple[
    NodeCallback | None,
    tuple[NodeCallback, ...],
    tuple[NodeCallback, ...],
    NodeCallback | None,
    tuple,
    "Mapping[str, tuple[NodeCallback | None, NodeCallback | None]] | None",
]


@functools.lru_cache(maxsize=256)
def _plans_without_callbacks(handled: frozenset[type]) -> dict[type, _Plan]:
    """The plans (filled in by walkers as they meet the types) of the node types without
    callbacks, for walkers whose callback types are ``handled``."""
    return {}


class Walker:
    """Walks trees calling ``hooks[type(node)]`` (see ``NodeHooks``), exactly the
    callbacks a ``CSTVisitor`` with those methods would get from ``node.visit``."""

    def __init__(self, hooks: Mapping[type, NodeHooks], handled: frozenset[type] | None = None) -> None:
        """``handled``: ``frozenset(hooks)``, if the caller has it at hand."""
        self._hooks = hooks
        # Types to step over: nothing to call in their subtrees.  Also values that are no node.
        handled = frozenset(hooks) if handled is None else handled
        inert = self._inert = inert_types(handled)
        skipped = _skipped(inert)
        # The plans of types without callbacks, shared by the walkers of these callback types
        # (a rule's finder scans many small bodies: each walker would work them out again).
        self._shared_plans = _plans_without_callbacks(handled)
        self._handled = handled
        plans: dict[type, _Plan] = dict(self._shared_plans)
        sequences = (tuple, list)
        plan_for = self._plan

        def visit(node: cst.CSTNode) -> None:
            cls = type(node)
            plan = plans.get(cls)
            if plan is None:
                plan = plans[cls] = plan_for(cls)
            enter, visits, leaves, exit_, fields, attributes = plan
            descend = enter is None or enter(node) is not False
            for hook in visits:
                hook(node)
            if descend:
                if attributes is None:
                    for name in fields:
                        value = getattr(node, name)
                        if type(value) in sequences:
                            for child in value:
                                if type(child) not in skipped:
                                    visit(child)
                        elif type(value) not in skipped:
                            visit(value)
                else:
                    visit_fields(node, fields, attributes)
            for hook in leaves:
                hook(node)
            if exit_ is not None:
                exit_(node)

        def visit_fields(node: cst.CSTNode, fields: tuple, attributes: Mapping) -> None:
            # The attribute callbacks as ``walk`` makes them (see there).
            for name, before, after in fields:
                value = getattr(node, name)
                if type(value) in sequences:
                    if before is not None:
                        before(node)
                    for child in value:
                        if type(child) not in skipped:
                            visit(child)
                elif value is None:
                    if name in _SKIPPED_WHEN_NONE:
                        continue
                    if before is not None:
                        before(node)
                elif _is_node(value):
                    if before is not None:
                        before(node)
                    if type(value) not in skipped:
                        visit(value)
                elif isinstance(value, cst.MaybeSentinel):
                    if before is not None:
                        before(node)
                else:
                    continue
                if after is not None:
                    after(node)

        def close() -> None:
            nonlocal visit, visit_fields, plan_for
            visit = visit_fields = plan_for = None  # type: ignore[assignment]

        self._visit = visit
        self._close = close

    def walk(self, node: cst.CSTNode) -> None:
        if type(node) not in self._inert:
            self._visit(node)

    def walk_once(self, node: cst.CSTNode) -> None:
        """``walk``, then ``close``: for a walker made for one walk."""
        try:
            self.walk(node)
        finally:
            self.close()

    def close(self) -> None:
        """Break the reference cycles of the walker's recursive closures (the walker cannot walk
        again): the walker, and what its callbacks hold, are freed as soon as it is dropped, not
        at the garbage collector's next run (which would first scan them)."""
        self._close()
        self._visit = self._close = None  # type: ignore[assignment]

    def _plan(self, cls: type) -> _Plan:
        hooks = self._hooks.get(cls)
        if hooks is None:
            plan = _plain_plan(cls, self._inert)
            if cls not in self._handled:
                self._shared_plans[cls] = plan
            return plan
        if hooks.attributes:
            fields = tuple(
                (name, *hooks.attributes.get(name, (None, None))) for name in visited_fields(cls)
            )
            return (hooks.enter, hooks.visits, hooks.leaves, hooks.exit, fields, hooks.attributes)
        return (hooks.enter, hooks.visits, hooks.leaves, hooks.exit, walked_fields(cls, self._inert), None)


class _VisitorHooks(Mapping[type, "NodeHooks"]):
    """A ``Visitor``'s callbacks as ``NodeHooks`` for every node type (made when first asked for)."""

    def __init__(self, visitor: Visitor, skip_trivia: bool, attribute_types: frozenset[type] | None) -> None:
        self._visitor = visitor
        self._types = NODE_TYPES - TRIVIA_TYPES if skip_trivia else NODE_TYPES
        self._attribute_types = attribute_types
        self._made: dict[type, NodeHooks] = {}

    def __getitem__(self, cls: type) -> NodeHooks:
        hooks = self._made.get(cls)
        if hooks is None:
            if cls not in self._types:
                raise KeyError(cls)
            hooks = self._made[cls] = self._hooks(cls)
        return hooks

    def _hooks(self, cls: type[cst.CSTNode]) -> NodeHooks:
        on_visit, on_leave = self._visitor.on_visit, self._visitor.on_leave
        attributes = None
        if self._attribute_types is None or cls in self._attribute_types:
            before, after = self._visitor.on_visit_attribute, self._visitor.on_leave_attribute
            attributes = {
                name: (functools.partial(_call_with, before, name), functools.partial(_call_with, after, name))
                for name in visited_fields(cls)
            }
        # libcst walks the children when ``on_visit`` returns something true.
        return NodeHooks(enter=lambda node: bool(on_visit(node)), exit=on_leave, attributes=attributes)

    def __iter__(self) -> Iterator[type]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)


def _call_with(callback: Callable[[cst.CSTNode, str], None], attribute: str, node: cst.CSTNode) -> None:
    callback(node, attribute)


def node_types_named(name: str) -> tuple[type[cst.CSTNode], ...]:
    """The node classes called ``name`` (what libcst's ``visit_<name>`` methods are for)."""
    return _TYPES_BY_NAME.get(name, ())


_TYPES_BY_NAME: dict[str, tuple[type[cst.CSTNode], ...]] = {}
for _cls in NODE_TYPES:
    _TYPES_BY_NAME[_cls.__name__] = (*_TYPES_BY_NAME.get(_cls.__name__, ()), _cls)


_CALLBACK_METHODS: dict[type, tuple[tuple[type, str | None, str | None], ...] | None] = {}
_CALLBACKS = ("on_visit", "on_leave", "on_visit_attribute", "on_leave_attribute")


def callback_methods(cls: type) -> tuple[tuple[type, str | None, str | None], ...] | None:
    """For a class with libcst-style ``visit_<Node>``/``leave_<Node>`` methods (a
    ``CSTVisitor`` subclass, a rule): (node class, its visit_ method name, its leave_
    method name) for each node class it has a method for; None when it needs the generic
    ``walk`` (it overrides ``on_visit`` & co, or has ``visit_<Node>_<field>`` methods)."""
    known = _CALLBACK_METHODS.get(cls, False)
    if known is not False:
        return known  # type: ignore[return-value]
    attributes = _attribute_names(cls)
    known = _CALLBACK_METHODS_BY_NAMES.get(attributes, False)
    if known is False:
        known = _CALLBACK_METHODS_BY_NAMES[attributes] = _callback_methods(attributes)
    # Classes defined inside functions are new on every call (and hold their closure): not kept
    # (their answer is, by their attribute names).
    if "<locals>" not in cls.__qualname__:
        _CALLBACK_METHODS[cls] = known
    return known  # type: ignore[return-value]


# The answer of ``callback_methods`` depends on the attribute names only: a finder class defined
# inside a function, made again on every call, is worked out once.
_CALLBACK_METHODS_BY_NAMES: dict[frozenset[str], tuple[tuple[type, str | None, str | None], ...] | None] = {}


def _attribute_names(cls: type) -> frozenset[str]:
    return frozenset(attr for base in cls.__mro__ if base not in _CST_VISITOR_MRO for attr in vars(base))


def _callback_methods(attributes: frozenset[str]) -> tuple[tuple[type, str | None, str | None], ...] | None:
    found: dict[type, list[str | None]] = {}
    methods: tuple[tuple[type, str | None, str | None], ...] | None = ()
    for attr in attributes:
        prefix, _, name = attr.partition("_")
        if attr in _CALLBACKS:
            methods = None
            break
        if prefix not in ("visit", "leave") or not name:
            continue
        types = node_types_named(name)
        if not types:
            if node_types_named(name.partition("_")[0]):
                methods = None  # an attribute callback
                break
            continue
        for node_type in types:
            slot = found.setdefault(node_type, [None, None])
            slot[0 if prefix == "visit" else 1] = attr
    if methods is not None:
        methods = tuple((node_type, visit, leave) for node_type, (visit, leave) in found.items())
    return methods


_CST_VISITOR_MRO = frozenset(cst.CSTVisitor.__mro__)


class OwnBodyVisitor(cst.CSTVisitor):
    """A visitor of one function body that does not enter the functions, classes and lambdas
    defined in it (their statements are not the body's)."""

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def scan(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only ``CSTVisitor``, faster (see ``Walker``)."""
    methods = _scan_methods(type(visitor))
    if methods is None:
        walk(node, visitor)
        return
    Walker(_ScanHooks(visitor, methods), handled=methods.handled).walk_once(node)


class _ScanMethods(NamedTuple):
    """A visitor class's ``callback_methods``: node class -> (visit_ name, leave_ name)."""

    names: dict[type, tuple[str | None, str | None]]
    handled: frozenset[type]


_SCAN_METHODS: dict[type, _ScanMethods | None] = {}


def _scan_methods(cls: type) -> _ScanMethods | None:
    known = _SCAN_METHODS.get(cls, False)
    if known is not False:
        return known  # type: ignore[return-value]
    methods = callback_methods(cls)
    found = _SCAN_METHODS_BY_METHODS.get(methods, False) if methods is not None else None
    if found is False:
        names = {node_type: (visit, leave) for node_type, visit, leave in methods}  # type: ignore[union-attr]
        found = _SCAN_METHODS_BY_METHODS[methods] = _ScanMethods(names, frozenset(names))
    if "<locals>" not in cls.__qualname__:  # as in ``callback_methods``
        _SCAN_METHODS[cls] = found
    return found  # type: ignore[return-value]


# By ``callback_methods`` answer (shared by the local finder classes with the same methods).
_SCAN_METHODS_BY_METHODS: dict[tuple, _ScanMethods] = {}


class _ScanHooks(Mapping[type, NodeHooks]):
    """A visitor's methods as ``NodeHooks``, bound when the walk first meets the node type
    (scans are many and small: binding every method up front cost more than the walk)."""

    def __init__(self, visitor: cst.CSTVisitor, methods: _ScanMethods) -> None:
        self._visitor = visitor
        self._names = methods.names

    def __getitem__(self, node_type: type) -> NodeHooks:
        visit, leave = self._names[node_type]
        visitor = self._visitor
        return NodeHooks(enter=getattr(visitor, visit) if visit else None, exit=getattr(visitor, leave) if leave else None)

    def get(self, node_type: type, default: NodeHooks | None = None) -> NodeHooks | None:  # type: ignore[override]
        return self[node_type] if node_type in self._names else default

    def __iter__(self) -> Iterator[type]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
