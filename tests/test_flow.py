"""Order, dominance and exits inside one body (torchlint.analysis.flow)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis.flow import Flow, has_if_statement


def _calls(tree: cst.CSTNode) -> dict[str, cst.Call]:
    """Each call ``name()`` in the tree by its function name (the probes are unique)."""
    found: dict[str, cst.Call] = {}

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name):
                found[node.func.value] = node

    tree.visit(Finder())
    return found


def loop_flow(source: str) -> tuple[Flow, dict[str, cst.Call]]:
    module = cst.parse_module(textwrap.dedent(source))
    loop = next(s for s in module.body if isinstance(s, (cst.For, cst.While, cst.FunctionDef)))
    return Flow(loop), _calls(module)


@pytest.mark.parametrize(
    "source, dominates",
    [
        ("for i in r:\n    a()\n    b()\n", True),
        ("for i in r:\n    b()\n    a()\n", False),
        ("for i in r:\n    if c:\n        a()\n    b()\n", False),
        ("for i in r:\n    if c:\n        a()\n        b()\n", True),
        ("for i in r:\n    with m:\n        a()\n    b()\n", True),
        ("for i in r:\n    try:\n        a()\n    finally:\n        pass\n    b()\n", True),
        ("for i in r:\n    try:\n        pass\n    except E:\n        a()\n    b()\n", False),
        ("for i in r:\n    for j in s:\n        a()\n    b()\n", False),
        ("for i in r:\n    x = 1 if a() else 0\n    b()\n", True),
        ("for i in r:\n    x = a() if c else 0\n    b()\n", False),
        ("for i in r:\n    x = c if d else a()\n    b()\n", False),
        ("for i in r:\n    c and a()\n    b()\n", False),
        ("for i in r:\n    a() and c\n    b()\n", True),
        ("for i in r:\n    if c:\n        a()\n    else:\n        b()\n", False),
        ("while c:\n    a()\n    if d:\n        b()\n", True),
        ("def f():\n    a()\n    b()\n", True),
    ],
)
def test_dominance(source: str, dominates: bool) -> None:
    flow, calls = loop_flow(source)
    assert flow.dominates(calls["a"], calls["b"]) is dominates


def test_order_and_between() -> None:
    flow, calls = loop_flow("for i in r:\n    a()\n    if c:\n        m()\n    b()\n")
    assert flow.before(calls["a"], calls["b"]) and not flow.before(calls["b"], calls["a"])
    assert flow.between(calls["m"], calls["a"], calls["b"])
    assert not flow.between(calls["a"], calls["m"], calls["b"])


def test_nested_functions_are_not_in_the_body() -> None:
    flow, calls = loop_flow("for i in r:\n    def inner():\n        a()\n    f = lambda: m()\n    b()\n")
    assert not flow.contains(calls["a"]) and not flow.contains(calls["m"]) and flow.contains(calls["b"])
    assert flow.place(calls["a"]) is None


def test_the_loop_header_is_not_in_the_iteration() -> None:
    module = cst.parse_module("for i in a():\n    b()\nelse:\n    m()\n")
    loop = module.body[0]
    calls = _calls(module)
    flow = Flow(loop)
    assert not flow.contains(calls["a"]) and flow.contains(calls["b"]) and not flow.contains(calls["m"])


@pytest.mark.parametrize(
    "body, exits",
    [
        ("a()\nb()\n", False),
        ("a()\nif c:\n    continue\nb()\n", True),
        ("a()\nif c:\n    break\nb()\n", True),
        ("a()\nif c:\n    return\nb()\n", True),
        ("a()\nif c:\n    raise E\nb()\n", True),
        ("a()\nfor j in s:\n    if c:\n        continue\nb()\n", False),  # leaves only the inner loop
        ("a()\nfor j in s:\n    return\nb()\n", True),
        ("if c:\n    continue\na()\nb()\n", False),  # before the first point
        ("a()\nb()\nif c:\n    continue\n", False),  # after the second
    ],
)
def test_exits_between(body: str, exits: bool) -> None:
    source = "def f():\n  for i in r:\n" + textwrap.indent(body, "    ")
    module = cst.parse_module(source)
    loop = module.body[0].body.body[0]
    calls = _calls(module)
    assert Flow(loop).exits_between(calls["a"], calls["b"]) is exits


def test_exits_from_the_start_and_to_the_end() -> None:
    flow, calls = loop_flow("for i in r:\n    if c:\n        continue\n    a()\n    b()\n")
    assert flow.exits_between(None, calls["a"])
    assert not flow.exits_between(calls["a"], None)


def test_places_know_unconditional_and_handled_code() -> None:
    flow, calls = loop_flow(
        "for i in r:\n    a()\n    if c:\n        m()\n    try:\n        b()\n    except E:\n        pass\n"
    )
    assert flow.place(calls["a"]).unconditional
    assert not flow.place(calls["m"]).unconditional
    assert flow.place(calls["b"]).unconditional and flow.place(calls["b"]).errors_handled
    assert not flow.place(calls["a"]).errors_handled


@pytest.mark.parametrize(
    "body, exclusive",
    [
        ("if c:\n        a()\n    else:\n        b()\n", True),
        ("if c:\n        a()\n    elif d:\n        b()\n", True),
        ("if c:\n        a()\n    if d:\n        b()\n", False),  # two ifs in a row
        ("if c:\n        a()\n        b()\n", False),
        ("try:\n        a()\n    except E:\n        b()\n", True),
    ],
)
def test_exclusive_branches(body: str, exclusive: bool) -> None:
    flow, calls = loop_flow("for i in r:\n    " + body)
    assert flow.exclusive(calls["a"], calls["b"]) is exclusive


@pytest.mark.parametrize(
    "source, has_if",
    [
        ("for i in r:\n    a()\n    b = c if d else e\n", False),  # a conditional expression is no statement
        ("for i in r:\n    if c:\n        a()\n", True),
        ("for i in r:\n    with m:\n        for j in s:\n            if c: a()\n", True),
        ("for i in r:\n    try:\n        a()\n    except E:\n        if c:\n            b()\n", True),
        ("for i in r:\n    try:\n        a()\n    finally:\n        if c:\n            b()\n", True),
        ("for i in r:\n    a()\nelse:\n    if c:\n        b()\n", False),  # the loop's else is no part of its body
        ("for i in r:\n    while c:\n        a()\n    else:\n        if d:\n            b()\n", True),
        ("for i in r:\n    match x:\n        case 1:\n            if c:\n                a()\n", True),
        ("for i in r:\n    def f():\n        if c:\n            a()\n    class K:\n        if c:\n            b()\n", False),
        ("for i in r: a(); b()\n", False),
    ],
)
def test_has_if_statement_finds_an_if_statement_of_the_body_outside_nested_definitions(source: str, has_if: bool):
    loop = cst.parse_module(source).body[0]
    assert isinstance(loop, cst.For)
    assert has_if_statement(loop.body) is has_if
    # The same answer as the flow's frames: some node of one iteration sits in an arm of an ``if``.
    flow = Flow(loop)
    framed_by_if = any(
        isinstance(flow._framing.get(frame.node_id), cst.If) for place in flow._places.values() for frame in place.frames
    )
    assert framed_by_if is has_if
