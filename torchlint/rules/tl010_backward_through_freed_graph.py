"""TL010 backward-through-freed-graph: ``backward()`` in a loop reaches graph nodes that
an earlier iteration's ``backward()`` already freed (a graph built before the loop, or
recurrent state carried across iterations without ``.detach()``).

Reported only when certain.  The model follows the loop's graph over its first two
iterations (``ctx.loop_graph``, see ``analysis/loop_graph.py``).  The finding: the second
iteration's ``backward()`` reaches a node that saves tensors and that the first
iteration's ``backward()`` (without ``retain_graph``) went through.
"""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis.loop_graph import GraphNode, LoopBackward
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

    def _check_loop(self, loop: cst.For | cst.While) -> None:
        graph = self.ctx.loop_graph(loop)
        if graph is None:
            return
        for backward, hit in graph.freed_reached():
            self._report(backward, hit, graph.expressions, graph.assumes_trainable_modules)

    # ------------------------------------------------------------ report
    def _report(
        self, backward: LoopBackward, hit: frozenset[GraphNode], expressions: dict[int, cst.CSTNode],
        frozen_may_matter: bool,
    ) -> None:
        before_loop = [n for n in hit if n.iteration == 0]
        order = {expr_id: index for index, expr_id in enumerate(expressions)}
        # Name the outermost expression (the first one evaluated), so the message is stable.
        chosen = min(before_loop or hit, key=lambda n: (order.get(n.expr, len(order)), n.iteration))
        example = expressions.get(chosen.expr)
        shown = fixes.source_of(example) if example is not None else "an earlier result"
        if len(shown) > 40:
            shown = shown[:37] + "..."
        receiver = fixes.source_of(backward.loss) if backward.loss is not None else "it"
        if len(receiver) > 30:
            receiver = "the loss"
        else:
            receiver = f"`{receiver}`"
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
