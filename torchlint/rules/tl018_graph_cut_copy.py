"""TL018 graph-cut-copy: ``torch.tensor(t)`` of a tensor that requires grad copies it without history."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Value
from torchlint.analysis import torch_api as api
from torchlint.analysis.events import EventKind
from torchlint.analysis.facts import data_argument
from torchlint.analysis.graph_cuts import copies_in, graphless_terms
from torchlint.analysis.values import ASSUMED_TAGS
from torchlint.rule import Fix, FixSafety, Rule

_WARNING = "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone()"
_LIST_WARNING = "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior"


class GraphCutCopy(Rule):
    code = "TL018"
    name = "graph-cut-copy"
    summary = "`torch.tensor(t)` of a tensor that requires grad: a copy without history, gradients stop there"
    default = False  # precision on real code below the bar: see the rule's page
    fix_safety = FixSafety.UNSAFE
    tokens = ("tensor(", "from_numpy(")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        source = self.ctx.source
        # NumPy round trips are found from the backward() of the loss they leave a graph-less term of.
        self._graph = self.ctx.track_module_graph() if "numpy()" in source and "backward" in source else None
        self._reported: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if self._graph is not None:
            self._check_round_trips(node)
        if self.ctx.qualify(node.func) not in api.COPY_CONSTRUCTORS:
            return
        data = data_argument(node)
        if data is None:
            return
        value = self.ctx.value_of(data)
        if not value.carries_grad or value.tagged_within(ASSUMED_TAGS):
            return
        condition = self.ctx.requires_grad_when_run(value)
        if condition is None:
            return
        name = fixes.source_of(data)
        copy = fixes.source_of(node.func)
        if value.is_tensor:
            message = (
                f"`{name}` requires grad: `{copy}(...)` copies it without history (UserWarning '{_WARNING}'), "
                f"so no gradient flows back through it; use `{name}` itself (`.to(dtype)` for a conversion) "
                "or, to cut it on purpose, `.detach().clone()`"
            )
        else:
            message = (
                f"`{name}` holds tensors that require grad: `{copy}(...)` converts each to a Python number "
                f"(UserWarning '{_LIST_WARNING}'), so no gradient flows back through them; use `torch.stack(...)`"
                " to keep the graph, or `.item()` values to record numbers"
            )
        self.report(
            node,
            message,
            self._fix(node, data, value),
            when=condition,
        )

    def _check_round_trips(self, node: cst.Call) -> None:
        """``loss = ce + triplet; loss.backward()`` where ``triplet`` was computed only from copies
        made through NumPy (``torch.from_numpy(out.data.numpy()[idx])``) of tensors with a graph:
        the term adds no gradient, silently (the sum still has one through ``ce``)."""
        event = self.ctx.autograd_event(node)
        if event is None or event.kind is not EventKind.BACKWARD or event.subject is None:
            return
        graph = self._graph
        assert graph is not None
        for term in graphless_terms(self.ctx, graph, node, event.subject):
            for copy, source in copies_in(self.ctx, term, node):
                if id(copy) in self._reported or not self._has_graph(source):
                    continue
                self._reported.add(id(copy))
                name, loss = fixes.source_of(source), fixes.source_of(event.subject)
                self.report(
                    copy,
                    f"`{name}` has a graph, but this copy of it through NumPy has none: `{term}`, computed from "
                    f"it, is a term of `{loss}` without a graph, so `{fixes.source_of(node)}` gets no gradient "
                    f"from it (the term is silently not trained); compute on `{name}` itself "
                    f"(index it: `{name}[idx]`) to keep the graph",
                    statement=self._statement_of(copy),
                )

    def _has_graph(self, source: cst.BaseExpression) -> bool:
        graph = self._graph
        assert graph is not None
        value = self.ctx.value_of(source)
        if value.requires_grad and not value.tagged_within(ASSUMED_TAGS):
            return True
        return type(source) in (cst.Name, cst.Attribute) and bool(graph.forwards_of(source))

    def _statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        flow = self.ctx.value_flow(self.ctx.region)
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            current = flow.parent(current)
        return current

    def _fix(self, node: cst.Call, data: cst.BaseExpression, value: Value) -> Fix | None:
        """``torch.tensor(t)`` -> ``t``; with ``dtype=``/``device=`` -> ``t.to(dtype=..., device=...)``;
        a list literal of tensors -> ``torch.stack([...])``."""
        keywords = [arg for arg in node.args if arg.keyword is not None]
        positional = [arg for arg in node.args if arg.keyword is None]
        if len(positional) != 1 or positional[0].star or any(a.keyword.value not in api.CONVERSION_KEYWORDS for a in keywords):
            return None
        if value.is_tensor:
            kept: cst.BaseExpression = fixes.atom(data)  # the call may sit inside a larger expression
        elif type(data) is cst.List and self.ctx.torch_name is not None:
            stack = cst.Attribute(value=cst.Name(self.ctx.torch_name), attr=cst.Name("stack"))
            kept = cst.Call(func=stack, args=[cst.Arg(data)])
        else:
            return None
        if keywords:
            kept = fixes.method_call(kept, "to", keywords)
        return fixes.replace("use the tensor itself (keeps the graph)", node, kept)
