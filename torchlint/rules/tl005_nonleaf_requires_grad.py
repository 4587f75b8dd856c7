"""TL005 nonleaf-requires-grad: ``requires_grad`` set on a non-leaf, or as a band-aid on a
loss that has no graph."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, Value, dotted_name, positional_args
from torchlint.analysis import torch_api as api
from torchlint.analysis.bindings import bindings_in_scope
from torchlint.analysis.events import backward_call, graph_root_key
from torchlint.analysis.values import ASSUMED_TAGS
from torchlint.analysis.walk import scan
from torchlint.rule import Fix, FixSafety, Rule

_NONLEAF_ERROR = "you can only change requires_grad flags of leaf variables."
# Receivers whose `requires_grad = False` may freeze a module's parameters (then its output is a leaf).
_MAY_FREEZE = frozenset({Kind.MODULE, Kind.LEAF, Kind.UNKNOWN, Kind.OBJECT, Kind.COLLECTION})


@dataclass
class _BandAid:
    node: cst.CSTNode
    statement: cst.CSTNode | None
    key: str
    # The value the flag was set on, to tell whether a later backward() starts from it;
    # None when the name has a single assignment in this scope (then it always is).
    origin: cst.CSTNode | None
    scope: object
    reason: str


class NonleafRequiresGrad(Rule):
    code = "TL005"
    name = "nonleaf-requires-grad"
    summary = "`requires_grad` set on a non-leaf (raises or does nothing), or on a loss that has no graph"
    fix_safety = FixSafety.UNSAFE
    tokens = ("requires_grad",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._graphless: dict[int, str] = {}  # id(assignment) -> why its value has no graph
        self._band_aids: list[_BandAid] = []
        self._freezes_parameters = False  # seen anywhere in the file (checked once it is all read)

    # ------------------------------------------------------------ assignments
    def visit_Assign(self, node: cst.Assign) -> None:
        reason = self._graph_dropped(node.value)
        if reason is not None:
            self._graphless[id(node)] = reason
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not (isinstance(target, cst.Attribute) and target.attr.value == "requires_grad"):
            return
        key = dotted_name(target.value)
        if key is None:
            return
        value = self.ctx.value_of(target.value)
        flag = _literal_bool(node.value)
        self._note_freeze(value, flag)
        if flag is None:
            return  # `y.requires_grad = x.requires_grad`: whether it raises depends on the run
        if self._is_nonleaf(value):
            self._report_nonleaf_assignment(node, target.value, key, flag)
            return
        given = self._nonleaf_given_call_sites(target.value, value)
        if given is not None:
            self._report_nonleaf_assignment(node, target.value, key, flag, given)
        if flag is True:
            self._note_band_aid(node, key, value)

    def _graph_dropped(self, expr: cst.BaseExpression) -> str | None:
        """Why the value of ``expr`` (being assigned now) has no autograd graph, or None."""
        if self.ctx.grad_mode.statically_disabled and isinstance(
            expr, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)
        ):
            return "it is computed under `torch.no_grad()`"
        if isinstance(expr, cst.Call) and self.ctx.qualify(expr.func) in api.RETENSORIZING_FACTORIES:
            if any(self._drops_graph(arg.value) for arg in expr.args):
                return "it is a new tensor made from a Python number or a NumPy array"
        value = self.ctx.value_of(expr)
        if value.kind is Kind.PLAIN and "detached" in value.tags:
            return "it is computed from detached values"
        return None

    def _drops_graph(self, expr: cst.BaseExpression, depth: int = 2) -> bool:
        """``expr`` contains ``.item()``, ``float(...)``, ``.numpy()``, a NumPy call, or a name
        holding such a value (detached per the analysis, or assigned once from such an expression)."""
        found = False
        rule = self

        class Finder(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                nonlocal found
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in api.GRAPH_DROPPING_METHODS:
                    found = True
                elif isinstance(func, cst.Name) and func.value in api.GRAPH_DROPPING_BUILTINS:
                    found = True
                elif (rule.ctx.qualify(func) or "").startswith("numpy."):
                    found = True

            def visit_Name(self, name: cst.Name) -> None:
                nonlocal found
                if "detached" in rule.ctx.value_of(name).tags:
                    found = True
                elif depth > 0:
                    assignment = bindings_in_scope(rule.ctx, name.value).single_assignment()
                    if assignment is not None and rule._drops_graph(assignment.value, depth - 1):
                        found = True

        scan(expr, Finder())
        return found

    # ------------------------------------------------------------ requires_grad_()
    def visit_Call(self, node: cst.Call) -> None:
        backward = backward_call(node, self.ctx)
        if backward is not None:
            self._check_band_aids(backward.roots)
            return
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_"):
            return
        receiver = func.value
        value = self.ctx.value_of(receiver)
        args = positional_args(node)
        flag = _literal_bool(args[0]) if args else True
        if len(node.args) > 1 or (node.args and not args):
            flag = None  # requires_grad_(requires_grad=...) and other spellings: no fix
        self._note_freeze(value, flag)
        if flag is None:
            return  # `requires_grad_(x.requires_grad)`: a no-op or an error depending on the run
        if self._is_nonleaf(value):
            self._report_nonleaf_call(node, receiver, flag)
            return
        given = self._nonleaf_given_call_sites(receiver, value)
        if given is not None:
            self._report_nonleaf_call(node, receiver, flag, given)
        key = dotted_name(receiver)
        statement_call = self.ctx.expression_statement(node)
        if key is not None and flag is True and statement_call is not None:
            self._note_band_aid(node, key, value)

    # ------------------------------------------------------------ non-leaf
    def _note_freeze(self, value: Value, flag: bool | None) -> None:
        if flag is not True and value.kind in _MAY_FREEZE:
            self._freezes_parameters = True

    def _nonleaf_given_call_sites(self, receiver: cst.BaseExpression, value: Value) -> Callable[[], bool] | None:
        """For an unknown value in a method analysed before the methods that call it: whether,
        with the parameters bound to what every call site passes, it is certainly a non-leaf
        (asked once the file is analysed: a condition for ``report``)."""
        if value.kind is not Kind.UNKNOWN:
            return None
        later = self.ctx.value_given_call_sites(receiver)
        if later is None:
            return None
        mode = self.ctx.grad_mode

        def nonleaf() -> bool:
            found = later()
            return found is not None and self._is_nonleaf(found) and not mode.is_disabled() and not (
                "model-output" in found.tags and self._freezes_parameters)

        return nonleaf

    @staticmethod
    def _is_nonleaf(value: Value) -> bool:
        """Certainly a non-leaf (not one computed only from tensors guessed to require grad)."""
        return value.kind is Kind.NONLEAF and not value.tags & (ASSUMED_TAGS | {"device-dependent"})

    def _report_nonleaf_assignment(
        self, node: cst.Assign, receiver: cst.BaseExpression, key: str, flag: bool,
        given: Callable[[], bool] | None = None,
    ) -> None:
        computed = "what the call sites pass" if given is not None else "tensors that require grad"
        message = (
            f"`{key}` is not a leaf (it is computed from {computed}): setting "
            f"`requires_grad` raises '{_NONLEAF_ERROR}'"
        )
        if flag:
            self._remove_statement(node, receiver, message + f"; `{key}` already requires grad, remove the line",
                                   given=given)
        else:
            message += f"; to cut it from the graph use `{key} = {key}.detach()`"
            self._report_nonleaf(node, receiver, message, _detach_fix(node, receiver, key), given)

    def _report_nonleaf_call(
        self, node: cst.Call, receiver: cst.BaseExpression, flag: bool, given: Callable[[], bool] | None = None
    ) -> None:
        """``given``: the condition under which it is a non-leaf, when not known by now."""
        name = fixes.source_of(receiver)
        statement = self.ctx.expression_statement(node)
        if flag:
            message = (
                f"`{name}.requires_grad_()` on a non-leaf does nothing: it already requires grad and "
                "does not become a leaf (its `.grad` stays None); remove the call"
            )
            if given is not None:
                message += " (it is computed from what the call sites pass)"
            if statement is not None:
                self._remove_statement(statement, receiver, message, reported=node, given=given)
            else:
                fix = fixes.replace("remove `requires_grad_()`", node, receiver)
                self._report_nonleaf(node, receiver, message, fix, given)
            return
        message = (
            f"`{name}` is not a leaf (it is computed from tensors that require grad): "
            f"`requires_grad_(False)` raises '{_NONLEAF_ERROR}'; use `.detach()` to cut it from the graph"
        )
        key = dotted_name(receiver)
        if statement is None:
            fix: Fix | None = fixes.replace("use `.detach()`", node, fixes.method_call(receiver, "detach", []))
        else:
            fix = _detach_fix(statement, receiver, key) if key is not None else None
        self._report_nonleaf(node, receiver, message, fix, given)

    def _report_nonleaf(
        self, node: cst.CSTNode, receiver: cst.BaseExpression, message: str, fix: Fix | None,
        given: Callable[[], bool] | None = None,
    ) -> None:
        self.report(node, message, fix, when=given or self._nonleaf_condition(receiver))

    def _nonleaf_condition(self, receiver: cst.BaseExpression) -> Callable[[], bool] | None:
        """When the value is really a non-leaf: grad mode is on for some caller, and, for a
        module's output, no parameter is frozen anywhere in the file (a frozen module's output is a leaf)."""
        mode = self.ctx.grad_mode
        module_output = "model-output" in self.ctx.value_of(receiver).tags
        if mode.statically_enabled and not module_output:
            return None
        return lambda: not mode.is_disabled() and not (module_output and self._freezes_parameters)

    def _remove_statement(
        self,
        small: cst.BaseSmallStatement,
        receiver: cst.BaseExpression,
        message: str,
        reported: cst.CSTNode | None = None,
        given: Callable[[], bool] | None = None,
    ) -> None:
        """Report with a fix that deletes ``small`` (``pass`` when its block would be empty)."""
        line = self.ctx.statement
        node = reported or small
        condition = given or self._nonleaf_condition(receiver)

        def report_with_block(block: cst.CSTNode) -> None:
            fix = _removal_fix(block, line, small)
            self.report(node, message, fix, when=condition, statement=line)

        if line is None or not self.ctx.at_block_end(report_with_block):
            self._report_nonleaf(node, receiver, message, None, given)

    # ------------------------------------------------------------ band-aid
    def _note_band_aid(self, node: cst.CSTNode, key: str, value: Value) -> None:
        reason = None
        origin: cst.CSTNode | None = None
        if isinstance(node, cst.Assign):
            origin_after = node.targets[0].target  # the analysis re-binds the name to this leaf
        else:
            origin_after = node
        if "." not in key:
            assignment = bindings_in_scope(self.ctx, key).single_assignment()
            if assignment is not None:
                reason = self._graphless.get(id(assignment))
        if reason is None and value.kind is Kind.PLAIN and "detached" in value.tags:
            reason, origin = "it is computed from detached values", origin_after
        if reason is None or value.kind not in (Kind.PLAIN, Kind.UNKNOWN):
            return
        self._band_aids.append(_BandAid(node, self.ctx.statement, key, origin, self.ctx.function, reason))

    def _check_band_aids(self, roots: tuple[cst.BaseExpression, ...]) -> None:
        keys = {key for key in map(graph_root_key, roots) if key is not None}
        for band_aid in list(self._band_aids):
            if band_aid.key not in keys or band_aid.scope is not self.ctx.function:
                continue
            if band_aid.origin is not None and self.ctx.value_of_key(band_aid.key).origin is not band_aid.origin:
                continue
            self._band_aids.remove(band_aid)
            self.report(
                band_aid.node,
                f"`{band_aid.key}` has no graph ({band_aid.reason}): setting `requires_grad` silences "
                "'element 0 of tensors does not require grad and does not have a grad_fn' but "
                "`backward()` then reaches no parameter and nothing trains; compute the loss from tensors "
                "that carry the graph",
                statement=band_aid.statement,
            )


def _literal_bool(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _detach_fix(small: cst.BaseSmallStatement, receiver: cst.BaseExpression, key: str) -> Fix:
    """``y.requires_grad = False`` -> ``y = y.detach()``."""
    target = fixes.strip_parens(receiver)
    assign = cst.Assign(
        targets=[cst.AssignTarget(target)],
        value=fixes.method_call(target, "detach", []),
        semicolon=getattr(small, "semicolon", cst.MaybeSentinel.DEFAULT),
    )
    return fixes.replace(f"detach `{key}` instead", small, assign)


def _removal_fix(block: cst.CSTNode, line: cst.CSTNode | None, small: cst.BaseSmallStatement) -> Fix | None:
    """Delete ``small`` from its line, or the line from ``block``; ``pass`` keeps a block non-empty."""
    description = "remove the statement"
    if isinstance(line, cst.SimpleStatementSuite) or (isinstance(line, cst.SimpleStatementLine) and len(line.body) > 1):
        kept = [statement for statement in line.body if statement is not small]
        if not kept:
            return fixes.replace(description, small, cst.Pass())
        kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return fixes.replace(description, line, line.with_changes(body=kept))
    if not isinstance(line, cst.SimpleStatementLine):
        return None
    statements = list(getattr(block, "body", ()))
    if line not in statements:
        return None
    if len(statements) == 1:
        return fixes.replace(description, line, line.with_changes(body=[cst.Pass()]))
    if not any(empty.comment is not None for empty in line.leading_lines):
        return fixes.replace(description, line, cst.RemovalSentinel.REMOVE)
    # Keep the comments above the deleted line: hand them to the next statement.
    index = statements.index(line)
    if index + 1 < len(statements):
        following = statements[index + 1]
        moved = following.with_changes(leading_lines=[*line.leading_lines, *following.leading_lines])
        return Fix(description, ((line, cst.RemovalSentinel.REMOVE), (following, moved)))
    return fixes.replace(description, line, line.with_changes(body=[cst.Pass()]))
