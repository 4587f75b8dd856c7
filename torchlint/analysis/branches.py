"""Statements, blocks and branches, mixed into the ``Analyzer``: the current statement, the
enclosing loops and compound statements, hooks run at a block's end, and the joins of what
names hold where branches (``if``, loops, ``try``) meet.
"""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.scopes import Scope
from torchlint.analysis.values import TENSOR_KINDS, UNKNOWN, Kind, Value, join_states
from torchlint.analysis.walk import contains


# Statements whose bindings the analysis records in ``scope.values``.
_TRACKED_BINDING_SITES = frozenset({cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem, cst.NamedExpr})


class ControlFlow:
    """Mixin of ``Analyzer`` (uses its ``scope``, ``value_of``, ``_bind_loop_target`` ...)."""

    def runs_every_iteration(self, loop: cst.For | cst.While) -> bool:
        """Whether the current point runs on every iteration of the enclosing ``loop``: nothing
        but ``with`` blocks and loops over parameters (``for p in model.parameters()``) stands
        between them (no ``if``, ``try`` or other inner loop)."""
        for index, node in enumerate(self.compound):
            if node is loop:
                return all(
                    type(inner) is cst.With or self._loops_over_parameters(inner)
                    for inner in self.compound[index + 1 :]
                )
        return False

    def runs_once_per_run_of(self, loop: cst.For | cst.While) -> bool:
        """Whether the current point runs in at most one iteration of each run of ``loop``: it is
        in the body of an ``if`` inside the loop that compares the loop's iteration counter with
        a literal (``for t in range(n): ... if t == 0:``, ``for i, b in enumerate(loader)``)."""
        counter = _iteration_counter(loop)
        if counter is None:
            return False
        inside = False
        for node in self.compound:
            if node is loop:
                inside = True
            elif (
                inside and type(node) is cst.If and _compares_with_literal(node.test, counter)
                and self.statement is not None and contains(node.body, self.statement)
            ):
                return True
        return False

    def _loops_over_parameters(self, node: cst.CSTNode) -> bool:
        if type(node) is not cst.For:
            return False
        iterated = self.value_of(node.iter)  # type: ignore[attr-defined]
        return iterated.kind is Kind.COLLECTION and iterated.element is not None and (
            iterated.element.kind is Kind.LEAF and "parameter" in iterated.element.tags)

    def repeated_body(self) -> cst.For | cst.While | cst.FunctionDef | None:
        """The innermost body around the current point that runs again and again: the
        enclosing loop of this function, else the function itself; None at module level
        outside loops."""
        if self.loops:
            return self.loops[-1]
        function = self.function
        return function.node if function is not None else None

    # ------------------------------------------------------------ blocks
    def _enter_Module(self, node: cst.Module) -> None:
        self._block_hooks.append((node, []))

    def _leave_Module(self, node: cst.Module) -> None:
        self._run_block_hooks()
        self._run_deferred(self.scope)

    def _enter_IndentedBlock(self, node: cst.IndentedBlock | cst.SimpleStatementSuite) -> None:
        self._block_hooks.append((node, []))

    def _leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._run_block_hooks()

    _enter_SimpleStatementSuite = _enter_IndentedBlock

    def _leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.statement = None
        self._run_block_hooks()

    def _run_block_hooks(self) -> None:
        block, hooks = self._block_hooks.pop()
        for hook in hooks:
            hook(block)

    def _enter_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node
        if self._loop_exits:
            self._after_loop(node)

    def _leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = None

    def _enter_SimpleStatementSuite_body(self, node: cst.SimpleStatementSuite) -> None:
        self.statement = node

    # ------------------------------------------------------------ control flow
    def _enter_If(self, node: cst.If) -> None:
        self._branch_states.append({"entry": dict(self.scope.values)})
        self.compound.append(node)
        self._forget_guarded(node.test)

    def _leave_If_body(self, node: cst.If) -> None:
        frame = self._branch_states[-1]
        frame["body"] = self.scope.values
        self.scope.values = dict(frame["entry"])  # type: ignore[arg-type]

    def _leave_If(self, node: cst.If) -> None:
        self.compound.pop()
        frame = self._branch_states.pop()
        self.scope.values = join_states(frame["body"], self.scope.values, self._unbound_where_missing)  # type: ignore[arg-type]

    def _enter_For_body(self, node: cst.For) -> None:
        self._branch_states.append({"entry": dict(self.scope.values)})
        self._bind_loop_target(node.target, node.iter)
        self.loops.append(node)
        self.compound.append(node)

    def _leave_For_body(self, node: cst.For | cst.While) -> None:
        self.loops.pop()
        self.compound.pop()
        frame = self._branch_states.pop()
        ran = self.scope.values
        entry = _started_accumulators(frame["entry"], ran)  # type: ignore[arg-type]
        self.scope.values = join_states(entry, ran, self._unbound_where_missing)
        self._note_loop_exit(frame["entry"], ran)  # type: ignore[arg-type]

    def _enter_While_body(self, node: cst.While) -> None:
        self._branch_states.append({"entry": dict(self.scope.values)})
        self.loops.append(node)
        self.compound.append(node)

    _leave_While_body = _leave_For_body

    def _enter_Try(self, node: cst.Try | cst.TryStar) -> None:
        self._branch_states.append({"entry": dict(self.scope.values), "ends": []})
        self.compound.append(node)

    _enter_TryStar = _enter_Try

    def _leave_Try_body(self, node: cst.Try | cst.TryStar) -> None:
        self._branch_states[-1]["body"] = dict(self.scope.values)

    _leave_TryStar_body = _leave_Try_body

    def _enter_ExceptHandler(self, node: cst.ExceptHandler | cst.ExceptStarHandler) -> None:
        frame = self._branch_states[-1]
        self.scope.values = join_states(frame["entry"], frame["body"], self._unbound_where_missing)  # type: ignore[arg-type]
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self.scope.bind(node.name.name.value, UNKNOWN)

    _enter_ExceptStarHandler = _enter_ExceptHandler

    def _leave_ExceptHandler(self, node: cst.ExceptHandler | cst.ExceptStarHandler) -> None:
        self._branch_states[-1]["ends"].append(dict(self.scope.values))  # type: ignore[union-attr]

    _leave_ExceptStarHandler = _leave_ExceptHandler

    def _enter_Try_orelse(self, node: cst.Try | cst.TryStar) -> None:
        self.scope.values = dict(self._branch_states[-1]["body"])  # type: ignore[arg-type]

    _enter_TryStar_orelse = _enter_Try_orelse

    def _leave_Try_orelse(self, node: cst.Try | cst.TryStar) -> None:
        self._branch_states[-1]["body"] = dict(self.scope.values)

    _leave_TryStar_orelse = _leave_Try_orelse

    # ------------------------------------------------------------ after a loop
    def _note_loop_exit(self, entry: dict[str, Value], ran: dict[str, Value]) -> None:
        """After a loop, names only its body binds (``for x, y in loader``) are unbound on the path
        that skipped it: a later statement that reads one runs only once the loop ran (else it
        raises NameError), and from there on names hold what the body left (``loss = 0`` then
        ``loss += crit(out, y)`` in the body: a tensor, not the 0).  Kept until the end of the
        block holding the loop (``_after_loop``)."""
        only = [key for key in ran if key not in entry and self._unbound_where_missing(key)]
        if not only or not self._block_hooks:
            return
        joined = dict(self.scope.values)  # (a copy: later statements bind into ``scope.values``)
        changed = {key: value for key, value in ran.items() if joined.get(key) is not value}
        if not changed:
            return
        exit_ = _LoopExit(self.scope, only, joined, changed)
        self._loop_exits.append(exit_)
        self.at_block_end(lambda block: self._loop_exits.remove(exit_) if exit_ in self._loop_exits else None)

    def _after_loop(self, node: cst.SimpleStatementLine) -> None:
        """``return acc, y.shape[0], loss`` after ``for x, y in loader``: the statement reads the
        loop's own name, so the loop ran: names the statement sees keep the body's values (those
        not rebound since the loop)."""
        exit_ = self._loop_exits[-1]
        values = self.scope.values
        if exit_.scope is not self.scope:
            return
        names = {key for key in exit_.only if values.get(key) is exit_.joined.get(key)}  # (not rebound since)
        if not names:
            self._loop_exits.pop()
            return
        if not _reads_unconditionally(node, names):
            return
        self._loop_exits.pop()
        better = {key: value for key, value in exit_.ran.items() if values.get(key) is exit_.joined.get(key)}
        self.scope.values = {**values, **better}

    def _unbound_where_missing(self, key: str) -> bool:
        """A plain name this function (or the module) binds only by statements the analysis
        follows (assignments, loop and ``with`` targets): on a path where it has no value it
        is unbound, so reading it there raises.  Not: ``self.x`` keys (untracked is not
        unbound), parameters, globals, imports, ``def``s, class bodies."""
        if "." in key or self.scope.kind == "class":
            return False
        return self.scope_bindings().bound_only_by(key, _TRACKED_BINDING_SITES)

    def _merge_try(self) -> None:
        frame = self._branch_states[-1]
        if frame.get("merged"):
            return
        merged = frame["body"]
        for end in frame["ends"]:  # type: ignore[union-attr]
            merged = join_states(merged, end, self._unbound_where_missing)  # type: ignore[arg-type]
        self.scope.values = dict(merged)  # type: ignore[arg-type]
        frame["merged"] = True

    def _enter_Try_finalbody(self, node: cst.Try | cst.TryStar) -> None:
        self._merge_try()

    _enter_TryStar_finalbody = _enter_Try_finalbody

    def _leave_Try(self, node: cst.Try | cst.TryStar) -> None:
        self._merge_try()
        self._branch_states.pop()
        self.compound.pop()

    _leave_TryStar = _leave_Try


