"""Hostile input: every broken, strange or enormous file gives one clear error line
naming it (and the cell, for notebooks), never a traceback; the rest of the run
goes on; the exit code is 2; memory stays bounded.  Driven through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchlint import engine
from torchlint.engine import MAX_NESTING, SourceError, fix_source, lint_source
from torchlint.files import MAX_SOURCE_BYTES, ReadError, decode, read_source
from torchlint.rules import all_rules

HEADER = "import torch\nw = torch.randn(3, requires_grad=True)\n"  # wakes every rule up
GOOD = HEADER + "w -= 1\n"

# name -> (file content, a word the error line must contain)
DEEP = {
    "deep_sum.py": (HEADER + "x = " + " - ".join(["w"] * 5000) + "\n", "too deeply nested"),
    "deep_attr.py": (HEADER + "x = w" + ".a" * 3000 + "\n", "too deeply nested"),
    "deep_calls.py": (HEADER + "x = w" + "()" * 3000 + "\n", "too deeply nested"),
    "deep_index.py": (HEADER + "x = w" + "[0]" * 3000 + "\n", "too deeply nested"),
    "deep_unary.py": (HEADER + "x = " + "-" * 20000 + "w\n", "too deeply nested"),
    "deep_not.py": (HEADER + "x = " + "not " * 5000 + "w\n", "too deeply nested"),
    "deep_lambda.py": (HEADER + "x = " + "lambda: " * 3000 + "w\n", "too deeply nested"),
    "deep_and.py": (HEADER + "x = " + " and ".join(["w"] * 20000) + "\n", "too deeply nested"),
    "deep_parens.py": (HEADER + "x = " + "(" * 5000 + "w" + ")" * 5000 + "\n", "too many nested parentheses"),
    "deep_lists.py": (HEADER + "x = " + "[" * 5000 + "]" * 5000 + "\n", "too many nested parentheses"),
    "deep_blocks.py": (
        HEADER + "".join(" " * i + "if w:\n" for i in range(150)) + " " * 150 + "w -= 1\n",
        "indentation",
    ),
    "deep_strings.py": (HEADER + "x = " + " ".join(['"a"'] * 5000) + "\n", "error"),
}
BROKEN = {
    "syntax.py": (HEADER.encode() + b"def (:\n", "syntax error"),
    "undecodable.py": (HEADER.encode() + b"x = '\xe9'\n", "cannot decode"),
    "bad_cookie.py": (b"# -*- coding: klingon -*-\n" + HEADER.encode(), "klingon"),
    "binary.py": (b"\x7fELF\x02\x01\x01\x00\x00\x00requires_grad", "binary"),
    "nul_inside.py": (HEADER.encode() + b"x = 1\x00\n", "binary"),
    **{name: (text.encode(), word) for name, (text, word) in DEEP.items()},
}
# Odd but valid files: no error, and the good findings still come.
VALID = {
    "empty.py": b"",
    "bom_only.py": b"\xef\xbb\xbf",
    "blank.py": b"\n\n   \n\t\n",
    "form_feed.py": HEADER.encode() + b"\x0c\nw.grad\n",
    "cr_only.py": GOOD.replace("\n", "\r").encode(),
    "long_line.py": (GOOD + "x = [" + "1.0, " * 20000 + "]\n").encode(),
    "long_string.py": (GOOD + "x = '" + "a" * 500_000 + "'\n").encode(),
    "wide.py": (GOOD + "".join(f"v{i} = w * {i}\n" for i in range(1000))).encode(),
    "nested_ok.py": (GOOD + "x = " + "(" * 150 + "w" + ")" * 150 + "\n").encode(),
}


def notebook(*cells: str) -> str:
    data = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": source.splitlines(keepends=True),
            }
            for source in cells
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data)


def build_tree(root: Path) -> dict[str, str]:
    """The hostile tree; returns {relative path: word its error line must contain}."""
    expected: dict[str, str] = {}
    for name, (data, word) in BROKEN.items():
        (root / name).write_bytes(data)
        expected[name] = word
    for name, data in VALID.items():
        (root / name).write_bytes(data)
    (root / "good.py").write_text(GOOD)
    with open(root / "huge.py", "wb") as handle:  # 50 MB of generated code
        line = b"x = [" + b"1.0, " * 200 + b"]  # requires_grad\n"
        handle.write(line * (50 * 2**20 // len(line) + 1))
    expected["huge.py"] = "too large"
    (root / "unreadable.py").write_text(GOOD)
    (root / "unreadable.py").chmod(0)
    expected["unreadable.py"] = "Permission denied"
    (root / "loop_a.py").symlink_to("loop_b.py")
    (root / "loop_b.py").symlink_to("loop_a.py")
    expected["loop_a.py"] = expected["loop_b.py"] = "symbolic links"
    (root / "dangling.py").symlink_to("nowhere.py")
    expected["dangling.py"] = "No such file"
    os.mkfifo(root / "fifo.py")
    expected["fifo.py"] = "not a regular file"
    (root / "sub").mkdir()
    (root / "sub" / "up").symlink_to("..")  # a directory loop: not followed
    (root / "bad_json.ipynb").write_text('{"cells": [')
    expected["bad_json.ipynb"] = "invalid notebook JSON"
    (root / "deep_json.ipynb").write_text("[" * 100000 + "]" * 100000)
    expected["deep_json.ipynb"] = "nested too deeply"
    (root / "bad_cell.ipynb").write_text(notebook(HEADER, "def (:\n", "w -= 1\n"))
    expected["bad_cell.ipynb"] = "cell 2"
    big = json.loads(notebook(GOOD))  # 6 MB of outputs (an image), little code: fine
    big["cells"][0]["outputs"] = [
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo" * 600_000}}
    ]
    (root / "big_outputs.ipynb").write_text(json.dumps(big))
    (root / "bad_cell_bytes.ipynb").write_bytes(b'{"cells": [{"cell_type": "code", "source": "\xff"}]}')
    expected["bad_cell_bytes.ipynb"] = "cannot decode"
    return expected


def without_file_access_override() -> list[str]:
    """As root, a chmod-000 file is still readable: drop the capabilities that allow it."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: an unreadable file cannot be made")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]


