"""Facts of subtrees kept by node (``torchlint.analysis.memo``): worked out once per node object,
never taken for another node (an equal one included), forgotten once a complete analysis did not
ask for them; and a lint that keeps them across versions is the lint without them."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.memo import NodeMemo
from torchlint.incremental import IncrementalParser
from torchlint.lsp.program import Program, analyse
from torchlint.settings import Settings


def test_a_fact_is_worked_out_once_per_node_object():
    memo, made = NodeMemo(), []

    def count(node: cst.CSTNode) -> int:
        made.append(node)
        return len(made)

    first, equal = cst.parse_statement("x = 1\n"), cst.parse_statement("x = 1\n")
    assert memo.get("count", first, count) == 1
    assert memo.get("count", first, count) == 1
    assert memo.get("count", equal, count) == 2  # equal, but another node
    assert memo.get("other", first, count) == 3  # another question
    memo.sweep()
    assert memo.get("count", first, count) == 1  # asked before the sweep: kept
    memo.sweep()
    memo.sweep()
    assert memo.get("count", equal, count) == 4  # not asked by the last complete analysis: forgotten
    assert memo.reused == 1


SOURCE = """import torch


def scale(t):
    t.mul_(2)
    return t


def train(model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


w = torch.randn(3, requires_grad=True)
scale(w)
"""
# Each edit away from the last; the findings of functions whose text did not change change too.
EDITS = [
    SOURCE.replace("requires_grad=True", "requires_grad=False"),  # TL002 in `scale` goes
    SOURCE,  # and comes back
    SOURCE.replace("        optimizer.step()", "        optimizer.step()\n        optimizer.zero_grad()"),  # TL008 goes
    "# moved down\n" + SOURCE,  # every finding a line down
    SOURCE.replace("scale(w)\n", ""),  # no call site: TL002 goes
    SOURCE.replace("    t.mul_(2)", "    t.mul_(2)  # noqa: TL002"),
    SOURCE.replace("    t.mul_(2)", "    t.mul_(2)\n    t.add_(1)"),
]


def test_facts_kept_across_versions_give_the_lint_of_each_version():
    parser, settings = IncrementalParser(), Settings()
    seen = []
    for text in [SOURCE, *EDITS, *EDITS[::-1]]:
        program = Program.of_file("memo.py", "file:///memo.py", text)
        kept = analyse(program, settings, build=parser).outcome()
        assert kept == analyse(program, settings).outcome(), text
        seen.append(sorted((finding.code, finding.line) for finding in kept.findings))
    assert seen[0] == [("TL002", 5), ("TL008", 11)]
    assert seen[1:5] == [[("TL008", 11)], seen[0], [("TL002", 5)], [("TL002", 6), ("TL008", 12)]]
    assert parser.memo.reused > 0
