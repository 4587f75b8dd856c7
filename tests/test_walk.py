"""The typed walker (``Walker``, ``scan``) makes exactly the callbacks libcst's
``visit`` makes, in the same order, although it skips subtrees where no callback
can fire (judged from libcst's field annotations, checked here against real trees)."""

from __future__ import annotations

import gc
import typing
import weakref
from pathlib import Path

import libcst as cst
import pytest
from conftest import FIXTURES, ROOT
from test_prefilter import EXOTIC

from torchlint.analysis.names import dotted_expression, dotted_name
from torchlint.analysis.walk import (
    _ANNOTATION_FIXES,
    NODE_TYPES,
    NodeHooks,
    Walker,
    _is_node,
    _node_types_of,
    children,
    field_types,
    inert_types,
    node_types_under,
    scan,
)

SOURCES = sorted(FIXTURES.glob("**/*.py")) + sorted((ROOT / "benchmarks" / "corpus").glob("*.py"))
NAMES = ["exotic", *[str(p.relative_to(ROOT)) for p in SOURCES]]


def _module(name: str) -> cst.Module:
    return cst.parse_module(EXOTIC if name == "exotic" else (ROOT / name).read_text(encoding="utf-8"))


# A visitor with callbacks on a mix of node types: expressions, statements, trivia
# (comments, commas), a pruned subtree (function bodies) and leaves.
_PRUNED = {"FunctionDef"}
_WATCHED = ["Name", "Call", "Attribute", "Comment", "Comma", "EmptyLine", "Arg", "FunctionDef", "Lambda",
            "SimpleString", "Integer", "For", "Param", "MatchAs", "FormattedStringExpression"]


def _recording_visitor(events: list[tuple]) -> cst.CSTVisitor:
    def make(kind: str, name: str):
        def callback(self: cst.CSTVisitor, node: cst.CSTNode) -> bool | None:
            events.append((kind, name, id(node)))
            return False if kind == "visit" and name in _PRUNED else None
        return callback

    methods = {f"{kind}_{name}": make(kind, name) for name in _WATCHED for kind in ("visit", "leave")}
    return type("Recording", (cst.CSTVisitor,), methods)()


@pytest.mark.parametrize("name", NAMES)
def test_scan_makes_the_same_callbacks_as_libcst(name: str) -> None:
    module = _module(name)
    expected: list[tuple] = []
    actual: list[tuple] = []
    module.visit(_recording_visitor(expected))
    scan(module, _recording_visitor(actual))
    assert actual == expected


@pytest.mark.parametrize("name", NAMES)
def test_walker_attribute_callbacks_match_libcst(name: str) -> None:
    """Callbacks around fields (``visit_For_body``), as the analysis uses them."""
    module = _module(name)
    expected: list[tuple] = []

    class Libcst(cst.CSTVisitor):
        def visit_For_body(self, node: cst.For) -> None:
            expected.append(("before", "body", id(node)))

        def leave_For_body(self, node: cst.For) -> None:
            expected.append(("after", "body", id(node)))

        def visit_If_orelse(self, node: cst.If) -> None:
            expected.append(("before", "orelse", id(node)))

        def visit_Call(self, node: cst.Call) -> None:
            expected.append(("visit", "Call", id(node)))

        def leave_If(self, node: cst.If) -> None:
            expected.append(("leave", "If", id(node)))

    module.visit(Libcst())
    actual: list[tuple] = []

    def record(*event: object):
        return lambda node: actual.append((*event, id(node)))

    hooks = {
        cst.For: NodeHooks(attributes={"body": (record("before", "body"), record("after", "body"))}),
        cst.If: NodeHooks(exit=record("leave", "If"), attributes={"orelse": (record("before", "orelse"), None)}),
        cst.Call: NodeHooks(enter=record("visit", "Call")),
    }
    Walker(hooks).walk(module)
    assert actual == expected


@pytest.mark.parametrize("name", NAMES)
def test_field_annotations_hold_for_real_trees(name: str) -> None:
    """What the walker skips is judged from the fields' annotations: every child found
    in a parsed tree has a type its field's annotation allows."""
    _check_annotations(_module(name))


def _check_annotations(module: cst.Module) -> None:
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for field, types in field_types(type(node)):
            value = getattr(node, field)
            for child in value if isinstance(value, (tuple, list)) else [value]:
                if _is_node(child):
                    assert types is None or type(child) in types, (type(node).__name__, field, type(child).__name__)
                    stack.append(child)


