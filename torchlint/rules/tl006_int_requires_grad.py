"""TL006 int-requires-grad: ``requires_grad=True`` on an integer or bool tensor."""

from __future__ import annotations

import re

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, keyword_arg, positional_args
from torchlint.analysis.torch_api import (
    DTYPE_FROM_DATA,
    DTYPE_FROM_ELEMENTS,
    FACTORIES,
    INTEGER_DTYPES,
    INTEGER_FACTORIES,
)
from torchlint.analysis.values import INTEGRAL
from torchlint.rule import Fix, FixSafety, Rule

_DECIMAL = re.compile(r"^[0-9][0-9_]*$")
_MESSAGE = (
    "{what}: `requires_grad=True` raises 'Only Tensors of floating point and complex dtype can require "
    "gradients'; {remedy}"
)


class IntRequiresGrad(Rule):
    code = "TL006"
    name = "int-requires-grad"
    summary = "requires_grad=True on an integer or bool tensor"
    fix_safety = FixSafety.SAFE
    tokens = ("requires_grad",)

    def visit_Call(self, node: cst.Call) -> None:
        requires_grad = keyword_arg(node, "requires_grad")
        if requires_grad is None or not (isinstance(requires_grad.value, cst.Name) and requires_grad.value.value == "True"):
            return
        factory = self.ctx.qualify(node.func)
        if factory not in FACTORIES:
            return
        dtype = keyword_arg(node, "dtype")
        if dtype is not None:
            if self.ctx.qualify(dtype.value) in INTEGER_DTYPES:
                self.report(node, _MESSAGE.format(what="integer dtype", remedy="use a floating dtype"),
                            self._float_dtype_fix(dtype))
            return
        if factory in INTEGER_FACTORIES:
            self.report(node, _MESSAGE.format(what=f"`{factory}` makes an integer tensor", remedy="pass a float dtype"),
                        self._add_dtype_fix(node))
            return
        if factory not in DTYPE_FROM_DATA:
            return
        data = self._dtype_deciding_args(node, factory)
        if not data or not all(self._is_integer_data(arg) for arg in data):
            return
        literals = [lit for arg in data for lit in _integer_literals(arg)]
        fix = None
        if literals and all(_DECIMAL.match(lit.value) for lit in literals):
            convert = literals if factory in DTYPE_FROM_ELEMENTS else literals[:1]
            fix = Fix(
                "use float literals",
                tuple((lit, cst.Float(value=lit.value + ".", lpar=lit.lpar, rpar=lit.rpar)) for lit in convert),
            )
        remedy = "use float literals"
        if fix is None:  # the ints are names (`n = 3`, `len(x)`): ask for a float dtype instead
            remedy, fix = "pass a float dtype", self._add_dtype_fix(node)
        self.report(node, _MESSAGE.format(what="integer data makes an integer tensor", remedy=remedy), fix)

    def _is_integer_data(self, node: cst.BaseExpression) -> bool:
        """An int or bool (a literal, or a name the model knows holds one: ``n = 3``, ``len(x)``,
        ``n + 1``), or a list or tuple of them."""
        if isinstance(node, cst.Name) and node.value in ("True", "False"):
            return True
        if isinstance(node, (cst.List, cst.Tuple)):
            return bool(node.elements) and all(
                isinstance(e, cst.Element) and self._is_integer_data(e.value) for e in node.elements
            )
        value = self.ctx.value_of(node)
        return value.kind is Kind.NUMBER and INTEGRAL in value.tags

    @staticmethod
    def _dtype_deciding_args(node: cst.Call, factory: str) -> list[cst.BaseExpression]:
        args = positional_args(node)
        if factory in DTYPE_FROM_ELEMENTS:
            data = keyword_arg(node, "data")
            return args[:1] or ([data.value] if data else [])
        if factory == "torch.full":
            fill = keyword_arg(node, "fill_value")
            return args[1:2] or ([fill.value] if fill else [])
        return args[:3]  # arange/range: start, end, step

    def _float_dtype_fix(self, dtype: cst.Arg) -> Fix | None:
        if isinstance(dtype.value, cst.Attribute):
            return fixes.replace("use torch.float32", dtype.value, dtype.value.with_changes(attr=cst.Name("float32")))
        return None

    def _add_dtype_fix(self, node: cst.Call) -> Fix | None:
        torch_name = self.ctx.torch_name
        if torch_name is None:
            return None
        args = list(node.args)
        position = next(i for i, a in enumerate(args) if a.keyword and a.keyword.value == "requires_grad")
        dtype = cst.Arg(
            value=cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("float32")),
            keyword=cst.Name("dtype"),
            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
        )
        args.insert(position, dtype)
        return fixes.replace("pass dtype=torch.float32", node, node.with_changes(args=args))


def _integer_literals(node: cst.BaseExpression) -> list[cst.Integer]:
    if isinstance(node, cst.Integer):
        return [node]
    if isinstance(node, cst.UnaryOperation):
        return _integer_literals(node.expression)
    if isinstance(node, (cst.List, cst.Tuple)):
        return [lit for e in node.elements for lit in _integer_literals(e.value)]
    return []
