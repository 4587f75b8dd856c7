"""Score torchlint on the development corpus of real training code (corpus/dev/*.toml).

Every case names one line of a third-party file (repository + path + commit, or a PyPI sdist +
version) with a rule and a label: ``bug`` (a real mistake the rule should report) or ``ok`` (a
correct line that looks like the mistake). The files are not committed; they live in a local cache
(default /work/corpus-cache, see corpus/README.md for how to re-fill it). This script lints every
cached file once with ``python -m torchlint`` (whatever ``PYTHONPATH`` points at), checks that each
labelled line still has the text it was labelled on (``line_sha``), and prints per rule: labelled
bugs, found (TP), missed (FN), labelled ok lines flagged (FP), precision and recall, plus every
finding on a cached file that is on no labelled line ("unlabelled", to triage and label).

A finding counts for a case when it has the case's rule and starts on the case's line or anywhere
in the same logical statement (a statement continued over several lines). For notebooks a case
gives ``cell`` (1-based, counting every cell as torchlint does) and ``line`` within the cell.

    python scripts/score_corpus.py                       # default rules
    python scripts/score_corpus.py --select ALL --show-missed --show-fp
    python scripts/score_corpus.py --rules TL002,TL009 --json /tmp/score.json
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASES = ROOT / "corpus" / "dev"
DEFAULT_CACHE = Path(os.environ.get("TORCHLINT_CORPUS_CACHE", "/work/corpus-cache"))
LABELS = ("bug", "ok")


@dataclass
class Case:
    id: str
    repo: str
    path: str
    commit: str | None
    line: int
    cell: int | None
    line_sha: str
    rule: str
    label: str
    note: str
    check: str
    source: str  # the toml file it came from
    file: Path | None = None  # the cached file, once resolved
    hits: list[dict] = field(default_factory=list)


def line_sha(text: str) -> str:
    """The label's fingerprint of one source line: sha256 of the stripped text, 12 hex digits."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


def cache_path(cache: Path, repo: str, commit: str | None, path: str) -> Path:
    """Where a case's file is cached: <cache>/<owner>/<name>/<commit>/<path> or <cache>/pypi/<name>/<version>/<path>."""
    if repo.startswith("pypi:"):
        name, _, version = repo[len("pypi:"):].partition("==")
        return cache / "pypi" / name / version / path
    if not commit:
        raise ValueError(f"{repo}: a GitHub case needs a commit")
    return cache / repo / commit / path


@dataclass
class Sibling:
    """A file that is no case but that torchlint's project lookups read when it lints a case's file
    (a model class it imports, the script calling its function): cached beside that file, in the
    directory of the cases' ``commit``, read from ``stored_commit`` where the index holds it only there."""

    repo: str
    path: str
    commit: str
    stored_commit: str
    chars: int
    cases: list[str]


def load_siblings(paths: list[Path]) -> list[Sibling]:
    siblings: list[Sibling] = []
    for toml_path in paths:
        with toml_path.open("rb") as handle:
            for raw in tomllib.load(handle).get("sibling", []):
                siblings.append(Sibling(repo=raw["repo"], path=raw["path"], commit=raw["commit"],
                                        stored_commit=raw.get("stored_commit", raw["commit"]),
                                        chars=int(raw["chars"]), cases=list(raw.get("cases", []))))
    return siblings


def load_cases(paths: list[Path]) -> list[Case]:
    cases: list[Case] = []
    seen: set[str] = set()
    for toml_path in paths:
        with toml_path.open("rb") as handle:
            data = tomllib.load(handle)
        for raw in data.get("case", []):
            case = Case(
                id=raw["id"], repo=raw["repo"], path=raw["path"], commit=raw.get("commit"),
                line=int(raw["line"]), cell=raw.get("cell"), line_sha=raw["line_sha"],
                rule=raw["rule"], label=raw["label"], note=raw.get("note", ""),
                check=raw.get("check", ""), source=toml_path.name,
            )
            if case.label not in LABELS:
                raise SystemExit(f"{toml_path}: case {case.id}: label must be one of {LABELS}")
            if case.id in seen:
                raise SystemExit(f"{toml_path}: duplicate case id {case.id}")
            seen.add(case.id)
            cases.append(case)
    return cases


def notebook_cells(text: str) -> dict[int, str]:
    """Each cell's source by 1-based cell number (every cell counts, as in torchlint's findings)."""
    cells = json.loads(text).get("cells", [])
    sources: dict[int, str] = {}
    for number, cell in enumerate(cells, start=1):
        source = cell.get("source", "")
        sources[number] = "".join(source) if isinstance(source, list) else source
    return sources


