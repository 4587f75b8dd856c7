"""The flake8 plugin, driven through the real ``python -m flake8``: it reports exactly
what the CLI reports (same line and column), every rule can be selected in flake8,
``[tool.torchlint]`` excludes and per-file-ignores apply, and every noqa spelling
gives the same result in both tools."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES

SOURCE = """\
import torch

w = torch.randn(3, requires_grad=True)
for _ in range(3):
    (w * 2).sum().backward()
    w = w - 0.1 * w.grad
    b = torch.tensor([1,\t2], requires_grad=True)
v = torch.zeros(2, requires_grad=True)
v.add_(1)  # noqa: TL002
"""
FINDING = re.compile(r"^(?:\./)?(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>TL\d+) ", re.MULTILINE)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd)


def _findings(*args: str, cwd: Path) -> list[tuple[str, int, int, str]]:
    result = _run(*args, cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    return sorted((m["path"], int(m["line"]), int(m["col"]), m["code"]) for m in FINDING.finditer(result.stdout))


def _cli(*args: str, cwd: Path) -> list[tuple[str, int, int, str]]:
    return _findings("torchlint", "--no-cache", *args, cwd=cwd)


def _flake8(*args: str, cwd: Path) -> list[tuple[str, int, int, str]]:
    return _findings("flake8", "--isolated", *args, cwd=cwd)


def test_flake8_plugin_matches_cli(tmp_path: Path) -> None:
    # The tab before TL006's column checks that both count columns in characters.
    (tmp_path / "train.py").write_text(SOURCE)
    cli = _cli("train.py", cwd=tmp_path)
    assert cli, "the CLI should report findings"
    assert _flake8("train.py", cwd=tmp_path) == cli  # the default rules
    assert not any(line == 9 for _, line, _, _ in cli), "both honour # noqa"
    # Every rule (the opt-in TL011 reports `.data`-free updates... and TL100 nothing here).
    assert _flake8("--select", "TL", "train.py", cwd=tmp_path) == _cli("--select", "ALL", "train.py", cwd=tmp_path)


def test_opt_in_rules_are_selected_in_flake8(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text((FIXTURES / "TL010" / "positives.py").read_text())
    expected = _cli("--select", "TL010", "loop.py", cwd=tmp_path)
    assert expected
    assert _flake8("--select", "TL010", "loop.py", cwd=tmp_path) == expected
    # flake8 alone: TL010 is in flake8's default ignore, like the CLI's default selection.
    assert not any(code == "TL010" for *_, code in _flake8("loop.py", cwd=tmp_path))
    assert not any(code == "TL010" for *_, code in _cli("loop.py", cwd=tmp_path))


def test_tool_torchlint_excludes_and_per_file_ignores_apply(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint]\nextend-exclude = ["generated"]\nper-file-ignores = {"tests/*" = ["TL001"]}\n'
    )
    for folder in ("generated", "tests", "src"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.py").write_text(SOURCE)
    args = ("generated/train.py", "tests/train.py", "src/train.py")
    found = _findings("flake8", "--select", "TL", *args, cwd=tmp_path)
    assert {path for path, *_ in found} == {"src/train.py", "tests/train.py"}
    assert any(code == "TL001" for path, *_, code in found if path == "src/train.py")
    assert not any(code == "TL001" for path, *_, code in found if path == "tests/train.py")
    # The CLI agrees on the files it is not told to exclude.
    cli = _cli("src/train.py", "tests/train.py", cwd=tmp_path)
    assert found == cli


# ---------------------------------------------------------------- noqa spellings, side by side
TYPO = "b{n} = torch.zeros(1)\nb{n}.require_grad = True"  # TL012 at the second line, column 1
SPELLINGS = [
    "", "# noqa", "#noqa", "# NOQA", "# NoQA", "#noqa:TL012", "# noqa:TL012", "# noqa: TL012", "# noqa: tl012",
    "# NOQA:TL001,TL012", "# noqa: TL001, TL012", "# noqa:TL001 TL012", "# noqa : TL012", "# noqa:  TL012",
    "# noqa: TL0", "# noqa: TL", "# noqa: TL001", "# noqa:TL001,TL002", "# noqa: E501", "# type: ignore # noqa: TL012",
    "# noqa: TL012 explained here", "#  noqa", "# no qa",
]


def test_every_noqa_spelling_agrees_with_flake8(tmp_path: Path) -> None:
    body = ["import torch"]
    for n, spelling in enumerate(SPELLINGS):
        body.append(TYPO.format(n=n) + (f"  {spelling}" if spelling else ""))
    # A comment anywhere in a backslash-continued line or a multi-line string counts (flake8's rule).
    body.append("c = torch.zeros(1)\nc.require_grad = \\\n    True  # noqa: TL012")
    body.append('d = torch.zeros(1)\nd.require_grad, s = True, """\n# noqa: TL012\n"""')
    (tmp_path / "typos.py").write_text("\n".join(body) + "\n")
    cli = _cli("--select", "TL012", "typos.py", cwd=tmp_path)
    flake8 = _flake8("--select", "TL012", "typos.py", cwd=tmp_path)
    assert flake8 == cli
    reported = {line for _, line, _, _ in cli}
    line_of = {spelling: 3 + 2 * n for n, spelling in enumerate(SPELLINGS)}
    silenced = {s for s in SPELLINGS if line_of[s] not in reported}
    assert silenced == set(SPELLINGS) - {"", "# noqa: TL001", "# noqa:TL001,TL002", "# noqa: E501", "# no qa"}
    assert reported == {line_of[s] for s in SPELLINGS if s not in silenced}  # not the continued line nor the string


