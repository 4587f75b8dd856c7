"""Which earlier statements the analysis of a new IPython cell needs.

Analysing every earlier cell again for each new one costs time in proportion to the
session (the analysis, not the parse, dominates once parses are cached).  Most of it
is irrelevant to the new cell: the findings shown are the new cell's, and they depend
only on what the names it uses hold.  So the program analysed is the new cell after
the earlier statements that may affect those names, found backwards to a fixed point
(a statement kept for ``model`` brings in what it reads, ``Net``, and so on).

The facts are an over-approximation read from Python's ``ast`` (fast, and scopes are
explicit): keeping a statement too many costs time, dropping one that matters could
change a finding, so every doubt keeps the statement.
 - A ``def`` only binds its name when it runs; its body matters when it is called, and
   the call mentions the name, which brings the ``def`` in together with every name its
   body uses.  A class body runs at once: what it mentions outside its methods counts.
 - Any other statement may change every name it mentions (``w.add_(1)``, ``f(w)``).
 - Imports, statements that may switch grad mode (the analyzer's own test: a call
   whose name has "grad" or "inference" in it), statements that touch no name bound
   in the program (``print("epoch")``, ``torch.manual_seed(0)``), and statements that
   mention a function or class the new cell defines (call sites of it) are always kept.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class Facts:
    """What one top-level statement does with module-level names."""

    mentions: frozenset[str]  # names it reads or writes, its functions' free names included
    affects: frozenset[str]  # names its own execution may bind or change
    binds: frozenset[str]  # names it binds at module level, other than by import
    always: bool = False  # kept in every program
    defines: frozenset[str] = frozenset()  # the function or class a def or class statement binds
    # ``a, b = x.m()``: the methods whose results it unpacks (the analysis may read such a call as
    # the method of that name of a class the program defines: analysis/method_candidates.py) ...
    unpacked_calls: frozenset[str] = frozenset()
    methods: frozenset[str] = frozenset()  # ... and the methods a class statement defines


_UNKNOWN = Facts(frozenset(), frozenset(), frozenset(), always=True)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = (*_FUNCTIONS, ast.ClassDef)


def cell_facts(program: str, statements: Sequence[cst.BaseStatement]) -> list[Facts]:
    """The facts of each of a cell's (libcst) top-level statements."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # libcst accepts what CPython does not
        return [_UNKNOWN] * len(statements)
    facts: list[Facts] = []
    position = 0
    for statement in statements:
        count = len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1  # `a; b`: two
        facts.append(_merged([_facts(node) for node in tree.body[position:position + count]]))
        position += count
    return facts if position == len(tree.body) else [_UNKNOWN] * len(statements)


def relevant(earlier: Sequence[Facts], cell: Sequence[Facts]) -> list[bool]:
    """For each earlier statement, whether the new cell's analysis needs it."""
    tracked = frozenset().union(*(f.binds for f in earlier))
    # Earlier functions calling one the cell defines are call sites of it (its parameters'
    # values and grad mode come from every call site).
    defined = frozenset().union(*(f.defines for f in cell))
    kept = [f.always or f.affects.isdisjoint(tracked) or not f.mentions.isdisjoint(defined) for f in earlier]
    needed = set().union(*(f.mentions for f in cell), *(f.mentions for f, keep in zip(earlier, kept) if keep))
    needed &= tracked
    unpacked = set().union(*(f.unpacked_calls for f in cell), *(f.unpacked_calls for f, keep in zip(earlier, kept) if keep))
    changed = True
    while changed:  # a fixed point: `a = w` and a later `a.add_(1)` connect in either order
        changed = False
        for index in range(len(earlier) - 1, -1, -1):
            facts = earlier[index]
            if not kept[index] and (not needed.isdisjoint(facts.affects) or not unpacked.isdisjoint(facts.methods)):
                kept[index] = changed = True
                needed |= facts.mentions & tracked
                unpacked |= facts.unpacked_calls
    return kept


# ---------------------------------------------------------------- reading the facts
def _merged(parts: list[Facts]) -> Facts:
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _UNKNOWN
    return Facts(
        frozenset().union(*(p.mentions for p in parts)),
        frozenset().union(*(p.affects for p in parts)),
        frozenset().union(*(p.binds for p in parts)),
        any(p.always for p in parts),
        frozenset().union(*(p.defines for p in parts)),
        frozenset().union(*(p.unpacked_calls for p in parts)),
        frozenset().union(*(p.methods for p in parts)),
    )