def test_field_types_are_the_resolved_annotations() -> None:
    """``field_types`` reads the dataclass annotations (fast) and resolves forward references."""
    for cls in NODE_TYPES:
        hints = {**typing.get_type_hints(cls), **_ANNOTATION_FIXES.get(cls, {})}
        assert field_types(cls) == tuple((name, _node_types_of(hints[name])) for name, _ in field_types(cls)), cls


# Constructs whose nodes libcst's annotations do not describe (see ``_ANNOTATION_FIXES``).
ODD_TREES = ["with open(p) as self.f, lock as (a, b[0], *c):\n    pass\n"]


@pytest.mark.parametrize("source", ODD_TREES)
def test_field_annotations_hold_for_odd_trees(source: str) -> None:
    _check_annotations(cst.parse_module(source))


def test_inert_types_hold_no_handled_node() -> None:
    inert = inert_types(frozenset({cst.Call}))
    assert cst.Name in inert and cst.Integer in inert and cst.Comma in inert
    assert cst.Call not in inert and cst.Attribute not in inert  # `a.b(c).d` holds a call
    # A comment can sit in the parentheses around a name, or after a comma.
    inert = inert_types(frozenset({cst.Comment}))
    assert cst.Name not in inert and cst.Comma not in inert and cst.EmptyLine not in inert
    assert cst.SimpleWhitespace in inert and cst.Newline in inert


def test_node_types_under_is_isinstance() -> None:
    bases = (cst.BaseNumber, cst.BaseString, cst.Name)
    assert node_types_under(*bases) == frozenset(t for t in NODE_TYPES if issubclass(t, bases))
    assert node_types_under(cst.Integer, cst.Float) == {cst.Integer, cst.Float}


def test_scan_falls_back_for_visitors_it_cannot_type(tmp_path: Path) -> None:
    """A visitor overriding ``on_visit`` (or with field callbacks) still gets every callback."""
    module = cst.parse_module("f(a, b)  # c\n")
    seen: list[str] = []

    class Everything(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            seen.append(type(node).__name__)
            return True

    scan(module, Everything())
    assert {"Comment", "Comma", "Name", "Call", "SimpleWhitespace"} <= set(seen)


class _NameCounter(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names = 0

    def visit_Name(self, node: cst.Name) -> None:
        self.names += 1


class _EveryNode(cst.CSTVisitor):
    def on_visit(self, node: cst.CSTNode) -> bool:
        return True


@pytest.mark.parametrize("visitor_class", [_NameCounter, _EveryNode])
def test_a_scan_leaves_no_garbage_cycle(visitor_class: type[cst.CSTVisitor]) -> None:
    """The walker of one scan is freed, with its visitor, when the scan returns: nothing is left
    for the garbage collector (which would scan it, and the tree, first)."""
    module = cst.parse_module("def f(a):\n    return g(a, b=[c for c in a])\n")
    scan(module, visitor_class())  # the first scan of a class works out its plans
    visitor = visitor_class()
    gone = weakref.ref(visitor)
    enabled = gc.isenabled()
    gc.disable()
    try:
        scan(module, visitor)
        del visitor
        assert gone() is None
    finally:
        if enabled:
            gc.enable()


def test_walkers_with_the_same_callback_types_keep_their_own_callbacks() -> None:
    """Walkers share the plans of node types without callbacks, never the callbacks."""
    module = cst.parse_module("x = f(a)\n")
    calls: list[str] = []
    for label in ("first", "second"):
        hooks = {cst.Call: NodeHooks(enter=lambda node, label=label: calls.append(label))}
        Walker(hooks).walk(module)
    assert calls == ["first", "second"]


@pytest.mark.parametrize("name", NAMES)
def test_children_are_libcsts(name: str) -> None:
    stack: list[cst.CSTNode] = [_module(name)]
    while stack:
        node = stack.pop()
        expected = list(node.children)
        found = children(node)
        assert len(found) == len(expected) and all(a is b for a, b in zip(found, expected)), type(node).__name__
        stack.extend(expected)


@pytest.mark.parametrize("key", ["x", "self.w", "a.b.c_d", "_p1.grad"])
def test_dotted_expression_is_what_the_parser_makes(key: str) -> None:
    expression = dotted_expression(key)
    assert expression.deep_equals(cst.parse_expression(key))
    assert dotted_name(expression) == key
