"""Code CPython runs but libcst's tokenizer rejects: a block indented with tabs inside
one indented with spaces (seen in real research code).  It is analysed with the tabs of
its indentation expanded; findings keep the original columns and carry no fix, because
a fix would be an edit of the re-indented text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from torchlint.engine import SourceError, fix_source, lint_source
from torchlint.rules import all_rules

MIXED = (
    "import torch\n"
    "\n"
    "def train(x):\n"
    "        w = torch.zeros(3, requires_grad=True)\n"
    "        for i in range(3):\n"
    "        \tloss = (w * x).sum()\n"
    "        \tloss.backward()\n"
    "        \tif i:\n"
    "        \t\tw.grad.zero_()\n"
    "        \telse:\n"
    "\t            w -= 0.1 * w.grad\n"
    "        return w\n"
)


def test_the_sample_is_what_the_engine_works_around() -> None:
    compile(MIXED, "<mixed>", "exec")  # CPython runs it
    with pytest.raises(cst.ParserSyntaxError):
        cst.parse_module(MIXED)


def test_findings_on_tab_indented_lines_keep_their_original_columns() -> None:
    result = lint_source(MIXED, all_rules())
    [finding] = [f for f in result.findings if f.code == "TL002"]
    line = MIXED.splitlines()[finding.line - 1]
    assert finding.line == 11
    assert line[finding.col - 1 :].startswith("w -= 0.1 * w.grad")
    assert finding.fix is None


def test_fix_leaves_the_file_as_it_is() -> None:
    result = fix_source(MIXED, all_rules())
    assert result.source == MIXED
    assert not result.applied
    assert any(f.code == "TL002" for f in result.remaining)


def test_tab_errors_are_still_syntax_errors() -> None:
    ambiguous = "if 1:\n        a = 1\n\tb = 2\n"  # TabError in CPython: meaning depends on the tab size
    with pytest.raises(SourceError, match="syntax error"):
        lint_source("import torch\n" + ambiguous, all_rules())


def test_the_cli_reports_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "mixed.py"
    path.write_text(MIXED)
    run = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", str(path)],
        capture_output=True, text=True,
    )
    assert run.returncode == 1, run.stderr
    assert f"{path}:11:14: TL002" in run.stdout
