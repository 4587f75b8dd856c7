"""The ``torchlint`` command."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from torchlint import __version__
from torchlint.cache import Cache, default_cache_dir
from torchlint.config import settings_for
from torchlint.datatypes import FileReport, FixSafety, FixStyle
from torchlint.files import discover
from torchlint.output import FORMATS, FORMATS_WITH_EDITS, FORMATS_WITH_SOURCE, format_statistics
from torchlint.parallel import lint_files
from torchlint.rulebook import page_for
from torchlint.rules import all_rules, rule_codes
from torchlint.runner import add_noqa_to_file
from torchlint.settings import Settings, SettingsError, resolve_rules, validate_selectors

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
STDIN = "-"


def _codes(value: str) -> tuple[str, ...]:
    return tuple(part.strip().upper() for part in value.split(",") if part.strip())


def _patterns(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint",
        description="Find and fix autograd mistakes in PyTorch training code before it runs.",
    )
    parser.add_argument("paths", nargs="*", default=None,
                        help="files or directories to lint (default: .); `-` reads from stdin")
    rules = parser.add_argument_group("rule selection (override [tool.torchlint] in pyproject.toml)")
    rules.add_argument("--select", type=_codes, help="comma-separated codes or prefixes to enable (replaces the default set)")
    rules.add_argument("--extend-select", type=_codes, default=(), help="codes or prefixes to enable in addition")
    rules.add_argument("--ignore", type=_codes, default=(), help="codes or prefixes to disable")
    files = parser.add_argument_group("files")
    files.add_argument("--exclude", type=_patterns, help="comma-separated patterns to skip (replaces the default list)")
    files.add_argument("--extend-exclude", type=_patterns, default=(), help="patterns to skip in addition")
    files.add_argument("--config", metavar="PATH", help="read settings from this pyproject.toml instead of searching")
    files.add_argument("--isolated", action="store_true", help="ignore all configuration files")
    files.add_argument("--stdin-filename", metavar="PATH",
                       help="the name of the file read from stdin (for messages, per-file-ignores, config)")
    fixing = parser.add_argument_group("fixing")
    fixing.add_argument("--fix", action="store_true", help="apply safe fixes in place (with `-`: print the fixed source)")
    fixing.add_argument("--unsafe-fixes", action="store_true", default=None, help="also apply fixes that may change behaviour")
    fixing.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false", help="never apply unsafe fixes")
    fixing.add_argument("--diff", action="store_true", help="show fixes as a unified diff and change nothing")
    fixing.add_argument("--fix-style", choices=[s.value for s in FixStyle], help="how updates are rewritten (default: data)")
    fixing.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` comments to silence every current finding")
    report = parser.add_argument_group("reporting")
    report.add_argument("--format", "--output-format", dest="format", choices=list(FORMATS), default="flake8",
                        help="output format (default: flake8)")
    report.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead")
    report.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    report.add_argument("--exit-non-zero-on-fix", action="store_true",
                        help="exit 1 when --fix changed a file, even if no finding remains (for pre-commit)")
    info = parser.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="print a rule's page from the rule book")
    info.add_argument("--list-rules", action="store_true", help="list the rules")
    info.add_argument("--verify", action="store_true", help="prove every selected rule with the installed torch")
    info.add_argument("--version", action="version", version=f"torchlint {__version__}")
    # --- performance (parallel workers, results cache: torchlint/parallel.py, torchlint/cache.py) ---
    speed = parser.add_argument_group("performance")
    speed.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                       help="worker processes (default: one per CPU for large runs; 1: no workers)")
    speed.add_argument("--no-cache", action="store_true", help="do not read or write the results cache")
    speed.add_argument("--cache-dir", metavar="PATH",
                       help="where to keep the results cache (default: .torchlint_cache in the project root)")
    # --- end performance ---
    return parser


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError("must be 0 (automatic) or more")
    return jobs


def _reads_stdin(args: argparse.Namespace) -> bool:
    return args.paths == [STDIN] or (not args.paths and args.stdin_filename is not None)


def _config_start(args: argparse.Namespace) -> list[str]:
    if _reads_stdin(args):
        return [str(Path(args.stdin_filename).absolute().parent)] if args.stdin_filename else []
    return list(args.paths or [])


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The configuration file's settings with the command line's options on top."""
    for selectors in (args.select or (), args.extend_select, args.ignore):
        validate_selectors(selectors)
    base = settings_for(_config_start(args), args.config, isolated=args.isolated)
    changes: dict[str, object] = {"fix_edits": args.format in FORMATS_WITH_EDITS and not args.statistics}
    if args.select is not None:  # "exactly these": the file's extend-select no longer applies
        changes.update(select=args.select, extend_select=args.extend_select)
    elif args.extend_select:
        changes["extend_select"] = base.extend_select + args.extend_select
    if args.ignore:
        changes["ignore"] = base.ignore + args.ignore
    if args.exclude is not None:
        changes["exclude"] = args.exclude
    if args.extend_exclude:
        changes["extend_exclude"] = base.extend_exclude + args.extend_exclude
    if args.fix_style:
        changes["fix_style"] = FixStyle(args.fix_style)
    if args.unsafe_fixes is not None:
        changes["unsafe_fixes"] = args.unsafe_fixes
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # `torchlint ... | head`: the reader went away; exit quietly like flake8 and ruff.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS


