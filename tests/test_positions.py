"""``node_positions`` and ``ModulePositions`` give exactly libcst's ``PositionProvider`` positions."""

from __future__ import annotations

import libcst as cst
import pytest
from conftest import FIXTURES, ROOT
from libcst.metadata import MetadataWrapper, PositionProvider
from test_prefilter import EXOTIC

from torchlint.analysis.positions import ModulePositions, node_positions
from torchlint.analysis.walk import children

SOURCES = sorted(FIXTURES.glob("**/*.py")) + sorted((ROOT / "benchmarks" / "corpus").glob("*.py"))
ODD = [
    EXOTIC,
    "",
    "\n",
    "x = 1",  # no trailing newline
    "# only a comment",
    "if a:\r\n    b = (1,\r\n         2)\r\nelse: c\r\n",  # CRLF
    "a = 1\rb = 2\r",  # CR only
    "def f():\n\tif x:\n\t\treturn (\n\t\t\t1)\n",  # tabs
    "s = '''a\nb'''; t = f'{x!r:>{w}}'\n",
    "x = [\n    1,  # one\n    2,\n]\n\n\n# trailing\n",
]


def _assert_same(module: cst.Module) -> None:
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = node_positions(module)
    assert len(found) == len(expected)
    for node, where in expected.items():
        assert found[node] == where, node
    assert dict(found) == dict(expected)
    _assert_same_piece_by_piece(module, expected)


def _assert_same_piece_by_piece(module: cst.Module, expected) -> None:
    """Each node asked for with its top-level statement (or header/footer line) as the hint."""
    lazy = ModulePositions(module, module.code)
    for piece in lazy.pieces:
        stack = [piece]
        while stack:
            node = stack.pop()
            stack.extend(children(node))
            assert lazy.at(node, piece) == expected[node], node
    assert lazy.at(module) == expected[module]


@pytest.mark.parametrize("source", ODD, ids=range(len(ODD)))
def test_positions_match_libcst(source: str) -> None:
    _assert_same(cst.parse_module(source))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_positions_match_libcst_on_files(path) -> None:
    _assert_same(cst.parse_module(path.read_text(encoding="utf-8")))


def test_unknown_node_is_a_key_error() -> None:
    positions = node_positions(cst.parse_module("x = 1\n"))
    with pytest.raises(KeyError):
        positions[cst.Name("x")]


LAZY = 'import torch\n\n\n# one\n@decorated\ndef f(x):\n    return x\n\ny = """a\nb"""\nz = (1,\n     2)  # two\n# end\n'


def test_only_the_statements_asked_about_are_generated() -> None:
    module = cst.parse_module(LAZY)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    lazy = ModulePositions(module, LAZY)
    last = module.body[-1]
    assert lazy.at(last.body[0].value, last) == expected[last.body[0].value]
    assert lazy.at(module.body[1].body, module.body[1]) == expected[module.body[1].body]
    assert lazy.at(module.footer[0], module.footer[0]) == expected[module.footer[0]]
    assert lazy.at(module.body[0]) == expected[module.body[0]]  # a statement is its own hint
    assert not lazy._everything  # nothing else was generated
    string = module.body[2].body[0].value  # in a statement not generated yet
    assert lazy.at(string) == expected[string]  # an expression without a hint: the whole module
    assert lazy._everything


def test_a_wrong_hint_still_finds_the_position() -> None:
    module = cst.parse_module("a = 1\nb = 2\n")
    name = module.body[1].body[0].targets[0].target
    assert ModulePositions(module, module.code).at(name, module.body[0]).start.line == 2


def test_unknown_node_is_a_key_error_when_lazy() -> None:
    positions = ModulePositions(cst.parse_module("x = 1\n"), "x = 1\n")
    with pytest.raises(KeyError):
        positions.at(cst.Name("x"), cst.Name("x"))
