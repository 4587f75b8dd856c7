"""TL019 for a loss a model class is handed by the script that imports it: ``add_loss_op(self,
loss_op)`` stores it as ``self.loss_op``, ``run_epoch`` computes ``self.loss_op(self.__call__(x),
y)``, and only ``train.py`` (``from model import *``) calls ``model.add_loss_op(nn.NLLLoss())``.
The model file names no loss at all.  Run with torch: ``nll_loss`` of the softmax head's
probabilities is negative (it minimises -p), cross-entropy of them never falls below the floor of
a softmax taken twice; a ``log_softmax`` head trains."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.runner import check_file
from torchlint.settings import Settings, resolve_rules

SETTINGS = Settings(select=("TL019",))
FLOOR = -math.log(math.e / (math.e + 2))  # three classes

MODEL = """\
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super(Classifier, self).__init__()
        self.fc = nn.Linear(4, 3)
        self.head = {head}

    def forward(self, x):
        return self.head(self.fc(x))

    def add_optimizer(self, optimizer):
        self.optimizer = optimizer

    def add_loss_op(self, loss_op):
        self.loss_op = loss_op

    def run_epoch(self, x, y):
        self.optimizer.zero_grad()
        y_pred = self.__call__(x)
        loss = self.loss_op(y_pred, y)
        loss.backward()
        self.optimizer.step()
        return loss.item()
"""
LOSS_LINE = 23

TRAIN = """\
from model import *
import torch
from torch import nn

if __name__ == '__main__':
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = (x @ torch.randn(4, 3)).argmax(dim=1)
    model = Classifier()
    model.add_optimizer(torch.optim.SGD(model.parameters(), lr=1.0))
    loss_op = {loss}
    model.add_loss_op(loss_op)
    for epoch in range(300):
        train_loss = model.run_epoch(x, y)
    print(train_loss)
"""

SOFTMAX, LOG_SOFTMAX = "nn.Softmax(dim=1)", "nn.LogSoftmax(dim=1)"


def _project(root: Path, head: str, loss: str, *extra: str) -> Path:
    (root / "model.py").write_text(MODEL.format(head=head))
    (root / "train.py").write_text(TRAIN.format(loss=loss))
    for index, text in enumerate(extra):
        (root / f"other{index}.py").write_text(text)
    return root / "model.py"


def _findings(path: Path) -> dict[int, str]:
    report = check_file(str(path), resolve_rules(SETTINGS), SETTINGS)
    assert report.error is None, report.error
    return {f.line: f.message for f in report.findings if f.code == "TL019"}


def _train(root: Path) -> float:
    result = subprocess.run([sys.executable, "train.py"], cwd=root, capture_output=True, text=True, check=True)
    return float(result.stdout)


@pytest.mark.parametrize(("loss", "name", "check"), [
    ("nn.NLLLoss()", "NLLLoss", lambda found: found < 0),
    ("nn.CrossEntropyLoss()", "CrossEntropyLoss", lambda found: found > FLOOR - 1e-3),
], ids=["NLLLoss", "CrossEntropyLoss"])
def test_the_loss_the_importing_script_hands_in(tmp_path: Path, loss: str, name: str, check) -> None:
    findings = _findings(_project(tmp_path, SOFTMAX, loss))
    assert list(findings) == [LOSS_LINE]
    assert f"`self.loss_op` (`{name}`)" in findings[LOSS_LINE]
    pytest.importorskip("torch")
    assert check(_train(tmp_path))


def test_a_log_softmax_head_trains(tmp_path: Path) -> None:
    assert _findings(_project(tmp_path, LOG_SOFTMAX, "nn.NLLLoss()")) == {}
    pytest.importorskip("torch")
    assert 0 < _train(tmp_path) < 0.3


def test_another_loss_is_not_a_finding(tmp_path: Path) -> None:
    assert _findings(_project(tmp_path, SOFTMAX, "nn.MSELoss()")) == {}


@pytest.mark.parametrize(("loss", "found"), [("nn.NLLLoss()", [LOSS_LINE]), ("nn.MSELoss()", [])],
                         ids=["agree", "disagree"])
def test_two_importers_must_agree_on_the_loss_class(tmp_path: Path, loss: str, found: list[int]) -> None:
    other = f"from model import Classifier\nimport torch.nn as tnn\n\nm = Classifier()\nm.add_loss_op({loss.replace('nn.', 'tnn.')})\n"
    assert list(_findings(_project(tmp_path, SOFTMAX, "nn.NLLLoss()", other))) == found


def test_a_call_the_analysis_does_not_see_is_not_followed(tmp_path: Path) -> None:
    other = "from model import Classifier\n\nm = Classifier()\nsetter = m.add_loss_op\nsetter(None)\nm.add_loss_op(*[None])\n"
    assert _findings(_project(tmp_path, SOFTMAX, "nn.NLLLoss()", other)) == {}


def test_the_file_calling_the_setter_itself_keeps_its_own_call_sites(tmp_path: Path) -> None:
    path = _project(tmp_path, SOFTMAX, "nn.NLLLoss()")
    path.write_text(path.read_text() + "\n\ndef build():\n    model = Classifier()\n    model.add_loss_op(nn.MSELoss())\n")
    assert _findings(path) == {}
