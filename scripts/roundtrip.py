"""Real-code round trip: ``torchlint --fix --unsafe-fixes --select ALL`` on a copy of
real PyTorch code must leave every file compiling, change only lines that have
findings, and a second pass must change nothing.

    python scripts/roundtrip.py --torch                  # the installed torch package
    python scripts/roundtrip.py --torch-subdir optim examples benchmarks/corpus
    python scripts/roundtrip.py /work/corpora/wheels/*.whl
    python scripts/roundtrip.py --work /tmp/rt --keep some/project

Each corpus (a directory, or a wheel whose ``.py`` files are unpacked) is copied
into a scratch directory first; the originals are never touched.  For every
corpus it prints: files, lines, findings, files changed, fixes applied, files
torchlint could not check (with the reason), and failures:

- a file that compiled before and does not after the fix;
- a changed line that is neither inside a finding nor at one of its fix's edits
  (findings and edits come from a ``--format json`` run before fixing);
- a file the second ``--fix`` pass changes again;
- torchlint crashing (a traceback, or an exit code other than 0, 1 or 2).

Exit status: 0 when every corpus passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

TORCHLINT = [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--select", "ALL"]
SUFFIXES = (".py", ".pyi")


@dataclass
class Result:
    name: str
    files: int = 0
    lines: int = 0
    findings: int = 0
    changed: int = 0
    fixed: int = 0
    unchecked: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


# ---------------------------------------------------------------- corpora
def copy_corpus(source: Path, destination: Path) -> None:
    """The Python files of a directory or a wheel, copied under ``destination``."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            for member in wheel.namelist():
                if member.endswith(SUFFIXES) and ".." not in Path(member).parts:
                    wheel.extract(member, destination)
        return
    if source.is_file():
        destination.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination / source.name)
        return
    for path in source.rglob("*"):
        if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
            target = destination / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.suffix in SUFFIXES and p.is_file()
    }


