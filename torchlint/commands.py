"""The subcommands besides ``check`` (``rule``, ``clean``, ``version``) and the options that
answer a question instead of linting (``--list-rules``, ``--show-settings``, ``--show-files``,
``--verify``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from torchlint import __version__
from torchlint.cache import CACHE_DIR_NAME, default_cache_dir
from torchlint.settings import Settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _parser(prog: str, description: str):
    from torchlint.cli import Parser

    return Parser(prog=prog, description=description)


def _unknown_rule(code: str) -> int:
    from torchlint.rulebook import rule_index
    from torchlint.suggest import did_you_mean

    hint = did_you_mean(code.upper(), rule_index())
    print(f"torchlint: error: unknown rule {code!r}{hint} (see `torchlint rule --all`)", file=sys.stderr)
    return EXIT_ERROR


# ---------------------------------------------------------------- rule
def rule(argv: Sequence[str]) -> int:
    """``torchlint rule CODE`` / ``--all``: rule pages as Markdown, or JSON objects."""
    parser = _parser("torchlint rule", "Explain a rule: its page from the rule book.")
    parser.add_argument("code", nargs="?", help="the rule's code, e.g. TL001")
    parser.add_argument("--all", action="store_true", help="every rule")
    parser.add_argument("--output-format", "--format", dest="format", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    if args.all == bool(args.code):
        parser.error("give a rule code or --all")
    from torchlint.rulebook import rule_index

    index = rule_index()
    codes = list(index) if args.all else [args.code.upper()]
    if codes[0] not in index:
        return _unknown_rule(args.code)
    if args.format == "json":
        entries = [rule_as_json(code) | {"explanation": _page(code).text} for code in codes]
        print(json.dumps(entries if args.all else entries[0], indent=2, ensure_ascii=False))
    else:
        print("\n\n".join(_page(code).text.rstrip() for code in codes))
    return EXIT_CLEAN


def _page(code: str):
    from torchlint.rulebook import page_for

    page = page_for(code)
    assert page is not None, code  # every code in the index has a page
    return page


def rule_as_json(code: str) -> dict[str, Any]:
    """A rule as ``--list-rules --output-format json`` prints it (``torchlint rule`` adds its page)."""
    from torchlint.rulebook import rule_url
    from torchlint.rules import rule_by_code

    found = rule_by_code(code)
    assert found is not None, code
    return {"code": found.code, "name": found.name, "summary": found.summary, "default": found.default,
            "fix": found.fix_safety.value if found.fix_safety else "none", "url": rule_url(code)}


def explain(code: str) -> int:
    """``--explain CODE``: the rule's page (like ``torchlint rule CODE``)."""
    return rule([code])


def list_rules(*, as_json: bool = False) -> int:
    from torchlint.rules import all_rules

    if as_json:
        print(json.dumps([rule_as_json(r.code) for r in all_rules()], indent=2, ensure_ascii=False))
        return EXIT_CLEAN
    for found in all_rules():
        default = "on " if found.default else "off"
        fix = found.fix_safety.value if found.fix_safety else "none"
        print(f"{found.code}  {found.name:<32} default:{default}  fix:{fix:<6}  {found.summary}")
    return EXIT_CLEAN


