"""Constructor arguments a class keeps to plot: ``history(train_losses, val_losses)``.

A class of this file or of a sibling file (``project.py``) whose ``__init__`` stores a parameter
as it is (``self.validation_losses = validation_losses``) and one of whose methods hands that
attribute to NumPy or a plotting library (``plt.plot(self.validation_losses)``): an argument
passed there ends in NumPy, as if the caller had plotted it (M6 for tensors that require grad).
The methods are read in the class's own file's analysis, with that file's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.project import ProjectClass

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer


def constructor_displays_argument(ctx: Analyzer, call: cst.Call, argument: cst.Arg) -> bool:
    """``call`` makes an instance of a class that stores ``argument`` (one of ``call.args``) in
    ``__init__`` and hands the stored attribute to NumPy or a plot in one of its methods (and
    to ``backward()`` in none)."""
    func = call.func
    if type(func) is not cst.Name or any(arg.star for arg in call.args):
        return False
    found = _class_and_analysis(ctx, func)
    if found is None:
        return False
    node, analysis = found
    methods = [s for s in node.body.body if type(s) is cst.FunctionDef]
    init = next((m for m in methods if m.name.value == "__init__"), None)
    if init is None:
        return False
    parameter = _parameter_given(init, call, argument)
    if parameter is None:
        return False
    from torchlint.analysis.uses import Sink  # (uses imports this module)

    sinks: set[Sink] = set()
    for attribute in _stored_as(init, parameter):
        for method in methods:
            if method is init or not method.params.params:
                continue
            key = f"{method.params.params[0].name.value}.{attribute}"
            uses = analysis.value_flow(method).follow(key)
            if uses is None:
                return False  # spreads too far to follow
            sinks.update(use.sink for use in uses)
    # (a method that backpropagates what it keeps: the history may be a multi-part loss)
    return Sink.NUMPY in sinks and Sink.BACKWARD not in sinks


def _class_and_analysis(ctx: Analyzer, func: cst.Name) -> tuple[cst.ClassDef, Analyzer] | None:
    """The ``class`` statement ``func`` names (this file's, else a sibling file's) and the
    analysis of the file it is in."""
    cls = ctx.scope.find_class(func.value)
    if cls is not None:
        return (cls.node, ctx) if type(cls.node) is cst.ClassDef else None
    project = ctx.project
    if project is None or func.value not in project.names or ctx.scope.lookup(func.value) is not None:
        return None
    found = project.object_of(func)
    if not isinstance(found, ProjectClass):
        return None
    node = found.file.class_node(found.name)
    analysis = found.file.analysis(found.depth)
    return (node, analysis) if node is not None and analysis is not None else None


def _parameter_given(init: cst.FunctionDef, call: cst.Call, argument: cst.Arg) -> str | None:
    """The ``__init__`` parameter that ``argument`` of ``call`` binds (past ``self``)."""
    params = init.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)][1:]
    if argument.keyword is not None:
        name = argument.keyword.value
        return name if name in positional or any(p.name.value == name for p in params.kwonly_params) else None
    position = [arg for arg in call.args if arg.keyword is None].index(argument)
    return positional[position] if position < len(positional) else None


def _stored_as(init: cst.FunctionDef, parameter: str) -> list[str]:
    """The attributes ``__init__`` sets to ``parameter`` as it is (``self.x = parameter``), when
    it never binds ``parameter`` again."""
    receiver = init.params.params[0].name.value if init.params.params else None
    stored: list[str] = []
    for statement in init.body.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is not cst.Assign:
                continue
            for target in small.targets:
                bound = target.target
                if type(bound) is cst.Name and bound.value == parameter:
                    return []  # rebound: what is stored afterwards is something else
                if (type(bound) is cst.Attribute and type(bound.value) is cst.Name and bound.value.value == receiver
                        and type(small.value) is cst.Name and small.value.value == parameter):
                    stored.append(bound.attr.value)
    return stored
