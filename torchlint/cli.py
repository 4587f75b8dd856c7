"""The ``torchlint`` command: ``torchlint [check] [options] [paths]`` and the other
subcommands (``rule``, ``server``, ``clean``, ``version``), like ruff's."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

from torchlint import __version__
from torchlint.cache import Cache, default_cache_dir
from torchlint.config import settings_for
from torchlint.datatypes import FileReport, FixStyle
from torchlint.files import discover
from torchlint.output import (
    DEFAULT_FORMAT, FORMATS, FORMATS_WITH_EDITS, FORMATS_WITH_SOURCE, FORMATS_WITH_SUMMARY, OutputOptions,
)
from torchlint.parallel import lint_files
from torchlint.runner import add_noqa_to_file
from torchlint.settings import Settings, SettingsError, resolve_rules, validate_selectors
from torchlint.summary import Mode, check_summary, diff_summary, fix_summary

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
STDIN = "-"
# The subcommands, in the order `--help` lists them; `check` is also what a bare `torchlint [paths]` runs.
COMMANDS = {
    "check": "lint files and directories (the default command)",
    "rule": "explain a rule (or --all), as text or JSON",
    "server": "run the language server (LSP over stdin/stdout; needs the `lsp` extra)",
    "clean": "remove the results cache (.torchlint_cache)",
    "version": "print torchlint's version",
}
NO_FILES_WARNING = "torchlint: warning: No Python files found under the given path(s)"


def _codes(value: str) -> tuple[str, ...]:
    return tuple(part.strip().upper() for part in value.split(",") if part.strip())


def _patterns(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


class Parser(argparse.ArgumentParser):
    """argparse with ruff's manners: no abbreviated options, and a mistyped option, choice
    or command gets a did-you-mean tip instead of only the usage."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        tip = self._tip(message)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n" + (f"\n  tip: {tip}\n" if tip else ""))

    def _tip(self, message: str) -> str | None:
        from torchlint.suggest import closest

        unknown = re.search(r"unrecognized arguments: (.*)", message)
        if unknown:
            options = [name for name in self._option_string_actions if name.startswith("--")]
            for word in unknown.group(1).split():
                if word.startswith("-"):
                    match = closest(word.split("=", 1)[0], options)
                    if match:
                        return f"a similar argument exists: '{match}'"
            return None
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            match = closest(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
            return f"a similar value exists: '{match}'" if match else None
        return None


def build_parser(prog: str = "torchlint") -> argparse.ArgumentParser:
    """The parser of ``torchlint check`` (and of the bare ``torchlint [paths]``)."""
    top = prog == "torchlint"
    commands = "".join(f"\n  {name:<9} {help_}" for name, help_ in COMMANDS.items())
    parser = Parser(
        prog=prog,
        usage=("%(prog)s [check] [options] [paths ...]\n       %(prog)s {rule,server,clean,version} ..." if top
               else "%(prog)s [options] [paths ...]"),
        description="Find and fix autograd mistakes in PyTorch training code before it runs."
                    + (f"\n\ncommands:{commands}\n\n`torchlint [paths]` is `torchlint check [paths]`;"
                       " `torchlint COMMAND --help` tells more." if top else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", default=None,
                        help="files or directories to lint (default: .); `-` reads from stdin")
    rules = parser.add_argument_group("rule selection (override [tool.torchlint] in pyproject.toml)")
    rules.add_argument("--select", type=_codes,
                       help="comma-separated codes or prefixes to enable, opt-in rules included (`TL`, `ALL`: every "
                            "rule); replaces the default set")
    rules.add_argument("--extend-select", type=_codes, default=(), help="codes or prefixes to enable in addition")
    rules.add_argument("--ignore", type=_codes, default=(), help="codes or prefixes to disable")
    files = parser.add_argument_group("files")
    files.add_argument("--exclude", type=_patterns, help="comma-separated patterns to skip (replaces the default list)")
    files.add_argument("--extend-exclude", type=_patterns, default=(), help="patterns to skip in addition")
    files.add_argument("--force-exclude", action="store_true", default=False,
                       help="apply the excludes to paths named on the command line too (pre-commit's hooks do)")
    files.add_argument("--no-force-exclude", dest="force_exclude", action="store_false", help=argparse.SUPPRESS)
    files.add_argument("--config", metavar="PATH", help="read settings from this pyproject.toml instead of searching")
    files.add_argument("--isolated", action="store_true", help="ignore all configuration files")
    files.add_argument("--stdin-filename", metavar="PATH",
                       help="the name of the file read from stdin (for messages, per-file-ignores, config)")
    fixing = parser.add_argument_group("fixing")
    fixing.add_argument("--fix", action="store_true", default=None,
                        help="apply safe fixes in place (with `-`: print the fixed source)")
    fixing.add_argument("--no-fix", dest="fix", action="store_false", help="do not fix (overrides an earlier --fix)")
    fixing.add_argument("--fix-only", action="store_true",
                        help="apply fixes, but neither report nor fail on what is left (implies --fix)")
    fixing.add_argument("--unsafe-fixes", action="store_true", default=None, help="also apply fixes that may change behaviour")
    fixing.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false", help="never apply unsafe fixes")
    fixing.add_argument("--diff", action="store_true", help="show fixes as a unified diff and change nothing")
    fixing.add_argument("--fix-style", choices=[s.value for s in FixStyle], help="how updates are rewritten (default: data)")
    fixing.add_argument("--show-fixes", action="store_true",
                        help="mark the findings that have a fix ([*] safe, [unsafe fix]) in concise and grouped output")
    fixing.add_argument("--no-show-fixes", dest="show_fixes", action="store_false", help=argparse.SUPPRESS)
    fixing.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` comments to silence every current finding")
    report = parser.add_argument_group("reporting")
    report.add_argument("--output-format", "--format", dest="format", choices=list(FORMATS), default=DEFAULT_FORMAT,
                        metavar="FORMAT", help=f"output format: {', '.join(FORMATS)} (default: {DEFAULT_FORMAT}; "
                                               "flake8 is another name for concise)")
    report.add_argument("--output-file", "-o", metavar="PATH", help="write the findings (and summary) to this file")
    report.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead")
    report.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    report.add_argument("--exit-non-zero-on-fix", action="store_true",
                        help="exit 1 when --fix changed a file, even if no finding remains (for pre-commit)")
    report.add_argument("--quiet", "-q", action="store_true", help="print the findings only, no summary")
    report.add_argument("--silent", "-s", action="store_true",
                        help="print nothing (the exit code still says whether there are findings)")
    report.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                        help="colour the text formats (auto: on a terminal without NO_COLOR)")
    report.add_argument("--verbose", "-v", action="store_true",
                        help="say which configuration is used, how many files are checked and how long it took")
    report.add_argument("--watch", "-w", action="store_true", help="lint again whenever a file or pyproject.toml changes")
    info = parser.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="print a rule's page from the rule book (= `torchlint rule CODE`)")
    info.add_argument("--list-rules", action="store_true", help="list the rules (as JSON with --output-format json)")
    info.add_argument("--show-settings", action="store_true", help="print the settings in effect and exit")
    info.add_argument("--show-files", action="store_true", help="print the files that would be checked and exit")
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
    command = given[0] if given and given[0] in COMMANDS else None
    if command == "server":  # the language server; lazy so linting never imports pygls
        from torchlint.lsp import main as run_server

        return run_server(given[1:])
    if command in ("rule", "clean", "version"):
        from torchlint import commands

        return getattr(commands, command)(given[1:])
    args = build_parser("torchlint check" if command else "torchlint").parse_args(given[1:] if command else given)
    args.fix = bool(args.fix or args.fix_only)
    return check(args)


def check(args: argparse.Namespace) -> int:
    """``torchlint check``: the options are parsed; lint, fix, or answer an information option."""
    from torchlint import commands

    if args.explain:
        return commands.explain(args.explain)
    if args.list_rules:
        return commands.list_rules(as_json=args.format == "json")
    settings = _settings(args)
    if settings is None:
        return EXIT_ERROR
    if args.show_settings:
        return commands.show_settings(args, settings)
    # The rules (and libcst) are imported only where files are analysed: a lint run whose
    # every result is cached never imports them (see lint_files).
    if args.verify:
        return commands.verify(resolve_rules(settings) if args.select or args.extend_select else None)
    if _reads_stdin(args):
        if args.force_exclude and args.stdin_filename and _excluded(args.stdin_filename, settings):
            if args.fix:  # an editor replaces the buffer with stdout: give it back unchanged
                sys.stdout.buffer.write(sys.stdin.buffer.read())
            return EXIT_CLEAN
        return _lint_stdin(args, settings, resolve_rules(settings))
    if STDIN in (args.paths or []):
        print("torchlint: error: `-` (stdin) cannot be combined with other paths", file=sys.stderr)
        return EXIT_ERROR
    if args.show_files:
        return commands.show_files(args, _discover(args, settings))
    if args.add_noqa:
        return _add_noqa(args, settings, resolve_rules(settings))
    if args.watch:
        from torchlint.watch import watch

        return watch(lambda: _lint_once(args), args.paths or ["."], clear=not args.output_file and sys.stdout.isatty())
    return _lint_once(args, settings)


def _settings(args: argparse.Namespace) -> Settings | None:
    """The settings, or None after saying on stderr what is wrong with them."""
    try:
        return settings_from_args(args)
    except SettingsError as error:
        print(f"torchlint: error: {error}", file=sys.stderr)
        return None


def _lint_once(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """One lint (or fix) run, its report and summary; the settings are read again when not given."""
    settings = settings or _settings(args)
    if settings is None:
        return EXIT_ERROR
    try:
        with _output(args) as out:
            return _lint(args, settings, out)
    except KeyboardInterrupt:  # files are written atomically: each is unchanged or fully fixed
        print("torchlint: interrupted", file=sys.stderr)
        return 130
    except _OutputFileError as error:
        print(f"torchlint: error: cannot write {args.output_file}: {error}", file=sys.stderr)
        return EXIT_ERROR


class _OutputFileError(Exception):
    pass


@contextmanager
def _output(args: argparse.Namespace) -> Iterator[TextIO]:
    """Where findings and summary go: stdout, or ``--output-file`` (its directory is created)."""
    if not args.output_file:
        yield sys.stdout
        return
    path = Path(args.output_file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "w", encoding="utf-8", newline="")
    except OSError as error:
        raise _OutputFileError(error.strerror or str(error)) from None
    with handle:
        yield handle


def _discover(args: argparse.Namespace, settings: Settings):
    root = Path(settings.project_root) if settings.project_root else None
    return discover(args.paths or ["."], settings.all_excludes, respect_gitignore=settings.respect_gitignore, root=root,
                    force_exclude=args.force_exclude)


def _excluded(path: str, settings: Settings) -> bool:
    from torchlint.files import is_excluded_path

    root = Path(settings.project_root) if settings.project_root else Path.cwd()
    return is_excluded_path(Path(path), root, settings.all_excludes)


def _print_error(path: str, error: str) -> None:
    # "3:5: syntax error ..." and "cell 2:3:5: ..." start with a position: path:line:col: error: ...
    if error[:1].isdigit() or error.startswith("cell "):
        where, _, error = error.partition(": ")
        path = f"{path}:{where}"
    print(f"{path}: error: {error}", file=sys.stderr)


def _lint(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    started = time.perf_counter()
    errors = 0
    paths: list[str] = []
    for path, problem in _discover(args, settings):
        if problem is not None:
            if not args.silent:
                print(f"{path}: error: {problem}", file=sys.stderr)
                _suggest_command(path)
            errors += 1
            continue
        paths.append(path)
    if not paths and not errors and not args.silent:
        print(NO_FILES_WARNING, file=sys.stderr)
    if args.verbose:
        from torchlint.commands import config_file

        _verbose(f"configuration: {config_file(args, settings) or 'none (defaults)'}")
        _verbose(f"{len(paths)} file{'s' * (len(paths) != 1)} to check")
    # Cached results, then the rest in parallel; reports in path order (torchlint/parallel.py).
    # Rules None: the settings' rules, resolved only if some file is not in the cache.
    reports = lint_files(paths, None, settings, fix=args.fix or args.diff, write=args.fix and not args.diff,
                         jobs=args.jobs, cache=_cache(args, settings), with_source=_shows_source(args))
    for report in reports:
        if report.error is not None:
            if not args.silent:
                _print_error(report.path, report.error)
            errors += 1
    if args.diff:
        if not args.silent:
            for report in reports:
                out.write(report.diff)
    elif not args.fix_only:
        _report(args, settings, reports, out)
    if args.verbose:
        _verbose(f"checked {len(paths)} file{'s' * (len(paths) != 1)} in {time.perf_counter() - started:.2f}s")
    return _summarize(args, reports, errors, out, settings)


def _verbose(message: str) -> None:
    print(f"torchlint: {message}", file=sys.stderr)


def _suggest_command(path: str) -> None:
    """`torchlint chek .`: the missing "file" was meant as a command."""
    from torchlint.suggest import closest

    match = closest(path, COMMANDS) if "/" not in path and "." not in path else None
    if match:
        print(f"  tip: a similar command exists: '{match}' (torchlint {match} ...)", file=sys.stderr)


def _cache(args: argparse.Namespace, settings: Settings) -> Cache | None:
    if args.no_cache:
        return None
    directory = Path(args.cache_dir) if args.cache_dir else default_cache_dir(settings)
    return Cache(directory, settings)


def _shows_source(args: argparse.Namespace) -> bool:
    return args.format in FORMATS_WITH_SOURCE and not args.statistics and not args.diff


def output_options(args: argparse.Namespace, settings: Settings) -> OutputOptions:
    colour = {"always": True, "never": False}.get(args.color)
    return OutputOptions(colour=colour, rule_url=settings.rule_url, show_fixes=args.show_fixes)


def _report(args: argparse.Namespace, settings: Settings, reports: list[FileReport], out: TextIO) -> None:
    if args.silent:
        return
    if args.statistics:
        from torchlint.output.text import format_statistics

        format_statistics(reports, out, as_json=args.format == "json")
    else:
        FORMATS[args.format](reports, out, output_options(args, settings))


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
        _report(args, settings, [report], sys.stderr)
        out = sys.stderr
    elif args.diff:
        sys.stdout.write(report.diff)
        out = sys.stdout
    else:
        _report(args, settings, [report], sys.stdout)
        out = sys.stdout
    return _summarize(args, [report], int(report.error is not None), out, settings)


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


def _summarize(args: argparse.Namespace, reports: list[FileReport], errors: int, out: TextIO,
               settings: Settings) -> int:
    """Print the run's summary (as ruff does: on stdout, after the findings of a text format
    or the diff) and return the exit code."""
    mode = Mode(fix_only=args.fix_only, unsafe_fixes=settings.unsafe_fixes)
    would_change = any(report.diff for report in reports)
    if args.diff:
        lines, stream = diff_summary(reports, mode), out
    elif args.fix:
        lines, stream = fix_summary(reports, mode, errors), out
    else:
        lines, stream = check_summary(reports, mode, errors), out
    shows_summary = args.diff or args.fix_only or args.format in FORMATS_WITH_SUMMARY or (
        args.statistics and args.format != "json")
    if not (args.quiet or args.silent) and shows_summary:
        stream.write("".join(line + "\n" for line in lines))
    if errors and not args.silent:
        print(f"torchlint: {errors} file{'s' * (errors != 1)} could not be checked.", file=sys.stderr)
    if errors:
        return EXIT_ERROR
    if args.exit_zero:
        return EXIT_CLEAN
    if args.diff:  # like ruff: 1 when there is something to apply, whatever remains
        return EXIT_FINDINGS if would_change else EXIT_CLEAN
    if args.fix and args.exit_non_zero_on_fix and any(report.fixed for report in reports):
        return EXIT_FINDINGS
    if args.fix_only:
        return EXIT_CLEAN
    return EXIT_FINDINGS if any(report.findings for report in reports) else EXIT_CLEAN
