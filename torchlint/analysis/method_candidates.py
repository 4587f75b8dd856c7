"""Which class's method ``receiver.method()`` runs when nothing names the receiver's class.

A federated server keeps its clients in ``self.users`` (a list handed to it) and calls
``ct, ns, loss = user.test()`` in a loop: the receiver's class is not known from the call,
but the call site says what the method must return for the line to run at all -- a tuple of
exactly as many items as the targets unpacking it.  Among the methods of that name the
project's classes define, a method whose every ``return`` is a tuple of another length (or
that returns nothing) would raise at that line, so it is not the one.  When exactly one
candidate fits and every other certainly does not, the call is read as a call of it.

Any doubt means no answer: a candidate whose returns are not all literal tuples (``return
stats``), a generator, a name that library objects have too (``step``, ``forward``,
``__call__``), a target list with a starred name, fewer than two targets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.scopes import ClassInfo
from torchlint.analysis.walk import OwnBodyVisitor, scan

if TYPE_CHECKING:
    from torchlint.analysis.project import ProjectClass

# Method names torch's (and other libraries') objects have: a receiver of unknown class
# calling one may be such an object, whatever the file's classes define.
_LIBRARY_METHODS = (api.STEP_METHODS | api.NOT_FORWARD_METHODS | api.LIST_METHODS | api.TENSOR_LIKE_METHODS
                    | api.GRAD_FREE_METHODS | api.VALUES_AND_INDICES | api.VALUES_AND_INDICES_GIVEN_A_DIM
                    | frozenset({"forward", "backward", "unbind"}))


def unpacking_arity(statement: cst.CSTNode | None, call: cst.Call) -> int | None:
    """``a, b, c = call`` as the current statement: how many targets (None for anything else)."""
    if statement is None or type(statement) is not cst.SimpleStatementLine:
        return None
    for small in statement.body:  # type: ignore[attr-defined]
        if type(small) is cst.Assign and small.value is call and len(small.targets) == 1:
            target = small.targets[0].target
            if type(target) in (cst.Tuple, cst.List) and len(target.elements) >= 2 and not any(
                    type(element) is cst.StarredElement for element in target.elements):
                return len(target.elements)
    return None


def returned_arities(node: cst.FunctionDef) -> frozenset[int] | None:
    """The lengths of the tuples the function returns (0 for ``return``/``return None`` and for
    falling off its end); None when some return is not a literal tuple or it is a generator."""
    finder = _ReturnFinder()
    scan(node.body, finder)
    if finder.unknown:
        return None
    if not _ends_in_return_or_raise(node.body):
        finder.arities.add(0)
    return frozenset(finder.arities)


def unique_fit(classes: Iterable[ClassInfo], method: str, arity: int) -> ClassInfo | None:
    """The one class among ``classes`` defining ``method`` whose ``method`` returns ``arity``-tuples,
    when every other class defining a method of that name certainly returns something else."""
    if method.startswith("__") or method in _LIBRARY_METHODS:
        return None
    fitting: list[ClassInfo] = []
    seen: set[int] = set()
    for cls in classes:
        info = cls.methods.get(method)
        if info is None or id(info.node) in seen:
            continue  # (an inherited method is the base's candidate)
        seen.add(id(info.node))
        arities = returned_arities(info.node)
        if arities is None:
            return None
        if arities == {arity}:
            fitting.append(cls)
        elif arity in arities:
            return None  # (some paths fit, some do not: which one runs is not known)
    return fitting[0] if len(fitting) == 1 else None


def fits_nowhere_else(classes: Sequence[ProjectClass], method: str, arity: int) -> bool:
    """No class of another project file the linted file imports has a ``method`` that may
    return ``arity``-tuples (an instance of it may be the receiver as well)."""
    for cls in classes:
        node = cls.method_node(method) if method in cls.file.text else None
        if node is None:
            continue
        arities = returned_arities(node)
        if arities is None or arity in arities:
            return False
    return True


def _ends_in_return_or_raise(body: cst.BaseSuite) -> bool:
    statements = body.body if type(body) is cst.IndentedBlock else ()
    if not statements:
        return False
    last = statements[-1]
    return type(last) is cst.SimpleStatementLine and any(type(s) in (cst.Return, cst.Raise) for s in last.body)


class _ReturnFinder(OwnBodyVisitor):
    def __init__(self) -> None:
        self.arities: set[int] = set()
        self.unknown = False

    def visit_Return(self, node: cst.Return) -> None:
        value = node.value
        if value is None or (type(value) is cst.Name and value.value == "None"):
            self.arities.add(0)
        elif type(value) in (cst.Tuple, cst.List) and not any(
                type(element) is cst.StarredElement for element in value.elements):  # type: ignore[attr-defined]
            self.arities.add(len(value.elements))  # type: ignore[attr-defined]
        else:
            self.unknown = True

    def visit_Yield(self, node: cst.Yield) -> None:
        self.unknown = True
