"""matplotlib ``Axes``: ``fig, axs = plt.subplots(2, 2); axs[0, 1].plot(epochs, losses)``.

Its plotting methods turn their data arguments into NumPy arrays as ``plt.plot`` does.  A name
is an ``Axes`` (or an array of them) when every binding of it in its scope is a call that makes
one: ``plt.subplots(...)`` (the tuple's second item), ``plt.subplot``/``plt.axes``/``plt.gca``,
or ``add_subplot``/``add_axes``/``gca`` of a figure made by ``plt.figure()``/``plt.subplots()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import torch_api as api

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.bindings import BindingTable


def plots_on_axes(ctx: Analyzer, call: cst.Call, table: BindingTable) -> bool:
    """``call`` is ``ax.plot(...)`` (``scatter``, ``hist`` ...) of an ``Axes``; ``table``: the
    bindings of the scope the call is in."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value not in api.AXES_PLOTTING_METHODS:  # type: ignore[attr-defined]
        return False
    receiver = func.value  # type: ignore[attr-defined]
    while type(receiver) is cst.Subscript:
        receiver = receiver.value  # type: ignore[attr-defined]
    return type(receiver) is cst.Name and _bound_only_to(table, receiver.value, lambda made: _makes_axes(ctx, table, made))


def _bound_only_to(table: BindingTable, name: str, makes: Callable[[cst.Call], bool]) -> bool:
    sites = table.of(name).sites
    return bool(sites) and all(
        type(site) is cst.Assign and type(site.value) is cst.Call and makes(site.value)  # type: ignore[attr-defined]
        for site in sites
    )


def _makes_axes(ctx: Analyzer, table: BindingTable, call: cst.Call) -> bool:
    func = call.func
    if ctx.qualify(func) in api.AXES_FACTORIES:
        return True
    if type(func) is not cst.Attribute or func.attr.value not in api.FIGURE_AXES_METHODS:  # type: ignore[attr-defined]
        return False
    figure = func.value  # type: ignore[attr-defined]
    if type(figure) is cst.Call:
        return ctx.qualify(figure.func) in api.FIGURE_FACTORIES  # type: ignore[attr-defined]
    return type(figure) is cst.Name and _bound_only_to(
        table, figure.value, lambda made: ctx.qualify(made.func) in api.FIGURE_FACTORIES)