def compiles(data: bytes, name: str) -> bool:
    try:
        compile(data, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# ---------------------------------------------------------------- torchlint runs
def run_torchlint(args: list[str], tree: Path, result: Result, what: str) -> subprocess.CompletedProcess:
    # Run from the tree's parent: `python -m` puts the working directory on sys.path, and
    # a corpus may hold modules that shadow the standard library (torch's __future__.py).
    run = subprocess.run([*TORCHLINT, *args, tree.name], cwd=tree.parent, capture_output=True, text=True)
    if "Traceback" in run.stderr or run.returncode not in (0, 1, 2):
        tail = run.stderr.strip().splitlines()[-3:]
        result.failures.append(f"{what}: torchlint crashed (exit {run.returncode}): {' | '.join(tail)}")
    return run


def allowed_lines(findings: list[dict], tree: Path) -> dict[str, set[int]]:
    """Per file (relative to ``tree``): the lines of every finding and of every edit of its fix."""
    allowed: dict[str, set[int]] = defaultdict(set)
    for finding in findings:
        lines = allowed[os.path.relpath(tree.parent / finding["filename"], tree)]
        lines.update(range(finding["location"]["row"], finding["end_location"]["row"] + 1))
        for edit in (finding.get("fix") or {}).get("edits", []):
            lines.update(range(edit["location"]["row"], edit["end_location"]["row"] + 1))
    return allowed


def changes_outside(before: str, after: str, allowed: set[int]) -> list[int]:
    """Old line numbers changed (or next to an insertion) that no finding allows."""
    old, new = before.splitlines(), after.splitlines()
    outside: list[int] = []
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            outside += [line for line in range(i1 + 1, i2 + 1) if line not in allowed]
        elif tag == "insert" and not ({i1, i1 + 1} & allowed):  # between old lines i1 and i1 + 1
            outside.append(i1 + 1)
    return outside


def decoded(data: bytes) -> str:
    from torchlint.files import decode  # the same decoding torchlint uses

    return decode(data).text


# ---------------------------------------------------------------- one corpus
def round_trip(name: str, source: Path, work: Path) -> Result:
    result = Result(name)
    start = time.monotonic()
    tree = work / name
    if tree.exists():
        shutil.rmtree(tree)
    copy_corpus(source, tree)
    before = snapshot(tree)
    result.files = len(before)
    result.lines = sum(data.count(b"\n") for data in before.values())
    compiled_before = {path for path, data in before.items() if compiles(data, path)}

    report = run_torchlint(["--format", "json", "--exit-zero"], tree, result, "check")
    try:
        findings = json.loads(report.stdout or "[]")
    except json.JSONDecodeError:
        findings = []
        result.failures.append("check: the json output does not parse")
    result.findings = len(findings)
    allowed = allowed_lines(findings, tree)

    fix = run_torchlint(["--fix", "--unsafe-fixes", "--exit-zero"], tree, result, "fix")
    result.unchecked = [
        line
        for line in fix.stderr.splitlines()
        if ": error: " in line or ": syntax error" in line or ("cannot analyse" in line)
    ]
    for line in fix.stderr.splitlines():
        if line.startswith("Fixed "):
            result.fixed = int(line.split()[1])
    after = snapshot(tree)
    for path, data in after.items():
        if data == before.get(path):
            continue
        result.changed += 1
        if path in compiled_before and not compiles(data, path):
            result.failures.append(f"{path}: compiled before the fix, not after")
        outside = changes_outside(decoded(before[path]), decoded(data), allowed.get(path, set()))
        if outside:
            result.failures.append(f"{path}: lines changed without a finding: {outside[:10]}")
    if set(after) != set(before):
        result.failures.append(f"files appeared or disappeared: {sorted(set(after) ^ set(before))[:10]}")

    run_torchlint(["--fix", "--unsafe-fixes", "--exit-zero"], tree, result, "second fix")
    again = snapshot(tree)
    for path, data in again.items():
        if data != after.get(path):
            result.failures.append(f"{path}: the second --fix pass changed it again")
    result.seconds = time.monotonic() - start
    return result


# ---------------------------------------------------------------- command line
def torch_directory() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("torch is not installed")
    return Path(spec.origin).parent


def corpora(args: argparse.Namespace) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    if args.torch:
        found.append(("torch", torch_directory()))
    for sub in args.torch_subdir:
        found.append((f"torch-{sub.replace('/', '-')}", torch_directory() / sub))
    for given in args.paths:
        path = Path(given)
        name = path.name.split("-")[0] if path.suffix == ".whl" else path.name or "corpus"
        found.append((name, path))
    return found


def print_table(results: list[Result]) -> None:
    header = (
        f"{'corpus':<22} {'files':>6} {'lines':>9} {'findings':>8} {'changed':>7} {'fixed':>6} "
        f"{'unchecked':>9} {'failures':>8} {'time':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.name:<22} {r.files:>6} {r.lines:>9} {r.findings:>8} {r.changed:>7} {r.fixed:>6} "
            f"{len(r.unchecked):>9} {len(r.failures):>8} {r.seconds:>6.0f}s"
        )
    for r in results:
        for line in r.unchecked[:20]:
            print(f"[{r.name}] not checked: {line}")
        for line in r.failures:
            print(f"[{r.name}] FAILURE: {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="directories, files or wheels to round-trip")
    parser.add_argument("--torch", action="store_true", help="the installed torch package's sources")
    parser.add_argument(
        "--torch-subdir",
        action="append",
        default=[],
        metavar="DIR",
        help="a subdirectory of the installed torch package (e.g. optim)",
    )
    parser.add_argument("--work", type=Path, help="scratch directory for the copies (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the fixed copies")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    found = corpora(args)
    if not found:
        parser.error("nothing to round-trip: give paths, wheels, --torch or --torch-subdir")
    work = args.work or Path(tempfile.mkdtemp(prefix="torchlint-roundtrip-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = [round_trip(name, path, work) for name, path in found]
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
