#!/usr/bin/env python
"""Benchmark torchlint against ruff and TorchFix on public corpora.

    python benchmarks/run.py                      # examples-sized + diffusers + torch, 3 runs each
    python benchmarks/run.py --corpus examples    # just the shipped training scripts (x8)
    python benchmarks/run.py --smoke              # seconds: shipped scripts once, no peers (CI)

Corpora (prepared under --workdir, reused between runs):
- examples: the training scripts in benchmarks/corpus/, copied 8 times (~100 files,
  ~12k lines: the size of pytorch/examples);
- diffusers: the sources of the diffusers wheel, fetched with
  ``pip download --no-deps diffusers==<pinned>``;
- torch: the installed torch package's own .py files.

Each tool runs as a separate process (median wall time of --repeat runs).  CPU
time comes from ``wait4`` (workers included); peak RSS is sampled every 20 ms with
psutil: the largest single process, and the sum over the process tree.  torchlint "cold"
starts from an empty cache directory, "warm" re-runs with that cache and no
change, "edit1" after changing one file.  ruff (``--select ALL``, ``--select F``)
and TorchFix run when installed (``--torchfix PATH`` points at an executable
in another environment; TorchFix pins an older libcst).
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "corpus"
DIFFUSERS_VERSION = "0.42.1"
EXAMPLE_COPIES = 8


# ---------------------------------------------------------------- corpora
@dataclass
class Corpus:
    name: str
    path: Path
    files: int = 0
    lines: int = 0

    def count(self) -> Corpus:
        for file in self.path.rglob("*.py"):
            self.files += 1
            with open(file, "rb") as handle:
                self.lines += handle.read().count(b"\n")
        return self


def examples_corpus(workdir: Path, copies: int = EXAMPLE_COPIES) -> Corpus:
    target = workdir / f"examples-x{copies}"
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(dir=workdir))
        for copy in range(copies):
            shutil.copytree(SHIPPED, staging / f"copy{copy}", ignore=shutil.ignore_patterns("__pycache__"))
        staging.rename(target)
    return Corpus("examples", target).count()


def diffusers_corpus(workdir: Path, version: str = DIFFUSERS_VERSION) -> Corpus:
    target = workdir / f"diffusers-{version}"
    if not target.is_dir():
        wheels = workdir / "wheels"
        wheel = next(wheels.glob(f"diffusers-{version}-*.whl"), None) if wheels.is_dir() else None
        if wheel is None:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                 "-d", str(wheels), f"diffusers=={version}"],
                check=True,
            )
            wheel = next(wheels.glob(f"diffusers-{version}-*.whl"))
        staging = Path(tempfile.mkdtemp(dir=workdir))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(staging, [n for n in archive.namelist() if n.startswith("diffusers/")])
        (staging / "diffusers").rename(target)
        shutil.rmtree(staging)
    return Corpus("diffusers", target).count()


def torch_corpus(workdir: Path) -> Corpus | None:
    spec = find_spec("torch")  # no import: just where the package is
    if spec is None or not spec.origin:
        return None
    source = Path(spec.origin).parent
    target = workdir / "torch-sources"
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(dir=workdir))
        for file in source.rglob("*.py"):
            destination = staging / file.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, destination)
        staging.rename(target)
    return Corpus("torch", target).count()


# ---------------------------------------------------------------- measuring
@dataclass
class Run:
    wall: float
    cpu: float
    max_rss_mb: float | None  # the largest single process (sampled), None without psutil
    tree_rss_mb: float | None  # all processes at once (sampled), None without psutil
    stdout_digest: str = ""  # to compare outputs without keeping them in memory
    exit_code: int = 0


@dataclass
class Row:
    corpus: Corpus
    tool: str
    runs: list[Run] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(r.cpu for r in self.runs)

    @property
    def rss(self) -> float | None:
        values = [r.max_rss_mb for r in self.runs if r.max_rss_mb is not None]
        return max(values) if values else None

    @property
    def tree_rss(self) -> float | None:
        values = [r.tree_rss_mb for r in self.runs if r.tree_rss_mb is not None]
        return max(values) if values else None


def measure(command: list[str], cwd: Path) -> Run:
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    sampler = _TreeSampler(process.pid)
    sampler.start()
    digest = hashlib.sha256()

    def read() -> None:  # ruff --select ALL prints megabytes: hash them, do not keep them
        for chunk in iter(lambda: process.stdout.read(1 << 16), b""):  # type: ignore[union-attr]
            digest.update(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    # CPU time from wait4 includes the workers the process waited for.  (Its ru_maxrss
    # is not used: after vfork+exec it also counts this launcher's memory.)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4
    reader.join()
    sampler.stop()
    return Run(
        wall, usage.ru_utime + usage.ru_stime, sampler.largest_mb, sampler.peak_mb, digest.hexdigest(),
        process.returncode,
    )


class _TreeSampler(threading.Thread):
    """Peak of the summed RSS of a process and its descendants (psutil, every 20 ms)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_mb: float | None = None
        self.largest_mb: float | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        peak = largest = 0
        while not self._done.is_set():
            try:
                sizes = [root.memory_info().rss]
                for child in root.children(recursive=True):
                    try:
                        sizes.append(child.memory_info().rss)
                    except psutil.Error:
                        pass
            except psutil.Error:
                break
            peak, largest = max(peak, sum(sizes)), max(largest, *sizes)
            self._done.wait(0.02)
        self.peak_mb = peak / 2**20 if peak else None
        self.largest_mb = largest / 2**20 if largest else None

    def stop(self) -> None:
        self._done.set()
        self.join()


