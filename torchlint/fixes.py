"""Building blocks for autofixes, shared by rules.  Everything here builds new
libcst nodes; the engine applies them by replacing the original nodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from torchlint.rule import Fix, FixSafety

_AUG_TO_METHOD: dict[type[cst.BaseAugOp], str] = {
    cst.SubtractAssign: "sub_",
    cst.AddAssign: "add_",
    cst.MultiplyAssign: "mul_",
    cst.DivideAssign: "div_",
}
_BINARY_TO_AUG: dict[type[cst.BaseBinaryOp], type[cst.BaseAugOp]] = {
    cst.Subtract: cst.SubtractAssign,
    cst.Add: cst.AddAssign,
    cst.Multiply: cst.MultiplyAssign,
    cst.Divide: cst.DivideAssign,
}
# ``x op= y`` -> ``x = x op y`` (the out-of-place form of an augmented assignment).
AUG_TO_BINARY: dict[type[cst.BaseAugOp], type[cst.BaseBinaryOp]] = {
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
    cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.PowerAssign: cst.Power,
    cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo,
}
BINARY_TO_METHOD: dict[type[cst.BaseBinaryOp], str] = {
    cst.Subtract: "sub_",
    cst.Add: "add_",
    cst.Multiply: "mul_",
    cst.Divide: "div_",
}


def data_of(expr: cst.BaseExpression) -> cst.Attribute:
    """``expr.data``."""
    return cst.Attribute(value=expr.with_changes(lpar=[], rpar=[]) if _is_simple(expr) else expr, attr=cst.Name("data"))


def _is_simple(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Name, cst.Attribute))


def method_call(receiver: cst.BaseExpression, method: str, args: list[cst.Arg]) -> cst.Call:
    """``receiver.method(args)`` (arguments keep their own formatting)."""
    cleaned = list(args)
    if cleaned:
        cleaned[-1] = cleaned[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(method)), args=cleaned)


def atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr``, parenthesised unless it already binds tighter than an attribute access."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.Integer,
                         cst.Float, cst.List, cst.Tuple, cst.Dict, cst.Set)) or getattr(expr, "lpar", None):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[], rpar=[]) if getattr(expr, "lpar", None) else expr


def aug_method(op: cst.BaseAugOp) -> str | None:
    return _AUG_TO_METHOD.get(type(op))


def binary_to_aug(op: cst.BaseBinaryOp) -> cst.BaseAugOp | None:
    aug = _BINARY_TO_AUG.get(type(op))
    return aug() if aug else None


def no_grad_call(torch_name: str) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("no_grad")))


def wrap_in_no_grad(
    line: cst.SimpleStatementLine,
    new_statements: cst.BaseSmallStatement | Sequence[cst.BaseSmallStatement],
    torch_name: str,
) -> cst.With:
    """Turn a one-statement line into ``with torch.no_grad():`` around the new statement(s),
    one line each.

    Comments above the line stay above the ``with``; a trailing comment stays on
    the last statement.
    """
    if isinstance(new_statements, cst.BaseSmallStatement):
        new_statements = [new_statements]
    statements = [s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for s in new_statements]
    inner = _lines(statements, (), line.trailing_whitespace)
    # The new header line ends like the line it replaces (files with mixed line endings).
    header = cst.TrailingWhitespace(newline=line.trailing_whitespace.newline)
    return cst.With(
        items=[cst.WithItem(item=no_grad_call(torch_name))],
        body=cst.IndentedBlock(body=inner, header=header),
        leading_lines=line.leading_lines,
    )


def can_wrap_statement(line: cst.CSTNode | None, small: cst.CSTNode) -> bool:
    """A with-block can replace ``line`` only if it is a line holding just ``small``."""
    return isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and line.body[0] is small


def replace(description: str, old: cst.CSTNode, new: cst.CSTNode, safety: FixSafety = FixSafety.SAFE) -> Fix:
    return Fix(description, ((old, new),), safety)


def source_of(node: cst.CSTNode) -> str:
    if type(node) is cst.Name and not node.lpar and not node.rpar:  # (most: a variable's name)
        return node.value
    return _EMPTY_MODULE.code_for_node(node)


_EMPTY_MODULE = cst.Module(body=[])  # (its default indent and newline: libcst's)


@dataclass(frozen=True)
class InplaceUpdate:
    """``target = target <op> arg`` to be rewritten as ``target.<method>(args)``."""

    target: cst.BaseExpression
    method: str
    args: list[cst.Arg]
    aug_op: cst.BaseAugOp | None


def inplace_update(
    *,
    small: cst.BaseSmallStatement,
    target: cst.BaseExpression,
    method: str,
    args: list[cst.Arg],
    aug_op: cst.BaseAugOp | None,
    no_grad_style: bool,
    grad_disabled_here: bool,
    line: cst.CSTNode | None,
    torch_name: str | None,
) -> Fix:
    """Rewrite the statement ``small`` into an in-place update of ``target`` that keeps it a leaf
    (see ``inplace_updates``)."""
    return inplace_updates(
        small=small,
        updates=[InplaceUpdate(target, method, args, aug_op)],
        no_grad_style=no_grad_style,
        grad_disabled_here=grad_disabled_here,
        line=line,
        torch_name=torch_name,
    )


def inplace_updates(
    *,
    small: cst.BaseSmallStatement,
    updates: list[InplaceUpdate | cst.Assign],
    no_grad_style: bool,
    grad_disabled_here: bool,
    line: cst.CSTNode | None,
    torch_name: str | None,
) -> Fix:
    """Rewrite the statement ``small`` into one in-place update per target that keeps it a
    leaf (an ``Assign`` in ``updates`` is a part of the statement that is kept as it is).

    Style "data": ``target.data.<method>(args)``.  Style "no_grad": inside a
    no_grad block ``target <op>= arg`` (or ``target.<method>(args)``), elsewhere
    the updates wrapped in one ``with torch.no_grad():`` (kept parts follow it); when the
    statement cannot be wrapped (it shares its line) the data form is used.
    """
    semicolon = small.semicolon if hasattr(small, "semicolon") else cst.MaybeSentinel.DEFAULT
    targets = ", ".join(f"`{source_of(u.target)}`" for u in updates if isinstance(u, InplaceUpdate))
    kept = [u.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for u in updates if isinstance(u, cst.Assign)]
    if no_grad_style:
        in_place = [_no_grad_form(u) for u in updates if isinstance(u, InplaceUpdate)]
        if grad_disabled_here:
            return _replace_statements(f"update {targets} in place", small, line, [*in_place, *kept], semicolon)
        if torch_name and isinstance(line, cst.SimpleStatementLine) and can_wrap_statement(line, small):
            description = f"update {targets} in place under `torch.no_grad()`"
            if not kept:
                return replace(description, line, wrap_in_no_grad(line, in_place, torch_name))
            # The kept parts run after the block, in grad mode as before.
            plain_end = cst.TrailingWhitespace(newline=line.trailing_whitespace.newline)
            block = wrap_in_no_grad(line.with_changes(trailing_whitespace=plain_end), in_place, torch_name)
            return replace(description, line, cst.FlattenSentinel([block, *_lines(kept, (), line.trailing_whitespace)]))
        if torch_name and isinstance(line, cst.SimpleStatementLine) and any(s is small for s in line.body) and not kept:
            # `a; w -= g`: the line is split so the update can have its block (a `.data`
            # fallback would write what TL011 reports).
            return replace(f"update {targets} in place under `torch.no_grad()`", line,
                           _split_around(line, small, in_place, torch_name))
    statements = [
        cst.Expr(method_call(data_of(u.target), u.method, u.args)) if isinstance(u, InplaceUpdate)
        else u.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        for u in updates
    ]
    data_targets = ", ".join(f"`{source_of(u.target)}.data`" for u in updates if isinstance(u, InplaceUpdate))
    return _replace_statements(f"update {data_targets} in place", small, line, statements, semicolon)


def _split_around(
    line: cst.SimpleStatementLine, small: cst.BaseSmallStatement, in_place: list[cst.BaseSmallStatement],
    torch_name: str,
) -> cst.FlattenSentinel:
    """The statements before ``small`` on its line, ``small`` replaced by a no_grad block, and
    the statements after it, each group on lines of its own."""
    index = next(i for i, s in enumerate(line.body) if s is small)
    before, after = list(line.body[:index]), list(line.body[index + 1 :])
    plain_end = cst.TrailingWhitespace(newline=line.trailing_whitespace.newline)
    parts: list[cst.BaseStatement] = []
    if before:
        before[-1] = before[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        parts.append(line.with_changes(body=before, trailing_whitespace=plain_end))
    last_end = line.trailing_whitespace if not after else plain_end
    block_line = line.with_changes(leading_lines=() if before else line.leading_lines, trailing_whitespace=last_end)
    parts.append(wrap_in_no_grad(block_line, in_place, torch_name))
    if after:
        after[-1] = after[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        parts.append(cst.SimpleStatementLine(body=after, trailing_whitespace=line.trailing_whitespace))
    return cst.FlattenSentinel(parts)


def _no_grad_form(update: InplaceUpdate) -> cst.BaseSmallStatement:
    single_positional = len(update.args) == 1 and update.args[0].keyword is None and not update.args[0].star
    if update.aug_op is not None and single_positional:
        return cst.AugAssign(target=update.target, operator=update.aug_op, value=update.args[0].value)
    return cst.Expr(method_call(update.target, update.method, update.args))


def _replace_statements(
    description: str,
    small: cst.BaseSmallStatement,
    line: cst.CSTNode | None,
    statements: list[cst.BaseSmallStatement],
    semicolon: cst.Semicolon | cst.MaybeSentinel,
) -> Fix:
    """``small`` replaced by ``statements``: one line each when ``small`` has its line to
    itself, else joined with semicolons in its place."""
    if len(statements) == 1:
        return replace(description, small, statements[0].with_changes(semicolon=semicolon))
    if isinstance(line, cst.SimpleStatementLine) and can_wrap_statement(line, small):
        return replace(description, line, cst.FlattenSentinel(
            _lines(statements, line.leading_lines, line.trailing_whitespace)))
    joined = [s.with_changes(semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" "))) for s in statements]
    joined[-1] = joined[-1].with_changes(semicolon=semicolon)
    return replace(description, small, cst.FlattenSentinel(joined))


def _lines(
    statements: list[cst.BaseSmallStatement],
    leading_lines: Sequence[cst.EmptyLine],
    trailing: cst.TrailingWhitespace,
) -> list[cst.SimpleStatementLine]:
    """One line per statement; comments above stay above the first, a trailing comment stays
    on the last, and every line ends like the original (mixed line endings)."""
    plain_end = cst.TrailingWhitespace(newline=trailing.newline)
    lines = [cst.SimpleStatementLine(body=[s], trailing_whitespace=plain_end) for s in statements]
    lines[0] = lines[0].with_changes(leading_lines=leading_lines)
    lines[-1] = lines[-1].with_changes(trailing_whitespace=trailing)
    return lines
