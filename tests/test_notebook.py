"""Jupyter notebooks: one program of code cells, IPython syntax masked, positions per
cell, and fixes that change only the cells they fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.cli import main
from torchlint.files import discover
from torchlint.notebook import Notebook, NotebookError
from torchlint.runner import add_noqa_to_file, fix_file, lint_content
from torchlint.settings import Settings, resolve_rules

# Pinned: other rules may also fire on these samples as the catalogue grows.
RULES = resolve_rules(Settings(select=("TL001", "TL012")))
SETUP = "import torch\nw = torch.zeros(3, requires_grad=True)\n"
LOOP = "for step in range(3):\n    loss = (w * 2).sum()\n    loss.backward()\n    w = w - 0.1 * w.grad\n"
FIXED_LOOP = LOOP.replace("w = w - 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")


def cell(source: str | list[str], kind: str = "code", **extra) -> dict:
    body = {"cell_type": kind, "id": f"id-{abs(hash(str(source))) % 10_000}", "metadata": {"tags": ["x"]},
            "source": source if not isinstance(source, str) else source.splitlines(keepends=True)}
    if kind == "code":
        body |= {"execution_count": 7, "outputs": [{"name": "stdout", "output_type": "stream", "text": ["ok é\n"]}]}
    return body | extra


def notebook(*cells: dict, indent: int = 1, ensure_ascii: bool = False, newline: bool = True, language: str = "python") -> str:
    data = {
        "cells": list(cells),
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=indent, ensure_ascii=ensure_ascii) + ("\n" if newline else "")


def findings(text: str, rules=RULES) -> list[tuple[int | None, int, int, str]]:
    report = lint_content("nb.ipynb", text, Settings(), rules).report
    assert report.error is None, report.error
    return [(f.cell, f.line, f.col, f.code) for f in report.findings]


# ---------------------------------------------------------------- one program, cells counted like ruff
def test_a_name_from_an_earlier_cell_is_known_and_cells_count_markdown_too() -> None:
    text = notebook(cell("# Title", "markdown"), cell(SETUP), cell("Some prose", "markdown"), cell(LOOP))
    assert findings(text) == [(4, 4, 5, "TL001")]


def test_each_cell_alone_would_not_be_flagged() -> None:
    assert findings(notebook(cell(LOOP))) == []


def test_flake8_format_names_the_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    Path("nb.ipynb").write_text(notebook(cell("# Title", "markdown"), cell(SETUP), cell(LOOP)))
    assert main(["nb.ipynb"]) == 1
    assert capsys.readouterr().out.startswith("nb.ipynb:cell 3:4:5: TL001 ")


# ---------------------------------------------------------------- IPython syntax
MAGICS = """%matplotlib inline
!pip install torch
files = !ls -la
%time x = 1
w?
?w
%pip install \\
    some-package
