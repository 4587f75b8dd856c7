"""A top-level function of a sibling file, seen from a call in the linted file.

``from loss import my_loss`` and ``loss, mse, ce = my_loss(pred, y)``: what ``my_loss`` returns
is read in the sibling file's own rule-less analysis (``project.py``), so that questions about
its body (which returned value is a term of which: ``return ce * alpha + mse * (1 - alpha),
mse, ce``) are answered there, with that file's names and bindings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.project import ProjectFunction

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.uses import ValueFlow


def sibling_function_flow(ctx: Analyzer, func: cst.BaseExpression) -> tuple[ValueFlow, cst.FunctionDef] | None:
    """The value flow of the sibling file's function ``func`` names, and its ``def``; None when
    ``func`` names no function of a project file (or its file does not parse)."""
    project = ctx.project
    if project is None or not isinstance(func, cst.Name) or func.value not in project.names:
        return None
    found = project.object_of(func)
    if not isinstance(found, ProjectFunction):
        return None
    analysis = found.file.analysis(found.depth)
    tree = found.file.tree()
    if analysis is None or tree is None:
        return None
    definition = next((statement for statement in tree.body
                       if type(statement) is cst.FunctionDef and statement.name.value == found.name), None)
    if definition is None:
        return None
    return analysis.value_flow(definition), definition
