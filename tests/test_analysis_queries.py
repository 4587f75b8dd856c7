"""Unit tests of model queries that rules used to answer with private machinery."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis.flow import Flow


def _loop_and_calls(source: str) -> tuple[cst.For | cst.While, dict[str, cst.Call]]:
    """The first loop of ``source`` and each call ``name()`` in it by its function name."""
    module = cst.parse_module(textwrap.dedent(source))
    loop = next(s for s in module.body if isinstance(s, (cst.For, cst.While)))
    calls: dict[str, cst.Call] = {}

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name):
                calls[node.func.value] = node

    module.visit(Finder())
    return loop, calls


# ---------------------------------------------------------------- Flow.separating_node
@pytest.mark.parametrize(
    "body, separator",
    [
        ("if c:\n        a()\n    else:\n        b()\n", cst.If),
        ("if c:\n        a()\n    elif d:\n        b()\n", cst.If),
        ("try:\n        a()\n    except E:\n        b()\n", cst.Try),
        ("x = a() if c else b()\n", cst.IfExp),
        ("if c:\n        a()\n    if d:\n        b()\n", None),  # two ifs in a row
        ("if c:\n        a()\n        b()\n", None),  # one arm
        ("a()\n    b()\n", None),
    ],
)
def test_separating_node_is_the_statement_with_both_arms(body: str, separator: type | None) -> None:
    loop, calls = _loop_and_calls("for i in r:\n    " + body)
    node = Flow(loop).separating_node(calls["a"], calls["b"])
    if separator is None:
        assert node is None
    else:
        assert type(node) is separator
        # the very statement of the body that holds both (not a copy, not an inner one)
        assert calls["a"] in _descendants(node) and calls["b"] in _descendants(node)


def test_separating_node_of_an_elif_is_the_inner_if() -> None:
    loop, calls = _loop_and_calls("for i in r:\n    if c:\n        z()\n    elif d:\n        a()\n    else:\n        b()\n")
    node = Flow(loop).separating_node(calls["a"], calls["b"])
    assert isinstance(node, cst.If) and isinstance(node.test, cst.Name) and node.test.value == "d"
    outer = Flow(loop).separating_node(calls["z"], calls["b"])
    assert isinstance(outer, cst.If) and outer.test.value == "c"  # type: ignore[attr-defined]


def test_separating_node_ignores_nested_functions() -> None:
    loop, calls = _loop_and_calls(
        "for i in r:\n    def f():\n        if c:\n            a()\n        else:\n            b()\n"
    )
    assert Flow(loop).separating_node(calls["a"], calls["b"]) is None


def _descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, inner: cst.CSTNode) -> bool:
            found.append(inner)
            return True

    node.visit(Collect())
    return found
