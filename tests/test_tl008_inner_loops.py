"""TL008 reads what an inner loop's body rebinds from its parent loop's binding table when
that rebinds none of the updated names (the inner body is then not walked again): the
findings are those of walking every loop body, on loops nested directly, through ``if`` and
``with`` blocks, and inside a class body (where the parent's table does not see the inner body)."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

SETUP = """
import torch
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

LOOPS = {
    "nothing rebound": """
        for epoch in range(3):
            for x in loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
        """,
    "the optimizer re-created in the inner loop": """
        for epoch in range(3):
            for x in loader:
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
        """,
    "re-created in the outer loop only": """
        for epoch in range(3):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                if x is not None:
                    with torch.enable_grad():
                        loss = model(x).sum()
                        loss.backward()
                        optimizer.step()
        """,
    "the inner loop in a class body": """
        for epoch in range(3):
            class Step:
                for x in loader:
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
        """,
    "three levels, re-created in the middle one": """
        def train(loader):
            for epoch in range(3):
                for batch in loader:
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    for x in batch:
                        loss = model(x).sum()
                        loss.backward()
                        optimizer.step()
        """,
}


def _findings(source: str) -> list[tuple[int, int, str]]:
    result = lint_source(source, [rule_by_code("TL008")])
    return [(f.line, f.col, f.message) for f in result.findings]


@pytest.mark.parametrize("shape", LOOPS)
def test_inner_loops_find_what_walking_every_loop_body_finds(shape: str, monkeypatch: pytest.MonkeyPatch):
    source = SETUP + textwrap.dedent(LOOPS[shape])
    found = _findings(source)
    rule = rule_by_code("TL008")
    monkeypatch.setattr(rule, "_rebinds_none_of", lambda self, loop, updates: False)  # every body walked
    assert found == _findings(source)


def test_a_loop_rebinding_nothing_is_flagged_once_at_its_innermost_failing_loop():
    found = _findings(SETUP + textwrap.dedent(LOOPS["nothing rebound"]))
    assert [line for line, _, _ in found] == [SETUP.count("\n") + 3]
