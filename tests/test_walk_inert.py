"""``inert_types`` (the node classes a walker steps over) is the largest set of classes whose
fields hold only classes of the set, as the plain fixed-point iteration finds it."""

from __future__ import annotations

import random

import libcst as cst

from torchlint.analysis.walk import NODE_TYPES, field_types, inert_types


def _fixed_point(handled: frozenset[type]) -> frozenset[type]:
    inert = set(NODE_TYPES - handled)
    changed = True
    while changed:
        changed = False
        for cls in list(inert):
            if any(types is None or not types <= inert for _, types in field_types(cls)):
                inert.discard(cls)
                changed = True
    return frozenset(inert)


def test_inert_types_is_the_largest_closed_set() -> None:
    chooser = random.Random(20261201)
    ordered = sorted(NODE_TYPES, key=lambda cls: cls.__name__)
    handled_sets = [
        frozenset(),
        frozenset({cst.Call}),
        frozenset({cst.Attribute, cst.FunctionDef, cst.ClassDef, cst.Lambda}),
        frozenset({cst.Name}),
        frozenset({cst.SimpleWhitespace, cst.Comment}),
        *(frozenset(chooser.sample(ordered, size)) for size in (1, 2, 3, 5, 8, 13, 40)),
    ]
    sizes = set()
    for handled in handled_sets:
        expected = _fixed_point(handled)
        assert inert_types(handled) == expected, sorted(cls.__name__ for cls in handled)
        sizes.add(len(expected))
    assert len(sizes) > 3  # the sets differ: the comparison says something