def logical_spans(source: str) -> dict[int, tuple[int, int]]:
    """For each physical line, the (first, last) line of the logical statement it belongs to."""
    spans: dict[int, tuple[int, int]] = {}
    start: int | None = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                              tokenize.ENDMARKER):
                continue
            if start is None:
                start = token.start[0]
            if token.type == tokenize.NEWLINE:
                for line in range(start, token.end[0] + 1):
                    spans[line] = (start, token.end[0])
                start = None
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # a file that does not tokenize: cases match their exact line only
    return spans


class CachedFile:
    """One cached file: its lines (per cell for notebooks) and logical statement spans."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.exists = path.is_file()
        self.units: dict[int | None, list[str]] = {}
        self.spans: dict[int | None, dict[int, tuple[int, int]]] = {}
        if not self.exists:
            return
        text = path.read_text(encoding="utf-8", errors="replace")
        sources = notebook_cells(text) if path.suffix == ".ipynb" else {None: text}
        for unit, source in sources.items():
            self.units[unit] = source.splitlines()
            self.spans[unit] = logical_spans(source)

    def text(self, cell: int | None, line: int) -> str | None:
        lines = self.units.get(cell)
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]

    def span(self, cell: int | None, line: int) -> tuple[int, int]:
        return self.spans.get(cell, {}).get(line, (line, line))


def run_torchlint(files: list[Path], select: str | None) -> tuple[list[dict], str]:
    """All findings of one torchlint run over ``files`` (JSON output), and its stderr."""
    command = [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--exit-zero",
               "--format", "json"]
    if select:
        command += ["--select", select]
    command += [str(path) for path in files]
    # `python -m` puts the working directory first on sys.path: run in an empty one, so that the
    # torchlint imported is PYTHONPATH's (or the installed one), not a checkout the caller stands in.
    with tempfile.TemporaryDirectory() as neutral:
        result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=neutral)
    stdout = result.stdout
    end = stdout.rfind("]")  # a summary line may follow the JSON array
    if end < 0:
        raise SystemExit(f"torchlint printed no JSON (exit {result.returncode}):\n{result.stderr[-2000:]}")
    return json.loads(stdout[: end + 1]), result.stderr


def known_rules() -> set[str]:
    """The rule codes the torchlint being measured has (`--list-rules`)."""
    result = subprocess.run([sys.executable, "-m", "torchlint", "--list-rules"],
                            capture_output=True, text=True, check=False)
    return {line.split()[0] for line in result.stdout.splitlines() if line[:2] == "TL"}


def score(cases: list[Case], findings: list[dict], files: dict[Path, CachedFile],
          rules: set[str] | None) -> tuple[dict[str, dict], list[dict]]:
    by_location: dict[tuple[str, int | None, int], list[Case]] = defaultdict(list)
    for case in cases:
        first, last = files[case.file].span(case.cell, case.line)
        for line in range(first, last + 1):
            by_location[(str(case.file), case.cell, line)].append(case)
    unlabelled: list[dict] = []
    for finding in findings:
        if rules and finding["code"] not in rules:
            continue
        name = str(Path(finding["filename"]).resolve())
        cell = finding.get("cell")
        row = finding["location"]["row"]
        matched = False
        for case in by_location.get((name, cell, row), []):
            if case.rule == finding["code"]:
                case.hits.append(finding)
                matched = True
        if not matched:
            cached = files.get(Path(name))
            text = cached.text(cell, row) if cached else None
            unlabelled.append({
                "code": finding["code"], "file": name, "cell": cell, "line": row,
                "text": (text or "").strip(), "message": finding["message"],
                "labelled_other_rule": (name, cell, row) in by_location,
            })
    table: dict[str, dict] = {}
    for case in cases:
        if rules and case.rule not in rules:
            continue
        row = table.setdefault(case.rule, {"bugs": 0, "tp": 0, "fn": 0, "ok": 0, "fp": 0})
        if case.label == "bug":
            row["bugs"] += 1
            row["tp" if case.hits else "fn"] += 1
        else:
            row["ok"] += 1
            row["fp"] += bool(case.hits)
    for row in table.values():
        flagged = row["tp"] + row["fp"]
        row["precision"] = round(row["tp"] / flagged, 3) if flagged else None
        row["recall"] = round(row["tp"] / row["bugs"], 3) if row["bugs"] else None
    return table, unlabelled


def total_row(table: dict[str, dict]) -> dict:
    total = {key: sum(row[key] for row in table.values()) for key in ("bugs", "tp", "fn", "ok", "fp")}
    flagged = total["tp"] + total["fp"]
    total["precision"] = round(total["tp"] / flagged, 3) if flagged else None
    total["recall"] = round(total["tp"] / total["bugs"], 3) if total["bugs"] else None
    return total


def mark_unknown(table: dict[str, dict], known: set[str]) -> dict[str, dict]:
    """Rules this torchlint does not have are shown as `TLxxx*` (their bugs all count as missed)."""
    return {rule if rule in known else rule + "*": row for rule, row in table.items()}


def print_markdown(table: dict[str, dict]) -> None:
    print("| rule | bugs | TP | FN | ok | FP | precision | recall |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for rule, row in sorted(table.items()) + [("all", total_row(table))]:
        cells = [row[k] for k in ("bugs", "tp", "fn", "ok", "fp")]
        cells += ["-" if row[k] is None else f"{row[k]:.2f}" for k in ("precision", "recall")]
        print(f"| {rule} | " + " | ".join(str(c) for c in cells) + " |")


def print_table(table: dict[str, dict]) -> None:
    header = f"{'rule':7} {'bugs':>5} {'TP':>4} {'FN':>4} {'ok':>5} {'FP':>4} {'precision':>9} {'recall':>7}"
    print(header)
    print("-" * len(header))
    rows = sorted(table.items()) + [("all", total_row(table))]
    for rule, row in rows:
        precision = "-" if row["precision"] is None else f"{row['precision']:.2f}"
        recall = "-" if row["recall"] is None else f"{row['recall']:.2f}"
        print(f"{rule:7} {row['bugs']:5} {row['tp']:4} {row['fn']:4} {row['ok']:5} {row['fp']:4} "
              f"{precision:>9} {recall:>7}")


def print_fetch_list(cases: list[Case], siblings: list[Sibling], cache: Path) -> None:
    """How to re-fill the cache: one read_file call per GitHub file (cases' files, then their
    siblings), one pip download per sdist."""
    github = sorted({(c.repo, c.commit, c.path) for c in cases if not c.repo.startswith("pypi:")})
    pypi = sorted({c.repo[len("pypi:"):] for c in cases if c.repo.startswith("pypi:")})
    for repo, commit, path in github:
        target = cache_path(cache, repo, commit, path)
        print(f'read_file(repo="{repo}", path="{path}", commit="{commit}")  -> {target}')
    for sibling in siblings:
        target = cache_path(cache, sibling.repo, sibling.commit, sibling.path)
        print(f'read_file(repo="{sibling.repo}", path="{sibling.path}", commit="{sibling.stored_commit}")  '
              f'-> {target}  # sibling of {", ".join(sibling.cases)}, {sibling.chars} characters')
    for requirement in pypi:
        name, _, version = requirement.partition("==")
        target = cache / "pypi" / name / version
        print(f"pip download --no-deps --no-binary :all: {requirement} -d SDISTS  "
              f"# then unpack the archive into {target}/ (a wheel where no sdist exists)")


def where(case: Case) -> str:
    cell = f"[cell {case.cell}]" if case.cell is not None else ""
    return f"{case.repo}:{case.path}{cell}:{case.line}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, nargs="*", default=None,
                        help="toml files or directories of cases (default: corpus/dev/)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the fetched files' cache")
    parser.add_argument("--select", default=None,
                        help="rules torchlint runs (`ALL` for every rule; default: its default rules)")
    parser.add_argument("--rules", default=None, help="comma-separated rules to score (default: all labelled)")
    parser.add_argument("--json", dest="json_out", type=Path, default=None, help="write the results here")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--show-missed", action="store_true", help="list labelled bugs not found")
    parser.add_argument("--show-fp", action="store_true", help="list labelled ok lines that were flagged")
    parser.add_argument("--show-unlabelled", action="store_true", help="list findings on no labelled line")
    parser.add_argument("--unlabelled-ignore", default="TL011,TL100",
                        help="rules never labelled (style rules), left out of the unlabelled list (default: %(default)s)")
    parser.add_argument("--fetch-list", action="store_true",
                        help="print how to re-fill the cache for every case (read_file calls, pip downloads) and exit")
    parser.add_argument("--line-sha", nargs=2, metavar=("FILE", "LINE"),
                        help="print the line_sha of LINE (or CELL:LINE for notebooks) in FILE and exit")
    args = parser.parse_args(argv)

    if args.line_sha:
        cached = CachedFile(Path(args.line_sha[0]))
        cell, _, line = args.line_sha[1].rpartition(":")
        text = cached.text(int(cell) if cell else None, int(line))
        if text is None:
            raise SystemExit("no such line")
        print(line_sha(text), text.strip())
        return 0

    sources = args.cases or [DEFAULT_CASES]
    toml_files = sorted(p for s in sources for p in ([s] if s.is_file() else s.glob("*.toml")))
    cases = load_cases(toml_files)
    rules = set(args.rules.split(",")) if args.rules else None
    siblings = load_siblings(toml_files)
    if args.fetch_list:
        print_fetch_list(cases, siblings, args.cache)
        return 0
    absent = [s for s in siblings if not cache_path(args.cache, s.repo, s.commit, s.path).exists()]
    if absent:  # their cases are scored, but findings that need the sibling's facts will be missed
        print(f"{len(absent)} sibling files not cached (--fetch-list): "
              + ", ".join(f"{s.repo}:{s.path} ({', '.join(s.cases)})" for s in absent))

    files: dict[Path, CachedFile] = {}
    missing: list[Case] = []
    drifted: list[tuple[Case, str | None]] = []
    unlocatable = [case for case in cases if case.repo.startswith("search-index:")]
    if unlocatable:  # a search-index hit names no repository: it cannot be fetched again
        print(f"{len(unlocatable)} cases name only a search-index id (no repository): not scored")
        cases = [case for case in cases if case not in unlocatable]
    for case in cases:
        case.file = cache_path(args.cache, case.repo, case.commit, case.path).resolve()
        cached = files.setdefault(case.file, CachedFile(case.file))
        if not cached.exists:
            missing.append(case)
            continue
        text = cached.text(case.cell, case.line)
        if text is None or line_sha(text) != case.line_sha:
            drifted.append((case, text))
    present = sorted(path for path, cached in files.items() if cached.exists)
    findings, stderr = run_torchlint(present, args.select) if present else ([], "")
    scored = [c for c in cases if c not in missing and all(c is not d for d, _ in drifted)]
    table, unlabelled = score(scored, findings, files, rules)
    ignored = set(args.unlabelled_ignore.split(",")) if args.unlabelled_ignore else set()
    unlabelled = [item for item in unlabelled if item["code"] not in ignored]

    projects = {c.repo for c in cases}
    print(f"{len(cases)} cases ({sum(c.label == 'bug' for c in cases)} bug, "
          f"{sum(c.label == 'ok' for c in cases)} ok) in {len(present)} files of {len(projects)} projects; "
          f"torchlint --select {args.select or '(default)'}")
    if missing:
        print(f"{len(missing)} cases whose file is not cached (see corpus/README.md): "
              + ", ".join(sorted({where(c).rsplit(':', 1)[0] for c in missing})[:10]))
    for case, text in drifted:
        print(f"DRIFT {case.id} {where(case)}: line_sha {case.line_sha} but the line is {text!r}")
    print()
    shown = mark_unknown(table, known_rules())
    print_markdown(shown) if args.markdown else print_table(shown)
    if shown.keys() != table.keys():
        print("* this torchlint has no such rule")
    if args.show_missed:
        print("\nmissed (labelled bug, no finding):")
        for case in scored:
            if case.label == "bug" and not case.hits and (not rules or case.rule in rules):
                print(f"  {case.id} {case.rule} {where(case)}: {files[case.file].text(case.cell, case.line).strip()}")
                print(f"      {case.note}")
    if args.show_fp:
        print("\nfalse positives (labelled ok, flagged):")
        for case in scored:
            if case.label == "ok" and case.hits and (not rules or case.rule in rules):
                print(f"  {case.id} {case.rule} {where(case)}: {files[case.file].text(case.cell, case.line).strip()}")
                print(f"      {case.note}")
    print(f"\n{len(unlabelled)} findings on no labelled line of this rule"
          + ("" if args.show_unlabelled else " (--show-unlabelled lists them)"))
    if args.show_unlabelled:
        for item in unlabelled:
            cell = f"[cell {item['cell']}]" if item["cell"] is not None else ""
            relative = os.path.relpath(item["file"], args.cache)
            print(f"  {item['code']} {relative}{cell}:{item['line']}: {item['text']}")
    if "error" in stderr.lower() or "traceback" in stderr.lower():
        print("\ntorchlint stderr:\n" + stderr[-3000:])
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "select": args.select, "table": table, "total": total_row(table),
            "cases": [{"id": c.id, "rule": c.rule, "label": c.label, "where": where(c),
                       "flagged": bool(c.hits)} for c in scored],
            "missing": [c.id for c in missing], "drift": [c.id for c, _ in drifted],
            "unlabelled": unlabelled,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
