"""A star import of a project file (``from network import *``) binds that file's public
top-level classes and functions, or its ``__all__``: the model class it supplies is known as
``from network import Net`` would make it (``analysis/project.py``).  The last star import that
binds a name wins; an ``__all__`` that cannot be read, or a file that star-imports in turn and
does not define the name, leaves it unknown."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from test_project import LOGITS_MODEL, SOFTMAX_MODEL, TRAIN_SCRIPT, _codes, _write


def _script(imports: str) -> str:
    return TRAIN_SCRIPT.format(imports=imports, model="Net()")


def test_a_star_import_supplies_the_model_class(tmp_path: Path) -> None:
    _write(tmp_path, {
        "network.py": SOFTMAX_MODEL,
        "logits.py": LOGITS_MODEL,
        "main.py": _script("from network import *"),
        "last_wins.py": _script("from logits import *\nfrom network import *"),
        "listed.py": _script("from listed_net import *"),
        "listed_net.py": SOFTMAX_MODEL + '\n__all__ = ["Net"]\n',
    })
    assert _codes(tmp_path / "main.py") == [("TL019", 12)]
    assert _codes(tmp_path / "last_wins.py") == [("TL019", 13)]
    assert _codes(tmp_path / "listed.py") == [("TL019", 12)]


def test_star_imports_that_do_not_bind_the_model_class_stay_silent(tmp_path: Path) -> None:
    _write(tmp_path, {
        "network.py": SOFTMAX_MODEL,
        "logits.py": LOGITS_MODEL,
        "hidden_net.py": SOFTMAX_MODEL + '\n__all__ = ["Base"]\n',
        "computed_net.py": SOFTMAX_MODEL + '\n__all__ = [name for name in dir() if name != "F"]\n',
        "passing_on.py": "from logits import *\nfrom helpers import *\n",
        "last_wins.py": _script("from network import *\nfrom logits import *"),
        "hidden.py": _script("from logits import *\nfrom hidden_net import *"),
        "computed.py": _script("from computed_net import *"),
        "passed_on.py": _script("from network import *\nfrom passing_on import *"),
        "local.py": _script("from network import *\n\n\nclass Net(nn.Module):\n    pass\n"),
    })
    assert _codes(tmp_path / "last_wins.py") == []  # logits' Net rebinds network's
    assert _codes(tmp_path / "hidden.py") == []  # not in __all__: logits' Net
    assert _codes(tmp_path / "computed.py") == []  # an __all__ it cannot read
    assert _codes(tmp_path / "passed_on.py") == []  # passing_on may bind Net through helpers
    assert _codes(tmp_path / "local.py") == []  # the file's own class


@pytest.mark.torch
def test_the_star_imported_model_keeps_the_loss_at_the_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the positive shape runs: cross-entropy of the star-imported model's softmax output,
    however confident its scores, stays at the floor of a softmax taken twice."""
    torch = pytest.importorskip("torch")
    _write(tmp_path, {"star_network.py": SOFTMAX_MODEL})
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict[str, object] = {}
    exec("from star_network import *\nmodel = Net()", namespace)
    model = namespace["model"]
    with torch.no_grad():
        model.fc.weight.copy_(torch.eye(3, 4) * 50)  # type: ignore[attr-defined]
        model.fc.bias.zero_()  # type: ignore[attr-defined]
    x, y = torch.eye(4)[:3], torch.arange(3)
    loss = torch.nn.CrossEntropyLoss()(model(x), y).item()  # type: ignore[operator]
    assert loss == pytest.approx(-math.log(math.e / (math.e + 2)), abs=1e-3)
    assert torch.nn.CrossEntropyLoss()(model.fc(x), y).item() < 1e-3  # type: ignore[attr-defined]
