"""The model's binding, grad-mode, in-place and loop-graph queries (what TL004 and TL010 ask
instead of keeping tables and interpreters of their own), through a probe rule."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import libcst as cst

from torchlint.analysis import Analyzer
from torchlint.analysis.bindings import bindings_in_scope
from torchlint.analysis.uses import changed_in_place
from torchlint.rule import Diagnostic, Rule, RuleOptions

Question = Callable[[Analyzer, cst.CSTNode], object]


def ask(source: str, node_type: type[cst.CSTNode], question: Question) -> list[object]:
    """``question(ctx, node)`` for every node of ``node_type``, at its point in the analysis."""
    module = cst.parse_module("import torch\n" + textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    answers: list[object] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

    setattr(Probe, f"visit_{node_type.__name__}", lambda self, node: answers.append(question(self.ctx, node)))
    sink: list[Diagnostic] = []
    analyzer.attach([Probe(analyzer, sink, RuleOptions())])
    analyzer.run()
    return answers


def test_binding_table_keys_and_leaf_makers_of_a_loop_body() -> None:
    source = """
    for batch in data:
        self.h = f(batch)
        h[0] = 1
        a, *rest = pair
        with open(p) as log:
            total += 1
        def inner():
            hidden = 2
        y.requires_grad_()
        energy.requires_grad = True
        z.detach_()
        print(w.requires_grad)
    """
    [table] = ask(source, cst.For, lambda ctx, loop: ctx.binding_table(loop.body))
    assert table.keys == {"self.h", "h", "a", "rest", "log", "total", "inner", "energy.requires_grad"}
    # Exact keys: `energy.requires_grad` makes `energy` a leaf, not `y`'s look-alike; a read is no change.
    assert table.made_leaf == {"y", "energy", "z"}


def test_bindings_in_scope_sees_parameters_globals_and_single_assignments() -> None:
    source = """
    def step(x, w):
        global seen
        y = x * w
        z = 1
        z = 2
        probe(x, y, z, seen)
    """

    def summary(ctx: Analyzer, call: cst.Call) -> list[tuple[bool, bool]] | None:
        if not (isinstance(call.func, cst.Name) and call.func.value == "probe"):
            return None
        names = [arg.value.value for arg in call.args]  # type: ignore[attr-defined]
        found = [bindings_in_scope(ctx, name) for name in names]
        return [(b.declared_outside, b.single_assignment() is not None) for b in found]

    answers = [a for a in ask(source, cst.Call, summary) if a is not None]
    assert answers == [[(True, False), (False, True), (False, False), (True, False)]]


def test_assignment_targets_are_writes_not_reads() -> None:
    source = """
    w.grad = None
    a.grad, b.grad = g1, g2
    del c.grad
    print(d.grad)
    e.grad += 1
    """
    answers = ask(source, cst.Attribute, lambda ctx, node: (node.value.value, ctx.is_assignment_target(node)))
    assert answers == [("w", True), ("a", True), ("b", True), ("c", True), ("d", False), ("e", False)]


def test_context_modes_of_with_items() -> None:
    source = """
    with torch.no_grad(), torch.enable_grad(), torch.set_grad_enabled(flag), open(p), torch.inference_mode(False):
        pass
    """

    def modes(ctx: Analyzer, node: cst.With) -> list[str | None]:
        found = [ctx.context_mode(item.item) for item in node.items]
        return [None if mode is None else mode.fixed.value for mode in found]  # type: ignore[union-attr]

    assert ask(source, cst.With, modes) == [["disabled", "enabled", "unknown", None, None]]


def test_changed_in_place_keeps_torch_and_builtins_out() -> None:
    source = """
    for x in data:
        h.detach_()
        torch.relu(a)
        print(b)
        helper(c)
        self.log.append(d)
        loss.backward()
    """
    [keys] = ask(source, cst.For, lambda ctx, loop: changed_in_place(ctx, loop.body))
    assert keys == {"h", "c"}


def test_loop_graph_reaches_what_the_first_iteration_freed() -> None:
    source = """
    model = torch.nn.Linear(3, 1)
    pred = model(x)
    for step in range(3):
        loss = ((pred - y) ** 2).mean()
        loss.backward()
    for step in range(3):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
    for step in range(3):
        loss = ((model(x) - y) ** 2).mean()
    """

    def reached(ctx: Analyzer, loop: cst.For) -> list[int] | None:
        graph = ctx.loop_graph(loop)
        if graph is None:
            return None
        return [len(hit) for _, hit in graph.freed_reached()]

    hoisted, rebuilt, without_backward = ask(source, cst.For, reached)
    assert hoisted and all(hoisted)  # the second backward reaches the hoisted forward pass
    assert rebuilt == []
    assert without_backward is None