# Peak memory of the child, measured in a wrapper process of its own.
MEASURE = """
import resource, subprocess, sys
run = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(run.stdout)
sys.stderr.write(run.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(run.returncode)
"""


@pytest.fixture(scope="module")
def hostile_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, str], subprocess.CompletedProcess, float]:
    root = tmp_path_factory.mktemp("hostile")
    expected = build_tree(root)
    # The cache is on (as by default) but kept out of the tree.
    cache = tmp_path_factory.mktemp("cache")
    command = [
        *without_file_access_override(),
        sys.executable,
        "-c",
        MEASURE,
        sys.executable,
        "-m",
        "torchlint",
        "--isolated",
        "--cache-dir",
        str(cache),
        "--select",
        "ALL",
        ".",
    ]
    start = time.monotonic()
    result = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
    return root, expected, result, time.monotonic() - start


def test_each_hostile_file_gives_one_clear_error_line(hostile_run) -> None:
    root, expected, result, _ = hostile_run
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()[:-1]  # the last line is the measured memory
    for name, word in expected.items():
        mine = [line for line in lines if line.startswith(f"{name}:")]
        assert len(mine) == 1, f"{name}: {mine}"
        assert word in mine[0], mine[0]
    summary = lines[-1]
    assert f"{len(expected)} files could not be checked" in summary, summary
    assert len(lines) == len(expected) + 1, "\n".join(lines)


def test_the_rest_of_the_run_goes_on(hostile_run) -> None:
    _, _, result, _ = hostile_run
    for name in ("good.py", "cr_only.py", "long_line.py", "long_string.py", "wide.py", "nested_ok.py"):
        assert f"{name}:3:1: TL002" in result.stdout
    assert "big_outputs.ipynb:cell 1:3:1: TL002" in result.stdout


def test_exit_code_says_an_error_happened(hostile_run) -> None:
    assert hostile_run[2].returncode == 2


def test_memory_and_time_stay_bounded(hostile_run) -> None:
    _, _, result, seconds = hostile_run
    peak_mib = int(result.stderr.splitlines()[-1]) / 1024
    assert peak_mib < 600, f"peak memory {peak_mib:.0f} MiB"
    assert seconds < 300


def test_fix_on_the_hostile_tree_changes_only_the_fixable_files(hostile_run, tmp_path: Path) -> None:
    root, expected, _, _ = hostile_run
    tree = tmp_path / "copy"
    tree.mkdir()
    for name in [*BROKEN, *VALID, "good.py"]:
        shutil.copyfile(root / name, tree / name)
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--fix", "."],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    changed = {p.name for p in tree.iterdir() if p.read_bytes() != before[p.name]}
    assert changed == {"good.py", "cr_only.py", "long_line.py", "long_string.py", "wide.py", "nested_ok.py"}


