"""scripts/score_corpus.py: cases are matched to findings by rule and logical statement, drift is caught."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("score_corpus", ROOT / "scripts" / "score_corpus.py")
score_corpus = importlib.util.module_from_spec(SPEC)
sys.modules["score_corpus"] = score_corpus
SPEC.loader.exec_module(score_corpus)

TRAINING = """\
import torch
w = torch.zeros(3, requires_grad=True)
b = torch.zeros(3, requires_grad=True)
for step in range(3):
    loss = (w * 2 + b).sum()
    loss.backward()
    w = w - 0.1 * w.grad
    with torch.no_grad():
        b -= (0.1
              * b.grad)
    b.grad.zero_()
"""


def _case(case_id: str, line: int, rule: str, label: str, text: str) -> str:
    return (
        f'[[case]]\nid = "{case_id}"\nrepo = "someone/demo"\npath = "train.py"\ncommit = "{"a" * 40}"\n'
        f'line = {line}\nline_sha = "{score_corpus.line_sha(text)}"\nrule = "{rule}"\nlabel = "{label}"\n'
        'note = "n"\ncheck = "c"\n'
    )


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    cache = tmp_path / "cache"
    source = cache / "someone" / "demo" / ("a" * 40) / "train.py"
    source.parent.mkdir(parents=True)
    source.write_text(TRAINING)
    lines = TRAINING.splitlines()
    cases = tmp_path / "cases.toml"
    cases.write_text(
        _case("c1", 7, "TL001", "bug", lines[6])          # found
        + _case("c2", 10, "TL002", "ok", lines[9])        # second line of a statement under no_grad: not flagged
        + _case("c3", 6, "TL009", "bug", lines[5])        # labelled bug that the rule does not report
        + _case("c4", 11, "TL002", "ok", "some other text")  # drifted: not scored
    )
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return cache, cases


def test_scores_cases_and_reports_drift(corpus: tuple[Path, Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    cache, cases = corpus
    out = tmp_path / "score.json"
    assert score_corpus.main(["--cases", str(cases), "--cache", str(cache), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["table"]["TL001"]["tp"] == 1
    assert result["table"]["TL002"] == {"bugs": 0, "tp": 0, "fn": 0, "ok": 1, "fp": 0,
                                        "precision": None, "recall": None}
    assert result["table"]["TL009"]["fn"] == 1
    assert result["drift"] == ["c4"]
    assert "DRIFT c4" in capsys.readouterr().out


def test_finding_inside_a_continued_statement_counts_for_its_case(tmp_path: Path) -> None:
    spans = score_corpus.logical_spans(TRAINING)
    assert spans[9] == (9, 10) and spans[10] == (9, 10)
    assert spans[7] == (7, 7)


def test_notebook_cells_count_every_cell(tmp_path: Path) -> None:
    notebook = {"cells": [{"cell_type": "markdown", "source": ["# title"]},
                          {"cell_type": "code", "source": ["import torch\n", "x = 1"]}]}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(notebook))
    cached = score_corpus.CachedFile(path)
    assert cached.text(2, 2) == "x = 1"
    assert cached.text(1, 1) == "# title"


def test_line_sha_ignores_surrounding_whitespace() -> None:
    assert score_corpus.line_sha("  w -= lr * w.grad\n") == score_corpus.line_sha("w -= lr * w.grad")
    assert len(score_corpus.line_sha("x")) == 12


def test_every_committed_case_is_well_formed() -> None:
    cases = score_corpus.load_cases(sorted((ROOT / "corpus" / "dev").glob("*.toml")))
    assert cases, "the development corpus has cases"
    for case in cases:
        assert case.rule.startswith("TL0") and case.label in ("bug", "ok")
        assert case.repo.startswith("pypi:") or (case.commit and len(case.commit) == 40), case.id
        assert len(case.line_sha) == 12 and case.check.startswith("torch 2.13"), case.id


def test_fetch_list_names_siblings_and_scoring_warns_when_one_is_missing(
        corpus: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache, cases = corpus
    stored = "b" * 40
    cases.write_text(cases.read_text() + (
        f'\n[[sibling]]\nrepo = "someone/demo"\npath = "model.py"\ncommit = "{"a" * 40}"\n'
        f'stored_commit = "{stored}"\nchars = 12\ncases = ["c1"]\n'))
    assert score_corpus.main(["--cases", str(cases), "--cache", str(cache), "--fetch-list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    target = cache / "someone" / "demo" / ("a" * 40) / "model.py"
    assert f'read_file(repo="someone/demo", path="model.py", commit="{stored}")  -> {target}  # sibling of c1, 12 characters' in listed
    assert score_corpus.main(["--cases", str(cases), "--cache", str(cache)]) == 0
    assert "1 sibling files not cached (--fetch-list): someone/demo:model.py (c1)" in capsys.readouterr().out
    target.write_text("import torch")
    assert score_corpus.main(["--cases", str(cases), "--cache", str(cache)]) == 0
    assert "sibling" not in capsys.readouterr().out


def test_every_committed_sibling_names_its_cases() -> None:
    tomls = sorted(ROOT.glob("corpus/**/*.toml"))
    siblings = score_corpus.load_siblings(tomls)
    ids = {case.id for path in tomls for case in score_corpus.load_cases([path])}
    assert siblings, "the corpora record their sibling files"
    for sibling in siblings:
        assert len(sibling.commit) == len(sibling.stored_commit) == 40 and sibling.chars > 0, sibling
        assert sibling.cases and set(sibling.cases) <= ids, sibling