@pytest.mark.parametrize(
    ("directive", "ruff_like"),
    [
        ("# flake8: noqa", "skipped"),
        ("#flake8:noqa", "skipped"),
        ("# flake8: noqa because it is generated", "skipped"),
        ("    # flake8: noqa", "skipped"),
        ("# FLAKE8= NOQA", "skipped"),  # flake8's own spelling rules: case and `=` do not matter
        ("x = 1  # flake8: noqa", "reported"),  # not on a line of its own: neither tool skips the file
        ("# flake8: noqa: TL002", "TL002 off"),  # ruff's reading; flake8 itself skips the whole file
    ],
)
def test_file_level_flake8_noqa(tmp_path: Path, directive: str, ruff_like: str) -> None:
    (tmp_path / "train.py").write_text(f"{directive}\n" + SOURCE.replace("  # noqa: TL002", "") + "b = torch.zeros(1)\nb.require_grad = True\n")
    cli = {code for *_, code in _cli("train.py", cwd=tmp_path)}
    flake8 = {code for *_, code in _flake8("--select", "TL", "train.py", cwd=tmp_path)}
    everything = {"TL001", "TL002", "TL006", "TL012"}
    if ruff_like == "skipped":
        assert cli == flake8 == set()
    elif ruff_like == "reported":
        assert cli == flake8 == everything
    else:
        assert cli == everything - {"TL002"} and flake8 == set()


def test_ruff_noqa_is_ruffs_own(tmp_path: Path) -> None:
    """``# ruff: noqa`` skips a file for ruff only (flake8 ignores it too)."""
    (tmp_path / "train.py").write_text("# ruff: noqa\n" + SOURCE)
    assert _cli("train.py", cwd=tmp_path) == _flake8("--select", "TL", "train.py", cwd=tmp_path) != []


def test_disable_noqa(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("# flake8: noqa\n" + SOURCE)
    assert _flake8("--select", "TL", "train.py", cwd=tmp_path) == []
    assert ("train.py", 10, 1, "TL002") in _flake8("--select", "TL", "--disable-noqa", "train.py", cwd=tmp_path)
