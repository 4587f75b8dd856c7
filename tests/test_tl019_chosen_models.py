"""TL019 for a model whose class is known only from a sibling file: chosen on a branch
(``if args.model == "cnn": net = CNN() elif ...: net = MLP()``, one of whose forwards ends in a
softmax and the other in ``log_softmax``), and handed to a step function whose output is the
join of two paths (``with torch.no_grad(): output = model.forward(x)`` for validation, ``output =
model.forward(x)`` otherwise).  Each program is run with torch: run with the softmax class,
cross-entropy never falls below the floor of a softmax taken twice and ``nll_loss`` of
probabilities is negative; the look-alikes train."""

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

NETS = """\
import torch
from torch import nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super(MLP, self).__init__()
        self.layer = nn.Linear(4, 3)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.layer(x))


class CNN(nn.Module):
    def __init__(self):
        super(CNN, self).__init__()
        self.layer = nn.Linear(4, 3)

    def forward(self, x):
        return F.log_softmax(self.layer(x), dim=1)


class Logits(nn.Module):
    def __init__(self):
        super(Logits, self).__init__()
        self.layer = nn.Linear(4, 3)

    def forward(self, x):
        return self.layer(x)


class Head(nn.Module):
    def __init__(self, n):
        super(Head, self).__init__()
        self.body = nn.Linear(4, 8)
        self.output_layer = nn.Sequential(nn.Linear(8, n), nn.Softmax(dim=-1))

    def forward(self, x):
        output = self.output_layer(self.body(x))
        return output
"""

# A script choosing the class by a setting; `{loss}` is the loss line, `{first}`/`{second}` the classes.
CHOSEN = """\
import sys
import torch
import torch.nn.functional as F
from nets import {first}, {second}


def test(net_g, x, y):
    net_g.eval()
    with torch.no_grad():
        log_probs = net_g(x)
        return {test_loss}


if __name__ == '__main__':
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = (x @ torch.randn(4, 3)).argmax(dim=1)
    model = sys.argv[1]
    if model == 'cnn':
        net_glob = {first}()
    elif model == 'mlp':
        net_glob = {second}()
    else:
        exit('Error: unrecognized model')
    optimizer = torch.optim.SGD(net_glob.parameters(), lr=1.0)
    net_glob.train()
    for step in range(300):
        optimizer.zero_grad()
        output = net_glob(x)
        {loss}
        loss.backward()
        optimizer.step()
    print(loss.item(), test(net_glob, x, y).item())
"""
LOSS_LINE, TEST_LINE = 30, 11

# A training script handing its model and criterion to a step function through `train_model`.
STEP = """\
import torch
import torch.nn as nn
from nets import {model_import}


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = (x @ torch.randn(4, 3)).argmax(dim=1)
    model = {model}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(300):
        train_loss = train_model(model, x, y, optimizer, criterion)
    val_loss = test_model(model, x, y, criterion)
    print(train_loss, val_loss)


def forward_step(model, x, y, criterion, mode=''):
    if mode == 'val':
        with torch.no_grad():
            output = model.forward(x)
    else:
        output = model.forward(x)
    loss = criterion(output, y)
    return loss


def train_model(model, x, y, optimizer, criterion):
    model.train()
    optimizer.zero_grad()
    loss = forward_step(model, x, y, criterion)
    loss.backward()
    optimizer.step()
    return loss.item()


def test_model(model, x, y, criterion):
    model.eval()
    return forward_step(model, x, y, criterion, mode='val').item()


if __name__ == '__main__':
    main()
"""
STEP_LINE = 25


def _project(root: Path, name: str, text: str) -> Path:
    (root / "nets.py").write_text(NETS)
    (root / name).write_text(text)
    return root / name


def _findings(path: Path) -> dict[int, str]:
    report = check_file(str(path), resolve_rules(SETTINGS), SETTINGS)
    assert report.error is None, report.error
    return {f.line: f.message for f in report.findings if f.code == "TL019"}


def _run(root: Path, name: str, *argv: str) -> list[float]:
    result = subprocess.run([sys.executable, name, *argv], cwd=root, capture_output=True, text=True, check=True)
    return [float(word) for word in result.stdout.split()]


