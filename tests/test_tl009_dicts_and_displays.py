"""TL009 on criteria picked from a dict literal of loss modules (``CRITERIA["mse"]``: indexing a
dict literal gives its values, ``Value.entries``) and on histories handed to a class that stores
them in ``__init__`` and plots them in a method (``analysis/displayed_arguments.py``), the class
in the same file or in a sibling file.  Checked against torch 2.13 as in ``test_tl009_escapes``:
each program is linted and run; a finding's program raises M6 (or keeps a graph), its fixed
program runs and keeps none; the look-alikes keep none and are not reported."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.test_tl009_escapes import PRELUDE, _findings, _marked, _run
from torchlint.engine import fix_source
from torchlint.rules import rule_by_code
from torchlint.runner import check_file
from torchlint.settings import Settings, resolve_rules

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

STEP = "    loss = crit(model(xb), yb)\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"

CURVES = """\
import numpy as np


class Curves:
    def __init__(self, train, val=None):
        self.train = train
        self.val = val

    def show(self):
        np.asarray(self.train)
        if self.val is not None:
            np.asarray(self.val)
"""

# The same class, keeping numbers made of the history instead.
COPIED = CURVES.replace("        self.train = train\n", "        train = [t.item() for t in train]\n        self.train = train\n")


def _history_loop(accumulated: str, mark: str) -> str:
    return "val = []\nfor xb, yb in loader:\n" + STEP + f"    val.append({accumulated}){mark}\n"


# name -> (program after the prelude, runtime outcome); a line marked `# TL009` is reported.
PROGRAMS: dict[str, tuple[str, str]] = {
    "criterion_from_a_dict_literal": (
        "CRITERIA = {'mse': nn.MSELoss(), 'l1': nn.L1Loss()}\ncrit = CRITERIA['mse']\n"
        + _history_loop("crit(model(xb), yb)", "  # TL009") + "arr = np.array(val)\n", "M6"),
    "history_plotted_by_a_class_of_the_file": (
        CURVES + _history_loop("crit(model(xb), yb)", "  # TL009") + "Curves([], val=val).show()\n", "M6"),
    # look-alikes
    "dict_entry_replaced_by_a_number_function": (
        "crits = {'mse': nn.MSELoss()}\ncrits['mse'] = lambda a, b: float(((a - b) ** 2).mean())\n"
        "crit = nn.MSELoss()\nmetric = crits['mse']\n" + _history_loop("metric(model(xb), yb)", "")
        + "arr = np.array(val)\nkept = val\n", "ok"),
    "class_keeps_numbers_of_the_history": (
        COPIED + _history_loop("crit(model(xb), yb)", "") + "c = Curves(val)\nc.show()\nkept = c.train\n", "ok"),
    "kept_terms_backpropagated_by_a_method_of_the_class": (
        CURVES.replace("    def show(self):", "    def apply(self):\n        sum(self.train).backward()\n\n    def show(self):")
        + "terms = []\nfor xb, yb in loader:\n    terms.append(crit(model(xb), yb))\nc = Curves(terms)\n"
        "opt.zero_grad()\nc.apply()\nopt.step()\nval = []\nkept = None\n", "ok"),
    "history_of_no_grad_losses_plotted": (
        CURVES + "val = []\nfor xb, yb in loader:\n" + STEP + "    with torch.no_grad():\n"
        "        val.append(crit(model(xb), yb))\nCurves(val).show()\nkept = val\n", "ok"),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_dict_criteria_and_displayed_histories(name: str) -> None:
    body, outcome = PROGRAMS[name]
    source = PRELUDE + body
    assert _run(source)[0] == outcome
    findings = _findings(source)
    assert {f.line for f in findings} == _marked(source)
    if not findings:
        return
    fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
    assert fixed != source
    namespace = _run(fixed)[1]  # runs to the end: no M6
    assert all(not isinstance(v, torch.Tensor) or v.grad_fn is None for v in namespace["val"])
    assert not _findings(fixed)


@pytest.mark.parametrize("helper, reported", [(CURVES, True), (COPIED, False)])
def test_history_plotted_by_a_class_of_a_sibling_file(helper: str, reported: bool, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "history.py").write_text(helper)
    source = PRELUDE + "from history import Curves\n" + _history_loop(
        "crit(model(xb), yb)", "  # TL009" if reported else "") + "c = Curves(val)\nc.show()\nkept = c.train\n"
    (tmp_path / "train.py").write_text(source)
    settings = Settings(select=("TL009",))
    found = check_file(str(tmp_path / "train.py"), resolve_rules(settings), settings).findings
    assert {f.line for f in found} == _marked(source)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "history", raising=False)
    assert _run(source)[0] == ("M6" if reported else "ok")
