"""TL009 through deep copies of a model, run under torch 2.13: the totals of the functions TL009
reports still hold a graph through every task (each summed loss has a grad_fn, and the total's
graph reaches the copies' parameters); the others hold none."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import top_level_functions

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = Path(__file__).parent / "fixtures" / "TL009" / "deep_copies.py"
TOTALS = {"validate": "val_loss", "validate_copy": "total", "validate_no_grad": "val_loss", "validate_items": "total"}


def _tasks() -> list:
    torch.manual_seed(0)
    return [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]


def test_reported_totals_keep_their_graphs_and_the_others_do_not() -> None:
    source = FIXTURE.read_text()
    lines = {f.line for f in lint_source(source, [rule_by_code("TL009")]).findings}
    flagged = {name for name, span in top_level_functions(source).items() if lines & set(span)}
    assert flagged == {"validate", "validate_copy"}
    # Return the total itself rather than its number, to look at its graph.
    for name, total in TOTALS.items():
        returned = "return val_loss.item()" if total == "val_loss" else ("return float(total)" if name == "validate_copy" else "return total")
        body = ast.get_source_segment(source, next(n for n in ast.parse(source).body if getattr(n, "name", "") == name))
        assert body is not None and returned in body
        source = source.replace(body, body.replace(returned, f"return {total}"))
    namespace: dict = {}
    exec(compile(source, str(FIXTURE), "exec"), namespace)
    for name in TOTALS:
        total = namespace[name](_tasks())
        carries_graph = isinstance(total, torch.Tensor) and total.grad_fn is not None
        assert carries_graph is (name in flagged), name
    assert len(namespace["snapshot"](_tasks())) == 3
