"""Where each node is in the source: libcst's ``PositionProvider``, about four times as fast,
and (``ModulePositions``) only for the top-level statements that hold a looked-up node.

``MetadataWrapper(module).resolve(PositionProvider)`` first walks the whole tree
for batchable providers (there are none here), then generates the module's code
while recording every node's start and end.  This module only does the second
part, with a leaner recording state: positions are kept as plain tuples by node
id, and a ``CodeRange`` is built only for the nodes that are looked up (a
linter looks up a few).  The positions are exactly libcst's
(``tests/test_positions.py`` compares them on the fixtures and the corpus).

A linter looks up the positions of a few nodes in a few statements: ``ModulePositions``
generates the code of one top-level statement at a time, starting at the line
CPython's own parser gives for it (``ast``, a fraction of the cost), and checks
that the generated text is the source's at that line; when it cannot tell where a
statement starts, or the node is in none it was pointed at, it falls back to the
whole module.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from torchlint.analysis.memo import NodeMemo

_NEWLINE = re.compile(r"\r\n?|\n")  # libcst's NEWLINE_RE

# id(node) -> (node, (start line, start column), (end line, end column))
_Spans = dict[int, tuple[cst.CSTNode, tuple[int, int], tuple[int, int]]]


class NodePositions(Mapping[cst.CSTNode, CodeRange]):
    """The syntactic position of every node of a module, as ``PositionProvider`` gives it."""

    def __init__(self, spans: _Spans) -> None:
        self._spans = spans

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        entry = self._spans.get(id(node))
        if entry is None or entry[0] is not node:
            raise KeyError(node)
        _, start, end = entry
        return CodeRange(CodePosition(*start), CodePosition(*end))

    def at(self, node: cst.CSTNode, near: cst.CSTNode | None = None) -> CodeRange:
        """``self[node]`` (every position is known: ``near`` is not needed)."""
        return self[node]

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return (node for node, _, _ in self._spans.values())

    def __len__(self) -> int:
        return len(self._spans)


def node_positions(module: cst.Module) -> NodePositions:
    """``MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)``, faster."""
    state = _PositionState(default_indent=module.default_indent, default_newline=module.default_newline)
    module._codegen(state)
    return NodePositions(state.spans)


class ModulePositions(Mapping[cst.CSTNode, CodeRange]):
    """``node_positions(module)``, computed lazily: ``at(node, near)`` generates only the
    top-level statement (or header/footer line) that holds ``near``."""

    def __init__(
        self,
        module: cst.Module,
        source: str,
        body_starts: Sequence[int | None] | None = None,
        memo: NodeMemo | None = None,
    ) -> None:
        """``body_starts``: the first line of each top-level statement, when the caller knows
        them (``statement_starts`` otherwise finds them; a wrong one only costs time).
        ``memo``: where the code of each statement generated, and its nodes' positions from
        its first line, are kept (``memo.py``: a statement the next version reuses is not
        generated again)."""
        self._module = module
        self._memo = memo
        # The pieces generated with the memo: index -> (their spans from line 1, lines to add).
        self._shifted: dict[int, tuple[_Spans, int]] = {}
        self._body_starts = body_starts
        self._source = source
        self._pieces: list[cst.CSTNode] = [*module.header, *module.body, *module.footer]
        self._spans: _Spans = {}
        self._generated: set[int] = set()  # indexes of the pieces whose positions are in
        self._everything = False
        self._starts: list[int | None] | None = None  # first line of each piece (None: unknown)
        self._line_offsets: list[int] | None = None
        self._owners: dict[int, int] | None = None  # id(statement) -> index of its piece

    def at(self, node: cst.CSTNode, near: cst.CSTNode | None = None) -> CodeRange:
        """The position of ``node``, which is in (or is) the statement ``near``, if given;
        without ``near``, cheap only for a statement."""
        entry = self._spans.get(id(node))
        if (entry is None or entry[0] is not node) and not self._everything:
            piece = self._piece_of(node if near is None else near)  # a statement is its own hint
            if piece is not None and piece not in self._generated:
                self._generate(piece)
            entry = self._spans.get(id(node))
            if (entry is None or entry[0] is not node) and self._shifted:
                entry = self._shifted_entry(node, piece)
        if entry is None or entry[0] is not node:
            return self._from_whole_module(node)
        _, start, end = entry
        return CodeRange(CodePosition(*start), CodePosition(*end))

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        return self.at(node)

    def __iter__(self) -> Iterator[cst.CSTNode]:
        self._generate_everything()
        return (node for node, _, _ in self._spans.values())

    def __len__(self) -> int:
        self._generate_everything()
        return len(self._spans)

    @property
    def pieces(self) -> Sequence[cst.CSTNode]:
        """The module's header lines, top-level statements and footer lines, in order."""
        return self._pieces

    def _from_whole_module(self, node: cst.CSTNode) -> CodeRange:
        self._generate_everything()
        entry = self._spans.get(id(node))
        if entry is None or entry[0] is not node:
            raise KeyError(node)
        _, start, end = entry
        return CodeRange(CodePosition(*start), CodePosition(*end))

    def _generate_everything(self) -> None:
        if not self._everything:
            self._spans = node_positions(self._module)._spans
            self._everything = True

    def _piece_of(self, near: cst.CSTNode) -> int | None:
        if self._owners is None:
            if self._memo is None:
                self._owners = _statement_owners(self._pieces)
            else:
                self._owners = owners = {}
                for index, piece in enumerate(self._pieces):
                    owners.update(dict.fromkeys(self._memo.get("statement ids", piece, _statement_ids), index))
        return self._owners.get(id(near))

    def _generate(self, piece: int) -> None:
        self._generated.add(piece)
        start = self._piece_start(piece)
        if start is None:
            return
        module = self._module
        if self._memo is None:
            code, last, spans = _piece_code(self._pieces[piece], module.default_indent, module.default_newline, start)
        else:
            kind = f"positions {module.default_indent!r} {module.default_newline!r}"
            code, last, spans = self._memo.get(
                kind, self._pieces[piece], lambda node: _piece_code(node, module.default_indent, module.default_newline)
            )
        if piece == len(self._pieces) - 1 and not module.has_trailing_newline:
            code = code[: len(code) - last]
        offsets = self._offsets()
        if start <= len(offsets) and self._source.startswith(code, offsets[start - 1]):
            if self._memo is None:  # else: a wrong start; the whole module decides
                self._spans.update(spans)
            else:
                self._shifted[piece] = (spans, start - 1)

    def _shifted_entry(
        self, node: cst.CSTNode, piece: int | None
    ) -> tuple[cst.CSTNode, tuple[int, int], tuple[int, int]] | None:
        """``node``'s span in a piece generated with the memo: ``piece`` first, then the others."""
        first = self._shifted.get(piece) if piece is not None else None
        for spans, lines in self._shifted.values() if first is None else (first, *self._shifted.values()):
            entry = spans.get(id(node))
            if entry is not None and entry[0] is node:
                _, (line, column), (end_line, end_column) = entry
                return node, (line + lines, column), (end_line + lines, end_column)
        return None

    def _offsets(self) -> list[int]:
        """The offset in the source at which each line starts."""
        if self._line_offsets is None:
            self._line_offsets = [0, *(match.end() for match in _NEWLINE.finditer(self._source))]
        return self._line_offsets

    def _piece_start(self, piece: int) -> int | None:
        if self._starts is None:
            self._starts = self._first_lines()
        return self._starts[piece]

    def _first_lines(self) -> list[int | None]:
        module = self._module
        header, footer = len(module.header), len(module.footer)
        starts: list[int | None] = [index + 1 for index in range(header)]
        starts += self._body_starts if self._body_starts is not None else statement_starts(module.body, self._source)
        offsets = self._offsets()
        lines = len(offsets) - 1 if self._source.endswith(("\n", "\r")) or not self._source else len(offsets)
        starts += [lines - footer + 1 + index for index in range(footer)]
        return starts


