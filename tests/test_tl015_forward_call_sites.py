"""TL015 on a list built in a module's ``forward`` from what the file's calls of the module pass
(``analysis/forward_sites.py``: ``self.propagate(adjacency, self.items.weight)`` runs
``Propagate.forward`` with ``features`` a parameter), and on a list holding a leaf that requires
grad and the non-leaves a loop makes from it (``values.REQUIRES_GRAD_ON_EVERY_PATH``).  Checked
against torch 2.13: each program is linted and run; a finding's program raises M6, the others run."""

from __future__ import annotations

import re

import pytest

from tests.test_tl009_escapes import M6
from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
pytestmark = pytest.mark.torch

PRELUDE = """\
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
adjacency = torch.rand(5, 5)


class Propagate(nn.Module):
    def forward(self, adjacency, features):
        layers = [features]
        while len(layers) < 3:
            layers.append(adjacency @ layers[-1])
        return {reduce}


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.items = nn.Embedding(5, 4)
        self.propagate = Propagate()

    def forward(self, adjacency):
        return self.propagate(adjacency, {passed})


out = Recommender()(adjacency)
"""

LOOP = """\
import numpy as np
import torch

basis = torch.eye(3, requires_grad=True)
mixer = torch.full((3, 3), 0.5)
powers = [{first}]
for _ in range(3):
    basis = mixer @ basis
    powers.append({appended})
spectrum = np.array(powers)
"""

# name -> (program, whether TL015 reports it; then running it raises M6)
PROGRAMS = {
    "np_sum_of_propagated_weight": (PRELUDE.format(reduce="np.sum(layers, 0)", passed="self.items.weight"), True),
    "np_mean_of_propagated_weight": (PRELUDE.format(reduce="np.mean(layers, axis=0)", passed="self.items.weight"), True),
    "stacked_in_torch": (PRELUDE.format(reduce="torch.stack(layers).sum(0)", passed="self.items.weight"), False),
    "detached_weight_passed": (PRELUDE.format(reduce="np.sum(layers, 0)", passed="self.items.weight.detach()"), False),
    "loop_of_leaf_and_products": (LOOP.format(first="basis", appended="basis"), True),
    "loop_detached": (LOOP.format(first="basis.detach()", appended="basis.detach()"), False),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_finding_iff_the_program_raises(name: str) -> None:
    program, reported = PROGRAMS[name]
    rule = rule_by_code("TL015")
    assert rule is not None
    findings = lint_source(program, [rule]).findings
    assert bool(findings) is reported, [f.message for f in findings]
    namespace: dict[str, object] = {}
    if reported:
        with pytest.raises(RuntimeError, match=re.escape(M6)):
            exec(compile(program, name, "exec"), namespace)
    else:
        exec(compile(program, name, "exec"), namespace)  # runs


def test_stacked_form_keeps_the_graph() -> None:
    """The fix the message points to for a forward (reduce in torch) trains: the embedding gets a gradient."""
    namespace: dict[str, object] = {}
    exec(compile(PRELUDE.format(reduce="torch.stack(layers).sum(0)", passed="self.items.weight"), "t", "exec"), namespace)
    out = namespace["out"]
    assert isinstance(out, torch.Tensor) and out.requires_grad
    out.sum().backward()