"""


def test_magics_and_shell_escapes_do_not_break_parsing() -> None:
    text = notebook(cell(MAGICS + SETUP), cell("%%time\n" + LOOP))
    assert findings(text) == [(2, 5, 5, "TL001")]


def test_masking_keeps_lines_and_columns() -> None:
    parsed = Notebook(notebook(cell(MAGICS + SETUP)))
    lines = parsed.program.splitlines()
    assert len(lines) == len((MAGICS + SETUP).splitlines())
    assert lines[-1] == "w = torch.zeros(3, requires_grad=True)"
    assert lines[2].startswith("files = ...")  # the assigned name stays defined


def test_indented_magics_are_masked_in_place() -> None:
    text = notebook(cell(SETUP + "for step in range(3):\n    %time loss = (w * 2).sum()\n    w = w - 0.1 * w.grad\n"))
    assert findings(text) == [(1, 5, 5, "TL001")]


def test_lines_inside_strings_and_brackets_are_not_magics() -> None:
    source = SETUP + 'doc = """\n%not a magic\n!neither\n"""\nok = (1\n    !=2)\nw = w - 0.1 * w.grad\n'
    parsed = Notebook(notebook(cell(source)))
    assert "%not a magic" in parsed.program and "!=2" in parsed.program
    assert findings(notebook(cell(source))) == [(1, 9, 1, "TL001")]


def test_non_python_cell_magics_are_skipped() -> None:
    text = notebook(cell(SETUP), cell("%%bash\nfor f in *; do echo $f; done\n"), cell(LOOP))
    assert findings(text) == [(3, 4, 5, "TL001")]


def test_notebooks_of_other_languages_are_skipped() -> None:
    assert findings(notebook(cell(SETUP), cell(LOOP), language="R")) == []


# ---------------------------------------------------------------- errors
def test_invalid_json_is_one_clear_error() -> None:
    report = lint_content("nb.ipynb", '{"cells": [}', Settings(), RULES).report
    assert report.error is not None and report.error.startswith("invalid notebook JSON: ") and "\n" not in report.error


def test_json_that_is_not_a_notebook() -> None:
    with pytest.raises(NotebookError, match="no `cells` list"):
        Notebook('{"worksheets": []}')


def test_a_cell_that_does_not_parse_is_named_and_the_others_are_linted_as_one_program() -> None:
    text = notebook(cell("# notes", "markdown"), cell(SETUP), cell("y = 1\nx = (1,\n"), cell(LOOP))
    report = lint_content("nb.ipynb", text, Settings(), RULES).report
    assert report.error == "cell 3:2:5: syntax error: '(' was never closed"  # counted in the cell
    assert [(f.cell, f.line, f.col, f.code) for f in report.findings] == [(4, 4, 5, "TL001")]  # w from cell 2


def test_every_cell_that_does_not_parse_is_named() -> None:
    text = notebook(cell("def f(:\n"), cell(SETUP), cell("  x = [\n"), cell(LOOP))
    linted = lint_content("nb.ipynb", text, Settings(), RULES)
    report = linted.report
    assert report.error is not None and report.error.startswith("cell 1:1:7: syntax error: ")
    assert report.error.endswith("(cell 3 does not parse either)")
    assert [(f.cell, f.code) for f in report.findings] == [(4, "TL001")]
    # Each one with its position, for an editor: cell 3 is dedented as IPython does, so its
    # column counts the two spaces removed.
    assert [(p.cell, p.line, p.col) for p in linted.problems] == [(1, 1, 7), (3, 1, 7)]
    assert str(linted.problems[0]) == report.error.split(" (cell 3")[0]


def test_fix_and_add_noqa_leave_a_cell_that_does_not_parse_alone(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    text = notebook(cell(SETUP), cell("x = (1,\n"), cell(LOOP))
    path.write_text(text)
    report = fix_file(str(path), RULES, Settings(), write=True)
    assert report.fixed == 1 and report.error is not None and report.error.startswith("cell 2:1:5: ")
    assert _changed_sources(text, path.read_text()) == {3: FIXED_LOOP.splitlines(keepends=True)}
    path.write_text(text)
    count, error = add_noqa_to_file(str(path), RULES, Settings())
    assert count == 1 and error is not None and error.startswith("cell 2:")
    assert list(_changed_sources(text, path.read_text())) == [3]


def test_cli_reports_the_bad_cell_and_the_findings_of_the_others(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text(notebook(cell(SETUP), cell("x = (1,\n"), cell(LOOP)))
    result = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "nb.ipynb"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.startswith("nb.ipynb:cell 3:4:5: TL001 ")
    assert "nb.ipynb:cell 2:1:5: error: syntax error: '(' was never closed" in result.stderr


# ---------------------------------------------------------------- cells IPython dedents
INDENTED = "    " + SETUP.replace("\n", "\n    ").rstrip(" ") + "\n" + "".join("    " + line for line in LOOP.splitlines(True))


@pytest.mark.parametrize("source", [INDENTED, "\n  \n" + INDENTED, "\tx = 1\n\tif x:\n\t\ty = 2\n", "  a = 1\nb = 2\n"])
def test_an_indented_cell_is_dedented_as_ipython_runs_it(source: str) -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    ipython = TransformerManager().transform_cell(source)
    ours = Notebook(notebook(cell(source))).program
    assert ours.lstrip("\n \t") == ipython  # the blank lines IPython drops stay: Python ignores them


def test_an_indented_cell_is_linted_with_its_own_columns() -> None:
    text = notebook(cell(INDENTED))
    report = lint_content("nb.ipynb", text, Settings(fix_edits=True), RULES).report
    assert report.error is None
    ((cell_number, line, col, code),) = [(f.cell, f.line, f.col, f.code) for f in report.findings]
    assert (cell_number, code) == (1, "TL001")
    assert INDENTED.splitlines()[line - 1][col - 1:].startswith("w = w - 0.1")
    # The fix as a text edit applies to the cell as stored.
    (edit,) = report.findings[0].edits
    lines = INDENTED.splitlines(keepends=True)
    start = sum(map(len, lines[: edit.line - 1])) + edit.col - 1
    end = sum(map(len, lines[: edit.end_line - 1])) + edit.end_col - 1
    assert INDENTED[:start] + edit.content + INDENTED[end:] == INDENTED.replace("w = w - 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")


def test_fixing_an_indented_cell_keeps_its_indentation(tmp_path: Path) -> None:
    from torchlint.rule import FixStyle

    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(cell(INDENTED)))
    assert fix_file(str(path), RULES, Settings(fix_style=FixStyle.NO_GRAD), write=True).fixed == 1
    fixed = "".join(json.loads(path.read_text())["cells"][0]["source"])
    assert fixed == INDENTED.replace(
        "        w = w - 0.1 * w.grad\n", "        with torch.no_grad():\n            w -= 0.1 * w.grad\n"
    )


def test_a_syntax_error_in_an_indented_cell_has_the_cells_column() -> None:
    report = lint_content("nb.ipynb", notebook(cell("    x = 1\n    y = (\n")), Settings(), RULES).report
    assert report.error == "cell 1:2:9: syntax error: '(' was never closed"


def test_cli_prints_the_cell_error_with_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    Path("nb.ipynb").write_text(notebook(cell(SETUP), cell("def f(:\n    w.grad\n")))
    Path("broken.ipynb").write_text("{")
    assert main(["nb.ipynb", "broken.ipynb"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("nb.ipynb:cell 2:") and "syntax error" in err[0]
    assert err[1].startswith("broken.ipynb: error: invalid notebook JSON")


# ---------------------------------------------------------------- fixing
def _changed_sources(before: str, after: str) -> dict[int, list[str]]:
    old, new = json.loads(before), json.loads(after)
    assert len(old["cells"]) == len(new["cells"])
    changed = {}
    for index, (a, b) in enumerate(zip(old["cells"], new["cells"])):
        assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
        if a["source"] != b["source"]:
            changed[index + 1] = b["source"]
    assert {k: v for k, v in old.items() if k != "cells"} == {k: v for k, v in new.items() if k != "cells"}
    return changed


@pytest.mark.parametrize("indent", [1, 2, 4])
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_fix_rewrites_only_the_changed_cell_and_keeps_the_formatting(tmp_path: Path, indent: int, ensure_ascii: bool) -> None:
    text = notebook(cell("# Título", "markdown"), cell(SETUP), cell(LOOP), cell("print('ü')\n"),
                    indent=indent, ensure_ascii=ensure_ascii)
    path = tmp_path / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    report = fix_file(str(path), RULES, Settings(), write=True)
    assert report.error is None and report.fixed == 1 and report.findings == []
    after = path.read_text(encoding="utf-8")
    assert _changed_sources(text, after) == {3: FIXED_LOOP.splitlines(keepends=True)}
    # Byte for byte, only the changed line differs.
    assert after.replace("w.data.sub_(0.1 * w.grad)", "w = w - 0.1 * w.grad") == text
    assert fix_file(str(path), RULES, Settings(), write=True).fixed == 0


def test_fix_that_adds_lines_keeps_the_json_layout(tmp_path: Path) -> None:
    from torchlint.rule import FixStyle

    text = notebook(cell(SETUP), cell(LOOP.rstrip("\n")), cell("done = True"))
    path = tmp_path / "nb.ipynb"
    path.write_text(text)
    report = fix_file(str(path), RULES, Settings(fix_style=FixStyle.NO_GRAD), write=True)
    assert report.error is None and report.fixed == 1
    after = path.read_text()
    fixed_cell = LOOP.rstrip("\n").replace(
        "    w = w - 0.1 * w.grad", "    with torch.no_grad():\n        w -= 0.1 * w.grad"
    )
    assert _changed_sources(text, after) == {2: fixed_cell.splitlines(keepends=True)}  # still no final newline
    assert after == text.replace(
        '    "    w = w - 0.1 * w.grad"\n', '    "    with torch.no_grad():\\n",\n    "        w -= 0.1 * w.grad"\n'
    )


def test_fix_keeps_string_sources_magics_and_a_missing_final_newline(tmp_path: Path) -> None:
    text = notebook(cell(["%load_ext autoreload\n", SETUP]), cell(source="%%time\n" + LOOP + "!echo done"), newline=False)
    path = tmp_path / "nb.ipynb"
    path.write_text(text)
    assert fix_file(str(path), RULES, Settings(), write=True).fixed == 1
    data = json.loads(path.read_text())
    assert data["cells"][1]["source"] == ["%%time\n", *FIXED_LOOP.splitlines(keepends=True), "!echo done"]
    assert data["cells"][0]["source"] == ["%load_ext autoreload\n", SETUP]
    assert not path.read_text().endswith("\n")


def test_a_cell_stored_as_one_string_stays_one_string(tmp_path: Path) -> None:
    raw = json.loads(notebook(cell(SETUP), cell(LOOP)))
    raw["cells"][1]["source"] = LOOP
    text = json.dumps(raw, indent=1)
    path = tmp_path / "nb.ipynb"
    path.write_text(text)
    fix_file(str(path), RULES, Settings(), write=True)
    assert json.loads(path.read_text())["cells"][1]["source"] == FIXED_LOOP


def test_diff_is_per_cell_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    text = notebook(cell(SETUP), cell(LOOP))
    Path("nb.ipynb").write_text(text)
    assert main(["--diff", "nb.ipynb"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("--- nb.ipynb:cell 2\n+++ nb.ipynb:cell 2\n")
    assert "-    w = w - 0.1 * w.grad\n+    w.data.sub_(0.1 * w.grad)\n" in out
    assert Path("nb.ipynb").read_text() == text


# ---------------------------------------------------------------- noqa, add-noqa, discovery
def test_noqa_in_a_cell_is_honoured() -> None:
    noqa = LOOP.replace("w.grad\n", "w.grad  # noqa: TL001\n")
    assert findings(notebook(cell(SETUP), cell(noqa))) == []


def test_add_noqa_in_a_notebook(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    text = notebook(cell(SETUP), cell("%%time\n" + LOOP))
    path.write_text(text)
    assert add_noqa_to_file(str(path), RULES, Settings()) == (1, None)
    after = path.read_text()
    assert _changed_sources(text, after)[2][4] == "    w = w - 0.1 * w.grad  # noqa: TL001\n"
    assert findings(after) == []


def test_discovery_includes_notebooks(tmp_path: Path) -> None:
    (tmp_path / "a.ipynb").write_text(notebook(cell(SETUP)))
    (tmp_path / "b.py").write_text("")
    (tmp_path / "c.json").write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb").write_text(notebook(cell(SETUP)))
    found = [Path(path).name for path, _ in discover([str(tmp_path)], Settings().all_excludes)]
    assert found == ["a.ipynb", "b.py"]
