"""TL004 on `.cuda()` copies, run under torch 2.13 on the CPU with `.double()` standing in for
`.cuda()` (both return a new non-leaf copy of a float32 CPU leaf): the reported functions return
None for the copy's gradient (with torch's non-leaf warning); the CPU-runnable look-alikes return
a gradient."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = Path(__file__).parent / "fixtures" / "TL004" / "gpu_copies.py"


def _namespace() -> dict:
    source = FIXTURE.read_text().replace(".cuda()", ".double()")
    namespace: dict = {}
    exec(compile(source, str(FIXTURE), "exec"), namespace)
    return namespace


def test_the_reported_copies_have_no_gradient() -> None:
    source = FIXTURE.read_text()
    lines = {f.line for f in lint_source(source, [rule_by_code("TL004")]).findings}
    assert len(lines) == 2
    namespace = _namespace()
    for name in ("moved_in_the_same_expression", "moved_by_a_rebinding"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert namespace[name]() is None
        assert any("is not a leaf Tensor is being accessed" in str(w.message) for w in caught), name


def test_the_look_alikes_have_their_gradient() -> None:
    namespace = _namespace()
    assert namespace["original_read"]() is not None
    assert namespace["moved_to_a_device"]("cpu") is not None
    assert namespace["leaf_made_last"]() is not None