# ---------------------------------------------------------------- tools
def torchlint_command(corpus: Corpus, cache: Path | None, jobs: int | None = None) -> list[str]:
    command = [sys.executable, "-m", "torchlint", "--isolated", "--exit-zero", str(corpus.path)]
    command += ["--no-cache"] if cache is None else ["--cache-dir", str(cache)]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    return command


def compile_torchlint() -> None:
    """Write torchlint's bytecode first, as ``pip install`` does: an editable install (or
    PYTHONDONTWRITEBYTECODE) would otherwise recompile it in every measured run."""
    spec = find_spec("torchlint")
    for location in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(location, quiet=1)


def find_tool(name: str, override: str | None) -> str | None:
    if override:
        return override if Path(override).exists() or shutil.which(override) else None
    return shutil.which(name)


def bench_corpus(corpus: Corpus, args: argparse.Namespace, workdir: Path) -> list[Row]:
    rows: list[Row] = []
    cache = workdir / f"cache-{corpus.name}"

    def row(tool: str, command: list[str], before=None, repeat: int = args.repeat) -> Row:
        result = Row(corpus, tool)
        for _ in range(repeat):
            if before is not None:
                before()
            run = measure(command, workdir)
            # torchlint runs with --exit-zero: anything else is a crash, not a measurement.
            if tool.startswith("torchlint") and run.exit_code != 0:
                raise SystemExit(f"{tool} exited with {run.exit_code} on {corpus.name}: {' '.join(command)}")
            result.runs.append(run)
        rows.append(result)
        print(f"  {tool:<24} {result.wall:8.2f} s", file=sys.stderr, flush=True)
        return result

    def clear_cache() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    print(f"{corpus.name}: {corpus.files} files, {corpus.lines} lines", file=sys.stderr)
    cold = row("torchlint cold", torchlint_command(corpus, cache), before=clear_cache)
    warm = row("torchlint warm", torchlint_command(corpus, cache))
    victim = sorted(corpus.path.rglob("*.py"))[0]
    original = victim.read_bytes()

    edits = iter(range(1_000_000))

    def touch_one() -> None:  # a new change each time: exactly one file to re-analyse
        victim.write_bytes(original + f"\n# edit {next(edits)}\n".encode())

    try:
        row("torchlint edit1", torchlint_command(corpus, cache), before=touch_one)
    finally:
        victim.write_bytes(original)
    serial = row("torchlint cold -j1", torchlint_command(corpus, cache, jobs=1), before=clear_cache)
    if not args.smoke:
        row("torchlint --no-cache", torchlint_command(corpus, None))
    # Same output whatever the cache and the number of workers.
    outputs = {cold.runs[-1].stdout_digest, warm.runs[-1].stdout_digest, serial.runs[-1].stdout_digest}
    if len(outputs) != 1:
        raise SystemExit(f"torchlint output differs between cold, warm and -j1 runs on {corpus.name}")
    if args.smoke:
        return rows
    ruff = find_tool("ruff", args.ruff)
    if ruff:
        base = [ruff, "check", "--no-cache", "--isolated", "--exit-zero", "-q"]
        row("ruff --select ALL", [*base, "--select", "ALL", str(corpus.path)])
        row("ruff --select F", [*base, "--select", "F", str(corpus.path)])
    # The floor for any Python command: the interpreter starting and exiting.
    row("python -c pass", [sys.executable, "-c", "pass"])
    torchfix = find_tool("torchfix", args.torchfix)
    if torchfix and (corpus.lines <= args.torchfix_max_lines):
        row("torchfix", [torchfix, str(corpus.path)], repeat=1 if corpus.lines > 50_000 else args.repeat)
    return rows


