"""TL015 and TL009 on per-epoch totals started from 0: each function of the fixture runs under
torch 2.13; those with a TL015 finding raise M6 (the NumPy conversion of totals that require
grad), the others run; the appended totals TL009 reports still hold their graphs."""

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

FIXTURE = Path(__file__).parent / "fixtures" / "TL015" / "epoch_totals.py"
FLAGGED = {"train", "train_averaged"}


def _flagged(source: str, code: str) -> set[str]:
    lines = {f.line for f in lint_source(source, [rule_by_code(code)]).findings}
    return {name for name, span in top_level_functions(source).items() if lines & set(span)}


def _batches() -> list:
    torch.manual_seed(0)
    return [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]


def test_flagged_functions_raise_m6_and_the_others_run() -> None:
    source = FIXTURE.read_text()
    assert _flagged(source, "TL015") == FLAGGED
    namespace: dict = {}
    exec(compile(source, str(FIXTURE), "exec"), namespace)
    for name in top_level_functions(source):
        if name in FLAGGED:
            with pytest.raises(RuntimeError, match=re.escape(M6)):
                namespace[name](2, _batches())
        else:
            namespace[name](2, _batches())


def test_the_appended_totals_keep_their_graphs() -> None:
    """TL009 reports `history.append(total)` of the flagged functions: each total still has a
    grad_fn, so every epoch's graph stays alive in the history."""
    source = FIXTURE.read_text()
    assert _flagged(source, "TL009") == FLAGGED
    namespace: dict = {}
    exec(compile(source.replace("np.array(history)", "history").replace("np.asarray(history)", "history"),
                 str(FIXTURE), "exec"), namespace)
    for name in FLAGGED:
        totals = namespace[name](2, _batches())
        assert len(totals) == 2 and all(total.grad_fn is not None for total in totals)
