"""Parsing one document again and again as it is edited (the language server's worker):
only the top-level statements whose text changed are parsed; the others are the nodes
of the previous version's tree (libcst nodes are immutable).

``IncrementalParser()(source)`` builds exactly the tree ``cst.parse_module(source)``
builds, for a source CPython's parser accepts (``engine.parse`` calls it only then):

- The source is cut into *chunks* before lines that start, at column 0, with code that
  can begin a statement, each chunk taking the blank and column-0 comment lines just
  above its first line (they are that statement's ``leading_lines``).  A chunk is
  parsed on its own, as a module.
- A chunk that parses on its own ends where the whole source's tokenizer is back at
  the start of a line outside any bracket, string or continuation (otherwise it would
  end inside one of them, which is a syntax error), so the whole source's statements
  are the chunks' statements, in order.  A chunk that does not parse (the cut fell
  inside a string whose lines start at column 0, after a decorator ...) is parsed
  together with the next one.
- Whitespace is owned as in the whole tree: a chunk's module ``header`` is its first
  statement's leading lines; a chunk other than the last must have no module
  ``footer`` (its trailing lines would belong to the next statement), and every
  chunk must agree on the default newline and, among those with indented blocks, on
  the default indentation (``IndentedBlock.indent`` is None when it is the default).
  Otherwise the source is parsed whole.

``tests/test_incremental.py`` compares the trees (``deep_equals``) and the lints with a
whole parse over edits of real files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import libcst as cst

from torchlint import interrupt
from torchlint.analysis.memo import NodeMemo
from torchlint.textdiff import line_starts

# Lines that start at column 0 but cannot start a statement: a compound statement's
# continuation, or a closing bracket.
_NO_STATEMENT_START = re.compile(r"(?:else|elif|except|finally)\b|[)\]}]")
_INDENTED = " \t\f"
_BLANK_OR_COMMENT = "\r\n#"
_DEFAULT_INDENT = cst.Module([]).default_indent
# Parsing chunks that turn out not to parse costs time: give up (parse whole) beyond this many.
MAX_FAILED_CHUNKS = 8
T = TypeVar("T")


@dataclass
class _Chunk:
    """One chunk's parse, as the statements it gives the whole module."""

    statements: tuple[cst.BaseStatement, ...]
    header: tuple[cst.EmptyLine, ...]  # the module's header, if this is the first chunk
    footer: tuple[cst.EmptyLine, ...]
    has_trailing_newline: bool
    default_newline: str
    default_indent: str | None  # None: no indented block, so the default does not matter
    _first_lines: list[int | None] | None = None

    def first_lines(self, text: str) -> list[int | None]:
        """Where each statement starts in the chunk's ``text`` (0-based lines)."""
        if self._first_lines is None:
            from torchlint.analysis.positions import statement_starts

            self._first_lines = [None if line is None else line - 1 for line in statement_starts(self.statements, text)]
        return self._first_lines


