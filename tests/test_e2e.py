"""End to end: the installed ``torchlint`` command, flake8 with the plugin, and both
pre-commit hooks through a real ``pre-commit try-repo`` in a temporary git repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import BAD, FIXED, ROOT

# Pinned: other rules may also fire on these samples as the catalogue grows.
CONFIG = '[tool.torchlint]\nselect = ["TL001", "TL012"]\n'
TORCHLINT = shutil.which("torchlint")

pytestmark = pytest.mark.skipif(TORCHLINT is None, reason="the torchlint command is not installed")


def notebook(*sources: str) -> str:
    cells = [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["# Notes\n"]}]
    cells += [
        {"cell_type": "code", "execution_count": 1, "id": f"c{n}", "metadata": {},
         "outputs": [{"name": "stdout", "output_type": "stream", "text": ["done\n"]}],
         "source": source.splitlines(keepends=True)}
        for n, source in enumerate(sources)
    ]
    data = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


NOTEBOOK = notebook("%matplotlib inline\nimport torch\nw = torch.zeros(3, requires_grad=True)\n",
                    "!nvidia-smi\nfor step in range(3):\n    (w * 2).sum().backward()\n    w = w - 0.1 * w.grad\n")


def run(args: list[str], cwd: Path, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    (tmp_path / "nb.ipynb").write_text(NOTEBOOK)
    return tmp_path


def test_lint_then_fix_then_clean(project: Path) -> None:
    result = run([TORCHLINT, "."], project)
    assert result.returncode == 1, result.stderr
    findings, summary = result.stdout.splitlines()[:3], result.stdout.splitlines()[3:]
    assert all(line.startswith(("nb.ipynb:cell 3:4:5: TL001 ", "src/train.py:5:1: TL012 ", "src/train.py:9:5: TL001 "))
               for line in findings) and len(set(findings)) == 3
    assert summary == ["Found 3 errors.", "[*] 3 fixable with `--fix`."] and result.stderr == ""

    fixed = run([TORCHLINT, "--fix", "."], project)
    assert fixed.returncode == 0 and "Found 3 errors (3 fixed, 0 remaining)." in fixed.stdout
    assert (project / "src" / "train.py").read_text() == FIXED
    cells = json.loads((project / "nb.ipynb").read_text())["cells"]
    assert cells[2]["source"][-1] == "    w.data.sub_(0.1 * w.grad)\n" and cells[2]["outputs"][0]["text"] == ["done\n"]
    assert cells[2]["source"][0] == "!nvidia-smi\n"

    clean = run([TORCHLINT, "."], project)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "All checks passed!\n", "")


def test_sarif_and_json_from_the_command(project: Path) -> None:
    sarif = run([TORCHLINT, "--format", "sarif", "."], project)
    log = json.loads(sarif.stdout)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]}
    assert sarif.returncode == 1 and uris == {"src/train.py", "nb.ipynb"}
    data = json.loads(run([TORCHLINT, "--format", "json", "--exit-zero", "."], project).stdout)
    assert {(item["filename"], item["cell"]) for item in data} == {("src/train.py", None), ("nb.ipynb", 3)}


def test_stdin_round_trip(project: Path) -> None:
    checked = run([TORCHLINT, "-", "--stdin-filename", "src/other.py"], project, stdin=BAD)
    assert checked.returncode == 1 and checked.stdout.startswith("src/other.py:5:1: TL012 ")
    fixed = run([TORCHLINT, "-", "--fix", "--stdin-filename", "src/other.py"], project, stdin=BAD)
    assert (fixed.returncode, fixed.stdout) == (0, FIXED)
    notebook_fixed = run([TORCHLINT, "-", "--fix", "--stdin-filename", "nb.ipynb"], project, stdin=NOTEBOOK)
    assert notebook_fixed.stdout == NOTEBOOK.replace("w = w - 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")


def test_a_config_error_is_one_line_and_exit_2(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.torchlint]\nextend-selct = ['TL100']\n")
    result = run([TORCHLINT, "."], project)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "unknown key `extend-selct`" in result.stderr


def test_add_noqa_then_clean(project: Path) -> None:
    result = run([TORCHLINT, "--add-noqa", "."], project)
    assert result.returncode == 0 and "Added 3 noqa directives." in result.stderr
    assert "w = w - 0.1 * w.grad  # noqa: TL001" in (project / "src" / "train.py").read_text()
    assert run([TORCHLINT, ".", "--extend-select", "TL100"], project).returncode == 0


def test_flake8_honours_noqa(project: Path) -> None:
    source = BAD.replace("b.require_grad = True", "b.require_grad = True  # noqa: TL012")
    (project / "src" / "train.py").write_text(source)
    result = run([sys.executable, "-m", "flake8", "--select", "TL001,TL012", "src/train.py"], project)
    assert result.returncode == 1, result.stderr
    assert [line.split(" ", 2)[:2] for line in result.stdout.splitlines()] == [["src/train.py:9:5:", "TL001"]]
    (project / "src" / "train.py").write_text(BAD.replace("w.grad\n", "w.grad  # noqa\n").replace(
        "b.require_grad = True", "b.require_grad = True  # noqa: E501"))
    result = run([sys.executable, "-m", "flake8", "--select", "TL001,TL012", "src/train.py"], project)
    assert [line.split(" ", 2)[:2] for line in result.stdout.splitlines()] == [["src/train.py:5:1:", "TL012"]]
    (project / "src" / "train.py").write_text("# torchlint: noqa: TL012\n" + BAD)
    result = run([sys.executable, "-m", "flake8", "--select", "TL001,TL012", "src/train.py"], project)
    assert [line.split(" ", 2)[:2] for line in result.stdout.splitlines()] == [["src/train.py:10:5:", "TL001"]]


# ---------------------------------------------------------------- pre-commit
def _snapshot_of_the_hook_repository(destination: Path) -> Path:
    """The hook repository as it is on disk, committed: `try-repo` on a checkout with
    uncommitted work only picks up changes to tracked files, never new ones."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, destination / name)
    for directory in ("torchlint", "rules"):
        shutil.copytree(ROOT / directory, destination / directory, ignore=shutil.ignore_patterns("__pycache__"))
    _git(destination, "init", "-q")
    _git(destination, "add", ".")
    _git(destination, "commit", "-q", "-m", "snapshot")
    return destination


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True)


