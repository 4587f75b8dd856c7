"""The engine: parse, run the enabled rules in one analysis pass, position and
filter what they report, and apply fixes.  It knows nothing about specific rules."""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from torchlint.analysis import Analyzer
from torchlint.noqa import (
    NoqaAudit,
    Use,
    file_exempt_codes,
    file_is_exempt,
    physical_lines,
    run_audits,
    suppression,
)
from torchlint.rule import Diagnostic, Fix, FixSafety, Rule, RuleOptions

MAX_FIX_PASSES = 10


class SourceError(Exception):
    """The source cannot be analysed (syntax error ...).  ``line``/``col`` are 1-based."""

    def __init__(self, message: str, line: int | None = None, col: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.col = col


class FixError(Exception):
    """A fix produced code that does not parse; nothing is written."""


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


@dataclass(frozen=True)
class TextEdit:
    """Replace the text from (line, col) up to (end_line, end_col) (1-based, end exclusive)."""

    line: int
    col: int
    end_line: int
    end_col: int
    content: str


@dataclass
class LintResult:
    findings: list[Finding]
    module: cst.Module | None = None
    parsed: bool = False


def active_rules(source: str, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The rules that can possibly fire on ``source`` (sound token pre-filter)."""
    always, by_token = _token_index(tuple(rules))
    active = set(always)
    for token, owners in by_token:
        # Each distinct token is searched for once, and not at all once its rules are in.
        if not owners <= active and token in source:
            active |= owners
    return [rule for rule in rules if rule in active]


@functools.lru_cache(maxsize=64)
def _token_index(rules: tuple[type[Rule], ...]) -> tuple[frozenset[type[Rule]], tuple[tuple[str, frozenset[type[Rule]]], ...]]:
    """Rules without tokens, and each distinct token with the rules it enables."""
    always = frozenset(rule for rule in rules if not rule.tokens)
    owners: dict[str, set[type[Rule]]] = {}
    for rule in rules:
        for token in rule.tokens:
            owners.setdefault(token, set()).add(rule)
    # Tokens shared by more rules first: one hit settles several rules.
    ordered = sorted(owners, key=lambda token: (-len(owners[token]), -len(token), token))
    return always, tuple((token, frozenset(owners[token])) for token in ordered)


def parse(source: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise SourceError(f"syntax error: {error.message}", error.raw_line, error.raw_column + 1) from None
    except RecursionError:
        raise SourceError("too deeply nested to analyse") from None


def lint_source(
    source: str,
    rules: Sequence[type[Rule]],
    options: RuleOptions = RuleOptions(),
    *,
    respect_noqa: bool = True,
) -> LintResult:
    """Lint one module's source with the given rules.

    ``respect_noqa`` False leaves line-level ``# noqa`` comments to the caller (flake8
    applies them itself); torchlint's own file-level ``# torchlint: noqa`` always counts.
    """
    if file_is_exempt(source):
        return LintResult([])
    exempt = file_exempt_codes(source)
    if exempt:
        rules = [r for r in rules if not any(r.code.startswith(code) for code in exempt)]
    # Rules that audit noqa comments run after the others, and only when noqa comments count.
    audits = active_rules(source, [r for r in rules if issubclass(r, NoqaAudit)]) if respect_noqa else []
    checks = active_rules(source, [r for r in rules if not issubclass(r, NoqaAudit)])
    if not checks and not audits:
        return LintResult([])
    module = parse(source)
    diagnostics = _analyse(module, source, checks, options) if checks else []
    if not diagnostics and not audits:
        return LintResult([], module, parsed=True)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    lines = physical_lines(source)
    used: set[Use] = set()
    findings = _position(diagnostics, positions, lines if respect_noqa else None, used)
    if audits:
        enabled = {r.code for r in rules}
        audit_diagnostics = run_audits(audits, module, positions, used, enabled, options)
        findings += _position(audit_diagnostics, positions, lines, set())
    findings.sort(key=lambda f: (f.line, f.col, f.code))
    return LintResult(findings, module, parsed=True)


def _position(
    diagnostics: Sequence[Diagnostic], positions: Any, lines: Sequence[str] | None, used: set[Use]
) -> list[Finding]:
    """Findings for the diagnostics not suppressed by a noqa comment (``lines`` None: none
    is); the suppressions that applied are added to ``used``."""
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()
    for diagnostic in diagnostics:
        key = (diagnostic.rule.code, id(diagnostic.node))
        if key in seen:
            continue
        seen.add(key)
        where: CodeRange = positions[diagnostic.node]
        noqa_lines = _noqa_lines(diagnostic, where, positions)
        if lines is not None:
            applied = suppression(diagnostic.rule.code, lines, noqa_lines)
            if applied is not None:
                used.add(applied)
                continue
        findings.append(
            Finding(
                diagnostic.rule.code,
                diagnostic.rule.name,
                diagnostic.message,
                where.start.line,
                where.start.column + 1,
                where.end.line,
                where.end.column + 1,
                diagnostic.fix,
                diagnostic,
                noqa_lines,
            )
        )
    return findings


def _analyse(module: cst.Module, source: str, rules: Sequence[type[Rule]], options: RuleOptions) -> list[Diagnostic]:
    analyzer = Analyzer(module, source)
    sink: list[Diagnostic] = []
    analyzer.attach(rule(analyzer, sink, options) for rule in rules)
    try:
        analyzer.run()
    except RecursionError:
        raise SourceError("too deeply nested to analyse") from None
    return [d for d in sink if d.when is None or d.when()]


def _noqa_lines(diagnostic: Diagnostic, where: CodeRange, positions: object) -> tuple[int, ...]:
    lines = {where.start.line}
    if diagnostic.statement is not None:
        span: CodeRange = positions[diagnostic.statement]  # type: ignore[index]
        lines |= {span.start.line, span.end.line}
    return tuple(sorted(lines))


# ---------------------------------------------------------------- fixing
@dataclass
class FixResult:
    source: str
    applied: list[Finding]
    remaining: list[Finding]


def fixable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.safety is FixSafety.SAFE)


def fix_source(
    source: str,
    rules: Sequence[type[Rule]],
    options: RuleOptions = RuleOptions(),
    *,
    unsafe: bool = False,
) -> FixResult:
    """Apply fixes in passes until nothing changes; the result always parses."""
    applied: list[Finding] = []
    original = source
    result = lint_source(source, rules, options)
    for _ in range(MAX_FIX_PASSES):
        candidates = [f for f in result.findings if fixable(f, unsafe)]
        if not candidates or result.module is None:
            break
        chosen = _non_overlapping(candidates)
        new_source = apply_fixes(result.module, [f.fix for f in chosen if f.fix])
        _check_parses(original, new_source, chosen)
        if new_source == source:
            break
        applied.extend(chosen)
        source = new_source
        result = lint_source(source, rules, options)
    return FixResult(source, applied, result.findings)


def _non_overlapping(findings: list[Finding]) -> list[Finding]:
    """Fixes whose edited regions do not overlap; the rest wait for the next pass."""
    chosen: list[Finding] = []
    taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for finding in findings:
        span = _fix_span(finding)
        if any(not (span[1] <= other[0] or other[1] <= span[0]) for other in taken):
            continue
        taken.append(span)
        chosen.append(finding)
    return chosen


def _fix_span(finding: Finding) -> tuple[tuple[int, int], tuple[int, int]]:
    # The fix replaces nodes inside the reported statement (or the reported node);
    # treat the whole lines as its region so two fixes never touch the same line.
    return ((finding.line, 0), (finding.end_line, 1 << 30)) if finding.fix else ((0, 0), (0, 0))


class _Replacer(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, object]) -> None:
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        return self.replacements.get(id(original_node), updated_node)


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> str:
    replacements: dict[int, object] = {}
    for fix in fixes:
        for old, new in fix.replacements:
            replacements[id(old)] = new
    return module.visit(_Replacer(replacements)).code


def _check_parses(original: str, new_source: str, chosen: list[Finding]) -> None:
    codes = ", ".join(sorted({f.code for f in chosen}))
    try:
        cst.parse_module(new_source)
    except cst.ParserSyntaxError as error:
        raise FixError(f"fix for {codes} produced code that does not parse: {error.message}") from None
    try:
        ast.parse(original)
    except SyntaxError:
        return  # the original is not valid for this Python either; libcst's check must do
    try:
        ast.parse(new_source)
    except SyntaxError as error:
        raise FixError(f"fix for {codes} produced code that does not parse: {error.msg}") from None


def fix_edit(module: cst.Module, source: str, finding: Finding) -> tuple[tuple[int, int], tuple[int, int], str] | None:
    """The fix of one finding as a single text edit: ((line, col), (end_line, end_col), new_text), 1-based."""
    if finding.fix is None:
        return None
    new_source = apply_fixes(module, [finding.fix])
    start = 0
    limit = min(len(source), len(new_source))
    while start < limit and source[start] == new_source[start]:
        start += 1
    end_old, end_new = len(source), len(new_source)
    while end_old > start and end_new > start and source[end_old - 1] == new_source[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return _line_col(source, start), _line_col(source, end_old), new_source[start:end_new]


def with_fix_edits(result: LintResult, source: str) -> list[Finding]:
    """The findings, each fixable one with its fix as a text edit."""
    if result.module is None:
        return result.findings
    findings: list[Finding] = []
    for finding in result.findings:
        edit = fix_edit(result.module, source, finding) if finding.fix is not None else None
        if edit is not None:
            (line, col), (end_line, end_col), content = edit
            finding = replace(finding, edits=(TextEdit(line, col, end_line, end_col, content),))
        findings.append(finding)
    return findings


def _line_col(source: str, offset: int) -> tuple[int, int]:
    line = source.count("\n", 0, offset) + 1
    line_start = source.rfind("\n", 0, offset) + 1
    return line, offset - line_start + 1
