"""TL013's fix adds the missing `()` (safe) and touches nothing else."""

from __future__ import annotations

from torchlint.engine import fix_source
from torchlint.rule import RuleOptions
from torchlint.rules import rule_by_code

SOURCE = """\
import torch
from torch import no_grad

def run(model, opt, loss, x):
    fn = opt.step
    opt.zero_grad; loss.backward  # both
    with torch.no_grad, no_grad as quiet:
        model.eval
    return fn
"""

FIXED = """\
import torch
from torch import no_grad

def run(model, opt, loss, x):
    fn = opt.step
    opt.zero_grad(); loss.backward()  # both
    with torch.no_grad(), no_grad() as quiet:
        model.eval()
    return fn
"""


def test_fix_adds_the_call_and_nothing_else() -> None:
    rule = rule_by_code("TL013")
    result = fix_source(SOURCE, [rule], RuleOptions())
    assert result.source == FIXED
    again = fix_source(result.source, [rule], RuleOptions())
    assert again.source == FIXED  # nothing left to fix