def _no_torch_constraints(path: Path) -> Path:
    """A pip constraints file under which installing torch fails: if torchlint's install
    pulled torch, the hook environment could not be built."""
    lines = ["torch<0"]
    existing = os.environ.get("PIP_CONSTRAINT") or "/etc/xdg/pip/constraints.txt"
    lines += [f"-c {item}" for item in existing.split() if Path(item).is_file()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_pre_commit_hooks_manifest_has_both_hooks() -> None:
    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"torchlint", "torchlint-fix"}
    for hook in hooks.values():
        assert set(hook["types_or"]) == {"python", "pyi", "jupyter"} and hook["language"] == "python"
    assert "--fix" in hooks["torchlint-fix"]["entry"].split()


@pytest.mark.slow
def test_pre_commit_try_repo_runs_both_hooks(tmp_path: Path) -> None:
    if shutil.which("pre-commit") is None or shutil.which("git") is None:
        pytest.skip("pre-commit and git are needed")
    hooks = _snapshot_of_the_hook_repository(tmp_path / "hooks")
    user = tmp_path / "user"
    (user / "src").mkdir(parents=True)
    (user / "pyproject.toml").write_text(CONFIG)
    (user / "src" / "train.py").write_text(BAD)
    (user / "nb.ipynb").write_text(NOTEBOOK)
    (user / "README.md").write_text("not python\n")
    _git(user, "init", "-q")
    _git(user, "add", ".")
    env = {
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PIP_CONSTRAINT": str(_no_torch_constraints(tmp_path / "constraints.txt")),
        "NO_COLOR": "1",
    }
    # No hook id: both hooks run, in manifest order, sharing one environment.
    result = run(["pre-commit", "try-repo", str(hooks), "--all-files"], user, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    check, fix = output.split("- hook id: torchlint-fix")[0], output.split("- hook id: torchlint-fix")[1]
    assert "- hook id: torchlint\n- exit code: 1" in check
    assert "src/train.py:9:5: TL001 " in check and "nb.ipynb:cell 3:4:5: TL001 " in check
    assert "- exit code: 1" in fix and "- files were modified by this hook" in fix and "Fixed 3 errors:" in fix
    assert (user / "src" / "train.py").read_text() == FIXED
    assert "w.data.sub_(0.1 * w.grad)" in (user / "nb.ipynb").read_text()

    # The fix hook's own command now passes: nothing left to change.
    entry = {hook["id"]: hook["entry"] for hook in yaml.safe_load((hooks / ".pre-commit-hooks.yaml").read_text())}
    again = run([TORCHLINT, *entry["torchlint-fix"].split()[1:], "src/train.py", "nb.ipynb"], user)
    assert again.returncode == 0, again.stdout + again.stderr
