"""Project lookups (``analysis/project.py``): evidence in a sibling file of the linted one —
a model class whose forward ends in softmax, an optimizer whose ``step`` zeroes the
gradients — and the results cache noticing when that sibling changes."""

from __future__ import annotations

from pathlib import Path

from torchlint.cache import Cache
from torchlint.parallel import lint_files
from torchlint.runner import check_file, lint_content
from torchlint.settings import Settings, resolve_rules

SETTINGS = Settings(select=("TL008", "TL019"))

SOFTMAX_MODEL = """\
import torch.nn as nn
import torch.nn.functional as F


class Base(nn.Module):
    pass


class Net(Base):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return F.softmax(self.fc(x), dim=1)
"""

LOGITS_MODEL = SOFTMAX_MODEL.replace("return F.softmax(self.fc(x), dim=1)", "return self.fc(x)")

TRAIN_SCRIPT = """\
import torch
import torch.nn as nn
{imports}


def train(model, loader):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    train({model}, [])
"""


def _codes(path: Path, settings: Settings = SETTINGS) -> list[tuple[str, int]]:
    report = check_file(str(path), resolve_rules(settings), settings)
    assert report.error is None, report.error
    return [(f.code, f.line) for f in report.findings]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_model_of_a_sibling_file_ending_in_softmax(tmp_path: Path) -> None:
    _write(tmp_path, {
        "network.py": SOFTMAX_MODEL,
        "main.py": TRAIN_SCRIPT.format(imports="import network as net", model="net.Net()"),
        "logits.py": LOGITS_MODEL,
        "main_logits.py": TRAIN_SCRIPT.format(imports="from logits import Net", model="Net()"),
    })
    assert _codes(tmp_path / "main.py") == [("TL019", 12)]
    assert _codes(tmp_path / "main_logits.py") == []


def test_relative_import_and_reexport_in_a_package(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/models/__init__.py": "from .net import Net as Classifier\n",
        "pkg/models/net.py": SOFTMAX_MODEL,
        "pkg/train.py": TRAIN_SCRIPT.format(imports="from .models import Classifier", model="Classifier()"),
        "pkg/tools/__init__.py": "",
        "pkg/tools/run.py": TRAIN_SCRIPT.format(imports="from pkg.models.net import Net", model="Net()"),
        # A directory without __init__.py, run from the directory above it.
        "runners/nets.py": SOFTMAX_MODEL,
        "runners/run.py": TRAIN_SCRIPT.format(imports="from runners.nets import Net", model="Net()"),
    })
    assert _codes(tmp_path / "pkg" / "train.py") == [("TL019", 12)]
    assert _codes(tmp_path / "pkg" / "tools" / "run.py") == [("TL019", 12)]  # from the package root
    assert _codes(tmp_path / "runners" / "run.py") == [("TL019", 12)]


OPTIMIZERS = """\
import torch


class Optimizer(object):
    def __init__(self, params):
        self.params = list(params)

    def clear(self):
        for p in self.params:
            p.grad.data.zero_()


class Zeroing(Optimizer):
    def step(self):
        for p in self.params:
            p.data.sub_(0.1 * p.grad.data)
        self.clear()


class Plain(Optimizer):
    def step(self):
        for p in self.params:
            p.data.sub_(0.1 * p.grad.data)


def get(name):
    return globals()[name]
"""

LOOP = """\
import torch
{imports}


def fit(model, loader):
    optimizer = {optimizer}
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
"""


def test_optimizer_of_the_project_that_zeroes_in_step(tmp_path: Path) -> None:
    _write(tmp_path, {
        "lib/__init__.py": "",
        "lib/optimizers.py": OPTIMIZERS,
        "lib/zeroing.py": LOOP.format(imports="from .optimizers import Zeroing", optimizer="Zeroing(model.parameters())"),
        "lib/made.py": LOOP.format(imports="from . import optimizers", optimizer="optimizers.get('sgd')"),
        "lib/plain.py": LOOP.format(imports="from .optimizers import Plain", optimizer="Plain(model.parameters())"),
    })
    assert _codes(tmp_path / "lib" / "zeroing.py") == []  # step() ends with self.clear()
    assert _codes(tmp_path / "lib" / "made.py") == []  # a factory of a module with a zeroing step()
    assert _codes(tmp_path / "lib" / "plain.py") == [("TL008", 7)]


def test_unresolvable_imports_and_files_not_on_disk_stay_unknown(tmp_path: Path) -> None:
    script = TRAIN_SCRIPT.format(imports="from network import Net", model="Net()")
    _write(tmp_path, {"main.py": script, "network.py": SOFTMAX_MODEL})
    rules = resolve_rules(SETTINGS)
    # An editor's buffer of a file that is not saved anywhere: no project to look into.
    unsaved = lint_content(str(tmp_path / "elsewhere" / "main.py"), script, SETTINGS, rules).report
    assert unsaved.findings == [] and unsaved.dependencies == ()
    (tmp_path / "network.py").unlink()
    assert _codes(tmp_path / "main.py") == []
    _write(tmp_path, {"network.py": "class Net(\n"})  # does not parse: nothing known
    assert _codes(tmp_path / "main.py") == []


def test_cache_entry_is_stale_when_the_sibling_changes(tmp_path: Path) -> None:
    _write(tmp_path, {
        "network.py": SOFTMAX_MODEL,
        "main.py": TRAIN_SCRIPT.format(imports="import network", model="network.Net()"),
    })
    paths = [str(tmp_path / "main.py")]
    rules = resolve_rules(SETTINGS)

    def run() -> list[tuple[str, int]]:
        cache = Cache(tmp_path / "cache", SETTINGS)
        (report,) = lint_files(paths, rules, SETTINGS, jobs=1, cache=cache)
        return [(f.code, f.line) for f in report.findings]

    assert run() == [("TL019", 12)]
    assert run() == [("TL019", 12)]  # from the cache
    sibling = tmp_path / "network.py"
    sibling.write_text(LOGITS_MODEL)
    assert run() == []
    sibling.write_text(SOFTMAX_MODEL)
    assert run() == [("TL019", 12)]


def test_a_sibling_with_python_2_statements_still_tells_about_its_classes(tmp_path: Path) -> None:
    # Old research code: the model class parses, the test class next to it does not (Python 2).
    python2_tail = '\n\nclass NetTest:\n    def test(self):\n        print "forward is a softmax"\n'
    decorated = SOFTMAX_MODEL.replace("class Net(Base):", "@some_registry\nclass Net(Base):")
    _write(tmp_path, {
        "network.py": decorated + python2_tail,
        "main.py": TRAIN_SCRIPT.format(imports="import network as net", model="net.Net()"),
        "logits.py": LOGITS_MODEL + python2_tail,
        "main_logits.py": TRAIN_SCRIPT.format(imports="from logits import Net", model="Net()"),
    })
    assert _codes(tmp_path / "main.py") == [("TL019", 12)]
    assert _codes(tmp_path / "main_logits.py") == []
