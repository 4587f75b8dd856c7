"""flake8 plugin: ``flake8 --select TL`` runs torchlint's rules with the same
line and column as the ``torchlint`` command (flake8 columns are 0-based in the
plugin API and printed 1-based)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from torchlint import __version__


class Flake8Plugin:
    name = "torchlint"
    version = __version__

    def __init__(self, tree: ast.AST, lines: list[str], filename: str = "stdin") -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type[Any]]]:
        from torchlint.engine import SourceError, lint_source
        from torchlint.settings import Settings, resolve_rules

        source = "".join(self.lines)
        try:
            # flake8 applies `# noqa` itself, exactly like the CLI does.
            result = lint_source(source, resolve_rules(Settings()), respect_noqa=False)
        except SourceError:
            return  # flake8 reports syntax errors itself (E999)
        for finding in result.findings:
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)
