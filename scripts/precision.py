#!/usr/bin/env python3
"""Measure torchlint's precision on real PyTorch code.

Fetches pinned releases of large PyTorch codebases through the package registry
(``pip download``), unpacks their Python sources into a cache, adds the sources
of the installed ``torch`` package and the repository's ``examples/``, runs the
``torchlint`` command on each, and reports per codebase: files, lines linted,
findings per rule and wall time.  Every finding is written (with the source
line) to a JSON and a CSV file for triage.

A maintainer records a verdict per finding in a triage file (committed as
``scripts/precision_triage.json``); with ``--triage`` the script prints the
precision table: findings per rule, how many were checked, real bugs, false
positives.  Verdicts are keyed by ``CODE|codebase|path|line:col|hash of the
source line``; when a new release moves a line, the verdict follows the same code,
path and source line.

Examples::

    python scripts/precision.py --jobs 2             # fetch, lint, write findings
    python scripts/precision.py --reuse --triage     # precision table from the last run
    python scripts/precision.py --reuse --triage --show TL002 --untriaged --context 6
    python scripts/precision.py --reuse --triage --mark fp \\
        --keys 'TL002|timm|timm/x.py|12:5' --note "runs under no_grad in the caller"

Only the standard library is used; torch is needed only to locate its sources.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = Path("/work/corpora/src")
DEFAULT_WHEELS = Path("/work/corpora/wheels")
DEFAULT_OUT = Path("/work/corpora/precision_findings.json")
DEFAULT_TRIAGE = REPO / "scripts" / "precision_triage.json"

# Registry packages, pinned so that line numbers in the triage file stay meaningful.
PINNED = {
    # Large PyTorch libraries.
    "transformers": "5.24.0",
    "diffusers": "0.42.1",
    "pytorch-lightning": "2.6.6",
    "timm": "1.0.31",
    # Training code: hand-written loops, manual SGD updates (d2l is the "Dive into Deep Learning" book's code).
    "d2l": "1.0.3",
    "pytorch-ignite": "0.5.5",
    "skorch": "1.4.0",
    "trl": "1.16.0",
    "stable-baselines3": "2.9.2",
    "torchtune": "0.6.1",  # its wheel ships the fine-tuning recipes (training scripts)
    "fastai": "2.8.12",
    "ultralytics": "8.4.190",
    "avalanche-lib": "0.6.0",
    "pytorch-metric-learning": "2.9.0",
    "deepxde": "1.15.0",
    # Code that handles leaves and gradients by hand: adversarial attacks, attribution, meta-learning
    # (learn2learn and advertorch publish only sdists, which include their examples and tests).
    "torchattacks": "3.5.1",
    "captum": "0.9.0",
    "learn2learn": "0.2.0",
    "advertorch": "0.2.3",
    # Source distributions, for their example training scripts (see SDIST).
    "opacus": "1.6.0",
    "pyro-ppl": "1.9.2",
}
# Fetched as source distributions (``--no-binary NAME``): their examples are not in the wheel.
SDIST = frozenset({"opacus", "pyro-ppl"})

VERDICTS = {"real": "real", "real bug": "real", "bug": "real", "tp": "real",
            "fp": "fp", "false positive": "fp", "false-positive": "fp",
            "unsure": "unsure", "?": "unsure"}

BATCH_SIZE = 400  # files per torchlint process (keeps the command line short)
FLAKE8_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) (?P<message>.*)$")


# ----------------------------------------------------------------- codebases
@dataclass
class Codebase:
    name: str
    version: str
    root: Path  # paths in findings are relative to this directory
    files: list[str] = field(default_factory=list)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")


def find_archive(archives: Path, name: str, version: str, sdist: bool = False) -> Path | None:
    """The downloaded wheel (or sdist, for projects that publish no wheel) of ``name==version``."""
    for archive in sorted(archives.iterdir()) if archives.is_dir() else ():
        suffix = next((s for s in ARCHIVE_SUFFIXES if archive.name.endswith(s)), None)
        if suffix is None or (sdist and suffix == ".whl"):
            continue
        stem = archive.name[: -len(suffix)]
        if suffix == ".whl":  # name-version-tags: the name has no "-" (wheels normalise it to "_")
            project, found_version = stem.split("-")[:2]
        else:  # name-version, where the name may contain "-"
            project, _, found_version = stem.rpartition("-")
        if _normalize(project) == _normalize(name) and found_version == version:
            return archive
    return None


def download(archives: Path, name: str, version: str) -> Path:
    sdist = name in SDIST
    archive = find_archive(archives, name, version, sdist)
    if archive is not None:
        return archive
    archives.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", name if sdist else ":none:",
               "-d", str(archives), f"{name}=={version}"]
    print("$", " ".join(command), file=sys.stderr)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    archive = find_archive(archives, name, version, sdist)
    if archive is None:
        raise SystemExit(f"pip download did not produce an archive for {name}=={version} in {archives}")
    return archive


def _archive_members(archive: Path) -> Iterable[tuple[str, bytes]]:
    """(path, content) of every Python file; an sdist's top directory (``name-version/``) is dropped."""
    if archive.name.endswith(".tar.gz"):
        with tarfile.open(archive) as tar:
            for member in tar:
                if member.isfile() and member.name.endswith(".py"):
                    handle = tar.extractfile(member)
                    if handle is not None:
                        yield member.name.split("/", 1)[-1], handle.read()
        return
    with zipfile.ZipFile(archive) as zipped:
        for name in zipped.namelist():
            if name.endswith(".py") and ".dist-info/" not in name:
                yield name, zipped.read(name)


