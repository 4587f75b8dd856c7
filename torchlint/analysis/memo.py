"""Facts about a node that follow from its subtree alone (what a body binds, the order of a
body's nodes, the names whose ``.grad`` a body reads), worked out once per node.

libcst nodes are immutable, all the way down: a fact of a node's subtree stays true for as
long as the node is the same object.  An entry holds its node, so the node (and its ``id``)
lives as long as the entry, and an entry is used only for that very object (``is``): a fact
is never taken for another node that happens to get the same ``id``.

The CLI's engine gives each file's analysis a new memo (then it only spares the summarising
analyzers, which look into the same bodies again, a second walk).  The language server's
worker keeps one per document, on the document's ``IncrementalParser``: the parser hands a new
version the nodes of the statements that did not change, and their facts are not worked out
again.  A changed statement is a new node, so its facts are new too.  What an analysis did not
ask about is forgotten when the next complete analysis ends (``sweep``): the memo holds the
facts of at most the last two versions' nodes.

A fact must be a function of the node's subtree only (never of the source text around it, the
settings, the rules or the analysis state), and must not be changed by those who ask for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import libcst as cst

T = TypeVar("T")
_Node = TypeVar("_Node", bound=cst.CSTNode)


class NodeMemo:
    """Facts by (kind of fact, node)."""

    def __init__(self) -> None:
        # (kind, id(node)) -> (node, fact): asked for since the last sweep, and before it.
        self._current: dict[tuple[str, int], tuple[cst.CSTNode, object]] = {}
        self._previous: dict[tuple[str, int], tuple[cst.CSTNode, object]] = {}
        self.made = self.reused = 0  # facts worked out, and taken from before the last sweep (tests)

    def get(self, kind: str, node: _Node, make: Callable[[_Node], T]) -> T:
        """The fact ``kind`` of ``node``: ``make(node)``, worked out once per node object.
        ``kind`` names ``make``'s question (one kind, one ``make``)."""
        key = (kind, id(node))
        entry = self._current.get(key)
        if entry is None or entry[0] is not node:
            entry = self._previous.pop(key, None)
            if entry is None or entry[0] is not node:
                entry = (node, make(node))
                self.made += 1
            else:
                self.reused += 1
            self._current[key] = entry
        return entry[1]  # type: ignore[return-value]

    def sweep(self) -> None:
        """An analysis is complete: keep the facts it asked for, forget the others (those of
        nodes an earlier version had).  An analysis given up before its end sweeps nothing:
        the facts of the version before stay for the next one."""
        self._previous, self._current = self._current, {}
