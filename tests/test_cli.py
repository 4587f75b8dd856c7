"""The command line, in process: stdin, --add-noqa, exit codes, --statistics, formats."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from torchlint.cli import main
from conftest import BAD, FIXED



@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    # Pinned: other rules may also fire on these samples as the catalogue grows.
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL001", "TL012"]\n')
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return tmp_path


def feed_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


# ---------------------------------------------------------------- stdin
def test_stdin_is_reported_under_the_stdin_filename(project: Path, monkeypatch, capsys) -> None:
    feed_stdin(monkeypatch, BAD.encode())
    assert main(["-", "--stdin-filename", "src/train.py"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in out] == ["src/train.py:5:1:", "src/train.py:9:5:", "Found", "[*]"]


def test_stdin_filename_alone_reads_stdin(project: Path, monkeypatch, capsys) -> None:
    feed_stdin(monkeypatch, BAD.encode())
    assert main(["--stdin-filename", "train.py", "--select", "TL012"]) == 1
    assert capsys.readouterr().out.startswith("train.py:5:1: TL012")


def test_stdin_uses_the_config_and_per_file_ignores_of_its_filename(project: Path, monkeypatch, capsys) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "pyproject.toml").write_text("[tool.torchlint]\nper-file-ignores = { 'tests/*' = ['TL001'] }\n")
    feed_stdin(monkeypatch, BAD.encode())
    assert main(["-", "--stdin-filename", "pkg/tests/test_x.py", "--quiet"]) == 1
    assert [line.split(" ")[1] for line in capsys.readouterr().out.splitlines()] == ["TL012"]


def test_stdin_fix_writes_the_fixed_source_to_stdout(project: Path, monkeypatch, capsys) -> None:
    feed_stdin(monkeypatch, BAD.encode())
    assert main(["-", "--fix", "--stdin-filename", "train.py"]) == 0
    captured = capsys.readouterr()
    assert captured.out == FIXED
    assert "Fixed 2 errors:\n- train.py:\n    1 × TL001 (rebind-update)\n    1 × TL012 (requires-grad-typo)\n" in captured.err


def test_stdin_fix_reports_what_remains_on_stderr(project: Path, monkeypatch, capsys) -> None:
    feed_stdin(monkeypatch, BAD.encode())
    assert main(["-", "--fix", "--select", "TL012", "--ignore", "TL012", "--extend-select", "TL001",
                 "--stdin-filename", "t.py"]) == 0
    feed_stdin(monkeypatch, BAD.encode())
    capsys.readouterr()
    assert main(["-", "--diff", "--stdin-filename", "t.py"]) == 1
    assert capsys.readouterr().out.startswith("--- t.py\n+++ t.py\n")


def test_stdin_fix_of_broken_code_echoes_it_unchanged(project: Path, monkeypatch, capsys) -> None:
    broken = "import torch\nx.grad = (\n"
    feed_stdin(monkeypatch, broken.encode())
    assert main(["-", "--fix", "--stdin-filename", "t.py"]) == 2
    captured = capsys.readouterr()
    assert captured.out == broken
    assert captured.err.startswith("t.py:") and "syntax error" in captured.err


def test_stdin_fix_keeps_the_encoding(project: Path, monkeypatch, capsysbinary) -> None:
    source = "# -*- coding: latin-1 -*-\n# café\n" + BAD
    feed_stdin(monkeypatch, source.encode("latin-1"))
    assert main(["-", "--fix", "--stdin-filename", "t.py"]) == 0
    assert capsysbinary.readouterr().out == ("# -*- coding: latin-1 -*-\n# café\n" + FIXED).encode("latin-1")


def test_stdin_cannot_be_mixed_with_paths(project: Path, capsys) -> None:
    (project / "a.py").write_text("")
    assert main(["-", "a.py"]) == 2
    assert "stdin" in capsys.readouterr().err


# ---------------------------------------------------------------- --add-noqa
def test_add_noqa_silences_every_finding_and_is_idempotent(project: Path, capsys) -> None:
    (project / "train.py").write_text(BAD)
    (project / "clean.py").write_text("x = 1\n")
    assert main(["--add-noqa", "."]) == 0
    assert "Added 2 noqa directives." in capsys.readouterr().err
    text = (project / "train.py").read_text()
    assert "b.require_grad = True  # noqa: TL012\n" in text and "w.grad  # noqa: TL001\n" in text
    assert (project / "clean.py").read_text() == "x = 1\n"
    assert main(["."]) == 0
    assert main(["--add-noqa", "."]) == 0
    assert "Added 0 noqa directives." in capsys.readouterr().err
    assert main([".", "--extend-select", "TL100"]) == 0


def test_add_noqa_reports_files_it_cannot_read_and_goes_on(project: Path, capsys) -> None:
    (project / "broken.py").write_text("x.grad = (\n")
    (project / "train.py").write_text(BAD)
    assert main(["--add-noqa", "."]) == 2
    err = capsys.readouterr().err
    assert "broken.py:" in err and "Added 2 noqa directives." in err
    assert (project / "broken.py").read_text() == "x.grad = (\n"


# ---------------------------------------------------------------- exit codes
def test_exit_non_zero_on_fix(project: Path) -> None:
    train = project / "train.py"
    train.write_text(BAD)
    assert main(["--fix", "--exit-non-zero-on-fix", "train.py"]) == 1
    assert train.read_text() == FIXED
    assert main(["--fix", "--exit-non-zero-on-fix", "train.py"]) == 0
    train.write_text(BAD)
    assert main(["--fix", "train.py"]) == 0


def test_exit_codes(project: Path) -> None:
    (project / "train.py").write_text(BAD)
    (project / "clean.py").write_text("x = 1\n")
    assert main(["clean.py"]) == 0
    assert main(["train.py"]) == 1
    assert main(["train.py", "--exit-zero"]) == 0
    assert main(["missing.py"]) == 2
    assert main(["--select", "TL999"]) == 2


# ---------------------------------------------------------------- reporting options
def test_statistics_replace_the_listing(project: Path, capsys) -> None:
    (project / "train.py").write_text(BAD)
    assert main(["--statistics", "train.py"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "1\tTL001\t[*] rebind-update", "1\tTL012\t[*] requires-grad-typo", "Found 2 errors.", "[*] 2 fixable with `--fix`."]
    assert main(["--statistics", "--format", "json", "train.py"]) == 1
    assert [row["code"] for row in json.loads(capsys.readouterr().out)] == ["TL001", "TL012"]


@pytest.mark.parametrize("name", ["flake8", "full", "json", "sarif", "github"])
def test_every_format_from_the_command_line(project: Path, capsys, name: str) -> None:
    (project / "train.py").write_text(BAD)
    assert main(["--format", name, "train.py"]) == 1
    out = capsys.readouterr().out
    assert "TL001" in out and "TL012" in out
    if name == "json":
        assert all(item["fix"]["edits"] for item in json.loads(out))
    if name == "sarif":
        assert json.loads(out)["runs"][0]["results"]


def test_output_format_is_an_alias(project: Path, capsys) -> None:
    (project / "train.py").write_text(BAD)
    main(["--output-format", "github", "train.py"])
    assert capsys.readouterr().out.startswith("::error ")


def test_explain_and_list_include_tl100(project: Path, capsys) -> None:
    assert main(["--explain", "TL100"]) == 0
    assert capsys.readouterr().out.startswith("# TL100 unused-noqa")
    assert main(["--list-rules"]) == 0
    assert "TL100  unused-noqa" in capsys.readouterr().out


def test_verify_skips_tl100(project: Path, capsys) -> None:
    pytest.importorskip("torch")
    assert main(["--verify", "--select", "TL100"]) == 0
    assert "TL100 unused-noqa: skipped" in capsys.readouterr().out
