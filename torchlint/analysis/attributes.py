"""Which methods of a class assign, change in place and read each ``self.<attr>``.

A per-class view for questions that span methods: a history a training step appends to
(``self.cost_his.append(loss)`` in ``learn()``) and another method plots or returns.  Built
once per class on first use, from the syntax of its method bodies (nested functions and
classes included: a closure reads ``self`` too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.names import dotted_name, self_attribute
from torchlint.analysis.walk import scan


@dataclass
class AttributeUses:
    """For each attribute name: the names of the methods that do each thing with ``self.<attr>``."""

    assigned: dict[str, set[str]] = field(default_factory=dict)  # self.x = ... (a new object)
    changed: dict[str, set[str]] = field(default_factory=dict)  # self.x.append(...), self.x += ...
    read: dict[str, set[str]] = field(default_factory=dict)  # any other use of its value

    def readers(self, attr: str) -> set[str]:
        return self.read.get(attr, set())

    def assigners(self, attr: str) -> set[str]:
        return self.assigned.get(attr, set())


def attribute_uses(cls: cst.ClassDef) -> AttributeUses:
    uses = AttributeUses()
    for statement in cls.body.body:
        if isinstance(statement, cst.FunctionDef):
            scan(statement.body, _MethodScan(statement.name.value, uses))
    return uses


class _MethodScan(cst.CSTVisitor):
    def __init__(self, method: str, uses: AttributeUses) -> None:
        self.method = method
        self.uses = uses
        self._counted: set[int] = set()  # attribute nodes already counted as assigned or changed

    def _attr(self, node: cst.BaseExpression) -> str | None:
        return self_attribute(dotted_name(node))

    def _note(self, table: dict[str, set[str]], node: cst.BaseExpression) -> None:
        attr = self._attr(node)
        if attr is not None:
            table.setdefault(attr, set()).add(self.method)
            self._counted.add(id(node))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
        for target in targets:
            self._note(self.uses.assigned, target.value if isinstance(target, cst.BaseElement) else target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._note(self.uses.changed, node.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in api.LIST_MUTATORS:
            self._note(self.uses.changed, func.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) not in self._counted:
            attr = self._attr(node)
            if attr is not None:
                self.uses.read.setdefault(attr, set()).add(self.method)
