"""The results cache: same reports as a fresh run, only changed files re-analysed,
never a crash on a broken or unwritable cache, safe under concurrent runs."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from torchlint import cache as cache_module
from torchlint import parallel
from torchlint.cache import CACHE_DIR_NAME, Cache
from torchlint.parallel import lint_files
from torchlint.rule import FixStyle
from torchlint.settings import Settings, resolve_rules

CORPUS = ROOT / "benchmarks" / "corpus"
MISTAKE = "import torch\nw = torch.randn(3, requires_grad=True)\nw = w - 0.1 * w.grad\n"


def _project(tmp_path: Path) -> list[str]:
    """A few files with and without findings, one that does not parse."""
    shutil.copy(CORPUS / "regression.py", tmp_path / "regression.py")
    shutil.copy(CORPUS / "mnist.py", tmp_path / "mnist.py")
    for path in sorted(FIXTURES.glob("TL00[12]/*.py"))[:4]:
        shutil.copy(path, tmp_path / f"{path.parent.name}_{path.name}")
    (tmp_path / "broken.py").write_text("def f(:\n    return w.grad\n")  # tokens: it is parsed
    (tmp_path / "mistake.py").write_text(MISTAKE)
    return sorted(str(p) for p in tmp_path.glob("*.py"))


def _summary(reports) -> list[tuple]:
    return [
        (r.path, r.error, r.source, r.fixed, r.diff,
         [(f.code, f.line, f.col, f.end_line, f.end_col, f.message, f.fix.description if f.fix else None,
           f.fix.safety if f.fix else None, f.noqa_lines, f.edits) for f in r.findings])
        for r in reports
    ]


class _Counter:
    """Counts the files that are really analysed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        original_check, original_fix = parallel.check_file, parallel.fix_file

        def check(path, *args, **kwargs):
            self.paths.append(path)
            return original_check(path, *args, **kwargs)

        def fix(path, *args, **kwargs):
            self.paths.append(path)
            return original_fix(path, *args, **kwargs)

        monkeypatch.setattr(parallel, "check_file", check)
        monkeypatch.setattr(parallel, "fix_file", fix)


def _run(paths, settings=Settings(), cache_dir=None, **kwargs):
    cache = Cache(cache_dir, settings) if cache_dir is not None else None
    return lint_files(paths, resolve_rules(settings), settings, jobs=1, cache=cache, **kwargs)


def test_warm_run_gives_the_cold_reports_without_analysing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _project(tmp_path)
    fresh = _run(paths)
    cold = _run(paths, cache_dir=tmp_path / "cache")
    counter = _Counter(monkeypatch)
    warm = _run(paths, cache_dir=tmp_path / "cache")
    assert counter.paths == []
    assert _summary(fresh) == _summary(cold) == _summary(warm)
    assert any(r.findings for r in warm) and any(r.error for r in warm)


def test_fix_edits_survive_the_cache(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    settings = Settings(fix_edits=True)
    fresh = _run(paths, settings)
    _run(paths, settings, tmp_path / "cache")
    warm = _run(paths, settings, tmp_path / "cache")
    assert _summary(fresh) == _summary(warm)
    assert any(f.edits for r in warm for f in r.findings)


def test_editing_one_file_reanalyses_only_that_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _project(tmp_path)
    _run(paths, cache_dir=tmp_path / "cache")
    edited = tmp_path / "mnist.py"
    edited.write_text(edited.read_text() + "\nw = torch.randn(3, requires_grad=True)\nw = w - w.grad\n")
    counter = _Counter(monkeypatch)
    reports = _run(paths, cache_dir=tmp_path / "cache")
    assert counter.paths == [str(edited)]
    assert [f.code for f in reports[paths.index(str(edited))].findings] == ["TL001"]
    counter.paths.clear()
    _run(paths, cache_dir=tmp_path / "cache")
    assert counter.paths == []


def test_settings_and_version_are_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _project(tmp_path)
    _run(paths, cache_dir=tmp_path / "cache")
    counter = _Counter(monkeypatch)
    _run(paths, Settings(fix_style=FixStyle.NO_GRAD), tmp_path / "cache")
    assert counter.paths == paths
    counter.paths.clear()
    _run(paths, Settings(ignore=("TL001",)), tmp_path / "cache")
    assert counter.paths == paths
    counter.paths.clear()
    monkeypatch.setattr(cache_module, "__version__", "999.0")
    _run(paths, cache_dir=tmp_path / "cache")
    assert counter.paths == paths


@pytest.mark.parametrize("damage", [b"", b"garbage", b"{}", b"\x00\xff" * 50, None])
def test_corrupt_entries_are_misses_and_are_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage) -> None:
    paths = _project(tmp_path)
    expected = _summary(_run(paths))
    _run(paths, cache_dir=tmp_path / "cache")
    entries = list(Cache(tmp_path / "cache", Settings()).entries())
    assert len(entries) == len(paths)
    for entry in entries:
        if damage is None:  # valid JSON with a wrong value: caught by the checksum
            header, _, payload = entry.read_bytes().partition(b"\n")
            entry.write_bytes(header + b"\n" + payload.replace(b'"error":', b'"error": ', 1))
        else:
            entry.write_bytes(damage)
    counter = _Counter(monkeypatch)
    assert _summary(_run(paths, cache_dir=tmp_path / "cache")) == expected
    assert sorted(counter.paths) == paths
    counter.paths.clear()
    assert _summary(_run(paths, cache_dir=tmp_path / "cache")) == expected
    assert counter.paths == []  # rebuilt


