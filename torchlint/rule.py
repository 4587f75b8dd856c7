"""The rule interface.  A rule is a small visitor that asks the analysis layer
questions and reports diagnostics; it knows nothing about files, the CLI or output.

A rule module in ``torchlint/rules/`` defines one ``Rule`` subclass; it is
discovered automatically and documented by its page in the rule book
(``rules/<CODE>-<name>.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

# The plain data types live in a libcst-free module (a fully cached run needs only them);
# rules import them from here.
from torchlint.datatypes import Fix, FixSafety, FixStyle, RuleOptions

if TYPE_CHECKING:
    import libcst as cst

    from torchlint.analysis import Analyzer

__all__ = ["Diagnostic", "Fix", "FixSafety", "FixStyle", "Rule", "RuleInfo", "RuleOptions"]


@dataclass
class Diagnostic:
    """A rule's report before the engine turns it into a positioned finding."""

    rule: type[Rule]
    node: cst.CSTNode
    message: str
    fix: Fix | None = None
    # The simple statement the finding sits in (its first/last line accept `# noqa`).
    statement: cst.CSTNode | None = None
    # Evaluated after the whole file is analysed (e.g. "grad mode may be enabled here").
    when: Callable[[], bool] | None = None


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    default: ClassVar[bool] = True
    fix_safety: ClassVar[FixSafety | None] = None
    # Source substrings without which the rule cannot fire.  A file that contains
    # none of the enabled rules' tokens is not parsed at all.  Empty = always run.
    tokens: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: Analyzer, sink: list[Diagnostic], options: RuleOptions) -> None:
        self.ctx = ctx
        self.options = options
        self._sink = sink

    # A rule that reports what a fix style produces names the style it needs, used when the
    # user chose none (TL011 reports `.data`: with it enabled, fixes use "no_grad").
    preferred_fix_style: ClassVar[FixStyle | None] = None

    @property
    def fix_style(self) -> FixStyle:
        return self.options.fix_style or FixStyle.DATA

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        fix: Fix | None = None,
        *,
        when: Callable[[], bool] | None = None,
        statement: cst.CSTNode | None = None,
    ) -> None:
        if fix is not None and self.fix_safety is FixSafety.UNSAFE and fix.safety is FixSafety.SAFE:
            fix = Fix(fix.description, fix.replacements, FixSafety.UNSAFE)
        self._sink.append(
            Diagnostic(type(self), node, message, fix, statement or self.ctx.statement, when)
        )

    def finish(self) -> None:
        """Called once after the whole file has been analysed."""


@dataclass(frozen=True)
class RuleInfo:
    """Public description of a rule (for --list-rules, docs and output formats)."""

    code: str
    name: str
    summary: str
    default: bool
    fix_safety: FixSafety | None
    tokens: tuple[str, ...] = field(default=())
