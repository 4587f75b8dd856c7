"""A fast read-only traversal: the same callbacks, in the same order, as
``node.visit(visitor)`` for a ``libcst.CSTVisitor``, without rebuilding nodes.

libcst's ``visit`` is written for transformers: every node's
``_visit_and_replace_children`` constructs (and validates) a copy of the node,
which costs more than the visitor's own work.  Here each node class's visited
fields, in visiting order, are read once from the string constants of its
``_visit_and_replace_children`` (each field is passed by name to one of libcst's
``visit_required/optional/sentinel/sequence`` helpers), and children are walked
directly.  ``tests/test_prefilter.py`` checks that the callback sequence equals
libcst's on the fixtures and a corpus sample.

Subtrees made only of whitespace, comments and punctuation are skipped when
the visitor says it has no callback for any of those node types.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

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


def walk(
    node: cst.CSTNode,
    visitor: Visitor,
    *,
    skip_trivia: bool = False,
    attribute_types: frozenset[type] | None = None,
) -> None:
    """``node.visit(visitor)`` for a read-only visitor.

    ``skip_trivia``: the visitor ignores every node in ``TRIVIA_TYPES`` (and
    attribute callbacks on them), so those subtrees are not walked.
    ``attribute_types``: the only node types whose attribute callbacks the
    visitor acts on (None: all).
    """
    skipped = TRIVIA_TYPES if skip_trivia else frozenset()
    on_visit, on_leave = visitor.on_visit, visitor.on_leave
    on_visit_attribute, on_leave_attribute = visitor.on_visit_attribute, visitor.on_leave_attribute
    fields_of = _FIELDS.get
    sequence_types = (tuple, list)
    sentinel = cst.MaybeSentinel

    def visit(current: cst.CSTNode) -> None:
        if on_visit(current):
            cls = type(current)
            fields = fields_of(cls) or visited_fields(cls)
            if attribute_types is not None and cls not in attribute_types:
                for name in fields:
                    value = getattr(current, name)
                    if type(value) in sequence_types:
                        for child in value:
                            if type(child) not in skipped:
                                visit(child)
                    elif value is not None and type(value) not in skipped and _is_node(value):
                        visit(value)
            else:
                for name in fields:
                    value = getattr(current, name)
                    if type(value) in sequence_types:
                        on_visit_attribute(current, name)
                        for child in value:
                            if type(child) not in skipped:
                                visit(child)
                        on_leave_attribute(current, name)
                    elif value is None:
                        if name not in _SKIPPED_WHEN_NONE:
                            on_visit_attribute(current, name)
                            on_leave_attribute(current, name)
                    elif _is_node(value):
                        on_visit_attribute(current, name)
                        if type(value) not in skipped:
                            visit(value)
                        on_leave_attribute(current, name)
                    elif isinstance(value, sentinel):
                        on_visit_attribute(current, name)
                        on_leave_attribute(current, name)
        on_leave(current)

    if type(node) not in skipped:
        visit(node)


_NODE_TYPES: dict[type, bool] = {}


def _is_node(value: object) -> bool:
    cls = type(value)
    known = _NODE_TYPES.get(cls)
    if known is None:
        known = _NODE_TYPES[cls] = isinstance(value, cst.CSTNode)
    return known
