"""Packaging promises: torch is not a runtime dependency, the rule book ships
inside the wheel, the README's commands are the ones CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from conftest import ROOT


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_torch_is_not_a_runtime_dependency() -> None:
    dependencies = _pyproject()["project"]["dependencies"]
    assert not any(re.match(r"torch\b", dep) for dep in dependencies)
    assert any(dep.startswith("torch") for dep in _pyproject()["project"]["optional-dependencies"]["verify"])


def test_linting_does_not_import_torch() -> None:
    code = (
        "import sys; from torchlint.cli import main; main(['examples']); "
        "sys.stderr.write('TORCH' if 'torch' in sys.modules else 'NOTORCH')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stderr.endswith("NOTORCH"), result.stderr


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", setup, re.DOTALL)
    assert len(commands) == 2, commands
    assert "torchlint examples/" in commands[0]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_pre_commit_hooks_manifest() -> None:
    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    hook = hooks["torchlint"]
    assert hook["language"] == "python"
    assert hook["entry"].split()[0] == "torchlint"
    assert {"python", "pyi"} <= set(hook["types_or"])
    assert hook["require_serial"] is True


def test_flake8_entry_point_is_declared() -> None:
    entry_points = _pyproject()["project"]["entry-points"]["flake8.extension"]
    assert entry_points == {"TL": "torchlint.flake8_plugin:Flake8Plugin"}


@pytest.mark.slow
def test_wheel_ships_the_rule_book_and_no_torch_requirement(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("torchlint-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
    rule_modules = [p.stem for p in (ROOT / "torchlint" / "rules").glob("tl*.py")]
    pages = [p.name for p in (ROOT / "rules").glob("TL*.md")]
    assert all(f"torchlint/_rulebook/{page}" in names for page in pages)
    assert all(f"torchlint/rules/{module}.py" in names for module in rule_modules)
    requirements = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert all("extra ==" in line for line in requirements if re.match(r"Requires-Dist: torch\b", line))
