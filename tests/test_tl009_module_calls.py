"""TL009 on module outputs reached through ``self.forward(x)``, ``torch.compile(m)`` and entries
assigned into an ``nn.ModuleDict`` or a dict (fixture ``TL009/module_calls.py``), checked against
torch 2.13 as in ``test_tl009_escapes``: each program is linted and run; a finding's program keeps
a graph in ``kept`` (and its fixed program keeps none), the look-alikes keep none.  ``torch.compile``
runs with the eager backend (no compiler needed): the claim is about the module it returns, which
runs the module passed and reads its methods through whatever the backend."""

from __future__ import annotations

import pytest

from tests.test_tl009_escapes import _findings, _marked, _run
from torchlint.engine import fix_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

PRELUDE = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
loader = [(torch.randn(8, 3), torch.randn(8, 1))] * 3


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x):
        return self.lin(x)

    def losses(self, x, y):
        out = self(x)
        return ((out - y) ** 2).mean(), (out - y).abs().mean()

    def fit_epoch(self, loader, opt):
        global kept
        total = 0
        for x, y in loader:
            out = self.forward(x)
            loss = ((out - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += {metric}
        print(total)
        kept = total


"""

STEP = """\
    loss, abs_err = {call}(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += {part}{mark}
kept = total
"""


def _step_loop(setup: str, call: str, part: str, reported: bool) -> str:
    loop = "total = 0\nfor x, y in loader:\n" + STEP.format(call=call, part=part, mark="  # TL009" if reported else "")
    return setup + "opt = torch.optim.SGD(net.parameters(), lr=0.01)\n" + loop


# name -> (metric accumulated in `fit_epoch`, program after the class, reported)
PROGRAMS: dict[str, tuple[str, str, bool]] = {
    "self_forward": (
        "(out - y).abs().sum()  # TL009", "net = Regressor()\nopt = torch.optim.SGD(net.parameters(), lr=0.01)\n"
        "net.fit_epoch(loader, opt)\n", True),
    "self_forward_item": (
        "(out - y).abs().sum().item()", "net = Regressor()\nopt = torch.optim.SGD(net.parameters(), lr=0.01)\n"
        "net.fit_epoch(loader, opt)\n", False),
    "model_forward": (
        "0", "net = Regressor()\ntotal = 0\nfor x, y in loader:\n    total += net.forward(x).sum()  # TL009\n"
        "print(total)\nkept = total\n", True),
    "compiled_call": (
        "0", "net = torch.compile(Regressor(), backend='eager')\ntotal = 0\nfor x, y in loader:\n"
        "    total += net(x).sum()  # TL009\nprint(total)\nkept = total\n", True),
    "compiled_method_part": (
        "0", _step_loop("net = torch.compile(Regressor(), backend='eager')\n", "net.losses", "abs_err", True), True),
    "module_dict_entry_part": (
        "0", _step_loop("nets = nn.ModuleDict()\nnets['reg'] = Regressor()\nnet = nets\n", "nets['reg'].losses",
                        "abs_err", True), True),
    "module_dict_entry_part_item": (
        "0", _step_loop("nets = nn.ModuleDict()\nnets['reg'] = Regressor()\nnet = nets\n", "nets['reg'].losses",
                        "abs_err.item()", False), False),
    "dict_entry_call": (
        "0", "nets = {}\nnets['reg'] = Regressor()\ntotal = 0\nfor x, y in loader:\n"
        "    total += nets['reg'](x).sum()  # TL009\nprint(total)\nkept = total\n", True),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_module_outputs_reached_through_forward_compile_and_entries(name: str) -> None:
    metric, program, reported = PROGRAMS[name]
    source = PRELUDE.replace("{metric}", metric) + program
    assert bool(_marked(source)) == reported
    assert {f.line for f in _findings(source)} == _marked(source)
    assert _run(source)[0] == ("leak" if reported else "ok")
    if reported:
        fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
        assert fixed != source
        assert _run(fixed)[0] == "ok"  # the fixed program runs and keeps no graph
        assert not _findings(fixed)
