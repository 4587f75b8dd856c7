"""TL009 on the loss parts a helper returns with their sum, when the helper is in a sibling file
(``from losses import combined``, also through ``loss_fn = combined``: ``analysis/
sibling_functions.py``), weighing the parts with local numbers (``alpha = 0.3; return fit * alpha
+ reg * (1 - alpha), fit, reg``: ``ValueFlow._is_weight`` reads the helper's own bindings).  Checked against torch 2.13 as in ``test_tl009_escapes``: a
finding's program keeps a graph in ``kept``; the look-alikes keep none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.test_tl009_escapes import PRELUDE, _findings, _marked, _run
from torchlint.runner import check_file
from torchlint.settings import Settings, resolve_rules

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

HELPER = """\
import torch.nn as nn


def combined(pred, y):
    alpha = 0.3
    fit = nn.MSELoss()(pred, y)
    reg = pred.pow(2).mean()
    loss = fit * alpha + reg * (1 - alpha)
    return loss, fit, reg
"""

DETACHED_HELPER = HELPER.replace("return loss, fit, reg", "return loss, fit.detach(), reg.detach()")

LOOP = """\
running_fit = 0.0
for xb, yb in loader:
    opt.zero_grad()
    loss, fit, reg = {call}(model(xb), yb)
    loss.backward()
    opt.step()
    running_fit += {accumulated}{mark}
kept = running_fit
"""

# name -> (sibling helper, import and alias lines, accumulated expression, reported)
SIBLING_PROGRAMS = {
    "imported_helper_part": (HELPER, "from losses import combined\n", "combined", "fit", True),
    "aliased_helper_part": (HELPER, "from losses import combined\nloss_fn = combined\n", "loss_fn", "fit", True),
    "part_item": (HELPER, "from losses import combined\n", "combined", "fit.item()", False),
    "helper_returns_detached_parts": (DETACHED_HELPER, "from losses import combined\n", "combined", "fit", False),
}


@pytest.mark.parametrize("name", sorted(SIBLING_PROGRAMS))
def test_parts_returned_by_a_sibling_helper(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper, imports, call, accumulated, reported = SIBLING_PROGRAMS[name]
    (tmp_path / "losses.py").write_text(helper)
    source = PRELUDE + imports + LOOP.format(call=call, accumulated=accumulated, mark="  # TL009" if reported else "")
    (tmp_path / "train.py").write_text(source)
    settings = Settings(select=("TL009",))
    found = check_file(str(tmp_path / "train.py"), resolve_rules(settings), settings).findings
    assert {f.line for f in found} == _marked(source)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "losses", raising=False)
    assert _run(source)[0] == ("leak" if reported else "ok")
