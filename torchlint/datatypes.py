"""Plain data shared by the engine, the results cache and the output formats:
findings and their fixes, file reports, and the options rules run with.

Nothing here imports libcst: a run whose every result is cached reads, reports
and exits with these types alone.  The engine, the rules and libcst are
imported only when some file must be analysed.  (``torchlint.rule``,
``torchlint.engine`` and ``torchlint.runner`` re-export these names.)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

    from torchlint.rule import Diagnostic, Rule

    Replacement = tuple[cst.CSTNode, "cst.CSTNode | cst.FlattenSentinel[cst.CSTNode] | cst.RemovalSentinel"]


class FixSafety(enum.Enum):
    """Like ruff's applicability: safe fixes keep behaviour the user relies on."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class FixStyle(enum.Enum):
    DATA = "data"  # w.data.sub_(...)
    NO_GRAD = "no_grad"  # with torch.no_grad(): w -= ...


@dataclass(frozen=True)
class RuleOptions:
    # None: not chosen by the user; the engine picks one the enabled rules agree with.
    fix_style: FixStyle | None = None


@dataclass(frozen=True)
class Fix:
    """Replace each node (by identity) with new code; applied by the engine.  Cached and
    pickled findings keep the description and safety, without the (libcst) replacements."""

    description: str
    replacements: tuple[Replacement, ...]
    safety: FixSafety = FixSafety.SAFE


@dataclass(frozen=True)
class TextEdit:
    """Replace the text from (line, col) up to (end_line, end_col) (1-based, end exclusive)."""

    line: int
    col: int
    end_line: int
    end_col: int
    content: str


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    line: int  # 1-based
    col: int  # 1-based, in characters
    end_line: int
    end_col: int  # 1-based, exclusive
    fix: Fix | None = None
    diagnostic: Diagnostic | None = field(default=None, compare=False, repr=False)
    # The lines whose `# noqa` covers this finding: the reported line and its statement's first and last.
    noqa_lines: tuple[int, ...] = field(default=(), compare=False, repr=False)
    # The fix as text edits; filled in on request (``with_fix_edits``) for output formats and editors.
    edits: tuple[TextEdit, ...] = field(default=(), compare=False, repr=False)
    cell: int | None = None  # notebooks: the 1-based cell that ``line`` and ``end_line`` count in

    @property
    def rule(self) -> type[Rule] | None:
        return self.diagnostic.rule if self.diagnostic else None


@dataclass
class FileReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # one line, "line:col: message" when the position is known
    fixed: int = 0
    fixed_codes: list[str] = field(default_factory=list)  # the rule of each applied fix (for the --fix summary)
    diff: str = ""
    source: str | None = None
    cells: dict[int, str] | None = None  # notebooks: each linted cell's source, by 1-based cell number
    # Other files of the project the findings depend on, as (path, size, mtime_ns) when read.
    dependencies: tuple[tuple[str, int, int], ...] = ()