# ---------------------------------------------------------------- the same, in-process
@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_nesting_is_a_source_error_quickly(name: str) -> None:
    source, word = DEEP[name]
    start = time.monotonic()
    with pytest.raises(SourceError, match=word if word != "error" else None):
        lint_source(source, all_rules())
    assert time.monotonic() - start < 5


SHAPES = {  # an expression nested `n` levels deep
    "sum": lambda n: " - ".join(["w"] * n),
    "attr": lambda n: "w" + ".a" * n,
    "calls": lambda n: "w" + "()" * n,
    "unary": lambda n: "-" * n + "w",
    "not": lambda n: "not " * n + "w",
    "and": lambda n: " and ".join(["w"] * n),
    "call_args": lambda n: "f(" * n + "w" + ")" * n,
    "mixed": lambda n: "[-(w + " * n + "w" + ")]" * n,
    "strings": lambda n: " ".join(['"a"'] * n),
}


@pytest.mark.parametrize("depth", [50, 100, 150, 199, 250, 300, MAX_NESTING - 1, MAX_NESTING + 1])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_nesting_below_and_above_the_limit_never_crashes(depth: int, shape: str) -> None:
    """At any depth: findings (and fixes), or a SourceError; never a RecursionError."""
    source = HEADER + "w -= 1\nx = " + SHAPES[shape](depth) + "\n"
    try:
        result = fix_source(source, all_rules(), unsafe=True)
    except SourceError:
        return
    applied = {finding.code for finding in result.applied}
    if "TL002" not in applied:  # analysed, but too deep for libcst to rewrite: reported unfixed
        assert "w -= 1" in result.source and "TL002" in {finding.code for finding in result.remaining}
    else:  # fixed (every rule is on, TL011 too: the update goes under no_grad)
        assert "with torch.no_grad():\n    w -= 1\n" in result.source


@pytest.mark.parametrize("compiler_measures", [True, False])
@pytest.mark.parametrize("shape", ["sum", "attr", "calls", "unary", "not"])
def test_both_depth_meters_draw_the_line_near_max_nesting(
    shape: str, compiler_measures: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPython's compiler under a lowered recursion limit (no other thread) and the walk of
    ``ast.parse``'s tree (otherwise) accept and refuse the same depths, give or take a few."""
    if compiler_measures and not engine._compiler_depth_check_works():
        pytest.skip("this CPython's compiler does not count its depth against the recursion limit")
    monkeypatch.setattr(engine, "_compiler_measures_depth", lambda: compiler_measures)
    assert engine._check_nesting(HEADER + "x = " + SHAPES[shape](MAX_NESTING - 20) + "\n") is None
    with pytest.raises(SourceError, match="too deeply nested"):
        engine._check_nesting(HEADER + "x = " + SHAPES[shape](MAX_NESTING + 20) + "\n")


def test_decode_messages_point_at_the_bad_byte() -> None:
    with pytest.raises(ReadError, match=r"byte 0xe9 at line 3, column 6"):
        decode(HEADER.encode() + b"x = '\xe9'\n")
    with pytest.raises(ReadError, match="binary"):
        decode(b"x = 1\n\x00")


def test_a_file_over_the_size_limit_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "big.py"
    with open(path, "wb") as handle:
        handle.truncate(MAX_SOURCE_BYTES + 1)  # sparse: no memory, no disk
    with pytest.raises(ReadError, match="too large"):
        read_source(path)


def test_source_over_the_size_limit_is_refused_by_the_engine() -> None:
    source = GOOD + "#" * MAX_SOURCE_BYTES + "\n"
    with pytest.raises(SourceError, match="too large"):
        lint_source(source, all_rules())


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(ReadError, match="not a regular file"):
        read_source(tmp_path / "pipe.py")


def test_nonexistent_path_given_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "missing.py", "good.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == "missing.py: error: no such file or directory"
    assert "good.py:3:1: TL002" in result.stdout


@pytest.mark.parametrize("name", ["binary.py", "undecodable.py", "deep_sum.py", "deep_parens.py", "syntax.py"])
def test_hostile_input_on_stdin(name: str) -> None:
    data, word = BROKEN[name]
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "-"],
        input=data,
        capture_output=True,
        timeout=120,
    )
    stderr = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in stderr
    assert stderr.startswith("-:") and word in stderr.splitlines()[0]