def _main(argv: Sequence[str] | None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["server"]:  # the language server; lazy so linting never imports pygls
        from torchlint.lsp import main as run_server

        return run_server(given[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.explain:
        return _explain(args.explain)
    if args.list_rules:
        return _list_rules()
    try:
        settings = settings_from_args(args)
    except SettingsError as error:
        print(f"torchlint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    # The rules (and libcst) are imported only where files are analysed: a lint run whose
    # every result is cached never imports them (see lint_files).
    if args.verify:
        return _verify(resolve_rules(settings) if args.select or args.extend_select else list(all_rules()))
    if _reads_stdin(args):
        return _lint_stdin(args, settings, resolve_rules(settings))
    if STDIN in (args.paths or []):
        print("torchlint: error: `-` (stdin) cannot be combined with other paths", file=sys.stderr)
        return EXIT_ERROR
    if args.add_noqa:
        return _add_noqa(args, settings, resolve_rules(settings))
    try:
        return _lint(args, settings)
    except KeyboardInterrupt:  # files are written atomically: each is unchanged or fully fixed
        print("torchlint: interrupted", file=sys.stderr)
        return 130


def _discover(args: argparse.Namespace, settings: Settings):
    root = Path(settings.project_root) if settings.project_root else None
    return discover(args.paths or ["."], settings.all_excludes, respect_gitignore=settings.respect_gitignore, root=root)


def _print_error(path: str, error: str) -> None:
    # "3:5: syntax error ..." and "cell 2:3:5: ..." start with a position: path:line:col: error: ...
    if error[:1].isdigit() or error.startswith("cell "):
        where, _, error = error.partition(": ")
        path = f"{path}:{where}"
    print(f"{path}: error: {error}", file=sys.stderr)


def _lint(args: argparse.Namespace, settings: Settings) -> int:
    errors = 0
    paths: list[str] = []
    for path, problem in _discover(args, settings):
        if problem is not None:
            print(f"{path}: error: {problem}", file=sys.stderr)
            errors += 1
            continue
        paths.append(path)
    # Cached results, then the rest in parallel; reports in path order (torchlint/parallel.py).
    # Rules None: the settings' rules, resolved only if some file is not in the cache.
    reports = lint_files(paths, None, settings, fix=args.fix or args.diff, write=args.fix and not args.diff,
                         jobs=args.jobs, cache=_cache(args, settings), with_source=_shows_source(args))
    for report in reports:
        if report.error is not None:
            _print_error(report.path, report.error)
            errors += 1
    if args.diff:
        for report in reports:
            sys.stdout.write(report.diff)
    else:
        _report(args, reports, sys.stdout)
    return _summarize(args, reports, errors)


def _cache(args: argparse.Namespace, settings: Settings) -> Cache | None:
    if args.no_cache:
        return None
    directory = Path(args.cache_dir) if args.cache_dir else default_cache_dir(settings)
    return Cache(directory, settings)


def _shows_source(args: argparse.Namespace) -> bool:
    return args.format in FORMATS_WITH_SOURCE and not args.statistics and not args.diff


def _report(args: argparse.Namespace, reports: list[FileReport], out) -> None:
    if args.statistics:
        format_statistics(reports, out, as_json=args.format == "json")
    else:
        FORMATS[args.format](reports, out)


def _lint_stdin(args: argparse.Namespace, settings: Settings, rules: list) -> int:
    """Lint the source on stdin as if it were ``--stdin-filename``.  With ``--fix`` the
    fixed source goes to stdout (the input unchanged when it cannot be fixed) and the
    findings that remain go to stderr."""
    from torchlint.runner import Action, lint_content

    name = args.stdin_filename or STDIN
    data = sys.stdin.buffer.read()
    linted = lint_content(name, data, settings, rules, action=Action.FIX if args.fix or args.diff else Action.CHECK)
    report = linted.report
    if report.error is not None:
        _print_error(name, report.error)
    if args.fix:
        fixed = report.source if report.error is None and report.source is not None else None
        sys.stdout.buffer.write(fixed.encode(linted.encoding) if fixed is not None else data)
        sys.stdout.flush()
        _report(args, [report], sys.stderr)
    elif args.diff:
        sys.stdout.write(report.diff)
    else:
        _report(args, [report], sys.stdout)
    return _summarize(args, [report], int(report.error is not None))


def _add_noqa(args: argparse.Namespace, settings: Settings, rules: list) -> int:
    added = errors = 0
    for path, problem in _discover(args, settings):
        error = problem
        if error is None:
            count, error = add_noqa_to_file(path, rules, settings)
            added += count
        if error is not None:
            _print_error(path, error)
            errors += 1
    print(f"Added {added} noqa directive{'s' * (added != 1)}.", file=sys.stderr)
    return EXIT_ERROR if errors else EXIT_CLEAN


def _summarize(args: argparse.Namespace, reports: list[FileReport], errors: int) -> int:
    findings = [f for r in reports for f in r.findings]
    fixed = sum(r.fixed for r in reports)
    would_change = sum(1 for r in reports if r.diff)
    parts: list[str] = []
    if args.fix and fixed and not args.diff:
        parts.append(f"Fixed {fixed} finding{'s' * (fixed != 1)}.")
    if args.diff and would_change:
        parts.append(f"Would fix {fixed} finding{'s' * (fixed != 1)} in {would_change} file{'s' * (would_change != 1)}.")
    if findings:
        safe = sum(1 for f in findings if f.fix and f.fix.safety is FixSafety.SAFE)
        unsafe = sum(1 for f in findings if f.fix and f.fix.safety is FixSafety.UNSAFE)
        files = sum(1 for r in reports if r.findings)
        line = f"Found {len(findings)} finding{'s' * (len(findings) != 1)} in {files} file{'s' * (files != 1)}."
        if safe and not args.fix:
            line += f" {safe} fixable with --fix."
        if unsafe:
            line += f" {unsafe} more with --unsafe-fixes."
        parts.append(line)
    elif not errors and not (args.diff and would_change):
        parts.append("All checks passed.")
    if errors:
        parts.append(f"{errors} file{'s' * (errors != 1)} could not be checked.")
    print(" ".join(parts), file=sys.stderr)
    if errors:
        return EXIT_ERROR
    if args.exit_zero:
        return EXIT_CLEAN
    if findings or (args.diff and would_change) or (args.fix and args.exit_non_zero_on_fix and fixed):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _explain(code: str) -> int:
    page = page_for(code)
    if code.upper() not in rule_codes() or page is None:
        print(f"torchlint: error: unknown rule {code!r} (see `torchlint --list-rules`)", file=sys.stderr)
        return EXIT_ERROR
    print(page.text.rstrip())
    return EXIT_CLEAN


def _list_rules() -> int:
    for rule in all_rules():
        default = "on " if rule.default else "off"
        fix = rule.fix_safety.value if rule.fix_safety else "none"
        print(f"{rule.code}  {rule.name:<32} default:{default}  fix:{fix:<6}  {rule.summary}")
    return EXIT_CLEAN


def _verify(rules: Sequence) -> int:
    try:
        import torch
    except ImportError:
        print(
            "torchlint: --verify runs every rule's examples with real torch, which is not installed.\n"
            "Install it with: pip install 'torchlint[verify]'  (or pip install torch)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    from torchlint.verify import has_torch_evidence, verify_rules

    for rule in rules:
        if not has_torch_evidence(rule):
            print(f"{rule.code} {rule.name}: skipped — not about torch behaviour (its page has no `python bad` example)")
    verdicts = verify_rules(rules)
    for verdict in verdicts:
        status = "confirmed" if verdict.confirmed else "NOT reproduced"
        print(f"{verdict.code} {verdict.name}: {status} with torch {torch.__version__} — {verdict.detail}")
    failed = sum(not v.confirmed for v in verdicts)
    print(f"{len(verdicts) - failed} of {len(verdicts)} rules confirmed.", file=sys.stderr)
    return EXIT_FINDINGS if failed else EXIT_CLEAN