def test_unusable_cache_directory_is_not_an_error(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    assert _summary(_run(paths, cache_dir=blocker)) == _summary(_run(paths))


def _lint_in_process(arguments: tuple[list[str], str]) -> list[tuple]:
    paths, cache_dir = arguments
    return _summary(_run(paths, cache_dir=Path(cache_dir)))


def test_concurrent_runs_share_a_cache_safely(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    expected = _summary(_run(paths))
    with multiprocessing.get_context("spawn" if sys.platform != "linux" else "fork").Pool(4) as pool:
        results = pool.map(_lint_in_process, [(paths, str(tmp_path / "cache"))] * 8)
    assert all(result == expected for result in results)
    assert _summary(_run(paths, cache_dir=tmp_path / "cache")) == expected
    leftovers = [p for p in (tmp_path / "cache").rglob(".tmp-*")]
    assert leftovers == []


def test_fix_and_diff_rewrite_files_whose_cached_findings_are_fixable(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    _run(paths, cache_dir=tmp_path / "cache")  # check run: fills the cache
    diff = _run(paths, cache_dir=tmp_path / "cache", fix=True)
    mistake = paths.index(str(tmp_path / "mistake.py"))
    assert "w.data.sub_" in diff[mistake].diff
    assert (tmp_path / "mistake.py").read_text() == MISTAKE  # --diff writes nothing
    fixed = _run(paths, cache_dir=tmp_path / "cache", fix=True, write=True)
    assert fixed[mistake].fixed == 1
    assert "w.data.sub_" in (tmp_path / "mistake.py").read_text()
    after = _run(paths, cache_dir=tmp_path / "cache")
    assert after[mistake].findings == []


def test_fix_run_reuses_entries_without_fixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _project(tmp_path)
    checked = _run(paths, cache_dir=tmp_path / "cache")
    fresh = _run(paths, fix=True)
    counter = _Counter(monkeypatch)
    cached = _run(paths, cache_dir=tmp_path / "cache", fix=True)
    assert _summary(cached) == _summary(fresh)
    analysed = set(counter.paths)
    for path, report in zip(paths, checked):
        has_safe_fix = any(f.fix and f.fix.safety.value == "safe" for f in report.findings)
        assert (path in analysed) == (has_safe_fix or report.error is not None), path


def test_pool_gives_the_same_reports_in_order(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    settings = Settings()
    serial = lint_files(paths, resolve_rules(settings), settings, jobs=1)
    pooled = lint_files(paths, resolve_rules(settings), settings, jobs=3)
    assert _summary(pooled) == _summary(serial)
    assert [r.path for r in pooled] == paths


def test_small_runs_stay_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _project(tmp_path)

    def no_pool(*args, **kwargs):
        raise AssertionError("a small run started worker processes")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    settings = Settings()
    assert len(lint_files(paths, resolve_rules(settings), settings)) == len(paths)


# ---------------------------------------------------------------- command line
def _torchlint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=cwd, capture_output=True, text=True)


def test_cli_cache_location_and_options(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.torchlint]\n")
    (project / "pkg" / "mistake.py").write_text(MISTAKE)
    first = _torchlint(project / "pkg", "mistake.py")
    assert first.returncode == 1 and "TL001" in first.stdout
    cache_dir = project / CACHE_DIR_NAME
    assert (cache_dir / "CACHEDIR.TAG").is_file() and (cache_dir / ".gitignore").is_file()
    assert list(Cache(cache_dir, Settings()).entries())
    second = _torchlint(project / "pkg", "mistake.py")
    assert (second.returncode, second.stdout, second.stderr) == (first.returncode, first.stdout, first.stderr)
    elsewhere = tmp_path / "elsewhere"
    _torchlint(project, "--cache-dir", str(elsewhere), "pkg")
    assert list(Cache(elsewhere, Settings()).entries())
    shutil.rmtree(cache_dir)
    _torchlint(project, "--no-cache", "-j", "2", "pkg")
    assert not cache_dir.exists()
    bad = _torchlint(project, "--jobs", "-3", "pkg")
    assert bad.returncode == 2 and "--jobs" in bad.stderr


def test_plain_findings_keep_what_output_needs(tmp_path: Path) -> None:
    (tmp_path / "mistake.py").write_text(MISTAKE)
    settings = Settings()
    report = lint_files([str(tmp_path / "mistake.py")], resolve_rules(settings), settings, jobs=1)[0]
    finding = report.findings[0]
    assert finding.diagnostic is None and finding.fix is not None and finding.fix.replacements == ()
    assert dataclasses.replace(finding, fix=None).code == "TL001"
