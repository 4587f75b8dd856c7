"""A method called on a receiver of unknown class is read as the one method of that name that
fits the call's unpacking (``analysis/method_candidates.py``) only when no class the file
imports from its project may fit as well: an instance of the imported class may be the
receiver just as well."""

from __future__ import annotations

from pathlib import Path

from test_project import _write
from torchlint.runner import check_file
from torchlint.settings import Settings, resolve_rules

SETTINGS = Settings(select=("TL015",))

SERVER = """\
import numpy as np
import torch.nn as nn
{imports}

model = nn.Linear(4, 3)
criterion = nn.CrossEntropyLoss()


class LocalMember:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def evaluate(self):
        return len(self.y), criterion(model(self.x), self.y)


def mean_loss(members):
    losses = []
    for member in members:
        count, loss = member.evaluate()
        losses.append(loss)
    return np.mean(losses)
"""

REMOTE = """\
class RemoteMember:
    def __init__(self, batches):
        self.batches = batches

    def evaluate(self):
        {body}
"""


def _lines(path: Path) -> list[int]:
    report = check_file(str(path), resolve_rules(SETTINGS), SETTINGS)
    assert report.error is None, report.error
    return [f.line for f in report.findings if f.code == "TL015"]


def test_an_imported_class_whose_method_cannot_fit_leaves_the_local_one(tmp_path: Path) -> None:
    _write(tmp_path, {
        "remote.py": REMOTE.format(body="return 'remote', len(self.batches), 0.0"),
        "server.py": SERVER.format(imports="from remote import RemoteMember"),
        "alone.py": SERVER.format(imports=""),
    })
    assert _lines(tmp_path / "server.py") == [22]
    assert _lines(tmp_path / "alone.py") == [22]


def test_an_imported_class_whose_method_may_fit_too_leaves_it_unknown(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pair.py": REMOTE.format(body="return len(self.batches), 0.0"),
        "named.py": REMOTE.format(body="stats = len(self.batches), 0.0\n        return stats"),
        "other.py": "class RemoteMember:\n    pass\n",
        "fits.py": SERVER.format(imports="from pair import RemoteMember"),
        "unknown.py": SERVER.format(imports="from named import RemoteMember"),
        "starred.py": SERVER.format(imports="from other import *"),
    })
    assert _lines(tmp_path / "fits.py") == []
    assert _lines(tmp_path / "unknown.py") == []
    assert _lines(tmp_path / "starred.py") == []