def _piece_code(
    piece: cst.CSTNode, default_indent: str, default_newline: str, start: int = 1
) -> tuple[str, int, _Spans]:
    """A top-level piece's code (generated from line ``start``), the length of its last token,
    and its nodes' positions."""
    state = _PositionState(default_indent, default_newline)
    state.line = start
    piece._codegen(state)
    return "".join(state.tokens), len(state.tokens[-1]) if state.tokens else 0, state.spans


def statement_starts(body: Sequence[cst.BaseStatement], source: str) -> list[int | None]:
    """The first line of each top-level statement's code (its leading blank and comment lines
    included), from CPython's parser; all None when that cannot tell."""
    unknown: list[int | None] = [None] * len(body)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            parsed = ast.parse(source).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # syntax newer than this Python ...
        return unknown
    starts: list[int | None] = []
    index = 0
    for statement in body:
        if index >= len(parsed):
            return unknown
        first = parsed[index]
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        starts.append(_first_line(statement, first))
    return starts if index == len(parsed) else unknown


def _first_line(statement: cst.BaseStatement, parsed: ast.stmt) -> int | None:
    """Where ``statement``'s code starts, given CPython's node for its first statement."""
    decorators = getattr(statement, "decorators", ())
    if not decorators:
        return parsed.lineno - len(statement.leading_lines)
    first = decorators[0]
    # CPython places a decorator at its expression, which a parenthesis or a line
    # continuation after the ``@`` can move to a later line.
    if first.decorator.lpar or "\\" in first.whitespace_after_at.value:
        return None
    expressions = getattr(parsed, "decorator_list", None)
    if not expressions:
        return None
    return expressions[0].lineno - len(statement.leading_lines) - len(first.leading_lines)