def unpack(archive: Path, target: Path) -> None:
    """Extract the archive's Python sources (once; a marker file records completion)."""
    marker = target / ".unpacked"
    if marker.exists():
        return
    target.mkdir(parents=True, exist_ok=True)
    base = target.resolve()
    for member, data in _archive_members(archive):
        destination = (target / member).resolve()
        if base not in destination.parents:  # never write outside the cache
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)
    marker.write_text(archive.name + "\n")


def python_files(root: Path, under: str = ".") -> list[str]:
    found = []
    for directory, dirnames, filenames in os.walk(root / under):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                found.append(os.path.relpath(os.path.join(directory, filename), root))
    return found


def registry_codebase(name: str, version: str, cache: Path, wheels: Path) -> Codebase:
    archive = download(wheels, name, version)
    root = cache / f"{name}-{version}"
    unpack(archive, root)
    return Codebase(name, version, root, python_files(root))


def torch_codebase() -> Codebase:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed; cannot lint its sources")
    package = Path(list(spec.submodule_search_locations)[0])
    return Codebase("torch", importlib.metadata.version("torch"), package.parent,
                    python_files(package.parent, package.name))


def examples_codebase() -> Codebase:
    root = REPO / "examples"
    return Codebase("examples", "repo", root, python_files(root) if root.is_dir() else [])


def gather(names: Sequence[str], cache: Path, wheels: Path) -> list[Codebase]:
    codebases = []
    for name in names:
        if name in PINNED:
            codebases.append(registry_codebase(name, PINNED[name], cache, wheels))
        elif name == "torch":
            codebases.append(torch_codebase())
        elif name == "examples":
            codebases.append(examples_codebase())
        else:
            raise SystemExit(f"unknown codebase {name!r}; known: {', '.join(all_codebase_names())}")
    return codebases


def all_codebase_names() -> list[str]:
    return [*PINNED, "torch", "examples"]


