"""TL009 through meters (``analysis/accumulators.py``): ``meter.update(loss)`` of a class whose
method adds its argument to a sum the instance keeps, and terms of a loss a helper returns
after ``loss += ...``.  Checked against torch 2.13 as in ``test_tl009_escapes``: each program is
linted and run; a finding's program keeps a graph in ``kept``, its fixed program keeps none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchlint.runner import check_file
from torchlint.settings import Settings, resolve_rules
from tests.test_tl009_escapes import PRELUDE, _findings, _marked, _run
from torchlint.engine import fix_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

METER = """\
class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / self.count
"""

MULTI_METER = """\
class Meters:
    def __init__(self, n):
        self._sum = [0] * n

    def add(self, values):
        for i, v in enumerate(values):
            self._sum[i] += v
"""

FLOAT_METER = METER.replace("self.sum += val * n", "self.sum += val.item() * n")
REBINDING_METER = METER.replace("        self.val = val\n", "        val = float(val)\n        self.val = val\n")

STEP = "    loss = crit(model(xb), yb)\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"

# name -> program after the prelude; a line marked `# TL009` is reported, and running the
# program leaves a graph in `kept`.
LEAKS: dict[str, str] = {
    "meter_in_a_loop": METER + "meter = AverageMeter()\nfor xb, yb in loader:\n" + STEP
    + "    meter.update(loss, len(xb))  # TL009\nkept = meter.sum\n",
    "meter_of_a_forward_without_backward": METER + "meter = AverageMeter()\nfor xb, yb in loader:\n"
    "    val_loss = crit(model(xb), yb)\n    meter.update(val_loss)  # TL009\nkept = meter.sum\n",
    "meter_of_several_values_in_a_training_step": MULTI_METER
    + "class Runner:\n    def __init__(self):\n        self.meters = Meters(2)\n\n"
    "    def step(self, xb, yb):\n        out = model(xb)\n        fit = crit(out, yb)\n        size = out.pow(2).mean()\n"
    "        loss = fit + 0.1 * size\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
    "        self.meters.add([fit * 10, size])  # TL009\n"
    "runner = Runner()\nfor xb, yb in loader:\n    runner.step(xb, yb)\nkept = runner.meters._sum\n",
    # `loss += reg` in the helper: `fit` is still a term of the backpropagated loss.
    # (the net is a parameter: `fit` is known to carry a graph only as a term of the loss)
    "term_of_a_loss_grown_with_augmented_assignment": "def parts(net, xb, yb):\n    out = net(xb)\n"
    "    fit = crit(out, yb)\n    loss = fit * 1.0\n    loss += 0.1 * out.pow(2).mean()\n    return loss, fit\n"
    "def epoch(net, batches):\n    fits = 0\n    for xb, yb in batches:\n        loss, fit = parts(net, xb, yb)\n"
    "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        fits += fit  # TL009\n"
    "    return fits\nkept = epoch(model, loader)\n",
}

# Look-alikes that keep no graph: nothing is reported.
FINE: dict[str, str] = {
    "meter_of_item_values": METER + "meter = AverageMeter()\nfor xb, yb in loader:\n" + STEP
    + "    meter.update(loss.item(), len(xb))\nkept = meter.sum\n",
    "meter_whose_update_takes_item": FLOAT_METER + "meter = AverageMeter()\nfor xb, yb in loader:\n" + STEP
    + "    meter.update(loss)\nkept = meter.sum\n",
    "meter_whose_update_converts_first": REBINDING_METER + "meter = AverageMeter()\nfor xb, yb in loader:\n" + STEP
    + "    meter.update(loss)\nkept = meter.sum\n",
    "meter_reset_every_iteration": METER + "meter = AverageMeter()\nfor xb, yb in loader:\n    meter.reset()\n" + STEP
    + "    meter.update(loss)\nkept = None\n",
    "meter_under_no_grad": METER + "meter = AverageMeter()\nwith torch.no_grad():\n    for xb, yb in loader:\n"
    "        meter.update(crit(model(xb), yb))\nkept = meter.sum\n",
    "meter_of_detached_values": MULTI_METER + "meters = Meters(1)\nfor xb, yb in loader:\n" + STEP
    + "    meters.add([loss.detach()])\nkept = meters._sum\n",
}


@pytest.mark.parametrize("name", sorted(LEAKS))
def test_meter_accumulations_are_findings_and_fixed_programs_keep_no_graph(name: str) -> None:
    source = PRELUDE + LEAKS[name]
    assert _run(source)[0] == "leak"
    assert {f.line for f in _findings(source)} == _marked(source)
    fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
    assert fixed != source
    assert _run(fixed)[0] == "ok"
    assert not _findings(fixed)


@pytest.mark.parametrize("name", sorted(FINE))
def test_meter_look_alikes_are_silent(name: str) -> None:
    source = PRELUDE + FINE[name]
    assert _run(source)[0] == "ok"
    assert not _findings(source)


def test_meter_of_a_sibling_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The meter class is imported from the project (``from utils.meters import AverageMeter``)."""
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("")
    (tmp_path / "utils" / "meters.py").write_text(METER)
    (tmp_path / "utils" / "floats.py").write_text(FLOAT_METER)
    body = "meter = AverageMeter()\nfor xb, yb in loader:\n" + STEP + "    meter.update(loss)\nkept = meter.sum\n"
    leaking = PRELUDE + "from utils.meters import AverageMeter\n" + body
    fine = PRELUDE + "from utils.floats import AverageMeter\n" + body
    (tmp_path / "train.py").write_text(leaking)
    (tmp_path / "train_floats.py").write_text(fine)
    settings = Settings(select=("TL009",))
    rules = resolve_rules(settings)
    found = check_file(str(tmp_path / "train.py"), rules, settings).findings
    assert [(f.code, f.line) for f in found] == [("TL009", leaking.count("\n", 0, leaking.index("meter.update")) + 1)]
    assert not check_file(str(tmp_path / "train_floats.py"), rules, settings).findings
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert _run(leaking)[0] == "leak"
    assert _run(fine)[0] == "ok"
