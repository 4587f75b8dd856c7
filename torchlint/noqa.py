"""``# noqa`` handling, compatible with flake8: ``# noqa`` silences every code on
the line, ``# noqa: TL001,TL002`` only those (a listed prefix covers the codes it
starts).  Any spelling flake8 honours is honoured (torchlint also accepts ``#noqa``
and lower-case codes: the flake8 plugin applies these suppressions itself, so
``flake8 --select TL`` and ``torchlint`` agree on every spelling).  Like flake8, a
comment anywhere in a multi-line string or backslash-continued line counts for
all of its lines.

File level: ``# torchlint: noqa`` anywhere in a file skips the file;
``# torchlint: noqa: CODES`` turns those codes off.  ``# flake8: noqa`` on a line
of its own skips the file too, and ``# flake8: noqa: CODES`` turns those codes off,
as ruff reads it (flake8 itself skips the whole file then).

Also here: the hook for rules that audit the suppression comments themselves
(``NoqaAudit``, run by the engine after the other rules) and ``add_noqa``, which
writes a ``# noqa: CODE`` comment for each finding.
"""

from __future__ import annotations

import re
import tokenize
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from torchlint.analysis.walk import scan
from torchlint.rule import Diagnostic, Fix, Rule

if TYPE_CHECKING:
    from libcst.metadata import CodeRange

NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
FILE_NOQA = re.compile(r"#\s*torchlint\s*:\s*noqa\b(?!\s*:)", re.IGNORECASE)
# `# torchlint: noqa: TL001, TL002` anywhere in a file: those codes are off for the file (like ruff's).
FILE_NOQA_CODES = re.compile(
    r"#\s*torchlint\s*:\s*noqa\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)", re.IGNORECASE
)
# `# flake8: noqa` as flake8 (a line starting with it, `=` for `:` allowed) and ruff (spaces anywhere) read it.
FLAKE8_FILE_NOQA = re.compile(
    r"^\s*#\s*flake8\s*[:=]\s*noqa(?:\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?",
    re.IGNORECASE | re.MULTILINE,
)
_SPLIT = re.compile(r"[,\s]+")
_NEWLINE = re.compile(r"\r\n|\r|\n")
_LINE_WITH_ENDING = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")

# A suppression that was used: (line, listed code), "" for a bare ``# noqa``.
Use = tuple[int, str]


class Positions(Protocol):
    """Where nodes are (``analysis.positions``): ``at(node, near)``, ``near`` a statement
    that holds ``node`` (a hint)."""

    def at(self, node: cst.CSTNode, near: cst.CSTNode | None = None) -> CodeRange: ...


def physical_lines(source: str) -> list[str]:
    """The source's lines as Python and libcst count them (``str.splitlines`` also
    splits at form feeds and other characters that are not line breaks in Python)."""
    lines = _NEWLINE.split(source)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def file_is_exempt(source: str, *, flake8: bool = True) -> bool:
    """Whether the file is skipped (``flake8`` False: ``# flake8: noqa`` does not count, as
    under flake8's ``--disable-noqa``)."""
    if FILE_NOQA.search(source) is not None:
        return True
    return flake8 and "flake8" in source.lower() and any(
        match.group("codes") is None for match in FLAKE8_FILE_NOQA.finditer(source)
    )


def file_exempt_codes(source: str, *, flake8: bool = True) -> frozenset[str]:
    """The codes that ``# torchlint: noqa: CODES`` and ``# flake8: noqa: CODES`` turn off for the whole file."""
    matches = list(FILE_NOQA_CODES.finditer(source))
    if flake8 and "flake8" in source.lower():
        matches += [match for match in FLAKE8_FILE_NOQA.finditer(source) if match.group("codes") is not None]
    return frozenset(code.upper() for match in matches for code in _SPLIT.split(match.group("codes")) if code)


def noqa_codes(line: str) -> frozenset[str] | None:
    """None: no noqa comment; empty set: a bare ``# noqa``; else the codes listed."""
    if "noqa" not in line.lower():
        return None
    match = NOQA.search(line)
    if match is None:
        return None
    return frozenset(_listed(match))


def _listed(match: re.Match[str]) -> list[str]:
    codes = match.group("codes")
    return [code.upper() for code in _SPLIT.split(codes.strip()) if code] if codes else []