def count_lines(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# ----------------------------------------------------------------- running torchlint
@dataclass
class Linter:
    command: list[str]
    json_output: bool
    extra_args: list[str]

    @classmethod
    def detect(cls, command: Sequence[str] | None = None) -> Linter:
        if command is None:
            found = shutil.which("torchlint")
            command = [found] if found else [sys.executable, "-m", "torchlint"]
        help_text = subprocess.run([*command, "--help"], capture_output=True, text=True).stdout
        format_choices = re.search(r"--format \{([^}]*)\}", help_text)
        json_output = bool(format_choices and "json" in format_choices.group(1).split(","))
        extra = []
        # Lint exactly the files given, as a first run would: no project config, no result cache.
        for option in ("--isolated", "--no-cache"):
            if option in help_text:
                extra.append(option)
        return cls(list(command), json_output, extra)

    def default_rules(self) -> list[str]:
        listing = subprocess.run([*self.command, "--list-rules"], capture_output=True, text=True, check=True).stdout
        return [line.split()[0] for line in listing.splitlines() if "default:on" in line]

    def run(self, root: Path, files: Sequence[str], select: Sequence[str]) -> tuple[list[dict], list[str]]:
        """Findings (dicts with path/line/col/code/message) and error lines for one batch."""
        command = [*self.command, "--select", ",".join(select), "--exit-zero", *self.extra_args,
                   "--format", "json" if self.json_output else "flake8", "--", *files]
        result = subprocess.run(command, cwd=root, capture_output=True, text=True)
        if result.returncode not in (0, 1, 2):
            raise SystemExit(f"torchlint failed ({result.returncode}):\n{result.stderr[-2000:]}")
        findings = parse_json(result.stdout) if self.json_output else parse_flake8(result.stdout)
        errors = [line for line in result.stderr.splitlines() if _is_error_line(line)]
        return findings, errors


def _is_error_line(line: str) -> bool:
    return bool(line) and not line.startswith(("Found ", "All checks passed", "Fixed ", "Would fix ")) and ":" in line


def parse_flake8(text: str) -> list[dict]:
    findings = []
    for line in text.splitlines():
        match = FLAKE8_LINE.match(line)
        if match:
            findings.append({"path": match["path"], "line": int(match["line"]), "col": int(match["col"]),
                             "code": match["code"], "message": match["message"]})
    return findings


def parse_json(text: str) -> list[dict]:
    """Accepts a list of findings, ``{"findings": [...]}``, or JSON lines; ruff-like or flat fields."""
    text = text.strip()
    if not text:
        return []
    try:
        data = json.loads(text)
        items = data.get("findings", data.get("results", [])) if isinstance(data, dict) else data
    except json.JSONDecodeError:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [_flat_finding(item) for item in items]


def _flat_finding(item: dict) -> dict:
    start = item.get("location") or item.get("start") or item.get("start_location") or {}
    return {
        "path": item.get("filename") or item.get("path") or item.get("file"),
        "line": int(start.get("row") or start.get("line") or item.get("line") or item.get("row")),
        "col": int(start.get("column") or start.get("col") or item.get("column") or item.get("col") or 1),
        "code": item.get("code"),
        "message": item.get("message", ""),
    }


# ----------------------------------------------------------------- results
def finding_key(code: str, codebase: str, path: str, line: int, col: int, source: str) -> str:
    """``CODE|codebase|path|line:col|sha1(stripped source line)[:10]``."""
    digest = hashlib.sha1(source.strip().encode()).hexdigest()[:10]
    return f"{code}|{codebase}|{path}|{line}:{col}|{digest}"


@dataclass
class CodebaseStats:
    name: str
    version: str
    root: str
    files: int
    lines: int
    seconds: float
    errors: list[str]


def lint_codebase(linter: Linter, codebase: Codebase, select: Sequence[str], jobs: int) -> tuple[CodebaseStats, list[dict]]:
    batches = [codebase.files[i:i + BATCH_SIZE] for i in range(0, len(codebase.files), BATCH_SIZE)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outputs = list(pool.map(lambda batch: linter.run(codebase.root, batch, select), batches))
    seconds = time.perf_counter() - started
    errors = [error for _, batch_errors in outputs for error in batch_errors]
    findings = []
    line_cache: dict[str, list[str]] = {}
    for batch_findings, _ in outputs:
        for raw in batch_findings:
            path = os.path.normpath(raw["path"])
            if path not in line_cache:
                line_cache[path] = (codebase.root / path).read_text(encoding="utf-8", errors="replace").splitlines()
            lines = line_cache[path]
            source = lines[raw["line"] - 1] if 0 < raw["line"] <= len(lines) else ""
            findings.append({
                "key": finding_key(raw["code"], codebase.name, path, raw["line"], raw["col"], source),
                "codebase": codebase.name, "version": codebase.version, "path": path,
                "line": raw["line"], "col": raw["col"], "code": raw["code"], "message": raw["message"],
                "source": source.strip(),
            })
    lines = sum(count_lines(codebase.root / f) for f in codebase.files)
    stats = CodebaseStats(codebase.name, codebase.version, str(codebase.root), len(codebase.files), lines,
                          round(seconds, 2), errors)
    return stats, findings


def write_results(out: Path, stats: list[CodebaseStats], findings: list[dict], select: Sequence[str]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"select": list(select), "codebases": [asdict(s) for s in stats], "findings": findings}
    out.write_text(json.dumps(payload, indent=1) + "\n")
    with open(out.with_suffix(".csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["key", "codebase", "version", "path", "line", "col", "code", "message", "source"])
        writer.writeheader()
        writer.writerows(findings)


def read_results(out: Path) -> tuple[list[str], list[CodebaseStats], list[dict]]:
    payload = json.loads(out.read_text())
    findings = payload["findings"]
    for f in findings:  # keys are derived data: recompute them, so an older results file still matches
        f["key"] = finding_key(f["code"], f["codebase"], f["path"], f["line"], f["col"], f["source"])
    return payload["select"], [CodebaseStats(**s) for s in payload["codebases"]], findings


# ----------------------------------------------------------------- triage
class Triage:
    """Verdicts per finding key, stored as JSON: {"verdicts": {key: {"verdict", "note", ...}}}."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.verdicts: dict[str, dict] = {}
        if path.exists():
            self.verdicts = json.loads(path.read_text()).get("verdicts", {})
        # The same source line elsewhere in the same file: where a verdict moves when lines shift.
        self._by_line: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
        self.current: set[str] = set()  # keys of the findings being triaged (see ``use``)
        for key in self.verdicts:
            code, codebase, file, _, digest = key.split("|")
            self._by_line[(code, codebase, file, digest)].append(key)

    def matching_key(self, finding: dict) -> str | None:
        """The verdict's key: the finding's own, or that of the same source line before it moved."""
        if finding["key"] in self.verdicts:
            return finding["key"]
        code, codebase, file, position, digest = finding["key"].split("|")
        # Only a verdict whose own line no current finding claims has moved (identical lines
        # elsewhere in the file keep their own verdicts).
        candidates = [key for key in self._by_line.get((code, codebase, file, digest), [])
                      if key not in self.current]
        col = position.split(":")[-1]
        same_col = [key for key in candidates if key.split("|")[3].split(":")[-1] == col]
        return (same_col or candidates or [None])[0]

    def use(self, findings: Iterable[dict]) -> Triage:
        """Triage these findings (the verdicts of their exact keys are not moved to other lines)."""
        self.current = {f["key"] for f in findings}
        return self

    def lookup(self, finding: dict) -> dict | None:
        key = self.matching_key(finding)
        return self.verdicts[key] if key else None

    def mark(self, finding: dict, verdict: str, note: str, repro: str | None) -> None:
        entry = {"verdict": VERDICTS[verdict.lower()], "note": note, "source": finding["source"],
                 "message": finding["message"]}
        if repro:
            entry["repro"] = repro
        self.verdicts[finding["key"]] = entry

    def save(self) -> None:
        ordered = dict(sorted(self.verdicts.items()))
        self.path.write_text(json.dumps({"schema": 1, "verdicts": ordered}, indent=1, ensure_ascii=False) + "\n")


def _verdict_of(entry: dict | None) -> str | None:
    if not entry or not entry.get("verdict"):
        return None
    return VERDICTS.get(str(entry["verdict"]).lower(), "unsure")


# ----------------------------------------------------------------- reports
def print_summary(stats: Sequence[CodebaseStats], findings: Sequence[dict], select: Sequence[str]) -> None:
    per = Counter((f["codebase"], f["code"]) for f in findings)
    header = ["codebase", "version", "files", "lines", "seconds", "errors", *select, "total"]
    rows = []
    for s in stats:
        counts = [per[(s.name, code)] for code in select]
        rows.append([s.name, s.version, s.files, s.lines, f"{s.seconds:.1f}", len(s.errors), *counts, sum(counts)])
    totals = [sum(per[(s.name, code)] for s in stats) for code in select]
    rows.append(["all", "", sum(s.files for s in stats), sum(s.lines for s in stats),
                 f"{sum(s.seconds for s in stats):.1f}", sum(len(s.errors) for s in stats), *totals, sum(totals)])
    print_table(header, rows)


def print_precision(stats: Sequence[CodebaseStats], findings: Sequence[dict], triage: Triage,
                    select: Sequence[str]) -> None:
    table: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for finding in findings:
        verdict = _verdict_of(triage.lookup(finding))
        counts = table[(finding["codebase"], finding["code"])]
        counts["findings"] += 1
        if verdict is not None:
            counts["checked"] += 1
            counts[verdict] += 1
    header = ["codebase", "lines", "rule", "findings", "checked", "real", "FP", "unsure", "precision"]
    rows = []
    overall: Counter = Counter()
    for s in stats:
        codes = sorted(code for name, code in table if name == s.name)
        if not codes:
            rows.append([s.name, s.lines, "-", 0, 0, 0, 0, 0, "-"])
        for code in codes:
            counts = table[(s.name, code)]
            overall.update(counts)
            rows.append([s.name, s.lines, code, *_precision_cells(counts)])
    rows.append(["all", sum(s.lines for s in stats), "all", *_precision_cells(overall)])
    print_table(header, rows)
    codebases = {s.name for s in stats}
    matched = {triage.matching_key(f) for f in findings}
    gone = [key for key in triage.verdicts
            if key not in matched and key.split("|")[1] in codebases and key.split("|")[0] in select]
    if gone:
        fixed = sum(1 for key in gone if _verdict_of(triage.verdicts[key]) == "fp")
        print(f"\n{len(gone)} triaged findings are no longer reported ({fixed} of them false positives).")


def _precision_cells(counts: Counter) -> list[object]:
    judged = counts["real"] + counts["fp"]
    precision = f"{counts['real'] / judged:.1%}" if judged else "-"
    return [counts["findings"], counts["checked"], counts["real"], counts["fp"], counts["unsure"], precision]


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A Markdown table (readable in a terminal, pastable into an issue)."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for index, row in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
        if index == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def show(findings: Sequence[dict], stats: Sequence[CodebaseStats], context: int, triage: Triage | None,
         only_untriaged: bool) -> None:
    roots = {s.name: Path(s.root) for s in stats}
    for finding in findings:
        entry = triage.lookup(finding) if triage else None
        if only_untriaged and _verdict_of(entry):
            continue
        lines = (roots[finding["codebase"]] / finding["path"]).read_text(encoding="utf-8", errors="replace").splitlines()
        number = finding["line"]
        print(f"=== {finding['key']}")
        print(f"    [{finding['codebase']}] {finding['path']}:{number}:{finding['col']}: {finding['code']} {finding['message']}")
        if entry:
            print(f"    verdict: {entry.get('verdict')} — {entry.get('note', '')}")
        for index in range(max(1, number - context), min(len(lines), number + context) + 1):
            marker = ">>" if index == number else "  "
            print(f"{marker}{index:6d}  {lines[index - 1]}")


def sample(findings: Sequence[dict], per_rule: int, seed: int) -> list[dict]:
    """At most ``per_rule`` random findings per (codebase, rule), plus one per distinct source line."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for finding in findings:
        groups[(finding["codebase"], finding["code"])].append(finding)
    rng = random.Random(seed)
    chosen: list[dict] = []
    for _, group in sorted(groups.items()):
        picked = group if len(group) <= per_rule else rng.sample(group, per_rule)
        seen = {_pattern(f) for f in picked}
        for finding in group:  # every distinct pattern at least once
            if _pattern(finding) not in seen:
                seen.add(_pattern(finding))
                picked.append(finding)
        chosen.extend(sorted(picked, key=lambda f: (f["path"], f["line"])))
    return chosen


def _pattern(finding: dict) -> str:
    return re.sub(r"\w+", "x", finding["source"])  # the statement's shape, names blanked


# ----------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--codebase", action="append", choices=all_codebase_names(),
                        help="codebase to lint (repeatable; default: all)")
    parser.add_argument("--select", help="comma-separated rule codes (default: the rules `torchlint --list-rules` marks default:on)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"where sources are unpacked (default {DEFAULT_CACHE})")
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS, help=f"where wheels are downloaded (default {DEFAULT_WHEELS})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"findings JSON; a CSV is written next to it (default {DEFAULT_OUT})")
    parser.add_argument("--torchlint", help="command to run instead of `torchlint` (e.g. 'python -m torchlint')")
    parser.add_argument("--format", choices=["auto", "json", "flake8"], default="auto",
                        help="torchlint output to parse (default: json when torchlint supports it)")
    parser.add_argument("--jobs", type=int, default=1, help="torchlint processes run in parallel per codebase (default 1)")
    parser.add_argument("--reuse", action="store_true", help="read findings from --out instead of linting again")
    parser.add_argument("--triage", type=Path, nargs="?", const=DEFAULT_TRIAGE,
                        help=f"verdicts file; prints the precision table (default {DEFAULT_TRIAGE.relative_to(REPO)})")
    parser.add_argument("--show", metavar="CODE", nargs="?", const="ALL", help="print findings of a rule (or ALL) in context")
    parser.add_argument("--untriaged", action="store_true", help="with --show: only findings without a verdict")
    parser.add_argument("--context", type=int, default=4, help="lines of context for --show")
    parser.add_argument("--sample", type=int, metavar="N", help="with --show: N random findings per codebase and rule plus every distinct pattern")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mark", choices=sorted(set(VERDICTS.values())), help="record a verdict for --keys in the --triage file")
    parser.add_argument("--keys", help="comma-separated finding keys (or key prefixes) for --mark")
    parser.add_argument("--note", default="", help="why (for --mark)")
    parser.add_argument("--repro", help="minimal reproduction file (for --mark)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = args.codebase or all_codebase_names()
    if args.reuse:
        select, stats, findings = read_results(args.out)
        stats = [s for s in stats if s.name in names]
        findings = [f for f in findings if f["codebase"] in names]
    else:
        linter = Linter.detect(args.torchlint.split() if args.torchlint else None)
        if args.format != "auto":
            linter.json_output = args.format == "json"
        select = args.select.split(",") if args.select else linter.default_rules()
        print(f"torchlint: {' '.join(linter.command)} --select {','.join(select)} "
              f"--format {'json' if linter.json_output else 'flake8'} {' '.join(linter.extra_args)}", file=sys.stderr)
        stats, findings = [], []
        for codebase in gather(names, args.cache, args.wheels):
            codebase_stats, codebase_findings = lint_codebase(linter, codebase, select, args.jobs)
            stats.append(codebase_stats)
            findings.extend(codebase_findings)
            print(f"{codebase.name} {codebase.version}: {codebase_stats.files} files, {codebase_stats.lines} lines, "
                  f"{len(codebase_findings)} findings, {codebase_stats.seconds:.1f}s", file=sys.stderr)
            for error in codebase_stats.errors[:5]:
                print(f"  error: {error}", file=sys.stderr)
        if args.codebase and args.out.exists():
            stats, findings = _keep_other_codebases(args.out, select, stats, findings)
        write_results(args.out, stats, findings, select)
        print(f"findings written to {args.out} and {args.out.with_suffix('.csv')}", file=sys.stderr)

    triage = Triage(args.triage).use(findings) if args.triage else None
    if args.mark:
        if triage is None or not args.keys:
            raise SystemExit("--mark needs --triage FILE and --keys")
        marked = _mark(triage, findings, args.keys.split(","), args.mark, args.note, args.repro)
        triage.save()
        print(f"marked {marked} findings {args.mark}", file=sys.stderr)
        return 0
    if args.show:
        chosen = [f for f in findings if args.show == "ALL" or f["code"] == args.show]
        if args.sample:
            chosen = sample(chosen, args.sample, args.seed)
        show(chosen, stats, args.context, triage, args.untriaged)
        return 0
    print_summary(stats, findings, select)
    if triage is not None:
        print()
        print_precision(stats, findings, triage, select)
    return 0


def _keep_other_codebases(out: Path, select: Sequence[str], stats: list[CodebaseStats],
                          findings: list[dict]) -> tuple[list[CodebaseStats], list[dict]]:
    """Re-linting some codebases (``--codebase``) with the same rules keeps the others' results."""
    old_select, old_stats, old_findings = read_results(out)
    if list(old_select) != list(select):
        return stats, findings
    names = {s.name for s in stats}
    kept = [s for s in old_stats if s.name not in names]
    print(f"kept the results of {', '.join(s.name for s in kept) or 'no other codebase'} from {out}", file=sys.stderr)
    return kept + stats, [f for f in old_findings if f["codebase"] not in names] + findings


def _mark(triage: Triage, findings: Iterable[dict], keys: Sequence[str], verdict: str, note: str,
          repro: str | None) -> int:
    marked = 0
    for key in keys:
        matches = [f for f in findings if f["key"].startswith(key.strip())]
        if not matches:
            print(f"no finding matches {key!r}", file=sys.stderr)
        for finding in matches:
            triage.mark(finding, verdict, note, repro)
            marked += 1
    return marked


if __name__ == "__main__":
    sys.exit(main())
