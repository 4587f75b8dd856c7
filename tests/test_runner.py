"""One file's trouble never stops the run: it becomes one error line for that file."""

from __future__ import annotations

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
