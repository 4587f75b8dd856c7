"""``[tool.torchlint]`` in ``pyproject.toml``: finding it and turning it into ``Settings``.

Like ruff, the nearest ``pyproject.toml`` that has a ``[tool.torchlint]`` table
wins (files without the table are passed over), and relative paths in it
(``exclude``, ``per-file-ignores``) start at that file's directory.  Unknown keys
and bad values raise ``ConfigError`` naming the file and the key.

To add a key: add one entry to ``KEYS`` (and a field to ``Settings``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from torchlint.datatypes import FixStyle
from torchlint.settings import Settings, SettingsError, validate_selectors

CONFIG_NAME = "pyproject.toml"


class ConfigError(SettingsError):
    """The configuration file is unreadable or invalid (exit code 2)."""


Parser = Callable[[str, Any], Any]


def _strings(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"`{key}` must be a list of strings, got {_show(value)}")
    return tuple(value)


def _selectors(key: str, value: Any) -> tuple[str, ...]:
    codes = tuple(code.strip().upper() for code in _strings(key, value))
    try:
        validate_selectors(codes)
    except SettingsError as error:
        raise ConfigError(f"`{key}`: {error}") from None
    return codes


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"`{key}` must be true or false, got {_show(value)}")
    return value


def _fix_style(key: str, value: Any) -> FixStyle:
    choices = [style.value for style in FixStyle]
    if value not in choices:
        raise ConfigError(f"`{key}` must be one of {', '.join(map(repr, choices))}, got {_show(value)}")
    return FixStyle(value)


def _url(key: str, value: Any) -> str:
    if not isinstance(value, str) or "://" not in value:
        raise ConfigError(f"`{key}` must be a URL such as \"https://example.org/rules/{{code}}.html\", got {_show(value)}")
    try:
        value.format(code="TL001", name="rebind-update", file="TL001-rebind-update.md")
    except (KeyError, IndexError, ValueError):
        raise ConfigError(f"`{key}` may use only {{code}}, {{name}} and {{file}}, got {_show(value)}") from None
    return value


def _per_file_ignores(key: str, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"`{key}` must be a table of \"glob\" = [\"CODE\", ...], got {_show(value)}")
    return tuple((pattern, _selectors(f'{key}."{pattern}"', codes)) for pattern, codes in value.items())


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    return repr(value)


# key in [tool.torchlint] -> (Settings field, parser)
KEYS: dict[str, tuple[str, Parser]] = {
    "select": ("select", _selectors),
    "extend-select": ("extend_select", _selectors),
    "ignore": ("ignore", _selectors),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
    "exclude": ("exclude", _strings),
    "extend-exclude": ("extend_exclude", _strings),
    "fix-style": ("fix_style", _fix_style),
    "unsafe-fixes": ("unsafe_fixes", _boolean),
    "respect-gitignore": ("respect_gitignore", _boolean),
    "rule-url": ("rule_url", _url),
}


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 ({error.reason})") from None


def _table(data: dict[str, Any], path: Path) -> dict[str, Any] | None:
    tool = data.get("tool")
    table = tool.get("torchlint") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.torchlint` must be a table, got {_show(table)}")
    return table


def has_torchlint_table(path: Path) -> bool:
    try:
        return _table(read_toml(path), path) is not None
    except ConfigError:
        return True  # a broken file that might be ours is reported, not skipped


def find_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.torchlint]`` table in ``start``
    (a directory, or a file's directory) or above it."""
    start = start.absolute()
    if not start.is_dir():
        start = start.parent
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file() and has_torchlint_table(candidate):
            return candidate
    return None


def load_config(path: Path, base: Settings = Settings()) -> Settings:
    """``base`` updated with the ``[tool.torchlint]`` table of ``path`` (which may lack the table)."""
    table = _table(read_toml(path), path) or {}
    values: dict[str, Any] = {"project_root": str(path.absolute().parent)}
    for key, value in table.items():
        if key not in KEYS:
            from torchlint.suggest import closest

            match = closest(key, KEYS)
            hint = f"did you mean `{match}`? " if match else ""
            raise ConfigError(f"{path}: [tool.torchlint] unknown key `{key}` ({hint}known keys: {', '.join(KEYS)})")
        field_name, parse = KEYS[key]
        try:
            values[field_name] = parse(key, value)
        except ConfigError as error:
            raise ConfigError(f"{path}: [tool.torchlint] {error}") from None
    return dataclasses.replace(base, **values)


def common_directory(paths: Sequence[str]) -> Path:
    """Where the config search starts for these paths: their deepest common directory."""
    if not paths:
        return Path.cwd()
    directories = [Path(p).absolute() for p in paths]
    directories = [p if p.is_dir() else p.parent for p in directories]
    common = directories[0]
    for directory in directories[1:]:
        while common != common.parent and not directory.is_relative_to(common):
            common = common.parent
    return common


def settings_for(paths: Sequence[str], config: str | None = None, *, isolated: bool = False) -> Settings:
    """The settings for a run over ``paths``: ``config`` when given, else the nearest
    ``[tool.torchlint]`` above the paths (``isolated``: none)."""
    if isolated:
        return Settings()
    if config is not None:
        return load_config(Path(config))
    found = find_config(common_directory(paths))
    return load_config(found) if found is not None else Settings()
