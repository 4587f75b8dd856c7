"""Fixes never lose code: atomic writes that keep permissions, owner, encoding and
line endings; a fix that breaks the code writes nothing and names its rule;
overlapping fixes are applied in bounded passes; a second ``--fix`` changes
nothing; an interrupted ``--fix`` and two concurrent ones leave every file old or
new, never damaged."""

from __future__ import annotations

import ast
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
import pytest

from torchlint import files
from torchlint.engine import MAX_FIX_PASSES, FixError, fix_source
from torchlint.files import TEMPORARY_SUFFIX, WriteError, read_source, write_atomic
from torchlint.rule import Fix, FixStyle, Rule, RuleOptions
from torchlint.rules import all_rules
from torchlint.runner import fix_file
from torchlint.settings import Settings

SAMPLE = """import torch

w = torch.zeros(3, requires_grad=True)
b = torch.zeros(1)
b.require_grad = True  # a typo
for step in range(3):
    loss = (w * 2).sum()
    loss.backward()
    w = w - 0.1 * w.grad
    w.grad = None
"""


def fixed(source: str, style: FixStyle = FixStyle.DATA, unsafe: bool = False) -> str:
    return fix_source(source, all_rules(), RuleOptions(fix_style=style), unsafe=unsafe).source


def torchlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def leftovers(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.endswith(TEMPORARY_SUFFIX)]


def test_sample_has_fixes() -> None:
    assert fixed(SAMPLE) != SAMPLE  # the tests below rely on it


# ---------------------------------------------------------------- write_atomic
def test_write_atomic_replaces_content_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    path.chmod(0o751)
    write_atomic(path, "x = 2\n", "utf-8")
    assert path.read_text() == "x = 2\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert not leftovers(tmp_path)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_write_atomic_keeps_owner(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    os.chown(path, 4321, 4322)
    write_atomic(path, "x = 2\n", "utf-8")
    info = path.stat()
    assert (info.st_uid, info.st_gid) == (4321, 4322)


def test_write_atomic_writes_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real.name)
    write_atomic(link, "x = 2\n", "utf-8")
    assert link.is_symlink() and real.read_text() == "x = 2\n"


@pytest.mark.parametrize("failing", ["fsync", "replace"])
@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_write_atomic_failure_leaves_the_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str, error: BaseException
) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")

    def fail(*args: object) -> None:
        raise error

    monkeypatch.setattr(files.os, failing, fail)
    with pytest.raises(type(error)):
        write_atomic(path, "x = 2\n", "utf-8")
    monkeypatch.undo()
    assert path.read_text() == "x = 1\n"
    assert not leftovers(tmp_path)


def test_write_atomic_refuses_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    original = read_source(path)
    path.write_text("x = 1  # edited meanwhile\n")
    with pytest.raises(WriteError, match="changed on disk"):
        write_atomic(path, "x = 2\n", "utf-8", original=original)
    assert path.read_text() == "x = 1  # edited meanwhile\n"
    assert not leftovers(tmp_path)