class NoqaLines:
    """A source's physical lines, and which lines a noqa comment on one of them covers:
    flake8 searches the whole span of a multi-line string or backslash-continued line
    (its ``noqa_line_for``).  The spans are tokenized only when asked for."""

    def __init__(self, source: str) -> None:
        self.lines = physical_lines(source)
        self.any = "noqa" in source.lower()  # no comment anywhere: nothing to look up
        self._spans: dict[int, range] | None = None

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> str:
        return self.lines[index]

    def around(self, numbers: Iterable[int]) -> list[int]:
        """``numbers`` and the other lines of their spans, in order, each once."""
        if self._spans is None:
            self._spans = _token_spans(self.lines)
        seen: dict[int, None] = {}
        for number in numbers:
            seen.update(dict.fromkeys(self._spans.get(number, (number,))))
        return list(seen)


def _token_spans(lines: Sequence[str]) -> dict[int, range]:
    """Each line that shares a span with others (between two NL/NEWLINE tokens) -> the span."""
    spans: dict[int, range] = {}
    first: int | None = None
    last = 0
    try:
        for token in tokenize.generate_tokens(iter(line + "\n" for line in lines).__next__):
            if token.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            first = token.start[0] if first is None else first
            last = max(last, token.end[0])
            if token.type in (tokenize.NL, tokenize.NEWLINE):
                if last > first:
                    spans.update(dict.fromkeys(range(first, last + 1), range(first, last + 1)))
                first, last = None, 0
    except (tokenize.TokenError, SyntaxError):  # flake8 then uses no spans either
        return {}
    return spans


def suppression(code: str, lines: Sequence[str], line_numbers: Iterable[int]) -> Use | None:
    """The noqa comment on one of the (1-based) ``line_numbers`` that covers ``code``, if any
    (with ``NoqaLines``: also on the other lines of their multi-line spans)."""
    if isinstance(lines, NoqaLines):
        if not lines.any:
            return None
        line_numbers = lines.around(line_numbers)
    for number in line_numbers:
        if not 1 <= number <= len(lines):
            continue
        codes = noqa_codes(lines[number - 1])
        if codes is None:
            continue
        if not codes:
            return number, ""
        for listed in sorted(codes):
            if code.startswith(listed):
                return number, listed
    return None


def is_suppressed(code: str, lines: Sequence[str], line_numbers: tuple[int, ...]) -> bool:
    """True when a noqa comment on any of the (1-based) ``line_numbers`` covers ``code``."""
    return suppression(code, lines, line_numbers) is not None


# ---------------------------------------------------------------- auditing suppressions
@dataclass(frozen=True)
class NoqaDirective:
    """A ``# noqa`` comment as libcst sees it (its owner is the node a fix replaces)."""

    line: int
    codes: tuple[str, ...]  # upper-cased, in written order; empty for a bare ``# noqa``
    comment: cst.Comment
    owner: cst.TrailingWhitespace | cst.EmptyLine


class _DirectiveCollector(cst.CSTVisitor):
    def __init__(self, positions: Positions) -> None:
        self.positions = positions
        self.piece: cst.CSTNode | None = None  # the top-level statement (or line) being scanned
        self.found: list[NoqaDirective] = []

    def _collect(self, owner: cst.TrailingWhitespace | cst.EmptyLine) -> None:
        comment = owner.comment
        if comment is None or "noqa" not in comment.value.lower():
            return
        match = NOQA.search(comment.value)
        if match is not None:
            line = self.positions.at(comment, self.piece).start.line
            self.found.append(NoqaDirective(line, tuple(_listed(match)), comment, owner))

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        self._collect(node)

    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        self._collect(node)


def find_directives(module: cst.Module, positions: Positions) -> list[NoqaDirective]:
    """Every ``# noqa`` comment in the module (comments only: never text inside strings)."""
    collector = _DirectiveCollector(positions)
    # Piece by piece (the same callbacks as one scan of the module): a lazy ``positions``
    # then generates only the pieces with a directive.
    for piece in (*module.header, *module.body, *module.footer):
        collector.piece = piece
        scan(piece, collector)
    return collector.found


class NoqaAudit(Rule):
    """Base class of rules that check the suppression comments themselves.

    The engine runs them after the other rules (and only when noqa comments are
    honoured), passing every directive, which of them suppressed a finding, and
    the codes of the rules enabled for this file.  They report on the comment.
    """

    # Every spelling the case-insensitive NOQA pattern accepts: "noqa", "NOQA", "NoQA"...
    tokens = tuple(
        "".join(letter.upper() if mask & (1 << i) else letter for i, letter in enumerate("noqa")) for mask in range(16)
    )

    def audit(self, directives: Sequence[NoqaDirective], used: Set[Use], enabled: frozenset[str]) -> None:
        raise NotImplementedError

    def report_directive(self, directive: NoqaDirective, message: str, fix: Fix | None = None) -> None:
        self._sink.append(Diagnostic(type(self), directive.comment, message, fix, statement=directive.comment))


