"""The engine: parse, run the enabled rules in one analysis pass, position and
filter what they report, and apply fixes.  It knows nothing about specific rules."""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import re
import symtable
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

import libcst as cst
from libcst.metadata import CodeRange

from torchlint import interrupt
from torchlint.analysis import Analyzer
from torchlint.analysis.memo import NodeMemo
from torchlint.analysis.project import ProjectImports
from torchlint.analysis.positions import ModulePositions
from torchlint.analysis.walk import children
from torchlint.datatypes import Finding, TextEdit  # re-exported: plain data, also used without libcst
from torchlint.files import MAX_SOURCE_BYTES, too_large
from torchlint.noqa import (
    NoqaAudit,
    Use,
    file_exempt_codes,
    file_is_exempt,
    NoqaLines,
    run_audits,
    suppression,
)
from torchlint.rule import Diagnostic, Fix, FixSafety, FixStyle, Rule, RuleOptions
from torchlint.textdiff import changed_span, line_and_column, line_starts

MAX_FIX_PASSES = 10


class SourceError(Exception):
    """The source cannot be analysed (syntax error ...).  ``line``/``col`` are 1-based."""

    def __init__(self, message: str, line: int | None = None, col: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.col = col


class FixError(Exception):
    """A fix produced code that does not parse; nothing is written."""


class TooDeepToRewrite(FixError):
    """libcst's rewriting recursion cannot reach the fixed nodes (the tree can still be analysed)."""


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


# Builds the tree of a source CPython's parser accepted (``cst.parse_module``, or a parser
# that reuses an earlier version's statements: ``torchlint.incremental``).
Build = Callable[[str], cst.Module]


def parse(source: str, build: Build | None = None) -> cst.Module:
    if len(source) > MAX_SOURCE_BYTES:  # memory: libcst needs ~250 bytes per character
        raise SourceError(too_large(len(source)))
    # A builder that parses a document again and again may know which parts CPython accepted.
    accepts = getattr(build, "accepts", None)
    if accepts is None:
        rejected = _check_nesting(source)
    else:
        rejected = accepts(source, _check_nesting, _each_passes_nesting_check)
    try:
        if rejected is None:
            with _node_validation_skipped():  # CPython accepted it: libcst's checks would pass
                return (build or cst.parse_module)(source)
        return _parse_on_large_stack(source)
    except cst.ParserSyntaxError as error:
        if rejected is not None:  # both parsers reject it: CPython's message is the familiar one
            raise SourceError(f"syntax error: {rejected.msg}", rejected.lineno, rejected.offset) from None
        raise SourceError(
            f"cannot analyse this code: libcst's parser rejects it ({error.message})",
            error.raw_line,
            error.raw_column + 1,
        ) from None
    except RecursionError:
        raise SourceError(_TOO_DEEP) from None
    except cst.CSTValidationError as error:  # e.g. "a" b"x": parses, but is not valid Python
        raise SourceError(f"syntax error: {error}") from None


def check_syntax(source: str) -> None:
    """``SourceError`` if ``source`` does not parse, as ``parse`` would raise it, for a
    fraction of the cost: CPython's parser alone (no libcst tree) when it accepts the
    source.  When it rejects it, ``parse`` decides (libcst accepts syntax newer than
    this interpreter, and it names the problem the way files with findings get it)."""
    if len(source) > MAX_SOURCE_BYTES:
        raise SourceError(too_large(len(source)))
    try:
        with warnings.catch_warnings(), _gc_paused():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            compile(source, "<torchlint>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        return
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    parse(source)


# Deepest syntax tree analysed.  Real code stays under 100 levels (94 is the
# deepest in torch, transformers, diffusers, timm and lightning); libcst's native
# parser slows down quadratically with depth (seconds at 1000 levels) and
# overflows the C stack (a segfault) at a few thousand.
MAX_NESTING = 400
_TOO_DEEP = "too deeply nested to analyse"
_DEEPER_THAN_MAX = f"{_TOO_DEEP} (more than {MAX_NESTING} levels)"
_BOOLEAN_OPERATOR = re.compile(r"\b(?:and|or)\b")
# Stack for libcst's parser when the depth could not be measured first.
_PARSER_STACK_BYTES = 512 * 1024 * 1024


def _check_nesting(source: str) -> SyntaxError | None:
    """Refuse sources nested too deeply for libcst (``SourceError``).

    CPython's own parser measures the depth safely (it raises instead of
    crashing).  Returns CPython's error when it cannot parse the source (a syntax
    error, or syntax newer than this interpreter): the depth is then unknown.
    """
    with _gc_paused():  # the tree has no cycles; collections would only cost time
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escape sequences and the like
                if _compiler_measures_depth():
                    _compile_within_depth(source)
                    tree = None
                else:
                    tree = ast.parse(source)
        except (RecursionError, MemoryError):  # MemoryError: "too complex to parse"
            raise SourceError(_DEEPER_THAN_MAX) from None
        except SyntaxError as error:
            if "too many nested" in (error.msg or ""):
                raise SourceError(f"syntax error: {error.msg}", error.lineno, error.offset) from None
            return error
        except ValueError as error:  # NUL bytes
            return SyntaxError(str(error))
        if tree is not None and _depth(tree) > MAX_NESTING:
            raise SourceError(_DEEPER_THAN_MAX)
        if _boolean_chain_too_long(source, tree):
            raise SourceError(_DEEPER_THAN_MAX)
    return None


def _boolean_chain_too_long(source: str, tree: ast.AST | None) -> bool:
    """``a and b and c`` is one node in CPython's tree but a nested chain in libcst's.  Each
    word ``and``/``or`` is a distinct occurrence of the substring: counting those first
    (C speed) bounds the regex's count from above."""
    return (
        source.count("and") + source.count("or") > MAX_NESTING
        and len(_BOOLEAN_OPERATOR.findall(source)) > MAX_NESTING
    ) and any(
        isinstance(node, ast.BoolOp) and len(node.values) > MAX_NESTING for node in ast.walk(tree or ast.parse(source))
    )


def _each_passes_nesting_check(texts: Sequence[str]) -> bool:
    """Whether ``_check_nesting`` accepts each of ``texts`` (returns None, raises nothing),
    for the price of one of its threads: the parts of a source a builder saw change
    (``IncrementalParser.accepts``)."""
    if not texts:
        return True
    with _gc_paused():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if not _compiler_measures_depth():
                    return False  # (the whole source is checked then)
                _compile_within_depth(*texts)
        except (RecursionError, MemoryError, SyntaxError, ValueError):
            return False
        return not any(_boolean_chain_too_long(text, None) for text in texts)


# CPython's compiler (3.11, 3.12) checks its recursion against the interpreter's limit,
# scaled: ``3 * (limit - current depth)`` levels.  Compiling under a lowered limit measures
# the depth in C, twice as fast as walking ``ast.parse``'s tree in Python.  Only the symbol
# table pass is run (the compiler's first pass that visits every node with that check, as the
# AST optimizer does): the same depths are refused as by a whole ``compile``, without the
# bytecode (a quarter of the time).
_COMPILER_LEVELS_PER_FRAME = 3


def _compile_within_depth(*sources: str) -> None:
    """Build each source's symbol table: RecursionError if nested deeper than about
    ``MAX_NESTING`` (the first error met is raised).

    In a new thread, whose recursion depth is known exactly (the caller's may include
    C levels that its frames do not show); the caller waits meanwhile.
    """
    outcome: list[BaseException] = []

    def run() -> None:
        previous = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(_frame_depth() + MAX_NESTING // _COMPILER_LEVELS_PER_FRAME + 1)
            for source in sources:
                symtable.symtable(source, "<torchlint>", "exec")
        except BaseException as error:  # re-raised in the calling thread
            outcome.append(error)
        finally:
            sys.setrecursionlimit(previous)

    thread = threading.Thread(target=run, name="torchlint-depth", daemon=True)
    thread.start()
    thread.join()
    if outcome:
        raise outcome[0]


def _frame_depth() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def _compiler_measures_depth() -> bool:
    """Whether ``_compile_within_depth`` can be used here: only with no other thread (the
    lowered limit would apply to them too), and only if this CPython behaves as measured."""
    return threading.active_count() == 1 and _compiler_depth_check_works()


@functools.lru_cache(maxsize=1)
def _compiler_depth_check_works() -> bool:
    try:
        _compile_within_depth("x = " + "-" * (MAX_NESTING - 20) + "1\n")
    except RecursionError:
        return False
    try:
        _compile_within_depth("x = " + "-" * (MAX_NESTING + 20) + "1\n")
    except RecursionError:
        return True
    return False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_VALIDATION_LOCK = threading.Lock()


@contextlib.contextmanager
def _node_validation_skipped() -> Iterator[None]:
    """Build libcst nodes without their ``_validate()`` (a tenth of the parse time).

    Validation only raises on trees that are not valid Python; call this for
    sources CPython has already accepted.  Nodes built meanwhile by other threads
    merely skip a check; the lock keeps the saved original method intact.
    """
    node_class = cst.CSTNode
    with _VALIDATION_LOCK:
        validating = node_class.__dict__["__post_init__"]
        node_class.__post_init__ = _no_validation  # type: ignore[method-assign]
        try:
            yield
        finally:
            node_class.__post_init__ = validating  # type: ignore[method-assign]


def _no_validation(self: cst.CSTNode) -> None:
    pass


def _depth(tree: ast.AST) -> int:
    depth, level = 0, [tree]
    children = ast.iter_child_nodes
    while level:
        depth += 1
        level = [child for node in level for child in children(node)]
    return depth


def _parse_on_large_stack(source: str) -> cst.Module:
    """``cst.parse_module`` in a thread with a large stack: deep nesting cannot crash it."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["module"] = cst.parse_module(source)
        except BaseException as error:  # re-raised in the calling thread
            outcome["error"] = error

    try:
        previous = threading.stack_size(_PARSER_STACK_BYTES)
    except (ValueError, RuntimeError):  # the platform does not allow it
        return cst.parse_module(source)
    try:
        thread = threading.Thread(target=run, name="torchlint-parse", daemon=True)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["module"]  # type: ignore[return-value]


def lint_source(
    source: str,
    rules: Sequence[type[Rule]],
    options: RuleOptions = RuleOptions(),
    *,
    respect_noqa: bool = True,
    build: Build | None = None,
) -> LintResult:
    """Lint one module's source with the given rules.

    ``respect_noqa`` False leaves ``# noqa`` and ``# flake8: noqa`` comments to the caller
    (flake8 applies them itself); torchlint's own file-level ``# torchlint: noqa`` always counts.
    ``build``: how the tree is built (see ``parse``).
    """
    try:
        # A file's trees are built and dropped in one go: generational collections
        # during the build only rescan them (measured: a quarter of the CPU per line).
        with _gc_paused():
            return _lint_source(source, rules, options, respect_noqa, build)
    except RecursionError:  # any of the tree walks (analysis, positions, audits)
        raise SourceError(_TOO_DEEP) from None


def _lint_source(
    source: str, rules: Sequence[type[Rule]], options: RuleOptions, respect_noqa: bool, build: Build | None
) -> LintResult:
    # ``# flake8: noqa`` is a noqa comment: the caller that applies those (flake8) decides.
    if file_is_exempt(source, flake8=respect_noqa):
        check_syntax(source)  # like ruff: a syntax error cannot be silenced
        return LintResult([])
    options = _with_fix_style(options, rules)
    exempt = file_exempt_codes(source, flake8=respect_noqa)
    if exempt:
        rules = [r for r in rules if not any(r.code.startswith(code) for code in exempt)]
    # Rules that audit noqa comments run after the others, and only when noqa comments count.
    audits = active_rules(source, [r for r in rules if issubclass(r, NoqaAudit)]) if respect_noqa else []
    checks = active_rules(source, [r for r in rules if not issubclass(r, NoqaAudit)])
    if not checks and not audits:
        check_syntax(source)  # nothing to analyse, but a syntax error is still reported
        return LintResult([])
    try:
        module = parse(source, build)
    except SourceError:
        retabbed = _indentation_retabbed(source)
        if retabbed is None:
            raise
        return _lint_retabbed(source, retabbed, rules, options, respect_noqa)
    interrupt.check()  # the language server's worker: a newer text came while parsing this one
    # A builder that reuses an earlier version's statements keeps the facts of their subtrees.
    memo = getattr(build, "memo", None)
    diagnostics = _analyse(module, source, checks, options, memo) if checks else []
    if not diagnostics and not audits:
        if memo is not None:
            memo.sweep()  # complete: what this version did not ask about is an older version's
        return LintResult([], module, parsed=True)
    # A builder that assembled the tree from statements may know where they start.
    known_starts = getattr(build, "statement_starts", None)
    positions = ModulePositions(module, source, known_starts(module) if known_starts is not None else None, memo)
    lines = NoqaLines(source)
    used: set[Use] = set()
    findings = _position(diagnostics, positions, lines if respect_noqa else None, used)
    if audits:
        enabled = {r.code for r in rules}
        audit_diagnostics = run_audits(audits, module, positions, used, enabled, options)
        findings += _position(audit_diagnostics, positions, lines, set())
    findings.sort(key=lambda f: (f.line, f.col, f.code))
    if memo is not None:
        memo.sweep()
    return LintResult(findings, module, parsed=True)


def _indentation_retabbed(source: str) -> str | None:
    """``source`` with the tabs of its indentation expanded to CPython's tab stops (8), when
    that is why libcst rejects code CPython runs (a block indented with tabs inside one
    indented with spaces); None otherwise.  CPython refuses indentation whose meaning
    depends on the tab size (TabError), so for code it accepts the expansion keeps every
    block as it is."""
    if "\t" not in source or not _is_valid_python(source):
        return None
    lines = source.splitlines(keepends=True)
    retabbed = [_retab_line(line) for line in lines]
    return "".join(retabbed) if retabbed != lines else None


def _retab_line(line: str) -> str:
    body = line.lstrip(" \t")
    indent = line[: len(line) - len(body)]
    return indent.expandtabs(8) + body if "\t" in indent else line


def _lint_retabbed(
    source: str, retabbed: str, rules: Sequence[type[Rule]], options: RuleOptions, respect_noqa: bool
) -> LintResult:
    """The findings of ``source`` analysed as ``retabbed``, with columns of the original
    lines and no fixes: a fix is an edit of the retabbed text, which would re-indent the file."""
    result = _lint_source(retabbed, rules, options, respect_noqa, None)
    original_lines = source.splitlines()
    retabbed_lines = retabbed.splitlines()

    def column(line: int, col: int) -> int:
        if not 0 < line <= len(original_lines):
            return col
        original, expanded = original_lines[line - 1], retabbed_lines[line - 1]
        original_indent = len(original) - len(original.lstrip(" \t"))
        expanded_indent = len(expanded) - len(expanded.lstrip(" \t"))
        if col - 1 >= expanded_indent:
            return col - (expanded_indent - original_indent)
        return min(col, original_indent + 1)

    findings = [
        replace(
            finding,
            col=column(finding.line, finding.col),
            end_col=column(finding.end_line, finding.end_col),
            fix=None,
        )
        for finding in result.findings
    ]
    return LintResult(findings, None, parsed=True)


def _with_fix_style(options: RuleOptions, rules: Sequence[type[Rule]]) -> RuleOptions:
    """The fix style the user chose or, failing that, one no enabled rule objects to: a fix
    never produces code another enabled rule reports."""
    if options.fix_style is not None:
        return options
    preferred = next((r.preferred_fix_style for r in rules if r.preferred_fix_style is not None), None)
    return RuleOptions(fix_style=preferred or FixStyle.DATA)


def _position(
    diagnostics: Sequence[Diagnostic], positions: ModulePositions, lines: Sequence[str] | None, used: set[Use]
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
        where = positions.at(diagnostic.node, diagnostic.statement)
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


def _analyse(
    module: cst.Module, source: str, rules: Sequence[type[Rule]], options: RuleOptions, memo: NodeMemo | None = None
) -> list[Diagnostic]:
    analyzer = Analyzer(module, source, ProjectImports.current(), memo)
    sink: list[Diagnostic] = []
    analyzer.attach(rule(analyzer, sink, options) for rule in rules)
    try:
        analyzer.run()
    except RecursionError:
        raise SourceError("too deeply nested to analyse") from None
    return [d for d in sink if d.when is None or d.when()]


def _noqa_lines(diagnostic: Diagnostic, where: CodeRange, positions: ModulePositions) -> tuple[int, ...]:
    lines = {where.start.line}
    if diagnostic.statement is not None:
        span = positions.at(diagnostic.statement, diagnostic.statement)
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
    """Apply fixes in passes until nothing changes; the result always parses.

    Each pass applies the fixes that do not touch each other's code (see
    ``_non_overlapping``); the rest are found again on the fixed code and applied
    in a later pass, for at most ``MAX_FIX_PASSES`` passes.  A fix that produces
    code that does not parse raises ``FixError`` naming its rule: nothing is fixed.
    """
    applied: list[Finding] = []
    original_is_valid = _is_valid_python(source)
    result = lint_source(source, rules, options)
    for _ in range(MAX_FIX_PASSES):
        candidates = [f for f in result.findings if fixable(f, unsafe)]
        if not candidates or result.module is None:
            break
        chosen = _non_overlapping(candidates)
        try:
            new_source = _apply_checked(result.module, chosen, original_is_valid)
        except TooDeepToRewrite:  # the findings stay, unfixed
            break
        if new_source == source:
            break
        applied.extend(chosen)
        source = new_source
        result = lint_source(source, rules, options)
    return FixResult(source, applied, result.findings)


def _non_overlapping(findings: list[Finding]) -> list[Finding]:
    """Fixes that can be applied together; the rest wait for the next pass.

    Two fixes conflict when they touch a common line (the reported lines), or
    when a node one of them replaces lies inside a node the other replaces (the
    outer replacement would silently drop the inner one).
    """
    chosen: list[Finding] = []
    taken_lines: list[tuple[int, int]] = []
    taken_nodes: set[int] = set()  # every node inside a chosen fix's replaced nodes
    replaced_by_chosen: set[int] = set()
    for finding in findings:
        if finding.fix is None:
            continue
        lines = (finding.line, finding.end_line)
        if any(lines[0] <= other[1] and other[0] <= lines[1] for other in taken_lines):
            continue
        replaced = {id(old) for old, _ in finding.fix.replacements}
        inside = _subtree_ids(old for old, _ in finding.fix.replacements)
        if replaced & taken_nodes or inside & replaced_by_chosen:
            continue
        chosen.append(finding)
        taken_lines.append(lines)
        taken_nodes |= inside
        replaced_by_chosen |= replaced
    return chosen


def _subtree_ids(nodes: Iterable[cst.CSTNode]) -> set[int]:
    found: set[int] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        found.add(id(node))
        stack.extend(children(node))
    return found


class _Replacer(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, object]) -> None:
        self.replacements = replacements
        # Compound statements the fixes create: adjacent ones with the same header merge.
        self.created = {
            id(node)
            for new in replacements.values()
            for node in (new.nodes if isinstance(new, cst.FlattenSentinel) else (new,))
            if isinstance(node, cst.With)
        }

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        replacement = self.replacements.get(id(original_node), updated_node)
        if self.created and isinstance(replacement, (cst.IndentedBlock, cst.Module)):
            return self._merge_created_blocks(replacement)
        return replacement

    def _merge_created_blocks(self, block: cst.IndentedBlock | cst.Module) -> cst.IndentedBlock | cst.Module:
        """``with torch.no_grad(): a`` next to ``with torch.no_grad(): b``, both written by
        fixes, become one block (consecutive updates share one ``with``)."""
        merged: list[cst.BaseStatement] = []
        for statement in block.body:
            previous = merged[-1] if merged else None
            if (
                isinstance(previous, cst.With)
                and isinstance(statement, cst.With)
                and id(previous) in self.created
                and id(statement) in self.created
                and isinstance(previous.body, cst.IndentedBlock)
                and isinstance(statement.body, cst.IndentedBlock)
                and not statement.leading_lines  # a comment or blank line between keeps them apart
                and _header(previous) == _header(statement)
            ):
                combined = previous.with_changes(body=previous.body.with_changes(body=[*previous.body.body, *statement.body.body]))
                self.created.add(id(combined))
                merged[-1] = combined
            else:
                merged.append(statement)
        return block.with_changes(body=merged) if len(merged) != len(block.body) else block


def _header(statement: cst.With) -> str:
    return cst.Module([]).code_for_node(statement.with_changes(body=cst.IndentedBlock([]), leading_lines=()))


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> str:
    """The module's code with the fixes' replacements made (``FixError`` if too deep to rewrite)."""
    replacements: dict[int, object] = {}
    for fix in fixes:
        for old, new in fix.replacements:
            replacements[id(old)] = new
    try:
        return module.visit(_Replacer(replacements)).code
    except RecursionError:
        raise TooDeepToRewrite(_TOO_DEEP) from None


def _apply_checked(module: cst.Module, chosen: list[Finding], original_is_valid: bool) -> str:
    """Apply the chosen fixes; ``FixError`` naming the culprits if the result does not parse."""
    new_source, problem = _try_fixes(module, [f.fix for f in chosen if f.fix], original_is_valid)
    if problem is None:
        return new_source
    # Name the fixes that break the code on their own (if none does, blame them all).
    culprits = [f for f in chosen if f.fix and _try_fixes(module, [f.fix], original_is_valid)[1] is not None] or chosen
    where = ", ".join(f"{f.code} at line {f.line}" for f in culprits)
    raise FixError(f"the fix for {where} produced code that does not parse ({problem}); nothing is written")


def _try_fixes(module: cst.Module, fixes: Sequence[Fix], original_is_valid: bool) -> tuple[str, str | None]:
    """The fixed source, and why it does not parse (None: it does)."""
    try:
        new_source = apply_fixes(module, fixes)
    except cst.CSTValidationError as error:  # a replacement that does not fit where it goes
        return "", f"invalid syntax tree: {error}"
    return new_source, _parse_problem(new_source, original_is_valid)


def _parse_problem(source: str, must_be_valid_python: bool) -> str | None:
    """Why ``source`` does not parse, or None.  libcst must parse it; CPython too
    when the original was valid for this interpreter."""
    try:
        cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        return error.message
    except cst.CSTValidationError as error:
        return str(error)
    except RecursionError:
        return "too deeply nested"
    return _python_problem(source) if must_be_valid_python else None


def _python_problem(source: str) -> str | None:
    """Why this interpreter's own parser rejects ``source``, or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            ast.parse(source)
    except SyntaxError as error:
        return f"{error.msg} at line {error.lineno}"
    except (RecursionError, MemoryError, ValueError) as error:
        return str(error) or type(error).__name__
    return None


def _is_valid_python(source: str) -> bool:
    return _python_problem(source) is None


def fix_edit(module: cst.Module, source: str, finding: Finding) -> tuple[tuple[int, int], tuple[int, int], str] | None:
    """The fix of one finding as a single text edit: ((line, col), (end_line, end_col), new_text), 1-based."""
    if finding.fix is None:
        return None
    new_source = apply_fixes(module, [finding.fix])
    start, end_old, end_new = changed_span(source, new_source)
    starts = line_starts(source)
    return _line_col(starts, start), _line_col(starts, end_old), new_source[start:end_new]


def with_fix_edits(result: LintResult, source: str) -> list[Finding]:
    """The findings, each fixable one with its fix as a text edit."""
    if result.module is None:
        return result.findings
    findings: list[Finding] = []
    for finding in result.findings:
        try:
            edit = fix_edit(result.module, source, finding) if finding.fix is not None else None
        except FixError:  # too deep to rewrite: report the finding without its edit
            edit = None
        if edit is not None:
            (line, col), (end_line, end_col), content = edit
            finding = replace(finding, edits=(TextEdit(line, col, end_line, end_col, content),))
        findings.append(finding)
    return findings


def _line_col(starts: list[int], offset: int) -> tuple[int, int]:
    line, column = line_and_column(starts, offset)
    return line + 1, column + 1
