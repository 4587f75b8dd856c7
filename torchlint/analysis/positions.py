"""Where each node is in the source: libcst's ``PositionProvider``, about four times as fast.

``MetadataWrapper(module).resolve(PositionProvider)`` first walks the whole tree
for batchable providers (there are none here), then generates the module's code
while recording every node's start and end.  This module only does the second
part, with a leaner recording state: positions are kept as plain tuples by node
id, and a ``CodeRange`` is built only for the nodes that are looked up (a
linter looks up a few).  The positions are exactly libcst's
(``tests/test_positions.py`` compares them on the fixtures and the corpus).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

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

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return (node for node, _, _ in self._spans.values())

    def __len__(self) -> int:
        return len(self._spans)


def node_positions(module: cst.Module) -> NodePositions:
    """``MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)``, faster."""
    state = _PositionState(default_indent=module.default_indent, default_newline=module.default_newline)
    module._codegen(state)
    return NodePositions(state.spans)


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