# ---------------------------------------------------------------- version
def version(argv: Sequence[str]) -> int:
    parser = _parser("torchlint version", "Print torchlint's version.")
    parser.add_argument("--output-format", "--format", dest="format", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    if args.format == "json":
        print(json.dumps({"version": __version__}))
    else:
        print(f"torchlint {__version__}")
    return EXIT_CLEAN


# ---------------------------------------------------------------- clean
def clean(argv: Sequence[str]) -> int:
    """Remove the results cache: the project's (or ``--cache-dir``) and any ``.torchlint_cache``
    under the current directory, like ``ruff clean``.  Only directories torchlint created
    (they hold its ``CACHEDIR.TAG``) are removed."""
    parser = _parser("torchlint clean", "Remove the results cache (.torchlint_cache) of this project.")
    parser.add_argument("--cache-dir", metavar="PATH", help="the cache to remove (default: the project's)")
    args = parser.parse_args(argv)
    from torchlint.config import settings_for
    from torchlint.settings import SettingsError

    try:
        settings = settings_for([])
    except SettingsError:
        settings = Settings()
    candidates = [Path(args.cache_dir) if args.cache_dir else default_cache_dir(settings)]
    candidates += _caches_under(Path.cwd())
    removed = 0
    for directory in dict.fromkeys(path.absolute() for path in candidates):
        if (directory / "CACHEDIR.TAG").is_file() and b"torchlint" in (directory / "CACHEDIR.TAG").read_bytes():
            shutil.rmtree(directory, ignore_errors=True)
            print(f"Removed {directory}")
            removed += 1
    if not removed:
        print("No cache to remove.")
    return EXIT_CLEAN


def _caches_under(top: Path) -> Iterable[Path]:
    for directory, dirnames, _ in os.walk(top):
        if CACHE_DIR_NAME in dirnames:
            yield Path(directory) / CACHE_DIR_NAME
        dirnames[:] = [d for d in dirnames if d not in (CACHE_DIR_NAME, ".git", "node_modules", ".venv", "venv")]


# ---------------------------------------------------------------- --show-settings, --show-files
def config_file(args: argparse.Namespace, settings: Settings) -> str | None:
    """The configuration file the settings were read from (None: the defaults)."""
    if args.isolated:
        return None
    if args.config:
        return str(Path(args.config).absolute())
    found = Path(settings.project_root, "pyproject.toml") if settings.project_root else None
    return str(found) if found is not None and found.is_file() else None


def show_settings(args: argparse.Namespace, settings: Settings) -> int:
    """The settings in effect, as TOML-like ``key = value`` lines, and the rules they enable."""
    from torchlint.settings import resolve_rules

    print(f"# configuration: {config_file(args, settings) or 'none (defaults)'}")
    for field in dataclasses.fields(settings):
        if field.name in ("extra", "fix_edits"):  # internal
            continue
        value = getattr(settings, field.name)
        value = value.value if hasattr(value, "value") else value
        print(f"{field.name.replace('_', '-')} = {json.dumps(value, default=str)}")
    print(f"# enabled rules: {', '.join(r.code for r in resolve_rules(settings))}")
    return EXIT_CLEAN


def show_files(args: argparse.Namespace, found: Iterable[tuple[str, str | None]]) -> int:
    errors = 0
    for path, problem in found:
        if problem is None:
            print(path)
        else:
            print(f"{path}: error: {problem}", file=sys.stderr)
            errors += 1
    return EXIT_ERROR if errors else EXIT_CLEAN


# ---------------------------------------------------------------- --verify
def verify(rules: Sequence | None) -> int:
    """Prove the rules (all of them when None) with the installed torch."""
    try:
        import torch
    except ImportError:
        print(
            "torchlint: --verify runs every rule's examples with real torch, which is not installed.\n"
            "Install it with: pip install torch  (or, in a clone of torchlint: pip install '.[verify]')",
            file=sys.stderr,
        )
        return EXIT_ERROR
    from torchlint.rules import all_rules
    from torchlint.verify import has_torch_evidence, verify_rules

    rules = list(all_rules()) if rules is None else rules
    for found in rules:
        if not has_torch_evidence(found):
            print(f"{found.code} {found.name}: skipped — not about torch behaviour (its page has no `python bad` example)")
    verdicts = verify_rules(rules)
    for verdict in verdicts:
        status = "confirmed" if verdict.confirmed else "NOT reproduced"
        print(f"{verdict.code} {verdict.name}: {status} with torch {torch.__version__} — {verdict.detail}")
    failed = sum(not v.confirmed for v in verdicts)
    print(f"{len(verdicts) - failed} of {len(verdicts)} rules confirmed.", file=sys.stderr)
    return EXIT_FINDINGS if failed else EXIT_CLEAN
