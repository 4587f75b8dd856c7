"""The settings that apply to a document: its project's ``pyproject.toml``
(``[tool.torchlint]``), found and read by ``torchlint.config`` exactly as the CLI
finds and reads it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torchlint.config import find_config, load_config

# The directory walk's own matcher, so the server and `torchlint DIR` skip the same files.
from torchlint.files import is_excluded
from torchlint.rule import Rule
from torchlint.runner import rules_for_path
from torchlint.settings import Settings, SettingsError, resolve_rules


@dataclass(frozen=True)
class Project:
    settings: Settings
    root: Path | None  # where relative paths in the settings start
    error: str | None = None  # the configuration is invalid; the defaults are used meanwhile

    def rules_for(self, path: Path | None) -> list[type[Rule]] | None:
        """The rules to run on ``path``; None when the settings exclude it."""
        rules = resolve_rules(self.settings)
        if path is None:
            return rules
        if self.excludes(path):
            return None
        return rules_for_path(str(path), rules, self.settings)

    def excludes(self, path: Path) -> bool:
        """Whether the settings exclude the file (as ``torchlint --force-exclude FILE`` does)."""
        relative = self._relative(path)
        # Outside the project only the file's own name can be excluded, as for `torchlint FILE`.
        return self.excluded(relative if relative is not None else path.name)

    def excluded(self, relative: str) -> bool:
        """Whether a directory walk from the project root skips this file (or a directory above it)."""
        parts = relative.split("/")
        return any(
            is_excluded(part, "/".join(parts[: depth + 1]), self.settings.all_excludes)
            for depth, part in enumerate(parts)
        )

    def _relative(self, path: Path) -> str | None:
        if self.root is None:
            return None
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return None


def load_project(document: Path | None, workspace_root: Path | None) -> Project:
    """The project of a document (None: an unsaved one, which gets the workspace's settings)."""
    start = document.parent if document is not None else workspace_root
    config = find_config(start) if start is not None else None
    if config is None:
        return Project(Settings(), workspace_root)
    try:
        return Project(load_config(config), config.parent)
    except SettingsError as error:  # ConfigError names the file and the key
        return Project(Settings(), config.parent, str(error))
