"""Structured control flow inside one body: execution order, dominance, exits.

A ``Flow`` describes a *body that runs as a unit*: one iteration of a loop, one call of a
function, or the module.  Every node inside it (nested function, lambda and class bodies
excluded: they run at another time) gets a place: its position in source order and the
chain of *frames* between the body and the node — the ``if`` branch, loop body, ``with``
block, ``except`` handler ... it sits in.  A frame is conditional when the code in it may
be skipped on a pass through the body (an ``if`` branch, a loop body that may run zero
times, an ``except`` handler, the right operand of ``and``/``or``); a ``with`` block, a
``try`` body and a ``finally`` block are not.

Python code without ``goto`` runs its statements in source order on a first pass, so
"``a`` comes before ``b``" is source order, and ``a`` *dominates* ``b`` (every pass
that reaches ``b`` ran ``a`` first) when ``a`` comes first and every frame of ``a`` that
``b`` does not share is unconditional.  Exits (``continue``, ``break``, ``return``,
``raise``) that leave the body are recorded, so a rule can ask whether a pass may leave
between two points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import libcst as cst

from torchlint.analysis.walk import TRIVIA_TYPES, NODE_TYPES, inert_types, walked_fields

_LOOPS = (cst.For, cst.While)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_SEPARATE = (cst.FunctionDef, cst.Lambda, cst.ClassDef)  # bodies that run at another time
_EXITS = (cst.Continue, cst.Break, cst.Return, cst.Raise)
# (exact type tests in the index walk: ``isinstance`` on libcst's ABCs is slow, and no node
# class derives from these)
_EXIT_TYPES = frozenset(_EXITS)
_SEPARATE_TYPES = frozenset(_SEPARATE)
_RETURN_OR_RAISE = frozenset({cst.Return, cst.Raise})
_FRAMING_TYPES = frozenset({cst.If, *_LOOPS, cst.Try, cst.TryStar, cst.Match, cst.IfExp, cst.BooleanOperation, *_COMPREHENSIONS})
# Whitespace, punctuation and operators, and subtrees of nothing else, are not indexed:
# no question is about them, and leaving them out keeps the order of the rest.
_UNINDEXED = inert_types(NODE_TYPES - TRIVIA_TYPES)
_NOT_INDEXED = _UNINDEXED | {type(None), cst.MaybeSentinel}


@dataclass(frozen=True)
class Frame:
    """A block a node sits in: ``node``'s field ``field`` (``If.body``, ``For.body`` ...)."""

    node_id: int
    field: str
    conditional: bool
    loop: bool = False
    handled: bool = False  # a ``try`` body with ``except`` handlers: an error here may be caught


class Place(NamedTuple):  # (a tuple: one is made for every node of the body)
    order: int  # source (pre-)order among the body's nodes
    frames: tuple[Frame, ...]

    @property
    def unconditional(self) -> bool:
        """Runs on every pass through the body that is not left early (see ``Flow.exits_between``)."""
        return not any(frame.conditional for frame in self.frames)

    @property
    def errors_handled(self) -> bool:
        """Inside a ``try`` body that has ``except`` handlers."""
        return any(frame.handled for frame in self.frames)

    @property
    def in_nested_loop(self) -> bool:
        return any(frame.loop for frame in self.frames)


def _frame(node: cst.CSTNode, field: str) -> Frame | None:
    """The frame code in ``node.field`` runs in, or None when it runs whenever ``node`` does."""
    kind = type(node)
    if kind is cst.If:
        return Frame(id(node), field, True) if field in ("body", "orelse") else None
    if kind in _LOOPS:
        if field == "body":
            return Frame(id(node), field, True, loop=True)
        return Frame(id(node), field, True) if field == "orelse" else None
    if kind is cst.Try or kind is cst.TryStar:
        if field == "body" and node.handlers:  # type: ignore[attr-defined]
            return Frame(id(node), field, False, handled=True)
        return Frame(id(node), field, True) if field in ("handlers", "orelse") else None
    if kind is cst.Match:
        return Frame(id(node), field, True) if field == "cases" else None
    if kind is cst.IfExp:
        return Frame(id(node), field, True) if field in ("body", "orelse") else None
    if kind is cst.BooleanOperation:
        return Frame(id(node), field, True) if field == "right" else None
    if kind in _COMPREHENSIONS:
        return Frame(id(node), field, True, loop=True)
    return None


