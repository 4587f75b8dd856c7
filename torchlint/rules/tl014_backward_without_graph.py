"""TL014 backward-without-graph: ``backward()`` on a value that has no autograd graph."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, Value
from torchlint.analysis import torch_api as api
from torchlint.analysis.evaluate import GRADIENT_TAGS
from torchlint.analysis.events import EventKind
from torchlint.rule import Rule

_M3 = "element 0 of tensors does not require grad and does not have a grad_fn"
_BACKPROPAGATING = frozenset({EventKind.BACKWARD, EventKind.GRAD})


class BackwardWithoutGraph(Rule):
    code = "TL014"
    name = "backward-without-graph"
    summary = (
        "`backward()` on a value that has no graph (computed under no_grad, or from `.item()`, `.detach()`, "
        "NumPy, `torch.tensor(...)`): always raises"
    )
    default = False  # precision on real code below the bar: see the rule's page
    tokens = ("backward", "autograd")

    def visit_Call(self, node: cst.Call) -> None:
        event = self.ctx.autograd_event(node)
        if event is None or event.kind not in _BACKPROPAGATING or event.subject is None:
            return
        value = self.ctx.value_of(event.subject)
        if not (value.has_no_graph or (_made_without_grad(value) and type(event.subject) is not cst.Attribute)):
            # (An attribute, ``self.loss``: what its ``__init__`` bound, while other methods,
            # subclasses or plugins may add a graph-carrying loss to it before this runs.)
            return
        subject = fixes.source_of(event.subject)
        call = "`torch.autograd.grad`" if event.kind is EventKind.GRAD else "`backward()`"
        self.report(
            node,
            f"`{subject}` has no autograd graph ({self._why(value)}): {call} raises '{_M3}'; compute it "
            "from tensors that carry the graph (setting `requires_grad` on it trains nothing)",
        )

    def _why(self, value: Value) -> str:
        origin = value.origin
        if type(origin) is cst.Call:
            qualified = self.ctx.qualify(origin.func)
            if qualified in api.COPY_CONSTRUCTORS:
                return f"`{fixes.source_of(origin)}` is a new tensor without history"
            if qualified in api.FROM_NUMPY_FUNCTIONS:
                return "it is made from a NumPy array"
            if type(origin.func) is cst.Attribute and origin.func.attr.value in api.DETACHING_METHODS:
                return "it comes from `.detach()`"
        if self.ctx.grad_mode.statically_disabled:
            return "it is computed under `torch.no_grad()`/`inference_mode()`"
        if not value.has_no_graph:
            return "it is computed only from tensors that do not require grad: was `requires_grad=True` forgotten?"
        return "it is computed under `torch.no_grad()` or from values without a graph"


def _made_without_grad(value: Value) -> bool:
    """Computed only from tensors that do not require grad, none of them a gradient (``p.grad``
    carries a graph after ``backward(create_graph=True)``, which the model does not follow)."""
    return value.kind is Kind.PLAIN and not value.tags & GRADIENT_TAGS
