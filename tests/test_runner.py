"""One file's trouble never stops the run: it becomes one error line for that file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import torchlint.engine as engine
import torchlint.runner as runner
from torchlint.settings import Settings


def test_source_that_libcst_builds_but_rejects_is_a_syntax_error(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text('import torch\nx = "a" b"x"\nw.grad\n')
    (tmp_path / "good.py").write_text("import torch\nw = torch.randn(3, requires_grad=True)\nw.add_(1)\n")
    result = subprocess.run([sys.executable, "-m", "torchlint", "."], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "bad.py: error: syntax error" in result.stderr
    assert "good.py:3:1: TL002" in result.stdout


def test_a_bug_while_checking_a_file_is_reported_for_that_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import torch\n")

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(engine, "lint_source", broken)  # the runner imports the engine's on use
    report = runner.check_file(str(path), [], Settings())
    assert report.error is not None and report.error.startswith("internal error: KeyError")
    monkeypatch.setattr(engine, "fix_source", broken)
    assert runner.fix_file(str(path), [], Settings(), write=True).error.startswith("internal error")


def test_a_closed_pipe_ends_the_run_quietly(tmp_path: Path) -> None:
    for index in range(200):
        (tmp_path / f"m{index}.py").write_text("import torch\nw = torch.randn(3, requires_grad=True)\nw.add_(1)\n")
    command = f"{sys.executable} -m torchlint --no-cache . | head -n 1"
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path)
    assert result.stdout.count("\n") == 1
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


# ---------------------------------------------------------------- syntax errors in every file
TOKENLESS_ERRORS = {
    "unclosed.py": "x = (1,\n",
    "indent.py": "x = 1\n    y = 2\n",
    "exempt.py": "# torchlint: noqa\ndef f(:\n",  # like ruff: a syntax error cannot be silenced
}


def _python_says(name: str, source: str) -> str:
    try:
        compile(source, name, "exec")
    except SyntaxError as error:
        return f"{name}:{error.lineno}:{error.offset}: error: syntax error: {error.msg}"
    raise AssertionError(f"{name} compiles")


def test_a_syntax_error_is_reported_in_a_file_without_any_rule_token(tmp_path: Path) -> None:
    for name, source in TOKENLESS_ERRORS.items():
        (tmp_path / name).write_text(source)
    (tmp_path / "good.py").write_text("import torch\nw = torch.randn(3, requires_grad=True)\nw.add_(1)\n")
    (tmp_path / "newer.py").write_text("type Vector = list[float]\n")  # 3.12 syntax: libcst reads it
    result = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "."], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 2
    expected = {name: _python_says(name, source) for name, source in TOKENLESS_ERRORS.items()}
    assert sorted(result.stderr.splitlines()[:-1]) == sorted(expected.values())
    assert "good.py:3:1: TL002" in result.stdout
    for name, source in TOKENLESS_ERRORS.items():
        piped = subprocess.run([sys.executable, "-m", "torchlint", "--stdin-filename", name, "-"], input=source,
                               capture_output=True, text=True, cwd=tmp_path)
        assert piped.returncode == 2 and piped.stderr.splitlines()[0] == expected[name]


# ---------------------------------------------------------------- one pipeline
def test_one_entry_point_for_sources_and_notebooks(tmp_path: Path) -> None:
    rules = [rule for rule in runner_rules() if rule.code == "TL012"]
    source = b"import torch\nb = torch.zeros(1)\nb.require_grad = True\n"
    checked = runner.lint_content("t.py", source, Settings(), rules)
    assert [f.code for f in checked.report.findings] == ["TL012"] and not checked.changed
    fixed = runner.lint_content("t.py", source, Settings(), rules, action=runner.Action.FIX)
    assert fixed.text == source.decode().replace("require_grad", "requires_grad") and fixed.report.fixed == 1
    silenced = runner.lint_content("t.py", source, Settings(), rules, action=runner.Action.ADD_NOQA)
    assert silenced.noqa_added == 1 and silenced.text.endswith("b.require_grad = True  # noqa: TL012\n")
    notebook = '{"cells": [{"cell_type": "code", "source": "' + source.decode().replace("\n", "\\n") + '"}]}'
    in_cells = runner.lint_content("nb.ipynb", notebook.encode(), Settings(), rules, action=runner.Action.FIX)
    assert in_cells.report.fixed == 1 and "requires_grad = True" in in_cells.text
    assert runner.lint_content("t.py", b"\xff\xfe x", Settings(), rules).report.error.startswith("cannot decode")


def test_one_finding_at_a_time_is_fixed_or_silenced_as_the_whole_file_is() -> None:
    """What an editor's quick fixes do: one finding's fix, or its noqa comment, from the
    check's own tree, written as ``--fix`` and ``--add-noqa`` write them (notebook cells too)."""
    source = "import torch\nw = torch.randn(3, requires_grad=True)\nw -= 0.1 * w.grad\nw += 1\n"
    indented = "".join("    " + line for line in source.splitlines(keepends=True))  # IPython dedents it
    cells = [{"cell_type": "code", "source": text} for text in ("x = (", indented)]
    for path, content, text in (("t.py", source, source), ("nb.ipynb", json.dumps({"cells": cells}), indented)):
        notebook = path.endswith(".ipynb")
        checked = runner.lint_content(path, content, Settings())
        first, second = checked.report.findings
        fixed = runner.one_fix_text(checked, first)
        assert fixed is not None  # the other finding is left as it is
        assert runner.cell_texts(fixed, notebook=notebook)[first.cell or 1] == text.replace(
            "w -= 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")
        silenced = runner.noqa_text(checked, second)
        assert silenced is not None
        after = runner.lint_content(path, silenced, Settings())
        assert [(f.line, f.col) for f in after.report.findings] == [(first.line, first.col)]
        assert runner.cell_texts(silenced, notebook=notebook)[second.cell or 1] == text.replace(
            "w += 1\n", "w += 1  # noqa: TL002\n")
        with pytest.raises(ValueError):
            runner.one_fix_text(runner.lint_content(path, content, Settings(), action=runner.Action.FIX), first)


def runner_rules():
    from torchlint.rules import all_rules

    return all_rules()


def test_no_import_cycle_and_no_libcst_until_content_is_analysed() -> None:
    code = (
        "import sys, torchlint.runner\n"
        "assert not {'torchlint.notebook', 'torchlint.engine', 'libcst'} & set(sys.modules), sys.modules.keys()\n"
        "import torchlint.notebook\n"
        "assert 'torchlint.runner' not in {m for m in sys.modules if m.startswith('torchlint.notebook')}\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    # notebook.py is a document model: it imports neither the runner nor the rules.
    notebook_source = (Path(runner.__file__).parent / "notebook.py").read_text()
    assert "torchlint.runner" not in notebook_source and "torchlint.rules" not in notebook_source
