"""Effective settings (config file merged with the command line) and rule selection."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchlint.datatypes import FixStyle, RuleOptions
from torchlint.rules import all_rules, rule_codes

if TYPE_CHECKING:
    from torchlint.rule import Rule

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".env", "env", "build", "dist", "__pycache__",
    ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchlint_cache", "node_modules",
    ".eggs", "*.egg-info", "site-packages", ".ipynb_checkpoints",
)


class SettingsError(Exception):
    """Invalid configuration or option value (exit code 2)."""


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] | None = None  # None: the default-on rules
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    fix_style: FixStyle | None = None  # None: "data", or what an enabled rule prefers
    unsafe_fixes: bool = False
    respect_gitignore: bool = True
    extra: dict[str, object] = field(default_factory=dict, compare=False)
    # Where relative paths in exclude and per-file-ignores start: the config file's directory.
    project_root: str | None = None
    # Compute each finding's fix as text edits (for the json and full output formats, and editors).
    fix_edits: bool = False
    # Where rule links point (``rule-url``): None for the pages shipped with the package.
    rule_url: str | None = field(default=None, compare=False, repr=False)

    @property
    def rule_options(self) -> RuleOptions:
        return RuleOptions(fix_style=self.fix_style)

    @property
    def all_excludes(self) -> tuple[str, ...]:
        return self.exclude + self.extend_exclude


def _matches(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def validate_selectors(selectors: Iterable[str]) -> None:
    codes = rule_codes()  # from the rule modules' names: the rules themselves are not imported
    for selector in selectors:
        if selector != "ALL" and not any(code.startswith(selector) for code in codes):
            from torchlint.suggest import closest

            match = closest(selector, codes)
            hint = f"did you mean {match!r}? " if match else ""
            raise SettingsError(f"unknown rule selector {selector!r} ({hint}see `torchlint --list-rules`)")


def resolve_rules(settings: Settings, ignore_extra: Sequence[str] = ()) -> list[type[Rule]]:
    """Enabled rules: like ruff, ``select`` replaces the default set and ``extend-select`` adds to it.

    Without ``select`` the default-on rules run.  A selector enables every rule it
    names, opt-in ones included, as in ruff: a code, a prefix (``TL``, ``TL0``) or
    ``ALL``.  This imports the rules (and libcst): call it only when files are to be
    analysed.
    """
    rules = all_rules()

    def selected(rule: type[Rule], selectors: Iterable[str]) -> bool:
        return any(_matches(rule.code, selector) for selector in selectors)

    if settings.select is None:
        enabled = [rule for rule in rules if rule.default]
    else:
        enabled = [rule for rule in rules if selected(rule, settings.select)]
    enabled += [rule for rule in rules if rule not in enabled and selected(rule, settings.extend_select)]
    ignored = (*settings.ignore, *ignore_extra)
    # An exact selection beats a prefix ignore (ruff's specificity rule, simplified).
    exact = set(settings.select or ()) | set(settings.extend_select)
    return sorted(
        (r for r in enabled if r.code in exact or not any(_matches(r.code, i) for i in ignored)),
        key=lambda r: r.code,
    )
