"""TL010 backward-through-freed-graph: ``backward()`` in a loop reaches graph nodes that
an earlier ``backward()`` already freed: an earlier iteration's (a graph built before the
loop, or recurrent state carried across iterations without ``.detach()``), or an earlier one
of the same iteration (two losses sharing a subgraph).

Reported only when certain.  The model follows the loop's graph over its first two
iterations (``ctx.loop_graph``, see ``analysis/loop_graph.py``).  The finding: a
``backward()`` reaches a node that saves tensors and that an earlier ``backward()``
(without ``retain_graph``) went through.
"""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis.loop_graph import GraphNode, LoopBackward, LoopGraph
from torchlint.rule import Rule


class BackwardThroughFreedGraph(Rule):
    code = "TL010"
    name = "backward-through-freed-graph"
    summary = "backward() in a loop goes through a graph an earlier iteration already freed"
    default = False
    tokens = ("backward",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if "step" in self.ctx.source:
            # Which modules an optimizer trains (their outputs require grad): the model's module graph.
            self.ctx.track_module_graph()

    def visit_For(self, node: cst.For) -> None:
        self._check_loop(node)

    def visit_While(self, node: cst.While) -> None:
        self._check_loop(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        function = self.ctx.function
        if function is not None and node is function.node.body and not self.ctx.loops:
            graph = self.ctx.body_graph(node)  # a function body: two backwards one after the other
            if graph is not None:
                for backward, hit, earlier in graph.freed_earlier_in_iteration():
                    self._report_shared(backward, hit, earlier, graph)

    def _check_loop(self, loop: cst.For | cst.While) -> None:
        graph = self.ctx.loop_graph(loop)
        if graph is None:
            return
        reported: set[int] = set()
        # The first error at run time: a second backward in the first iteration, then the next iteration's.
        for backward, hit, earlier in graph.freed_earlier_in_iteration():
            reported.add(id(backward.call))
            self._report_shared(backward, hit, earlier, graph)
        for backward, hit in graph.freed_reached():
            if id(backward.call) not in reported:
                self._report(backward, hit, graph.expressions, graph.assumes_trainable_modules)

    # ------------------------------------------------------------ report
    def _report_shared(
        self, backward: LoopBackward, hit: frozenset[GraphNode], earlier: LoopBackward, graph: LoopGraph
    ) -> None:
        shown = self._shown(hit, graph.expressions)
        first = self._receiver(earlier)
        message = (
            f"backward() of {self._receiver(backward)} goes through `{shown}`, whose saved tensors the earlier "
            f"backward() of {first} in this iteration freed (it has no retain_graph=True), so it raises 'Trying to "
            "backward through the graph a second time'; add the losses and call backward() once, or pass "
            "retain_graph=True to the first backward()"
        )
        frozen_may_matter = graph.assumes_trainable_modules
        self.report(
            backward.call, message, statement=backward.line,
            when=lambda: not (frozen_may_matter and self.ctx.parameters_may_be_frozen),
        )

    @staticmethod
    def _shown(hit: frozenset[GraphNode], expressions: dict[int, cst.CSTNode]) -> str:
        """The outermost expression among ``hit`` (the first one evaluated: a stable message)."""
        before_loop = [n for n in hit if n.iteration == 0]
        order = {expr_id: index for index, expr_id in enumerate(expressions)}
        chosen = min(before_loop or hit, key=lambda n: (order.get(n.expr, len(order)), n.iteration))
        example = expressions.get(chosen.expr)
        shown = fixes.source_of(example) if example is not None else "an earlier result"
        return shown[:37] + "..." if len(shown) > 40 else shown

    @staticmethod
    def _receiver(backward: LoopBackward) -> str:
        receiver = fixes.source_of(backward.loss) if backward.loss is not None else "it"
        return "the loss" if len(receiver) > 30 else f"`{receiver}`"

    def _report(
        self, backward: LoopBackward, hit: frozenset[GraphNode], expressions: dict[int, cst.CSTNode],
        frozen_may_matter: bool,
    ) -> None:
        before_loop = [n for n in hit if n.iteration == 0]
        shown = self._shown(hit, expressions)
        receiver = self._receiver(backward)
        if before_loop:
            where = f"its graph includes `{shown}`, built before the loop"
            remedy = "compute it inside the loop"
        else:
            where = f"its graph reaches `{shown}` from the previous iteration (state carried across iterations)"
            remedy = "detach the carried state each iteration (`h = h.detach()`)"
        message = (
            f"backward() of {receiver} runs every iteration, but {where}; the first backward() frees its saved "
            f"tensors, so the second raises 'Trying to backward through the graph a second time'; {remedy}"
        )
        self.report(
            backward.call, message, statement=backward.line,
            when=lambda: not (frozen_may_matter and self.ctx.parameters_may_be_frozen),
        )