_NESTED_STATEMENTS = ("body", "orelse", "handlers", "finalbody", "cases")
_NESTING_FIELDS: dict[type, tuple[str, ...]] = {}


def _nesting_fields(cls: type) -> tuple[str, ...]:
    fields = _NESTING_FIELDS.get(cls)
    if fields is None:
        names = {field.name for field in dataclasses.fields(cls)}
        fields = _NESTING_FIELDS[cls] = tuple(name for name in _NESTED_STATEMENTS if name in names)
    return fields


def _statement_owners(pieces: Sequence[cst.CSTNode]) -> dict[int, int]:
    """id of every statement line, compound statement and block (and header/footer line)
    -> the index of the piece it is in."""
    owners: dict[int, int] = {}
    for index, piece in enumerate(pieces):
        owners.update(dict.fromkeys(_statement_ids(piece), index))
    return owners


def _statement_ids(piece: cst.CSTNode) -> list[int]:
    """The ids of the statement lines, compound statements and blocks of a piece (itself included)."""
    ids: list[int] = []
    simple = (cst.SimpleStatementLine, cst.EmptyLine)
    stack = [piece]
    while stack:
        node = stack.pop()
        ids.append(id(node))
        if type(node) in simple:
            for small in getattr(node, "body", ()):
                ids.append(id(small))
            continue
        for name in _nesting_fields(type(node)):
            value = getattr(node, name)
            if type(value) in (tuple, list):
                stack.extend(value)
            elif value is not None and not isinstance(value, cst.MaybeSentinel):
                stack.append(value)
    return ids


class _PositionState(CodegenState):
    """libcst's ``PositionProvidingCodegenState`` with tuples for positions."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.line = 1  # one-based
        self.column = 0  # zero-based
        self.spans: _Spans = {}
        self._starts: list[tuple[int, int]] = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self._advance(value)

    def _advance(self, value: str) -> None:
        if "\n" not in value and "\r" not in value:  # nearly every token
            self.column += len(value)
            return
        segments = _NEWLINE.split(value)
        if len(segments) == 1:
            self.column += len(value)
        else:
            self.line += len(segments) - 1
            self.column = len(segments[-1])

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        if id(node) not in self.spans:  # a syntactic position recorded inside wins
            self.spans[id(node)] = (node, start, (self.line, self.column))

    def record_syntactic_position(  # type: ignore[override]
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> _SyntacticPosition:
        return _SyntacticPosition(self, node, start_node, end_node)


class _SyntacticPosition:
    """``with state.record_syntactic_position(node, ...)``: a class, not a generator (faster)."""

    __slots__ = ("end_node", "node", "start", "start_node", "state")

    def __init__(
        self,
        state: _PositionState,
        node: cst.CSTNode,
        start_node: cst.CSTNode | None,
        end_node: cst.CSTNode | None,
    ) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = (self.state.line, self.state.column)

    def __exit__(self, *exc_info: object) -> None:
        # Like libcst's (a ``try/finally`` around the ``yield``): recorded even on an error.
        state = self.state
        start, end = self.start, (state.line, state.column)
        if self.start_node is not None:
            start = state.spans[id(self.start_node)][1]
        if self.end_node is not None:
            end = state.spans[id(self.end_node)][2]
        state.spans[id(self.node)] = (self.node, start, end)
