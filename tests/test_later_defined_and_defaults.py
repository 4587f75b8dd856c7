"""Facts that live further down the file, in a signature default or in another file, checked
against torch: each ``# %% case`` section of tests/fixtures/TL002/later_defined.py and
tests/fixtures/TL019/default_losses.py runs as a program (the fixture's set-up, then the
section), and two project shapes run from a temporary directory — a YOLO-style model file whose
``torch``/``nn`` come from ``from common import *``, and a trainer whose default loss meets a
sibling file's model that ends in ``nn.Softmax``."""

from __future__ import annotations

import math
import runpy
import sys
import warnings
from pathlib import Path

import pytest
from conftest import fixture_sections, marked_lines

from torchlint.engine import fix_source, lint_source
from torchlint.rule import FixStyle, RuleOptions
from torchlint.rules import rule_by_code
from torchlint.runner import check_file
from torchlint.settings import Settings, resolve_rules

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation"
# Cross-entropy of a softmax of perfectly confident scores over three classes: -log(e / (e + 2)).
FLOOR = -math.log(math.e / (math.e + 2))

TL002_CASES = fixture_sections("TL002", "later_defined.py")
TL019_CASES = fixture_sections("TL019", "default_losses.py")


def _run(source: str) -> tuple[dict[str, object], BaseException | None]:
    namespace: dict[str, object] = {"__name__": "__program__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(compile(source, "<program>", "exec"), namespace)
        except Exception as error:  # noqa: BLE001 - the error is the outcome
            return namespace, error
    return namespace, None


def _lines(source: str, code: str) -> set[int]:
    return {finding.line for finding in lint_source(source, [rule_by_code(code)]).findings}


def test_every_section_is_a_case() -> None:
    assert sorted(name.split(" ")[0] for name in TL002_CASES) == ["negative"] * 3 + ["positive"] * 2
    assert sorted(name.split(":")[0] for name in TL019_CASES) == ["negative"] * 3 + ["positive"] * 2


@pytest.mark.parametrize("name", sorted(TL002_CASES))
def test_later_defined_builders_agree_with_torch(name: str) -> None:
    source = TL002_CASES[name]
    _, error = _run(source)
    if name.startswith("positive"):
        assert isinstance(error, RuntimeError) and VIEW_OF_LEAF in str(error), error
    else:
        assert error is None, error
    assert bool(marked_lines(source, "TL002")) is name.startswith("positive")
    assert _lines(source, "TL002") == marked_lines(source, "TL002")


@pytest.mark.parametrize("style", [FixStyle.DATA, FixStyle.NO_GRAD])
@pytest.mark.parametrize("name", sorted(n for n in TL002_CASES if n.startswith("positive")))
def test_fixed_later_defined_builders_run(name: str, style: FixStyle) -> None:
    rules = [rule_by_code("TL002")]
    fixed = fix_source(TL002_CASES[name], rules, RuleOptions(fix_style=style)).source
    assert _run(fixed)[1] is None
    assert not _lines(fixed, "TL002")


@pytest.mark.parametrize("name", sorted(TL019_CASES))
def test_default_losses_agree_with_torch(name: str) -> None:
    source = TL019_CASES[name]
    assert _lines(source, "TL019") == marked_lines(source, "TL019")
    assert bool(marked_lines(source, "TL019")) is name.startswith("positive")
    namespace, error = _run(source)
    assert error is None, error
    loss = namespace["loss"].item()  # type: ignore[attr-defined]
    if name.startswith("positive"):
        assert loss == pytest.approx(FLOOR, abs=1e-3), "a softmax taken twice"
    else:
        assert loss < 1e-6, "the loss sees scores (or log-probabilities)"


# ---------------------------------------------------------------- project shapes
def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(text)


def _codes(path: Path, code: str) -> list[int]:
    settings = Settings(select=(code,))
    report = check_file(str(path), resolve_rules(settings), settings)
    assert report.error is None, report.error
    return [finding.line for finding in report.findings]


def _run_file(root: Path, path: Path) -> tuple[dict[str, object], BaseException | None]:
    before = set(sys.modules)
    sys.path.insert(0, str(root))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return runpy.run_path(str(path), run_name="__program__"), None
            except Exception as error:  # noqa: BLE001 - the error is the outcome
                return {}, error
    finally:
        sys.path.remove(str(root))
        for name in set(sys.modules) - before:
            del sys.modules[name]


STAR_COMMON = "import math\n\nimport torch\nimport torch.nn as nn\n"

STAR_MODEL = """\
from xf_star_common import *


class Head(nn.Module):
    def __init__(self):
        super(Head, self).__init__()
        self.m = nn.ModuleList(nn.Conv2d(4, 15, 1) for _ in range(2))
        self._initialize_biases()

    def _initialize_biases(self):
        for mi, s in zip(self.m, (8, 16)):
            b = mi.bias.view(3, -1)
            b[:, 4] += math.log(8 / (640 / s) ** 2)
            mi.bias = torch.nn.Parameter(b.view(-1), requires_grad=True)


Head()
"""

# `nn` from a star import in a file that uses no `torch.`: not known to be torch's.
STAR_OTHER = """\
from xf_star_layers import *


class Head(nn.Module):
    def __init__(self):
        super(Head, self).__init__()
        self.conv = nn.Conv2d(4, 15, 1)
        b = self.conv.bias.view(3, -1)
        b[:, 4] += 1.0
"""


def test_torch_and_nn_from_a_star_import(tmp_path: Path) -> None:
    _write(tmp_path, {"xf_star_common.py": STAR_COMMON, "yolo.py": STAR_MODEL, "other.py": STAR_OTHER})
    assert _codes(tmp_path / "yolo.py", "TL002") == [13]
    _, error = _run_file(tmp_path, tmp_path / "yolo.py")
    assert isinstance(error, RuntimeError) and VIEW_OF_LEAF in str(error), error
    assert _codes(tmp_path / "other.py", "TL002") == []


SOFTMAX_NETWORK = """\
import torch.nn as nn


class DualScorer(nn.Module):
    def __init__(self):
        super(DualScorer, self).__init__()
        self.op = nn.Softmax(dim=1)

    def forward(self, scores):
        return self.op(scores * 1.0)
"""

TRAINER = """\
import torch
from torch.nn import CrossEntropyLoss, NLLLoss

from {network} import DualScorer


class SupervisedTrainer(object):
    def __init__(self, loss_func=CrossEntropyLoss(), batch_size=64):
        self.loss_func = loss_func
        self.batch_size = batch_size

    def train_batch(self, model, inputs, targets):
        outputs = model(inputs)
        return self.loss_func(outputs, targets)


scores = torch.tensor([[30.0, 0.0, 0.0], [0.0, 30.0, 0.0]], requires_grad=True)
trainer = SupervisedTrainer({loss})
loss = trainer.train_batch(DualScorer(), scores, torch.tensor([0, 1]))
"""


def test_default_loss_and_a_sibling_model_ending_in_softmax(tmp_path: Path) -> None:
    _write(tmp_path, {
        "xf_network.py": SOFTMAX_NETWORK,
        "xf_log_network.py": SOFTMAX_NETWORK.replace("nn.Softmax(", "nn.LogSoftmax("),
        "trainer.py": TRAINER.format(network="xf_network", loss="batch_size=2"),
        "trainer_nll.py": TRAINER.format(network="xf_log_network", loss="loss_func=NLLLoss()"),
    })
    assert _codes(tmp_path / "trainer.py", "TL019") == [14]
    namespace, error = _run_file(tmp_path, tmp_path / "trainer.py")
    assert error is None, error
    assert namespace["loss"].item() == pytest.approx(FLOOR, abs=1e-3)  # type: ignore[attr-defined]
    # The only call site passes NLLLoss for a model ending in LogSoftmax: the default is not used.
    assert _codes(tmp_path / "trainer_nll.py", "TL019") == []
    namespace, error = _run_file(tmp_path, tmp_path / "trainer_nll.py")
    assert error is None, error
    assert namespace["loss"].item() < 1e-6  # type: ignore[attr-defined]