def test_write_atomic_accepts_a_file_already_fixed_by_another_run(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    original = read_source(path)
    path.write_text("x = 2\n")  # the other run's result
    write_atomic(path, "x = 2\n", "utf-8", original=original)
    assert path.read_text() == "x = 2\n" and not leftovers(tmp_path)


def test_write_atomic_refuses_text_the_encoding_cannot_hold(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nx = 1\n")
    with pytest.raises(WriteError, match="cannot be encoded"):
        write_atomic(path, "# -*- coding: latin-1 -*-\nx = '\u20ac'\n", "iso-8859-1")
    assert path.read_bytes() == b"# -*- coding: latin-1 -*-\nx = 1\n"


# ---------------------------------------------------------------- encodings and line endings
ENCODED = {
    "utf8.py": ("# caf\u00e9\n" + SAMPLE).encode("utf-8"),
    "bom.py": b"\xef\xbb\xbf" + ("# caf\u00e9\n" + SAMPLE).encode("utf-8"),
    "latin1.py": ("# -*- coding: latin-1 -*-\n# caf\u00e9\n" + SAMPLE).encode("latin-1"),
}


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_fix_keeps_the_encoding(tmp_path: Path, name: str) -> None:
    data = ENCODED[name]
    (tmp_path / name).write_bytes(data)
    assert torchlint("--fix", name, cwd=tmp_path).returncode in (0, 1)
    after = (tmp_path / name).read_bytes()
    source = read_source(tmp_path / name)
    assert after.startswith(b"\xef\xbb\xbf") == data.startswith(b"\xef\xbb\xbf")
    assert after == fixed(files.decode(data).text).encode(source.encoding)
    assert (b"caf\xe9" in after) == (name == "latin1.py")


def with_endings(text: str, endings: list[str]) -> str:
    lines = text.splitlines()
    return "".join(line + endings[i % len(endings)] for i, line in enumerate(lines))


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


@pytest.mark.parametrize("style", [FixStyle.DATA, FixStyle.NO_GRAD])
@pytest.mark.parametrize(
    "endings", [["\n"], ["\r\n"], ["\r\n", "\n"], ["\n", "\r\n"]], ids=["lf", "crlf", "mixed", "mixed2"]
)
def test_fix_keeps_line_endings(tmp_path: Path, style: FixStyle, endings: list[str]) -> None:
    source = with_endings(SAMPLE, endings)
    (tmp_path / "m.py").write_bytes(source.encode())
    torchlint("--fix", "--fix-style", style.value, "m.py", cwd=tmp_path)
    after = (tmp_path / "m.py").read_bytes().decode()
    assert after == fixed(source, style) != source
    # Every line keeps its ending; an inserted `with` header ends like the line it wraps.
    original = iter(source.splitlines(keepends=True))
    lines = after.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.strip() == "with torch.no_grad():":
            assert _ending(line) == _ending(lines[number + 1])
        else:
            assert _ending(line) == _ending(next(original)), line


def test_with_block_inserted_into_a_mixed_file_ends_like_the_wrapped_line() -> None:
    source = "import torch\nw = torch.zeros(3, requires_grad=True)\r\nw -= 1\r\nx = 1\n"
    assert fixed(source, FixStyle.NO_GRAD) == (
        "import torch\nw = torch.zeros(3, requires_grad=True)\r\nwith torch.no_grad():\r\n    w -= 1\r\nx = 1\n"
    )


# ---------------------------------------------------------------- broken and overlapping fixes
class BreaksTheCode(Rule):
    """Test rule: replaces every name `broken` with a keyword (code that does not parse)."""

    code = "TL990"
    name = "breaks-the-code"
    summary = "test"

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "broken":
            self.report(node, "broken", Fix("break it", ((node, cst.Name("lambda")),)))


class PutsAStatementInAnExpression(Rule):
    """Test rule: replaces the name `broken` with a `pass` statement (a tree libcst cannot print validly)."""

    code = "TL994"
    name = "statement-in-expression"
    summary = "test"

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "broken":
            self.report(node, "broken", Fix("break it", ((node, cst.Pass()),)))


class RenamesX(Rule):
    """Test rule: renames `x` to `y` (a good fix)."""

    code = "TL991"
    name = "renames-x"
    summary = "test"

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "x":
            self.report(node, "x", Fix("rename", ((node, cst.Name("y")),)))


class RenamesY(Rule):
    """Test rule: renames `y` back to `x` (with RenamesX: fixes that never settle)."""

    code = "TL992"
    name = "renames-y"
    summary = "test"

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "y":
            self.report(node, "y", Fix("rename", ((node, cst.Name("x")),)))


class RewritesLoops(Rule):
    """Test rule: renames a loop's target, reported at the loop's first body line but
    replacing the whole loop (so it contains other fixes' nodes)."""

    code = "TL993"
    name = "rewrites-loops"
    summary = "test"

    def visit_For(self, node: cst.For) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == "i":
            first = node.body.body[0]
            self.report(first, "loop", Fix("rename target", ((node, node.with_changes(target=cst.Name("j"))),)))


def test_a_fix_that_breaks_the_code_raises_and_names_its_rule() -> None:
    with pytest.raises(FixError) as error:
        fix_source("x = 1\nbroken = 2\n", [BreaksTheCode, RenamesX])
    message = str(error.value)
    assert "TL990 at line 2" in message and "TL991" not in message and "nothing is written" in message


def test_a_fix_that_builds_a_wrong_tree_raises_and_names_its_rule() -> None:
    with pytest.raises(FixError, match="TL994 at line 2"):
        fix_source("x = 1\ny = broken + 1\n", [PutsAStatementInAnExpression, RenamesX])


def test_a_fix_that_breaks_the_code_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\nbroken = 2\n")
    report = fix_file(str(path), [BreaksTheCode, RenamesX], Settings(), write=True)
    assert path.read_text() == "x = 1\nbroken = 2\n"
    assert report.error is not None and "TL990" in report.error
    assert not leftovers(tmp_path)


def test_nested_replacements_wait_for_the_next_pass() -> None:
    source = "for i in range(3):\n    a = 1\n    print(x)\n"
    result = fix_source(source, [RewritesLoops, RenamesX])
    assert result.source == "for j in range(3):\n    a = 1\n    print(y)\n"
    # Each fix applied exactly once: the loop rewrite did not swallow the rename.
    assert sorted(f.code for f in result.applied) == ["TL991", "TL993"]


def test_fixes_on_one_line_are_applied_in_passes() -> None:
    result = fix_source("x + x + x\n", [RenamesX])
    assert result.source == "y + y + y\n"


def test_fixes_that_never_settle_stop_after_the_pass_limit() -> None:
    result = fix_source("x = 1\n", [RenamesX, RenamesY])
    assert len(result.applied) == MAX_FIX_PASSES
    cst.parse_module(result.source)


def test_real_overlapping_fixes_end_in_a_fixed_point() -> None:
    # TL006 (integer data) and TL003 (.to after creation) fix the same expression.
    source = "import torch\ndevice = 'cpu'\nw = torch.tensor([1, 2], requires_grad=True).to(device)\nw.grad\n"
    once = fixed(source, unsafe=True)
    assert once != source
    assert fixed(once, unsafe=True) == once
    ast.parse(once)


# ---------------------------------------------------------------- the CLI
def test_second_fix_is_a_no_op(tmp_path: Path) -> None:
    for index in range(3):
        (tmp_path / f"m{index}.py").write_text(SAMPLE)
    first = torchlint("--fix", "--unsafe-fixes", "--select", "ALL", ".", cwd=tmp_path)
    assert "Fixed" in first.stdout  # the summary, on stdout as in ruff
    after_first = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    second = torchlint("--fix", "--unsafe-fixes", "--select", "ALL", ".", cwd=tmp_path)
    assert "Fixed" not in second.stdout and "Traceback" not in second.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.py")} == after_first


def _tree(root: Path, count: int) -> dict[Path, tuple[bytes, bytes]]:
    """``count`` files with fixable findings: {path: (original, fixed)}."""
    versions = {}
    for index in range(count):
        path = root / f"pkg{index % 4}" / f"m{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        source = f"# module {index}\n" + SAMPLE * 3
        path.write_text(source)
        versions[path] = (source.encode(), fixed(source).encode())
    return versions


def _assert_each_old_or_new(root: Path, versions: dict[Path, tuple[bytes, bytes]]) -> int:
    """Every file is exactly its original or its fixed version; returns how many are fixed."""
    done = 0
    for path, (original, new) in versions.items():
        data = path.read_bytes()
        assert data in (original, new), f"{path} is damaged"
        done += data == new
    assert not leftovers(root), "temporary files left behind"
    return done


def _wait_for_group(pgid: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)
    raise AssertionError("torchlint workers still running long after the signal")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_fix_leaves_every_file_old_or_new(tmp_path: Path, signum: int) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) and
    ``kill`` (SIGTERM to the main process only) at several points of a run."""
    versions = _tree(tmp_path, 32)
    command = [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--fix", "--jobs", "2", "."]
    start = time.monotonic()
    subprocess.run(command, cwd=tmp_path, capture_output=True, timeout=300)
    full = time.monotonic() - start
    assert _assert_each_old_or_new(tmp_path, versions) == len(versions)
    fixed_counts = []
    for fraction in (0.45, 0.65, 0.85):  # deterministic points from start-up to the last writes
        for path, (original, _) in versions.items():
            path.write_bytes(original)
        process = subprocess.Popen(
            command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        time.sleep(full * fraction)
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
        _wait_for_group(process.pid)
        fixed_counts.append(_assert_each_old_or_new(tmp_path, versions))
        for path in versions:
            ast.parse(path.read_bytes())
        if signum == signal.SIGINT and process.returncode == 130:
            assert stderr.strip().endswith("torchlint: interrupted") and "Traceback" not in stderr
    assert min(fixed_counts) < len(versions), f"no run was interrupted before the end: {fixed_counts}"


@pytest.mark.slow
def test_two_concurrent_fix_runs_do_not_corrupt_the_tree(tmp_path: Path) -> None:
    versions = _tree(tmp_path, 24)
    command = [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--fix", "--jobs", "1", "."]
    runs = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(run.wait(timeout=300), run.stderr.read()) for run in runs]  # type: ignore[union-attr]
    for code, stderr in results:
        assert code in (0, 1), stderr
        assert "Traceback" not in stderr
    assert _assert_each_old_or_new(tmp_path, versions) == len(versions)
    again = torchlint("--fix", ".", cwd=tmp_path)
    assert "Fixed" not in again.stdout


# ---------------------------------------------------------------- real-code round trip (scripts/roundtrip.py)
def _roundtrip_script():
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("roundtrip", ROOT / "scripts" / "roundtrip.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules.setdefault("roundtrip", module)  # dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_roundtrip_flags_changes_outside_findings() -> None:
    roundtrip = _roundtrip_script()
    before = "a = 1\nb = 2\nc = 3\n"
    assert roundtrip.changes_outside(before, "a = 1\nb = 5\nc = 3\n", {2}) == []
    assert roundtrip.changes_outside(before, "a = 1\nb = 5\nc = 4\n", {2}) == [3]
    assert roundtrip.changes_outside(before, "a = 1\nb = 2\nx = 0\nc = 3\n", {2}) == []  # next to a finding
    assert roundtrip.changes_outside(before, "x = 0\na = 1\nb = 2\nc = 3\n", {3}) == [1]


@pytest.mark.slow
def test_roundtrip_on_torch_optim_and_the_examples(root: Path, tmp_path: Path) -> None:
    """CI's modest corpus; the large ones are run by hand (see scripts/roundtrip.py)."""
    roundtrip = _roundtrip_script()
    import torch as _torch  # the installed package's sources are the corpus

    results = [
        roundtrip.round_trip("torch-optim", Path(_torch.__file__).parent / "optim", tmp_path),
        roundtrip.round_trip("examples", root / "examples", tmp_path),
        roundtrip.round_trip("benchmark-corpus", root / "benchmarks" / "corpus", tmp_path),
    ]
    for result in results:
        assert result.files and not result.failures, (result.name, result.failures)
    assert sum(r.changed for r in results) > 0  # the round trip did fix something
