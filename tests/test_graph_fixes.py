"""Fixes of the graph rules (TL004, TL005, TL007): exact output, comments kept, code still parses."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nw = torch.randn(3, requires_grad=True)\n"


def fixed(code: str, source: str, unsafe: bool = True) -> str:
    result = fix_source(HEADER + textwrap.dedent(source), [rule_by_code(code)], unsafe=unsafe)
    return result.source[len(HEADER):]


@pytest.mark.parametrize(
    "code, before, after",
    [
        # TL004: retain_grad() goes right before backward(), taking over the comments above it
        (
            "TL004",
            """\
            y = w * 2
            # backpropagate
            y.sum().backward()
            print(y.grad)
            """,
            """\
            y = w * 2
            # backpropagate
            y.retain_grad()
            y.sum().backward()
            print(y.grad)
            """,
        ),
        # TL005: the only statement of a block becomes `pass`; comments above a deleted line move down
        (
            "TL005",
            """\
            y = w * 2
            if True:
                y.requires_grad = True
            # explain
            y.requires_grad_()
            z = y + 1
            """,
            """\
            y = w * 2
            if True:
                pass
            # explain
            z = y + 1
            """,
        ),
        # TL005: the False forms become detach(); a statement sharing its line is removed alone
        (
            "TL005",
            """\
            y = w * 2
            y.requires_grad = False
            z = w * 3; z.requires_grad_()
            """,
            """\
            y = w * 2
            y = y.detach()
            z = w * 3
            """,
        ),
        # TL007: augmented assignment keeps the operand's grouping
        (
            "TL007",
            """\
            y = torch.exp(w)
            y -= w - 1
            y.sum().backward()
            """,
            """\
            y = torch.exp(w)
            y = y - (w - 1)
            y.sum().backward()
            """,
        ),
        # TL007: an in-place functional used as a statement is rebound
        (
            "TL007",
            """\
            y = torch.exp(w)
            F.relu(y, inplace=True)
            y.sum().backward()
            """,
            """\
            y = torch.exp(w)
            y = F.relu(y)
            y.sum().backward()
            """,
        ),
        # TL007: the nn module keeps its other arguments
        (
            "TL007",
            """\
            net = nn.Sequential(nn.Linear(3, 4), nn.Softmax(dim=1), nn.Dropout(0.5, inplace=True))
            """,
            """\
            net = nn.Sequential(nn.Linear(3, 4), nn.Softmax(dim=1), nn.Dropout(0.5))
            """,
        ),
    ],
)
def test_fix_output(code: str, before: str, after: str) -> None:
    assert fixed(code, before) == textwrap.dedent(after)


@pytest.mark.parametrize("code", ["TL004", "TL005", "TL007"])
def test_fixes_are_unsafe(code: str) -> None:
    source = {
        "TL004": "y = w * 2\ny.sum().backward()\nprint(y.grad)\n",
        "TL005": "y = w * 2\ny.requires_grad = True\n",
        "TL007": "y = torch.exp(w)\ny.mul_(2)\ny.sum().backward()\n",
    }[code]
    assert fixed(code, source, unsafe=False) == source
    assert fixed(code, source) != source


def test_no_fix_for_a_change_under_no_grad() -> None:
    """Out of place under no_grad() the result has no graph: the next backward() would raise M3."""
    source = HEADER + "y = torch.exp(w)\nwith torch.no_grad():\n    y.mul_(2)\ny.sum().backward()\n"
    (finding,) = lint_source(source, [rule_by_code("TL007")]).findings
    assert finding.fix is None


def test_no_fix_for_an_indexed_write() -> None:
    source = HEADER + "y = torch.exp(w)\ny[0] = 0.0\ny.sum().backward()\n"
    (finding,) = lint_source(source, [rule_by_code("TL007")]).findings
    assert finding.fix is None
