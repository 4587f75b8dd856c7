"""Parameters bound from the call sites in the files that import the linted one
(``analysis/importers.py``): ``train.fit(model.Net(), ...)`` in main.py hands train.py's
``fit`` a model whose forward ends in softmax.  The positive program is run with torch: its
cross-entropy never falls below the floor of a softmax taken twice; the look-alikes stay silent."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.cache import Cache
from torchlint.parallel import lint_files
from torchlint.runner import check_file
from torchlint.settings import Settings, resolve_rules

SETTINGS = Settings(select=("TL019",))
FLOOR = -math.log(math.e / (math.e + 2))  # three classes, perfectly confident scores

MODELS = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class SoftmaxNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return F.softmax(self.fc(x), dim=1)


class LogitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x)
"""

TRAIN = """\
import torch
import torch.nn as nn


def fit(net, optimizer, data, steps=300):
    criterion = nn.CrossEntropyLoss()
    for _ in range(steps):
        for x, y in data:
            optimizer.zero_grad()
            loss = criterion(net(x), y)
            loss.backward()
            optimizer.step()
    return loss.item()
"""

MAIN = """\
import torch
{imports}


def main():
    torch.manual_seed(0)
    x = torch.eye(3) * 20
    y = torch.arange(3)
    net = {model}
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
    print({call})


if __name__ == "__main__":
    main()
"""

FIT_LINE = 10  # `loss = criterion(net(x), y)` in TRAIN


def _main(model: str, imports: str = "import models\nimport train", call: str = "train.fit(net, optimizer, [(x, y)])") -> str:
    return MAIN.format(imports=imports, model=model, call=call)


def _project(root: Path, *mains: str, train: str = TRAIN) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "models.py").write_text(MODELS)
    (root / "train.py").write_text(train)
    for index, text in enumerate(mains):
        (root / f"main{index or ''}.py").write_text(text)
    return root / "train.py"


def _lines(path: Path) -> list[int]:
    report = check_file(str(path), resolve_rules(SETTINGS), SETTINGS)
    assert report.error is None, report.error
    return [f.line for f in report.findings if f.code == "TL019"]


@pytest.mark.parametrize("main", [
    _main("models.SoftmaxNet()"),
    _main("SoftmaxNet()", imports="from models import SoftmaxNet\nfrom train import fit",
          call="fit(net, optimizer, [(x, y)])"),
    _main("models.SoftmaxNet()", imports="import models\nimport train as t",
          call="t.fit(optimizer=optimizer, data=[(x, y)], net=net)"),
], ids=["module attribute", "imported by name", "keywords through an alias"])
def test_a_model_handed_in_by_the_importing_script(tmp_path: Path, main: str) -> None:
    assert _lines(_project(tmp_path, main)) == [FIT_LINE]


@pytest.mark.parametrize("mains", [
    [_main("models.LogitNet()")],  # the logits model
    [_main("models.SoftmaxNet()"), _main("models.LogitNet()")],  # two importers that disagree
    [_main("models.SoftmaxNet()", call="train.fit(*[net, optimizer, [(x, y)]])")],  # which argument is which
    [_main("models.SoftmaxNet()") + "\n\ndef fit(a, b, c):\n    pass\n\n\nfit(1, 2, 3)\n"],  # its own `fit` too
    [_main("models.SoftmaxNet()", imports="import models\nimport other as train")],  # another module
], ids=["logits", "importers disagree", "star arguments", "a fit of its own", "another module"])
def test_silent_when_the_importers_do_not_settle_it(tmp_path: Path, mains: list[str]) -> None:
    assert _lines(_project(tmp_path, *mains)) == []


def test_the_file_calling_its_function_itself_keeps_its_own_call_sites(tmp_path: Path) -> None:
    train = TRAIN + "\n\nif __name__ == '__main__':\n    import models\n    fit(models.LogitNet(), None, [])\n"
    assert _lines(_project(tmp_path, _main("models.SoftmaxNet()"), train=train)) == []


def test_a_directory_with_too_many_files_is_not_scanned(tmp_path: Path) -> None:
    from torchlint.analysis.importers import MAX_SCANNED

    path = _project(tmp_path, _main("models.SoftmaxNet()"))
    for index in range(MAX_SCANNED):
        (tmp_path / f"extra{index}.py").write_text("x = 1\n")
    assert _lines(path) == []


def test_cache_entry_is_stale_when_an_importer_changes_or_appears(tmp_path: Path) -> None:
    path = _project(tmp_path, _main("models.LogitNet()"))
    rules = resolve_rules(SETTINGS)

    def run() -> list[int]:
        cache = Cache(tmp_path / "cache", SETTINGS)
        (report,) = lint_files([str(path)], rules, SETTINGS, jobs=1, cache=cache)
        return [f.line for f in report.findings]

    assert run() == []
    (tmp_path / "main.py").write_text(_main("models.SoftmaxNet()"))
    assert run() == [FIT_LINE]
    (tmp_path / "main.py").unlink()
    assert run() == []
    (tmp_path / "main2.py").write_text(_main("models.SoftmaxNet()"))  # a new file in the directory
    assert run() == [FIT_LINE]


@pytest.mark.torch
@pytest.mark.parametrize(("model", "stalls"), [("models.SoftmaxNet()", True), ("models.LogitNet()", False)])
def test_the_softmax_model_handed_in_stalls_with_torch(tmp_path: Path, model: str, stalls: bool) -> None:
    pytest.importorskip("torch")
    _project(tmp_path, _main(model))
    result = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
    loss = float(result.stdout)
    if stalls:
        assert loss > FLOOR - 1e-3, "a softmax taken twice: never below its floor"
    else:
        assert loss < 0.05
    assert bool(_lines(tmp_path / "train.py")) is stalls


def test_a_script_above_the_package_imports_the_training_function(tmp_path: Path) -> None:
    package = tmp_path / "engine"
    path = _project(package)
    (package / "__init__.py").write_text("")
    (package / "models.py").unlink()
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "main.py").write_text(_main("models.SoftmaxNet()", imports="import models\nfrom engine.train import fit",
                                             call="fit(net, optimizer, [(x, y)])"))
    (tmp_path / "main_logits.py").write_text(_main("models.LogitNet()", imports="import models\nfrom engine import train"))
    assert _lines(path) == []  # the two scripts disagree
    (tmp_path / "main_logits.py").unlink()
    assert _lines(path) == [FIT_LINE]
