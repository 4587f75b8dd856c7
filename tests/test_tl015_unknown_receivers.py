"""TL015 on methods called on receivers of unknown class (``analysis/method_candidates.py``):
under torch 2.13 the flagged functions raise M6 with the fixture's `Member`s (the only class
whose method fits the unpacking), the silent ones that claim safety run; the analysis reads a
call as the fitting method's only when exactly one candidate fits and every other cannot."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import libcst as cst
import pytest

from tests.test_tl009_escapes import M6
from torchlint.analysis.method_candidates import returned_arities, unpacking_arity
from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

FIXTURE = Path(__file__).parent / "fixtures" / "TL015" / "unknown_receivers.py"


def _flagged_functions(source: str) -> set[str]:
    lines = {f.line for f in lint_source(source, [rule_by_code("TL015")]).findings}
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and lines & set(range(node.lineno, node.end_lineno + 1)):  # type: ignore[operator]
            names.add(node.name)
    return names


def test_only_the_fitting_calls_are_flagged() -> None:
    assert _flagged_functions(FIXTURE.read_text()) == {"weighted", "last_member_loss"}


@pytest.mark.torch
def test_flagged_functions_raise_m6_and_the_detached_ones_run() -> None:
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(FIXTURE.read_text(), str(FIXTURE), "exec"), namespace)
    torch.manual_seed(0)
    batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(2)]
    members = [namespace["Member"](batches), namespace["Member"](batches)]
    with pytest.raises(RuntimeError, match=re.escape(M6)):
        namespace["Federation"](members).weighted()
    with pytest.raises(RuntimeError, match=re.escape(M6)):
        namespace["last_member_loss"](members)
    with pytest.raises(ValueError, match="too many values to unpack"):
        count, loss = namespace["Federation"](members).evaluate()  # the candidate that does not fit
    namespace["detached_losses"](members)
    namespace["kept_whole"](members)


def _function(source: str) -> cst.FunctionDef:
    return cst.ensure_type(cst.parse_module(source).body[0], cst.FunctionDef)


@pytest.mark.parametrize(("source", "arities"), [
    ("def f():\n    return a, b\n", {2}),
    ("def f():\n    if c:\n        return a, b, c\n    return [a, b]\n", {2, 3}),
    ("def f():\n    x = 1\n", {0}),  # falls off its end: None
    ("def f():\n    if c:\n        return a, b\n", {0, 2}),
    ("def f():\n    def g():\n        return 1\n    return a, b\n", {2}),  # (a nested def's return)
    ("def f():\n    return stats\n", None),
    ("def f():\n    return (*a, b)\n", None),
    ("def f():\n    yield a, b\n    return a, b\n", None),
])
def test_returned_arities(source: str, arities: set[int] | None) -> None:
    found = returned_arities(_function(source))
    assert (None if found is None else set(found)) == arities


@pytest.mark.parametrize(("line", "arity"), [
    ("a, b, c = x.m()", 3), ("[a, b] = x.m()", 2), ("a = x.m()", None), ("a, *b = x.m()", None),
    ("a, b = c, d = x.m()", None), ("(a,) = x.m()", None),
])
def test_unpacking_arity(line: str, arity: int | None) -> None:
    statement = cst.parse_statement(line)
    assign = cst.ensure_type(cst.ensure_type(statement, cst.SimpleStatementLine).body[0], cst.Assign)
    assert unpacking_arity(statement, cst.ensure_type(assign.value, cst.Call)) == arity