def _started_accumulators(entry: dict[str, Value], ran: dict[str, Value]) -> dict[str, Value]:
    """The loop's entry state, where a name the loop starts from a literal 0 (``total = 0``) and
    the body makes a tensor (``total += loss``) holds that tensor: the 0 is the path where the
    loop never ran, which is ignored as an empty list's is (``values.join``)."""
    started = None
    for key, start in entry.items():
        if start.kind is Kind.NUMBER and "zero" in start.tags:
            value = ran.get(key)
            if value is not None and value.kind in TENSOR_KINDS:
                started = started or dict(entry)
                started[key] = value
    return started or entry


def _iteration_counter(loop: cst.For | cst.While) -> str | None:
    """The name counting ``loop``'s iterations: ``i`` of ``for i in range(...)`` and of
    ``for i, batch in enumerate(...)``."""
    if type(loop) is not cst.For or type(loop.iter) is not cst.Call or type(loop.iter.func) is not cst.Name:
        return None
    target, builtin = loop.target, loop.iter.func.value
    if builtin == "range" and type(target) is cst.Name:
        return target.value
    if builtin == "enumerate" and type(target) in (cst.Tuple, cst.List) and target.elements:  # type: ignore[union-attr]
        first = target.elements[0].value  # type: ignore[union-attr]
        return first.value if type(first) is cst.Name else None
    return None


