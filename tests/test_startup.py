"""A warm run (every result cached) is start-up bound: it imports neither libcst
nor the engine, the analysis or any rule.  Those come in only when a file must be
analysed.  Rule codes come from the rule modules' names, so checking ``--select``
imports no rule either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import torchlint.rules as rules_package
from conftest import BAD
from torchlint.rules import all_rules, rule_codes

# Runs the command in a fresh interpreter, then names the analysis modules it imported.
PROBE = """
import sys
from torchlint.cli import main
code = main(sys.argv[1:])
analysis = sorted(
    name for name in sys.modules
    if name.split(".")[0] == "libcst"
    or name.startswith(("torchlint.rules.", "torchlint.engine", "torchlint.analysis", "torchlint.noqa"))
)
sys.stderr.write("\\nIMPORTED:" + ",".join(analysis) + "\\n")
raise SystemExit(code)
"""


def _probe(cwd: Path, *args: str) -> tuple[str, str, list[str]]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True)
    stderr, _, imported = result.stderr.rpartition("\nIMPORTED:")
    assert result.returncode in (0, 1, 2) and "Traceback" not in result.stderr, result.stderr
    return result.stdout, stderr, [name for name in imported.strip().split(",") if name]


def _notebook(source: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.mark.parametrize(
    "options",
    [(), ("--format", "json"), ("--statistics",), ("--output-format", "sarif"), ("--output-format", "gitlab"),
     ("--output-format", "junit"), ("--output-format", "rdjson")],
    ids=["flake8", "json", "statistics", "sarif", "gitlab", "junit", "rdjson"],
)
def test_a_warm_run_imports_no_libcst_and_no_rule(tmp_path: Path, options: tuple[str, ...]) -> None:
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "clean.py").write_text("import torch\nx = torch.ones(2)\n")
    (tmp_path / "broken.py").write_text("def f(:\n    return w.grad\n")
    (tmp_path / "nb.ipynb").write_text(_notebook(BAD))
    args = ("--isolated", "--cache-dir", str(tmp_path / "cache"), *options, ".")
    cold_out, cold_err, cold_imported = _probe(tmp_path, *args)
    assert "libcst" in cold_imported  # the probe sees analysis when there is some
    warm_out, warm_err, warm_imported = _probe(tmp_path, *args)
    assert warm_imported == []
    assert (warm_out, warm_err) == (cold_out, cold_err)
    assert "TL001" in warm_out and "broken.py" in warm_err


def test_an_edited_file_brings_the_analysis_back(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\n")
    args = ("--isolated", "--cache-dir", str(tmp_path / "cache"), ".")
    _probe(tmp_path, *args)
    assert _probe(tmp_path, *args)[2] == []
    (tmp_path / "train.py").write_text(BAD)
    out, _, imported = _probe(tmp_path, *args)
    assert "libcst" in imported and "TL001" in out


def test_selectors_are_checked_without_importing_rules() -> None:
    code = (
        "import sys\n"
        "from torchlint.settings import SettingsError, validate_selectors\n"
        "validate_selectors(['TL0', 'TL001', 'TL100', 'ALL'])\n"
        "try:\n"
        "    validate_selectors(['TL0099'])\n"
        "except SettingsError as error:\n"
        "    print(error)\n"
        "print(sorted(m for m in sys.modules if m == 'libcst' or m.startswith('torchlint.rules.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["unknown rule selector 'TL0099' (did you mean 'TL009'? see `torchlint --list-rules`)", "[]"]


def test_rule_codes_are_the_rule_modules_names() -> None:
    assert rule_codes() == tuple(rule.code for rule in all_rules())


def test_a_rule_module_must_be_named_after_its_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tl998_misnamed.py").write_text(
        "from torchlint.rule import Rule\n\n\nclass Misnamed(Rule):\n"
        "    code, name, summary = 'TL997', 'misnamed', 'a rule in a module named for another code'\n"
    )
    discovery = (rules_package.all_rules, rules_package._rule_modules)  # both cached per process
    monkeypatch.setattr(rules_package, "__path__", [*rules_package.__path__, str(tmp_path)])
    try:
        for cached in discovery:
            cached.cache_clear()
        assert "TL998" in rule_codes()
        with pytest.raises(RuntimeError, match="tl998_misnamed defines TL997"):
            all_rules()
    finally:
        monkeypatch.undo()
        sys.modules.pop("torchlint.rules.tl998_misnamed", None)
        for cached in discovery:
            cached.cache_clear()


def test_a_cold_run_keeps_the_imported_modules_out_of_garbage_collections(tmp_path: Path) -> None:
    """After the rules (and libcst) are imported, what is alive is frozen (``gc.freeze``): no
    collection scans it again, nor do the collections at exit.  A warm run freezes nothing."""
    (tmp_path / "train.py").write_text(BAD)
    code = (
        "import gc, sys\n"
        "from torchlint.cli import main\n"
        "main(sys.argv[1:])\n"
        "sys.stderr.write(f'\\nFROZEN:{gc.get_freeze_count()}\\n')\n"
    )
    args = ("--isolated", "--cache-dir", str(tmp_path / "cache"), "-q", ".")
    frozen = []
    for _ in ("cold", "warm"):
        result = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True)
        frozen.append(int(result.stderr.rpartition("\nFROZEN:")[2]))
    cold, warm = frozen
    assert cold > 10_000 and warm == 0
