"""``node_positions`` gives exactly libcst's ``PositionProvider`` positions."""

from __future__ import annotations

import libcst as cst
import pytest
from conftest import FIXTURES, ROOT
from libcst.metadata import MetadataWrapper, PositionProvider
from test_prefilter import EXOTIC

from torchlint.analysis.positions import node_positions

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
