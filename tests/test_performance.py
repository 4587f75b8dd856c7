"""Smoke version of ``benchmarks/run.py`` (seconds, not minutes) and guards for
what keeps torchlint fast: start-up imports, the fast traversal, the pre-filter."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import libcst as cst

from conftest import ROOT
from torchlint.engine import _analyse, active_rules
from torchlint.rule import RuleOptions
from torchlint.rules import all_rules
from torchlint.analysis import analyzer

CORPUS = ROOT / "benchmarks" / "corpus"


def test_benchmark_smoke_run(tmp_path: Path) -> None:
    """Cold, warm, one-file-edited and single-process runs on the shipped scripts;
    the script itself fails if their outputs differ."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--smoke", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    for tool in ("torchlint cold", "torchlint warm", "torchlint edit1", "torchlint cold -j1"):
        assert f"| {tool} |" in result.stdout


def test_startup_imports_nothing_heavy() -> None:
    """The command imports neither torch nor the language server's packages."""
    code = (
        "import sys, torchlint.cli\n"
        "heavy = sorted(m for m in ('torch', 'numpy', 'pygls', 'lsprotocol', 'psutil') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_fast_traversal_is_faster_than_libcst_visit() -> None:
    sources = [p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.py"))]
    modules = [cst.parse_module(source) for source in sources]
    rules = all_rules()

    def analyse_all() -> float:
        start = time.process_time()
        for module, source in zip(modules, sources):
            _analyse(module, source, active_rules(source, rules), RuleOptions())
        return time.process_time() - start

    fast_walk = analyzer.Analyzer._walk

    def libcst_visit(self, node, visitor=None):
        node.visit(visitor or self)

    fast, slow = [], []
    try:
        for _ in range(3):
            analyzer.Analyzer._walk = fast_walk
            fast.append(analyse_all())
            analyzer.Analyzer._walk = libcst_visit
            slow.append(analyse_all())
    finally:
        analyzer.Analyzer._walk = fast_walk
    assert min(fast) * 1.5 < min(slow), (fast, slow)


def test_prefilter_is_cheap() -> None:
    """Deciding which rules can fire costs far less than parsing."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.py")))
    rules = all_rules()
    start = time.process_time()
    for _ in range(20):
        active_rules(source, rules)
    prefilter = (time.process_time() - start) / 20
    start = time.process_time()
    cst.parse_module(source)
    parse = time.process_time() - start
    assert prefilter * 20 < parse, (prefilter, parse)
