"""Which branches of a method an instance takes, from the literals its constructor was given.

``Conv2d_batchnorm(16, 16, activation='relu')`` whose ``__init__`` stores ``self.activation =
activation`` and whose ``forward`` says ``if self.activation == 'relu': return F.relu(x)``: for
that instance the ``else`` branch never runs.  An attribute counts only when the class assigns
it once, in ``__init__``'s own statements, from a literal or a parameter the constructor call
passes a literal for (or leaves at a literal default).  A test these literals do not decide
leaves both branches possible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.effects import blocks_of
from torchlint.analysis.names import dotted_name
from torchlint.analysis.walk import contains

if TYPE_CHECKING:
    from torchlint.analysis.scopes import ClassInfo, FunctionInfo

_UNDECIDED = object()  # a test or an attribute the literals do not decide


def constructor_literals(cls: ClassInfo, constructor: cst.CSTNode | None) -> dict[str, object]:
    """``self.<attr>`` key -> the literal it holds for the instance ``constructor`` (a call of
    ``cls``) made."""
    init = cls.method("__init__")
    if init is None or not isinstance(constructor, cst.Call):
        return {}
    from torchlint.analysis.functions import argument_expressions

    passed = argument_expressions(constructor, init)
    if passed is None:
        return {}
    counts = _self_assignment_counts(cls.node)
    found: dict[str, object] = {}
    for statement in init.node.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                continue
            key = dotted_name(small.targets[0].target)
            if key is None or not key.startswith("self.") or counts.get(key) != 1:
                continue
            value = _literal(_argument_or_default(small.value, init, passed))
            if value is not _UNDECIDED:
                found[key] = value
    return found


def built_by_call(cls: ClassInfo, key: str) -> bool:
    """The class assigns ``key`` (``self.relu``) once, in ``__init__``'s own statements, from a call
    (``nn.ReLU()``, not ``nn.ReLU() if relu else nn.Identity()``): which module it holds does not
    depend on the instance."""
    init = cls.method("__init__")
    if init is None or _self_assignment_counts(cls.node).get(key) != 1:
        return False
    for statement in init.node.body.body:
        for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and dotted_name(small.targets[0].target) == key:
                return isinstance(small.value, cst.Call)
    return False


def reachable(function: FunctionInfo, node: cst.CSTNode, literals: dict[str, object]) -> bool:
    """``node`` (a statement's part in ``function``'s body) can run for an instance whose
    attributes hold ``literals``: no enclosing ``if`` it sits in a branch of is decided against it."""
    path = _branches_to(function.node.body, node)
    if path is None:
        return True
    for test, in_body in path:
        decided = _truth(test, literals)
        if decided is not _UNDECIDED and bool(decided) is not in_body:
            return False
    return True


def _argument_or_default(value: cst.BaseExpression, init: FunctionInfo, passed: dict) -> cst.BaseExpression | None:
    if not isinstance(value, cst.Name):
        return value
    params = init.node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == value.value:
            return passed.get(value.value, param.default)
    return None  # a local or a global: not decided here


def _literal(node: cst.BaseExpression | None) -> object:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, (cst.Integer, cst.Float)):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    return _UNDECIDED


def _truth(test: cst.BaseExpression, literals: dict[str, object]) -> object:
    """What ``test`` evaluates to (a Python value), or _UNDECIDED."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _truth(test.expression, literals)
        return inner if inner is _UNDECIDED else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _truth(test.left, literals), _truth(test.right, literals)
        is_and = isinstance(test.operator, cst.And)
        if left is not _UNDECIDED and bool(left) is not is_and:
            return left  # `False and ...`, `True or ...`
        return right if left is not _UNDECIDED else (right if right is not _UNDECIDED and bool(right) is not is_and else _UNDECIDED)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, right = _operand(test.left, literals), _operand(test.comparisons[0].comparator, literals)
        if left is _UNDECIDED or right is _UNDECIDED:
            return _UNDECIDED
        operator = test.comparisons[0].operator
        if isinstance(operator, cst.Equal):
            return left == right
        if isinstance(operator, cst.NotEqual):
            return left != right
        if isinstance(operator, cst.Is):
            return left is right
        if isinstance(operator, cst.IsNot):
            return left is not right
        return _UNDECIDED
    return _operand(test, literals)


def _operand(node: cst.BaseExpression, literals: dict[str, object]) -> object:
    key = dotted_name(node) if isinstance(node, cst.Attribute) else None
    if key is not None:
        return literals.get(key, _UNDECIDED)
    return _literal(node)


def _branches_to(block: cst.BaseSuite, node: cst.CSTNode) -> list[tuple[cst.BaseExpression, bool]] | None:
    """The (test, in its body) of each ``if`` around ``node`` inside ``block``; None: not in it."""
    for statement in getattr(block, "body", ()):
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            if any(small is node or getattr(small, "value", None) is node for small in statement.body) \
                    or any(contains(small, node) for small in statement.body):
                return []
            continue
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(statement, cst.If):
            found = _in_if(statement, node)
        else:
            found = None
            for part in blocks_of(statement):
                found = _branches_to(part, node)
                if found is not None:
                    break
        if found is not None:
            return found
    return None


def _in_if(statement: cst.If, node: cst.CSTNode) -> list[tuple[cst.BaseExpression, bool]] | None:
    inner = _branches_to(statement.body, node)
    if inner is not None:
        return [(statement.test, True), *inner]
    orelse = statement.orelse
    if isinstance(orelse, cst.If):
        inner = _in_if(orelse, node)
    elif isinstance(orelse, cst.Else):
        inner = _branches_to(orelse.body, node)
    else:
        inner = None
    return [(statement.test, False), *inner] if inner is not None else None


def _self_assignment_counts(cls_node: cst.ClassDef) -> dict[str, int]:
    """``self.<attr>`` key -> how many assignments (also augmented, annotated) the class's statements
    make to it (assignments are statements: no expression is walked)."""
    counts: dict[str, int] = {}
    blocks: list[cst.CSTNode] = [cls_node.body]
    while blocks:
        block = blocks.pop()
        for statement in getattr(block, "body", ()):
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else \
                        [small.target] if isinstance(small, (cst.AugAssign, cst.AnnAssign)) else []
                    for target in targets:
                        for key in _keys(target):
                            counts[key] = counts.get(key, 0) + 1
            elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                blocks.append(statement.body)
            else:
                blocks.extend(blocks_of(statement))
    return counts


def _keys(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [key for element in target.elements for key in _keys(element.value)]
    key = dotted_name(target)
    return [key] if key is not None and key.startswith("self.") else []


__all__ = ["built_by_call", "constructor_literals", "reachable"]