def _compares_with_literal(test: cst.BaseExpression, name: str) -> bool:
    """``name == 3`` or ``3 == name``."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if type(target.operator) is not cst.Equal:
        return False
    sides = (test.left, target.comparator)
    return any(type(a) is cst.Name and a.value == name and type(b) is cst.Integer for a, b in (sides, sides[::-1]))


class _LoopExit:
    """What names held where a loop's body ended, for the statements after it (``_after_loop``).
    (A plain class: a dataclass costs its ``exec`` at every start.)"""

    __slots__ = ("scope", "only", "joined", "ran")

    def __init__(self, scope: Scope, only: list[str], joined: dict[str, Value], ran: dict[str, Value]) -> None:
        self.scope = scope
        self.only = only  # names only the loop binds
        self.joined = joined  # the state after the loop (its identity: not rebound since)
        self.ran = ran  # what the body left, where it differs


# Expressions whose parts may not all be evaluated (or not now): reading a name there proves nothing.
_CONDITIONAL = (cst.Lambda, cst.IfExp, cst.BooleanOperation, cst.ListComp, cst.SetComp, cst.DictComp,
                cst.GeneratorExp)
_READING_STATEMENTS = (cst.Return, cst.Expr, cst.Assign, cst.AugAssign, cst.AnnAssign)


def _reads_unconditionally(node: cst.SimpleStatementLine, names: set[str]) -> bool:
    """The statement's first small statement (a return, expression or assignment) reads one of
    ``names`` where it is always evaluated (not in a lambda, conditional or comprehension)."""
    small = node.body[0]
    if not isinstance(small, _READING_STATEMENTS):
        return False
    value = small.value  # type: ignore[union-attr]
    if value is None:
        return False
    finder = _NameRead(names)
    value.visit(finder)
    return finder.found


class _NameRead(cst.CSTVisitor):
    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found or isinstance(node, _CONDITIONAL):
            return False
        if type(node) is cst.Name and node.value in self.names:
            self.found = True
        elif type(node) is cst.Attribute:
            node.value.visit(self)  # (``x.y``: ``y`` is no name read)
            return False
        elif type(node) is cst.Arg:
            node.value.visit(self)  # (``f(y=1)``: the keyword is no name read)
            return False
        return True