def _chosen(first: str, second: str, loss: str, test_loss: str | None = None) -> str:
    return CHOSEN.format(first=first, second=second, loss=loss, test_loss=test_loss or loss.split(" = ")[1].replace("output", "log_probs"))


NLL = "loss = F.nll_loss(output, y)"
CE = "loss = F.cross_entropy(output, y)"


@pytest.mark.parametrize(("loss", "check"), [
    (NLL, lambda found: found < 0),  # -p: a probability, minimised
    (CE, lambda found: found > FLOOR - 1e-3),  # never below the floor of a softmax taken twice
], ids=["nll_loss", "cross_entropy"])
def test_a_class_chosen_by_a_setting_ends_in_softmax(tmp_path: Path, loss: str, check) -> None:
    path = _project(tmp_path, "main_nn.py", _chosen("CNN", "MLP", loss))
    findings = _findings(path)
    assert sorted(findings) == [TEST_LINE, LOSS_LINE]
    assert all("`MLP`" in message and "`CNN`" not in message for message in findings.values())
    pytest.importorskip("torch")
    train, held = _run(tmp_path, "main_nn.py", "mlp")
    assert check(train) and check(held)
    train, held = _run(tmp_path, "main_nn.py", "cnn")  # the other class trains
    assert 0 < train < 0.3 and 0 < held < 0.3


@pytest.mark.parametrize(("text", "models"), [
    (_chosen("CNN", "Logits", CE), ("cnn", "mlp")),  # log-probabilities or logits: both fine for cross-entropy
    (_chosen("CNN", "CNN", NLL), ("cnn", "mlp")),
    # the log of the probabilities (written for the softmax class: run with it)
    (_chosen("CNN", "MLP", "loss = F.nll_loss(torch.log(output), y)"), ("mlp",)),
    (_chosen("CNN", "MLP", "loss = F.nll_loss(output.log(), y)"), ("mlp",)),
], ids=["logits or log-probabilities", "one class", "torch.log", "log method"])
def test_no_class_gives_the_loss_probabilities(tmp_path: Path, text: str, models: tuple[str, ...]) -> None:
    path = _project(tmp_path, "main_nn.py", text)
    assert _findings(path) == {}
    pytest.importorskip("torch")
    for model in models:
        train, held = _run(tmp_path, "main_nn.py", model)
        assert 0 < train < 0.3 and 0 < held < 0.3


def test_the_softmax_class_never_reaching_the_loss_is_not_a_finding(tmp_path: Path) -> None:
    text = _chosen("CNN", "MLP", NLL).replace(
        "        net_glob = MLP()\n", "        probe = MLP()\n        classes = probe(x).argmax(1)\n        net_glob = CNN()\n")
    path = _project(tmp_path, "main_nn.py", text)
    assert _findings(path) == {}
    pytest.importorskip("torch")
    train, held = _run(tmp_path, "main_nn.py", "mlp")
    assert 0 < train < 0.3 and 0 < held < 0.3


@pytest.mark.parametrize(("model_import", "model", "stalls"), [
    ("Head", "Head(3)", True), ("Logits", "Logits()", False),
])
def test_the_output_of_either_path_of_a_step_function(tmp_path: Path, model_import: str, model: str, stalls: bool) -> None:
    path = _project(tmp_path, "train.py", STEP.format(model_import=model_import, model=model))
    assert sorted(_findings(path)) == ([STEP_LINE] if stalls else [])
    pytest.importorskip("torch")
    train, held = _run(tmp_path, "train.py")
    if stalls:
        assert train > FLOOR - 1e-3 and held > FLOOR - 1e-3
    else:
        assert train < 0.3 and held < 0.3


def test_outputs_of_two_models_on_two_paths_must_both_be_probabilities(tmp_path: Path) -> None:
    text = """\
import torch.nn.functional as F
from nets import MLP, Logits


def step(a, b, x, y, first):
    if first:
        out = a(x)
    else:
        out = b(x)
    return F.cross_entropy(out, y)


def run(x, y, first):
    return step(MLP(), Logits(), x, y, first), step(Logits(), MLP(), x, y, first)
"""
    assert _findings(_project(tmp_path, "main.py", text)) == {}
