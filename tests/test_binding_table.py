"""``BindingTable.bound_only_by`` answers from the sites and declarations ``of`` gives."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.analysis.scopes import BindingCollector, BindingTable
from torchlint.analysis.walk import scan

SOURCE = textwrap.dedent(
    """
    global g
    a = 1
    b += 1
    for c in d:
        e: int = 2
        with f as h:
            pass
    import i
    def j(k):
        l = 3
    g = 4
    if (m := 5):
        n = [o for o in p]
    try:
        pass
    except E as q:
        pass
    """
)
SITE_TYPES = (
    frozenset({cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem, cst.NamedExpr}),
    frozenset({cst.Assign}),
    frozenset(),
)


def test_bound_only_by_is_what_of_gives():
    collector = BindingCollector()
    scan(cst.parse_module(SOURCE), collector)
    table = BindingTable(collector)
    names = "abcdefghijklmnopqxyz"
    answers = set()
    for types in SITE_TYPES:
        for _ in range(2):  # remembered: the same answer again
            for name in names:
                bindings = table.of(name)
                expected = not bindings.declared_outside and bool(bindings.sites) and all(
                    type(site) in types for site in bindings.sites
                )
                assert table.bound_only_by(name, types) is expected, (name, types)
                answers.add(expected)
    assert answers == {True, False}
