"""TL015 after a loop that certainly ran, and through a slice of a returned tuple: each function
of the fixture runs under torch 2.13; those with a finding raise M6, the others run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import top_level_functions

from tests.test_tl009_escapes import M6
from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = Path(__file__).parent / "fixtures" / "TL015" / "loop_ran.py"


# The functions handed a list of clients (each a list of batches); the others get one client's batches.
_TAKE_CLIENTS = frozenset({"weighted_loss", "weighted_detached", "labels_only"})


def _arguments(name: str) -> tuple:
    torch.manual_seed(0)
    batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(2)]
    return ([batches, batches],) if name in _TAKE_CLIENTS else (batches,)


def test_flagged_functions_raise_m6_and_the_others_run() -> None:
    source = FIXTURE.read_text()
    flagged_lines = {f.line for f in lint_source(source, [rule_by_code("TL015")]).findings}
    functions = top_level_functions(source)
    flagged = {name for name, lines in functions.items() if flagged_lines & set(lines)}
    assert flagged == {"report", "weighted_loss", "last_batch_loss"}
    namespace: dict = {}
    exec(compile(source, str(FIXTURE), "exec"), namespace)
    for name in functions:
        if name in ("evaluate", "per_client"):
            continue  # (helpers of the others)
        if name in flagged:
            with pytest.raises(RuntimeError, match=re.escape(M6)):
                namespace[name](*_arguments(name))
        else:
            namespace[name](*_arguments(name))
