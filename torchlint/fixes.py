"""Building blocks for autofixes, shared by rules.  Everything here builds new
libcst nodes; the engine applies them by replacing the original nodes."""

from __future__ import annotations

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
    line: cst.SimpleStatementLine, new_statement: cst.BaseSmallStatement, torch_name: str
) -> cst.With:
    """Turn a one-statement line into ``with torch.no_grad():`` around the new statement.

    Comments above the line stay above the ``with``; a trailing comment stays on
    the statement.
    """
    inner = cst.SimpleStatementLine(
        body=[new_statement.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)],
        trailing_whitespace=line.trailing_whitespace,
    )
    # The new header line ends like the line it replaces (files with mixed line endings).
    header = cst.TrailingWhitespace(newline=line.trailing_whitespace.newline)
    return cst.With(
        items=[cst.WithItem(item=no_grad_call(torch_name))],
        body=cst.IndentedBlock(body=[inner], header=header),
        leading_lines=line.leading_lines,
    )


def can_wrap_statement(line: cst.CSTNode | None, small: cst.CSTNode) -> bool:
    """A with-block can replace ``line`` only if it is a line holding just ``small``."""
    return isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and line.body[0] is small


def replace(description: str, old: cst.CSTNode, new: cst.CSTNode, safety: FixSafety = FixSafety.SAFE) -> Fix:
    return Fix(description, ((old, new),), safety)


def source_of(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


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
    """Rewrite the statement ``small`` into an in-place update of ``target`` that keeps it a leaf.

    Style "data": ``target.data.<method>(args)``.  Style "no_grad": inside a
    no_grad block ``target <op>= arg`` (or ``target.<method>(args)``), elsewhere
    the same wrapped in ``with torch.no_grad():``; when the statement cannot be
    wrapped (it shares its line) the data form is used.
    """
    semicolon = small.semicolon if hasattr(small, "semicolon") else cst.MaybeSentinel.DEFAULT
    if no_grad_style:
        single_positional = len(args) == 1 and args[0].keyword is None and not args[0].star
        if aug_op is not None and single_positional:
            update: cst.BaseSmallStatement = cst.AugAssign(target=target, operator=aug_op, value=args[0].value)
        else:
            update = cst.Expr(method_call(target, method, args))
        if grad_disabled_here:
            return replace(f"update `{source_of(target)}` in place", small, update.with_changes(semicolon=semicolon))
        if torch_name and isinstance(line, cst.SimpleStatementLine) and can_wrap_statement(line, small):
            return replace(
                f"update `{source_of(target)}` in place under `torch.no_grad()`",
                line,
                wrap_in_no_grad(line, update, torch_name),
            )
    statement = cst.Expr(method_call(data_of(target), method, args), semicolon=semicolon)
    return replace(f"update `{source_of(target)}.data` in place", small, statement)
