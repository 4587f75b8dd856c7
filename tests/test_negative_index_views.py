"""``y[-1]`` is a view of ``y`` (one ``is_basic_indexing`` for the model): the TL007 fixture
``negative_index_views.py`` run with torch 2.13 fails on each line it expects TL007 on, and its
look-alike trains."""

from __future__ import annotations

import ast
import traceback
from pathlib import Path

import libcst as cst
import pytest

from torchlint.analysis.names import is_basic_indexing

FIXTURE = Path(__file__).parent / "fixtures" / "TL007" / "negative_index_views.py"
M4 = "modified by an inplace operation"


@pytest.mark.parametrize(
    ("expression", "basic"),
    [("y[-1]", True), ("y[0, -2]", True), ("y[:, -1]", True), ("y[None, ..., -3]", True), ("y[i]", False),
     ("y[[0, -1]]", False), ("y[-i]", False)],
)
def test_basic_indexing_takes_negative_integers(expression: str, basic: bool) -> None:
    node = cst.parse_expression(expression)
    assert isinstance(node, cst.Subscript)
    assert is_basic_indexing(node) is basic


def test_an_index_known_to_be_a_number_is_basic() -> None:
    node = cst.parse_expression("y[-i]")
    assert isinstance(node, cst.Subscript)
    assert is_basic_indexing(node, lambda index: isinstance(index, cst.Name))


@pytest.mark.torch
def test_negative_index_views_fail_where_tl007_reports_and_the_copy_trains() -> None:
    pytest.importorskip("torch")
    source = FIXTURE.read_text()
    expected = {n for n, line in enumerate(source.splitlines(), 1) if "# expect: TL007" in line}
    namespace: dict[str, object] = {"__name__": "tl007_negative_index_fixture"}
    exec(compile(source, str(FIXTURE), "exec"), namespace)
    functions = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    for function in functions:
        lines = range(function.lineno, (function.end_lineno or function.lineno) + 1)
        run = namespace[function.name]
        if any(line in expected for line in lines):
            with pytest.raises(RuntimeError, match=M4) as raised:
                run()  # type: ignore[operator]
            # (raised by backward(); the in-place change the rule reports sits in the same case)
            frames = [f for f in traceback.extract_tb(raised.value.__traceback__) if Path(f.filename) == FIXTURE]
            assert frames and frames[-1].lineno in lines
        else:
            run()  # type: ignore[operator]  # (raises if it does not train)
