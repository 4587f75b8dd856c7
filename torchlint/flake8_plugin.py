"""flake8 plugin: ``flake8 --select TL`` reports what the ``torchlint`` command
reports, with the same line and column (flake8 columns are 0-based in the plugin
API and printed 1-based).

Like TorchFix, the plugin runs every rule and leaves selection to flake8: the
opt-in rules are in flake8's default ignore list, so ``flake8`` alone runs the
default rules and ``flake8 --select TL010`` reports TL010.  ``[tool.torchlint]``
in the nearest ``pyproject.toml`` gives the excludes and per-file-ignores (its
``select``/``ignore`` are flake8's job here).  Suppression comments are applied
by torchlint (every spelling it accepts, file-level ones too) and then by flake8.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchlint import __version__

if TYPE_CHECKING:
    from torchlint.lsp.project import Project

_STDIN_NAMES = ("stdin", "-")


class Flake8Plugin:
    name = "torchlint"
    version = __version__
    respect_noqa = True  # False with flake8's --disable-noqa

    def __init__(self, tree: ast.AST, lines: list[str], filename: str = "stdin") -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, manager: Any) -> None:
        from torchlint.rules import all_rules

        manager.extend_default_ignore([rule.code for rule in all_rules() if not rule.default])

    @classmethod
    def parse_options(cls, options: Any) -> None:
        cls.respect_noqa = not getattr(options, "disable_noqa", False)

    def run(self) -> Iterator[tuple[int, int, str, type[Any]]]:
        from torchlint.runner import lint_content

        path = None if self.filename in _STDIN_NAMES else Path(self.filename).absolute()
        project = _project(str(path.parent) if path is not None else os.getcwd())
        rules = project.rules_for(path)  # every rule but the per-file-ignored ones; None: excluded
        if rules is None:
            return
        linted = lint_content(self.filename, "".join(self.lines), project.settings, rules,
                              respect_noqa=self.respect_noqa)
        if linted.report.error is not None:
            return  # flake8 reports syntax errors itself (E999)
        for finding in linted.report.findings:
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)


@functools.lru_cache(maxsize=64)
def _project(directory: str) -> Project:
    """The ``[tool.torchlint]`` settings for files in ``directory``, selecting every rule."""
    from torchlint.lsp.project import load_project

    project = load_project(Path(directory) / "_", None)
    everything = dataclasses.replace(project.settings, select=("ALL",), extend_select=(), ignore=())
    return dataclasses.replace(project, settings=everything)