class Flow:
    """Order and dominance of the nodes of one body (see the module docstring).

    ``root`` is a ``For``/``While`` (one iteration: its ``body``), a ``FunctionDef`` (one
    call: its ``body``) or a ``Module``."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self._places: dict[int, Place] = {}
        # (order, leaves the body): a break/continue in a nested loop only leaves that loop.
        self._exits: list[tuple[int, bool]] = []
        # The statements that open frames (``if``, loops, ``try`` ...), by id: the node behind a frame.
        self._framing: dict[int, cst.CSTNode] = {}
        body = root.body if isinstance(root, (*_LOOPS, cst.FunctionDef)) else root
        self._index(body)

    def _index(self, body: cst.CSTNode) -> None:
        order = 0
        places = self._places
        skipped = _NOT_INDEXED
        stack: list[tuple[cst.CSTNode, tuple[Frame, ...]]] = [(body, ())]
        while stack:
            node, frames = stack.pop()
            place = places[id(node)] = Place(order, frames)
            order += 1
            kind = type(node)
            if kind in _EXIT_TYPES:
                leaves = kind in _RETURN_OR_RAISE or not place.in_nested_loop
                self._exits.append((place.order, leaves))
            if kind in _SEPARATE_TYPES and node is not body:
                continue
            framing = kind in _FRAMING_TYPES
            pending: list[tuple[cst.CSTNode, tuple[Frame, ...]]] = []
            for name in walked_fields(kind, _UNINDEXED):
                value = getattr(node, name)
                inner = frames
                if framing:
                    frame = _frame(node, name)
                    if frame is not None:
                        inner = frames + (frame,)
                        self._framing[frame.node_id] = node
                if type(value) in (tuple, list):
                    pending.extend((item, inner) for item in value if type(item) not in skipped)
                elif type(value) not in skipped:
                    pending.append((value, inner))
            stack.extend(reversed(pending))  # pre-order: first child first

    # ------------------------------------------------------------ questions
    def place(self, node: cst.CSTNode) -> Place | None:
        """Where ``node`` runs in this body; None when it is not in it (or in a nested def)."""
        return self._places.get(id(node))

    def contains(self, node: cst.CSTNode) -> bool:
        return id(node) in self._places

    def before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """``a`` runs before ``b`` on a pass through the body (both in it)."""
        pa, pb = self.place(a), self.place(b)
        return pa is not None and pb is not None and pa.order < pb.order

    def dominates(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Every pass through the body that reaches ``b`` has run ``a`` before it."""
        pa, pb = self.place(a), self.place(b)
        if pa is None or pb is None or pa.order >= pb.order:
            return False
        shared = 0
        for fa, fb in zip(pa.frames, pb.frames):
            if fa != fb:
                break
            shared += 1
        return not any(frame.conditional for frame in pa.frames[shared:])

    def exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """``a`` and ``b`` sit in different branches of one statement (``if``/``else``, two
        ``match`` cases, a ``try`` body and its handler): no pass runs both.  Two ``if``
        statements one after the other are not exclusive."""
        return self.separating_statement(a, b) is not None

    def separating_statement(self, a: cst.CSTNode, b: cst.CSTNode) -> int | None:
        """The id of the statement in whose different branches ``a`` and ``b`` sit (see
        ``exclusive``), or None."""
        pa, pb = self.place(a), self.place(b)
        if pa is None or pb is None:
            return None
        for fa, fb in zip(pa.frames, pb.frames):
            if fa != fb:
                return fa.node_id if fa.node_id == fb.node_id else None
        return None

    def separating_node(self, a: cst.CSTNode, b: cst.CSTNode) -> cst.CSTNode | None:
        """The statement (``if``, ``match``, ``try`` ...) in whose different branches ``a`` and
        ``b`` sit (see ``exclusive``), or None."""
        statement = self.separating_statement(a, b)
        return self._framing.get(statement) if statement is not None else None

    def between(self, node: cst.CSTNode, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """``node`` may run after ``a`` and before ``b`` (source order, within one pass)."""
        p, pa, pb = self.place(node), self.place(a), self.place(b)
        return p is not None and pa is not None and pb is not None and pa.order < p.order < pb.order

    def exits_between(self, a: cst.CSTNode | None, b: cst.CSTNode | None) -> bool:
        """A ``continue``/``break``/``return``/``raise`` that leaves the body may run after ``a``
        (None: the start of the body) and before ``b`` (None: its end)."""
        start = self.place(a).order if a is not None and self.place(a) is not None else -1
        end = self.place(b).order if b is not None and self.place(b) is not None else len(self._places)
        return any(leaves and start < order < end for order, leaves in self._exits)


# The fields that hold statements (or blocks, clauses of statements): where an ``if`` statement can be.
_STATEMENT_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")
_SIMPLE_STATEMENTS = frozenset({cst.SimpleStatementLine, cst.SimpleStatementSuite})


def has_if_statement(body: cst.CSTNode) -> bool:
    """Whether an ``if`` statement sits in ``body`` (nested function and class bodies excluded):
    without one, no two nodes of a ``Flow`` of it are in different arms of an ``if``.  Only
    statements are looked at (an expression holds no statement), a fraction of a ``Flow``'s walk."""
    stack = [body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.If:
            return True
        if kind in _SIMPLE_STATEMENTS or (kind in _SEPARATE_TYPES and node is not body):
            continue
        for name in _STATEMENT_FIELDS:
            value = getattr(node, name, None)
            if type(value) in (tuple, list):
                stack.extend(value)
            elif value is not None:
                stack.append(value)
    return False
