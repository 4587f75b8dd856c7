"""``fixes.source_of`` (the code of a node, in messages and fixes) is libcst's code for the node,
for the names it answers without generating code as for everything else."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.fixes import source_of


@pytest.mark.parametrize(
    "code", ["optimizer", "(optimizer)", "( optimizer )", "((w))", "self.opt", "opts[0]", "f(x).grad", "a  +  b"]
)
def test_source_of_is_libcsts_code_for_the_node(code: str):
    node = cst.parse_expression(code)
    assert source_of(node) == cst.Module(body=[]).code_for_node(node) == code