def run_audits(
    audits: Sequence[type[NoqaAudit]],
    module: cst.Module,
    positions: Positions,
    used: Set[Use],
    enabled: Iterable[str],
    options: object,
) -> list[Diagnostic]:
    directives = find_directives(module, positions)
    if not directives:
        return []
    sink: list[Diagnostic] = []
    for audit in audits:
        audit(None, sink, options).audit(directives, used, frozenset(enabled))  # type: ignore[arg-type]
    return sink


def without_codes(comment: str, drop: Set[str]) -> str | None:
    """``comment`` with the listed ``drop`` codes removed from its noqa directive;
    None when nothing of the comment would remain."""
    match = NOQA.search(comment)
    if match is None:
        return comment
    keep = [code for code in _listed(match) if code not in drop]
    if keep:
        return comment[: match.start("codes")] + ", ".join(keep) + comment[match.end("codes"):]
    rest = (comment[: match.start()] + comment[match.end():]).strip()
    if not rest:
        return None
    return rest if rest.startswith("#") else f"# {rest}"


def replace_comment(directive: NoqaDirective, new_comment: str | None) -> tuple[cst.CSTNode, object]:
    """The replacement (for a ``Fix``) that gives the directive's line ``new_comment`` instead."""
    owner = directive.owner
    if new_comment is not None:
        return owner, owner.with_changes(comment=cst.Comment(new_comment))
    if isinstance(owner, cst.EmptyLine):
        return owner, cst.RemovalSentinel.REMOVE
    return owner, owner.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)


# ---------------------------------------------------------------- adding suppressions
class _Locatable(Protocol):
    code: str
    line: int
    noqa_lines: tuple[int, ...]


class AddNoqaError(Exception):
    """The source cannot be tokenized, so no comment is added."""


def add_noqa(source: str, findings: Iterable[_Locatable]) -> tuple[str, int]:
    """Add ``# noqa: CODE`` for every finding; returns the new source and the number of
    lines changed.

    The comment goes on the reported line when a comment can end that line, else on
    the last line of the finding's statement (never inside a multi-line string or
    after a backslash continuation).  An existing noqa comment gets the new codes
    merged in; any other comment is kept and the directive appended to it.
    """
    lines = _LINE_WITH_ENDING.findall(source)
    wanted: dict[int, set[str]] = {}
    commentable, comments = _comment_slots(lines)
    for finding in findings:
        candidates = [finding.line, *sorted(finding.noqa_lines, reverse=True)]
        line = next((n for n in candidates if n in commentable), None)
        if line is not None:
            wanted.setdefault(line, set()).add(finding.code)
    if not wanted:
        return source, 0
    changed = 0
    for number, codes in wanted.items():
        text, ending = _split_ending(lines[number - 1])
        comment_start = comments.get(number)
        new_text = _with_directive(text, comment_start, codes)
        if new_text != text:
            lines[number - 1] = new_text + ending
            changed += 1
    return "".join(lines), changed


def _split_ending(line: str) -> tuple[str, str]:
    stripped = line.rstrip("\r\n")
    return stripped, line[len(stripped):]


def _comment_slots(lines: Sequence[str]) -> tuple[set[int], dict[int, int]]:
    """Lines that a comment may end (they end at a NEWLINE/NL token), and the column
    where each existing comment starts."""
    commentable: set[int] = set()
    comments: dict[int, int] = {}
    try:
        for token in tokenize.generate_tokens(iter([*lines, ""]).__next__):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                commentable.add(token.start[0])
            elif token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.start[1]
                commentable.add(token.start[0])
    except (tokenize.TokenError, SyntaxError) as error:
        raise AddNoqaError(f"cannot tokenize: {error}") from None
    return commentable, comments


def _with_directive(text: str, comment_start: int | None, codes: set[str]) -> str:
    if comment_start is not None:
        comment = text[comment_start:]
        match = NOQA.search(comment)
        if match is not None:
            listed = _listed(match)
            if not listed:
                return text  # a bare `# noqa` already covers everything
            missing = sorted(code for code in codes if not any(code.startswith(c) for c in listed))
            if not missing:
                return text
            merged = ", ".join([*listed, *missing])
            start = comment_start + match.start("codes")
            return text[:start] + merged + text[comment_start + match.end("codes"):]
    return f"{text.rstrip()}  # noqa: {', '.join(sorted(codes))}"