class IncrementalParser:
    """Parses successive versions of one document, reusing the previous version's chunks."""

    def __init__(self) -> None:
        self._chunks: dict[tuple[bool, str], list[_Chunk]] = {}  # (first chunk?, text) -> parses
        self._unparsable: set[tuple[bool, str]] = set()
        self.reused = self.parsed = self.failed = 0  # chunks, in the last call (measurements, tests)
        self._built: tuple[cst.Module, list[int | None]] | None = None  # the last module assembled
        self._accepted: set[str] = set()  # texts of chunks known accepted on their own (``accepts``)
        self._checked: str | None = None  # the last source ``accepts`` had checked whole and accepted
        # Facts of the nodes it hands out, kept while the next versions reuse them (``analysis/memo.py``).
        self.memo = NodeMemo()

    def __call__(self, source: str) -> cst.Module:
        cuts = chunk_starts(source)
        self._built = None
        if len(cuts) == 1:
            self._chunks, self._unparsable = {}, set()
            return cst.parse_module(source)
        assembled = self._assemble(source, cuts)
        if assembled is None:
            return cst.parse_module(source)
        module, starts = assembled
        self._built = (module, starts)
        return module

    def accepts(
        self, source: str, check: Callable[[str], T], each_accepted: Callable[[Sequence[str]], bool]
    ) -> T | None:
        """``check(source)``, where ``check`` tells whether CPython's parser accepts a text (the
        engine's nesting check: None when it does; it may raise), worked out from the chunks
        this parser has not seen accepted before when it can: ``each_accepted(texts)`` tells
        whether ``check`` accepts each of several texts (at once: faster than one by one).

        A source made of chunks each accepted on its own is accepted (each chunk is a run of
        whole statements starting at column 0 and ending at a line's end outside any bracket
        or string, as the chunks that parse on their own are: see the module's docstring),
        except for what ties a module's statements together: ``from __future__`` imports
        (first in the file) and module-level ``global`` statements (after the name's uses); a
        source that mentions either is checked whole, and so is a source whose new chunks are
        not each accepted (the answer, a syntax error's line ..., is then the source's).  The
        chunks known accepted are those checked on their own, and those of a source ``check``
        accepted whole that this parser then parsed on their own (``_assemble``)."""
        self._checked = None
        cuts = chunk_starts(source)
        if len(cuts) == 1 or "__future__" in source or "global" in source:
            self._accepted = set()
            return check(source)
        ends = [offset for offset, _ in cuts[1:]] + [len(source)]
        texts = [source[start:end] for (start, _), end in zip(cuts, ends)]
        new = [text for text in texts if text not in self._accepted]
        if len(new) < len(texts) and each_accepted(new):
            self._accepted = set(texts)
            return None
        self._accepted = set()
        answer = check(source)
        if answer is None:
            self._checked = source
        return answer

    def statement_starts(self, module: cst.Module) -> list[int | None] | None:
        """The first line (1-based, leading lines included) of each of ``module.body``'s
        statements, if ``module`` is the last one this parser assembled (see
        ``ModulePositions``); None if not known."""
        if self._built is None or self._built[0] is not module:
            return None
        return self._built[1]

    def _assemble(self, source: str, cuts: list[tuple[int, int]]) -> tuple[cst.Module, list[int | None]] | None:
        chunks: list[_Chunk] = []
        starts: list[int | None] = []
        kept: dict[tuple[bool, str], list[_Chunk]] = {}
        unparsable: set[tuple[bool, str]] = set()
        self.reused = self.parsed = self.failed = 0
        ends = [offset for offset, _ in cuts[1:]] + [len(source)]
        start, line, index = 0, 0, 0
        try:
            while index < len(ends):
                end = ends[index]
                key = (start == 0, source[start:end])
                chunk = self._chunk(key, unparsable)
                if chunk is None or (end < len(source) and chunk.footer):  # cut here: not where a statement starts
                    if self.failed > MAX_FAILED_CHUNKS:
                        return None
                    unparsable.add(key)
                    index += 1
                    continue
                kept.setdefault(key, []).append(chunk)
                chunks.append(chunk)
                starts += [None if first is None else line + first + 1 for first in chunk.first_lines(key[1])]
                index += 1
                start, line = end, cuts[index][1] if index < len(cuts) else line
        except interrupt.Interrupted:  # a newer version will need the chunks parsed so far
            for key, parses in kept.items():
                self._chunks.setdefault(key, []).extend(parses)
            raise
        if start != len(source):  # the last chunks do not parse on their own
            return None
        self._chunks, self._unparsable = kept, unparsable
        if self._checked == source:  # accepted whole: so is each of its statement runs on its own
            self._accepted = {text for _, text in kept}
        module = _module_of(chunks)
        return (module, starts) if module is not None else None

    def _chunk(self, key: tuple[bool, str], unparsable: set[tuple[bool, str]]) -> _Chunk | None:
        """The chunk's parse: one of the previous version's, or a new one (None: it does not parse)."""
        if key in self._unparsable or key in unparsable:
            return None
        if cached := self._chunks.get(key):
            self.reused += 1
            return cached.pop()  # each parse is used once: a tree holds no node twice
        interrupt.check()  # between chunks: a first parse of a long text is given up soon
        self.parsed += 1
        first, text = key
        try:
            module = cst.parse_module(text)
        except Exception:  # noqa: BLE001 - any failure: this is no chunk
            self.failed += 1
            return None
        return _chunk_of(module, first)


def chunk_starts(source: str) -> list[tuple[int, int]]:
    """Where chunks start, as (offset, 0-based line): 0, and before each line that starts
    at column 0 with code that can begin a statement, the blank and column-0 comment lines
    right above it included.  Not after a decorator line (a decorator is its definition's)."""
    cuts = [(0, 0)]
    size = len(source)
    above: tuple[int, int] | None = None  # where the run of blank and comment lines above starts
    after_decorator = False
    for line, offset in enumerate(line_starts(source)):
        if offset >= size:
            break
        first = source[offset]
        if first in _BLANK_OR_COMMENT:
            above = (offset, line) if above is None else above
            continue
        if first in _INDENTED:
            above = None
            continue
        cut = (offset, line) if above is None else above
        if cut[0] > cuts[-1][0] and not after_decorator and not _NO_STATEMENT_START.match(source, offset):
            cuts.append(cut)
        after_decorator = first == "@"
        above = None
    return cuts


def _chunk_of(module: cst.Module, first: bool) -> _Chunk | None:
    if not module.body:
        return None
    statements = tuple(module.body)
    if not first and module.header:  # the whole tree's first statement keeps its leading lines
        statements = (statements[0].with_changes(leading_lines=module.header), *statements[1:])
    indented = any(_has_indented_block(statement) for statement in statements)
    return _Chunk(
        statements,
        tuple(module.header) if first else (),
        tuple(module.footer),
        module.has_trailing_newline,
        module.default_newline,
        module.default_indent if indented else None,
    )


def _has_indented_block(statement: cst.CSTNode) -> bool:
    """Whether the statement has an indented block (an INDENT token), whose detected
    indentation is then the module's default."""
    if isinstance(statement, (cst.IndentedBlock, cst.Match)):
        return True
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return False
    for name in ("body", "orelse", "handlers", "finalbody"):
        value = getattr(statement, name, None)
        values = value if isinstance(value, (tuple, list)) else (value,)
        if any(isinstance(part, cst.CSTNode) and _has_indented_block(part) for part in values):
            return True
    return False


def _module_of(chunks: list[_Chunk]) -> cst.Module | None:
    """The whole module, or None if the chunks detected different defaults."""
    newline = chunks[0].default_newline
    indents = {chunk.default_indent for chunk in chunks} - {None}
    if len(indents) > 1 or any(chunk.default_newline != newline for chunk in chunks):
        return None
    last = chunks[-1]
    return cst.Module(
        body=[statement for chunk in chunks for statement in chunk.statements],
        header=chunks[0].header,
        footer=last.footer,
        default_indent=indents.pop() if indents else _DEFAULT_INDENT,
        default_newline=newline,
        has_trailing_newline=last.has_trailing_newline,
    )