def _facts(statement: ast.stmt) -> Facts:
    mentions: set[str] = set()
    binds: set[str] = set()
    always = _Scan(mentions, binds).run([statement], frozenset(), module_level=True)
    if isinstance(statement, _SCOPES):
        # Running a def binds its name (and evaluates its decorators and defaults); a class
        # also runs its body, but not its methods.
        affects: set[str] = set()
        _Scan(affects, set(), enter_functions=False).run([statement], frozenset(), module_level=True)
    else:
        affects = mentions
    defines = frozenset({statement.name}) if isinstance(statement, _SCOPES) else frozenset()
    methods = frozenset(node.name for node in statement.body if isinstance(node, _FUNCTIONS[:2])) if isinstance(
        statement, ast.ClassDef) else frozenset()
    return Facts(frozenset(mentions), frozenset(affects), frozenset(binds), always, defines,
                 _unpacked_calls(statement), methods)


def _unpacked_calls(statement: ast.stmt) -> frozenset[str]:
    return frozenset(
        node.value.func.attr for node in ast.walk(statement)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List))
        and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute))


class _Scan:
    """Collects the names under some nodes that are not local to a function."""

    def __init__(self, mentions: set[str], binds: set[str], *, enter_functions: bool = True) -> None:
        self.mentions = mentions
        self.binds = binds  # bound at module level
        self.enter_functions = enter_functions

    def run(self, nodes: list[ast.AST], local: frozenset[str], *, module_level: bool) -> bool:
        """True if the nodes hold a module-level import or a call that may switch grad mode."""
        always = False
        stack = list(nodes)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                self._name(node.id, local, module_level and not isinstance(node.ctx, ast.Load))
            elif isinstance(node, _SCOPES):
                if not isinstance(node, ast.Lambda):
                    self._name(node.name, local, module_level)
                stack.extend(_evaluated_outside(node))
                always |= self._scope(node, local)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                always |= module_level
                for alias in node.names:
                    if alias.name != "*":
                        self._name(alias.asname or alias.name.split(".")[0], local, False)
            else:
                if module_level and isinstance(node, ast.Call) and _may_switch_grad_mode(node.func):
                    always = True
                stack.extend(ast.iter_child_nodes(node))
        return always

    def _name(self, name: str, local: frozenset[str], binding: bool) -> None:
        if name not in local:
            self.mentions.add(name)
            if binding:
                self.binds.add(name)

    def _scope(self, node: ast.AST, local: frozenset[str]) -> bool:
        if isinstance(node, ast.ClassDef):  # the body runs now; names bound in it are the class's
            inner, _ = _bound_in(node.body)
            return self.run(node.body, local | inner, module_level=False)
        if self.enter_functions:
            inner, declared = _locals(node)
            self.binds |= declared  # `global x` in a function: x is bound in the program
            body = [node.body] if isinstance(node, ast.Lambda) else node.body  # type: ignore[attr-defined]
            self.run(body, (local | inner) - declared, module_level=False)
        return False


def _may_switch_grad_mode(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return "grad" in name.lower() or "inference" in name.lower()


def _evaluated_outside(node: ast.AST) -> list[ast.AST]:
    """The parts of a def, lambda or class evaluated where it is defined."""
    parts: list[ast.AST] = list(getattr(node, "decorator_list", ()))
    if isinstance(node, ast.ClassDef):
        return [*parts, *node.bases, *node.keywords]
    arguments: ast.arguments = node.args  # type: ignore[attr-defined]
    parts += [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
    parts += [a.annotation for a in _parameters(arguments) if a.annotation is not None]
    returns = getattr(node, "returns", None)
    return [*parts, returns] if returns is not None else parts


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return [a for a in every if a is not None]


def _locals(function: ast.AST) -> tuple[frozenset[str], frozenset[str]]:
    """A function's local names (parameters and what it binds), and the names it declares
    ``global`` or ``nonlocal``."""
    body = function.body if isinstance(function.body, list) else [function.body]  # type: ignore[attr-defined]
    bound, declared = _bound_in(body)
    return bound | {a.arg for a in _parameters(function.args)}, declared  # type: ignore[attr-defined]


def _bound_in(body: list[ast.AST]) -> tuple[frozenset[str], frozenset[str]]:
    """Names a scope's body binds (not looking into nested scopes' bodies), and the names
    it declares ``global`` or ``nonlocal``."""
    names: set[str] = set()
    declared: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, _SCOPES):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
            stack.extend(_evaluated_outside(node))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names if alias.name != "*")
        else:
            if isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            stack.extend(ast.iter_child_nodes(node))
    return frozenset(names), frozenset(declared)
