"""Which names a file's torch imports bind (``analysis/names.py``): ``from torch.nn import *``
binds torch.nn's classes (``Softmax(dim=1)`` is ``torch.nn.Softmax``) unless the file binds the
name itself; ``from torch.x import y`` binds ``y``, never ``torch``, so a ``torch.`` used unbound
beside it comes from a star import of another module (a project file that imports torch).
Both directions: what must now resolve, and the look-alikes that must not."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from test_project import _codes, _write
from torchlint.analysis.names import ImportTable
from torchlint.analysis.torch_api import STAR_EXPORTS


def _qualified(source: str, expression: str) -> str | None:
    """What ``expression`` means after the imports of ``source`` (in order, as the analysis meets them)."""
    table = ImportTable()
    for statement in cst.parse_module(source).body:
        for small in statement.body if type(statement) is cst.SimpleStatementLine else ():
            if type(small) is cst.Import:
                table.add_import(small)
            elif type(small) is cst.ImportFrom:
                table.add_import_from(small)
                if type(small.names) is cst.ImportStar:
                    table.add_star_import(small, source)
    return table.qualify(cst.parse_expression(expression))


@pytest.mark.parametrize(("source", "expression", "expected"), [
    ("from torch.nn import *\n", "Softmax", "torch.nn.Softmax"),
    ("from torch.nn import *\n", "CrossEntropyLoss", "torch.nn.CrossEntropyLoss"),
    ("from torch.optim import *\n", "Adam", "torch.optim.Adam"),
    ("from torch import nn as N\n", "N.ReLU", "torch.nn.ReLU"),
    ("from torch.nn import functional as fn\n", "fn.softmax", "torch.nn.functional.softmax"),
    # torch comes from the star import: `from torch.utils.data import ...` binds no `torch`
    ("from torch.utils.data import DataLoader\nfrom network import *\nx = torch.nn.CrossEntropyLoss()\n",
     "torch.nn.CrossEntropyLoss", "torch.nn.CrossEntropyLoss"),
    ("import torch as T\nfrom network import *\nx = torch.softmax(y, 1)\n", "torch.softmax", "torch.softmax"),
    ("from torch.nn import *\nfrom layers import Linear\n", "Linear", "layers.Linear"),  # imported by name
], ids=["nn star: Softmax", "nn star: a loss", "optim star", "from torch import nn as N", "functional alias",
        "torch from a project star import", "torch from a star import beside an alias",
        "a later import by name wins"])
def test_names_the_imports_bind(source: str, expression: str, expected: str) -> None:
    assert _qualified(source, expression) == expected


@pytest.mark.parametrize(("source", "expression"), [
    ("from torch.nn import *\n\n\nclass Softmax(Module):\n    pass\n", "Softmax"),  # the file's own class
    ("from torch.nn import *\nReLU = make_activation()\n", "ReLU"),  # assigned
    ("from torch.nn import *\n", "Net"),  # not torch.nn's
    ("from torch.nn import *\n", "dropout"),  # not a class: left alone
    ("from torch.nn.functional import *\n", "softmax"),  # (functional's names are too often locals)
    ("from .nn import *\n", "Softmax"),  # a relative package named nn
    ("from torch.utils.data import DataLoader\n", "torch.nn.CrossEntropyLoss"),  # no torch bound at all
    ("from torch.utils.data import DataLoader\nfrom network import *\ntorch = load_backend()\nx = torch.ones(1)\n",
     "torch.ones"),  # the file binds `torch` itself
    ("import torch.nn as nn\n", "torch.softmax"),  # `import torch.nn as nn` binds nn only
], ids=["own class", "assigned", "not exported", "lower case", "functional star",
        "relative", "torch unbound", "torch assigned", "torch.nn as nn"])
def test_look_alikes_stay_unresolved(source: str, expression: str) -> None:
    assert _qualified(source, expression) is None


SOFTMAX_NET = """\
import torch
from torch.nn import *


class Net(Module):
    def __init__(self):
        super().__init__()
        self.fc = Linear(4, 3)
        self.out = Softmax(dim=1)

    def forward(self, x):
        return self.out(self.fc(x))
"""

OWN_SOFTMAX_NET = SOFTMAX_NET.replace("from torch.nn import *\n", """from torch.nn import *


class Softmax(Module):  # (returns the scores: not torch's Softmax)
    def __init__(self, dim):
        super().__init__()

    def forward(self, x):
        return x
""")

SCRIPT = """\
from torch.utils.data import DataLoader
from {network} import *


def main(loader):
    model = Net()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


main(DataLoader([]))
"""


def test_a_sibling_built_from_a_star_import_of_torch_nn(tmp_path: Path) -> None:
    _write(tmp_path, {
        "network.py": SOFTMAX_NET,
        "own.py": OWN_SOFTMAX_NET,
        "main.py": SCRIPT.format(network="network"),
        "main_own.py": SCRIPT.format(network="own"),
    })
    assert _codes(tmp_path / "main.py") == [("TL019", 11)]
    assert _codes(tmp_path / "main_own.py") == []


def test_the_star_exports_are_torch_classes() -> None:
    """Every name the table binds for a star import is bound by that star import in torch, to a class."""
    torch = pytest.importorskip("torch")
    assert torch is not None
    for module, names in STAR_EXPORTS.items():
        namespace: dict[str, object] = {}
        exec(f"from {module} import *", namespace)  # noqa: S102 - the real star import
        missing = sorted(name for name in names if not isinstance(namespace.get(name), type))
        assert not missing, f"{module}: {missing}"


@pytest.mark.torch
@pytest.mark.parametrize(("network", "stalls"), [("network", True), ("own", False)])
def test_the_star_imported_softmax_stalls_with_torch(tmp_path: Path, network: str, stalls: bool) -> None:
    """The model built from ``from torch.nn import *`` trains (its cross-entropy stays above the
    floor of a softmax taken twice); with the file's own Softmax class the loss goes to 0."""
    import math
    import subprocess
    import sys

    pytest.importorskip("torch")
    _write(tmp_path, {"network.py": SOFTMAX_NET, "own.py": OWN_SOFTMAX_NET})
    program = f"""
import torch
from {network} import *
torch.manual_seed(0)
model = Net()
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x, y = torch.eye(4)[:3] * 20, torch.arange(3)
for _ in range(300):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
print(loss.item())
"""
    result = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, check=True)
    loss = float(result.stdout)
    floor = -math.log(math.e / (math.e + 2))
    assert (loss > floor - 1e-3) if stalls else (loss < 0.05)
