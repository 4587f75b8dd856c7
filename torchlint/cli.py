"""The ``torchlint`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from torchlint import __version__
from torchlint.files import discover
from torchlint.output import FORMATS
from torchlint.rule import FixSafety, FixStyle
from torchlint.rulebook import page_for
from torchlint.rules import all_rules, rule_by_code
from torchlint.runner import FileReport, check_file, fix_file
from torchlint.settings import Settings, SettingsError, resolve_rules, validate_selectors

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(value: str) -> tuple[str, ...]:
    return tuple(part.strip().upper() for part in value.split(",") if part.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint",
        description="Find and fix autograd mistakes in PyTorch training code before it runs.",
    )
    parser.add_argument("paths", nargs="*", default=None, help="files or directories to lint (default: .)")
    parser.add_argument("--select", type=_codes, help="comma-separated codes or prefixes to enable (replaces the default set)")
    parser.add_argument("--extend-select", type=_codes, default=(), help="codes or prefixes to enable in addition")
    parser.add_argument("--ignore", type=_codes, default=(), help="codes or prefixes to disable")
    parser.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    parser.add_argument("--unsafe-fixes", action="store_true", default=None, help="also apply fixes that may change behaviour")
    parser.add_argument("--diff", action="store_true", help="show fixes as a unified diff and change nothing")
    parser.add_argument("--fix-style", choices=[s.value for s in FixStyle], help="how updates are rewritten (default: data)")
    parser.add_argument("--format", choices=sorted(FORMATS), default="flake8", help="output format (default: flake8)")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    parser.add_argument("--explain", metavar="CODE", help="print a rule's page from the rule book")
    parser.add_argument("--list-rules", action="store_true", help="list the rules")
    parser.add_argument("--verify", action="store_true", help="prove every selected rule with the installed torch")
    parser.add_argument("--version", action="version", version=f"torchlint {__version__}")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    for selectors in (args.select or (), args.extend_select, args.ignore):
        validate_selectors(selectors)
    return Settings(
        select=args.select,
        extend_select=args.extend_select,
        ignore=args.ignore,
        fix_style=FixStyle(args.fix_style) if args.fix_style else FixStyle.DATA,
        unsafe_fixes=bool(args.unsafe_fixes),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except SettingsError as error:
        print(f"torchlint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if args.explain:
        return _explain(args.explain)
    if args.list_rules:
        return _list_rules()
    rules = resolve_rules(settings)
    if args.verify:
        return _verify(rules if args.select or args.extend_select else list(all_rules()))
    return _lint(args, settings, rules)


def _lint(args: argparse.Namespace, settings: Settings, rules: list) -> int:
    reports: list[FileReport] = []
    errors = 0
    for path, problem in discover(args.paths or ["."], settings.all_excludes, respect_gitignore=settings.respect_gitignore):
        if problem is not None:
            print(f"{path}: error: {problem}", file=sys.stderr)
            errors += 1
            continue
        if args.fix or args.diff:
            report = fix_file(path, rules, settings, write=args.fix and not args.diff)
        else:
            report = check_file(path, rules, settings)
        if report.error is not None:
            print(f"{path}:{report.error}" if report.error[:1].isdigit() else f"{path}: error: {report.error}",
                  file=sys.stderr)
            errors += 1
        reports.append(report)
    if args.diff:
        for report in reports:
            sys.stdout.write(report.diff)
    else:
        FORMATS[args.format](reports, sys.stdout)
    return _summarize(args, reports, errors)


def _summarize(args: argparse.Namespace, reports: list[FileReport], errors: int) -> int:
    findings = [f for r in reports for f in r.findings]
    fixed = sum(r.fixed for r in reports)
    would_change = sum(1 for r in reports if r.diff)
    parts: list[str] = []
    if args.fix and fixed:
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
    if findings or (args.diff and would_change):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _explain(code: str) -> int:
    rule = rule_by_code(code)
    page = page_for(code)
    if rule is None or page is None:
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
    from torchlint.verify import verify_rules

    verdicts = verify_rules(rules)
    for verdict in verdicts:
        status = "confirmed" if verdict.confirmed else "NOT reproduced"
        print(f"{verdict.code} {verdict.name}: {status} with torch {torch.__version__} — {verdict.detail}")
    failed = sum(not v.confirmed for v in verdicts)
    print(f"{len(verdicts) - failed} of {len(verdicts)} rules confirmed.", file=sys.stderr)
    return EXIT_FINDINGS if failed else EXIT_CLEAN