# ---------------------------------------------------------------- report
def print_table(rows: list[Row]) -> None:
    print("| corpus | files | lines | tool | wall s (median) | cpu s | lines/s | peak RSS MB (largest proc) | peak RSS MB (all procs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tree = f"{r.tree_rss:.0f}" if r.tree_rss is not None else "-"
        largest = f"{r.rss:.0f}" if r.rss is not None else "-"
        print(
            f"| {r.corpus.name} | {r.corpus.files} | {r.corpus.lines} | {r.tool} | {r.wall:.2f} | {r.cpu:.2f} | "
            f"{r.corpus.lines / r.wall:,.0f} | {largest} | {tree} |"
        )
    print()
    by = {(r.corpus.name, r.tool): r for r in rows}
    for name in dict.fromkeys(r.corpus.name for r in rows):
        cold, warm = by.get((name, "torchlint cold")), by.get((name, "torchlint warm"))
        lines = []
        if cold and (name, "ruff --select ALL") in by:
            ratio = cold.wall / by[(name, "ruff --select ALL")].wall
            lines.append(f"cold / ruff ALL = {ratio:.2f} (target <= 1.0)")
        if cold and (name, "torchfix") in by:
            ratio = by[(name, "torchfix")].wall / cold.wall
            lines.append(f"TorchFix / cold = {ratio:.1f}x faster (target >= 20x)")
        if warm and (name, "ruff --select F") in by:
            ratio = warm.wall / by[(name, "ruff --select F")].wall
            lines.append(f"warm / ruff F = {ratio:.2f} (target <= 2.0)")
            if (name, "python -c pass") in by:
                floor = by[(name, "python -c pass")].wall / by[(name, "ruff --select F")].wall
                lines.append(f"python start-up alone / ruff F = {floor:.2f}")
        if cold and warm:
            lines.append(f"warm is {cold.wall / warm.wall:.1f}x faster than cold")
        if lines:
            print(f"- {name}: " + "; ".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", choices=["examples", "diffusers", "torch"],
                        help="which corpora (repeatable; default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median; default 3)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "torchlint-bench")
    parser.add_argument("--ruff", help="ruff executable (default: on PATH)")
    parser.add_argument("--torchfix", help="torchfix executable (default: on PATH)")
    parser.add_argument("--torchfix-max-lines", type=int, default=100_000,
                        help="skip TorchFix on larger corpora (it takes minutes; default 100000)")
    parser.add_argument("--smoke", action="store_true", help="CI smoke run: shipped scripts once, torchlint only")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeat = 1
    args.workdir.mkdir(parents=True, exist_ok=True)
    compile_torchlint()
    names = ["examples"] if args.smoke else (args.corpus or ["examples", "diffusers", "torch"])
    rows: list[Row] = []
    for name in names:
        if name == "examples":
            corpus = examples_corpus(args.workdir, 1 if args.smoke else EXAMPLE_COPIES)
        elif name == "diffusers":
            corpus = diffusers_corpus(args.workdir)
        else:
            found = torch_corpus(args.workdir)
            if found is None:
                print("torch is not installed: skipping its sources", file=sys.stderr)
                continue
            corpus = found
        rows += bench_corpus(corpus, args, args.workdir)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
