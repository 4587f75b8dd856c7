"""Unit tests of the shared analysis layer, through a probe: ``reveal(expr)``
records what the analysis thinks ``expr`` holds and which grad mode is active."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import Analyzer, Kind, Mode, Value
from torchlint.rule import Rule, RuleOptions


def _probe(source: str) -> list[tuple[Value, object]]:
    """The value and grad mode of every ``reveal(x)``, in source order (functions are analysed
    in call order, not in the order they are written)."""
    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    seen: dict[int, tuple[Value, object]] = {}

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "reveal":
                seen[id(node)] = (self.ctx.value_of(node.args[0].value), self.ctx.grad_mode)

    class SourceOrder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.calls: list[int] = []

        def visit_Call(self, node: cst.Call) -> None:
            self.calls.append(id(node))

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    order = SourceOrder()
    module.visit(order)
    return [seen[call] for call in order.calls if call in seen]


def reveal(source: str) -> list[tuple[Kind, frozenset[Mode]]]:
    return [(value.kind, mode.possible()) for value, mode in _probe(source)]  # type: ignore[attr-defined]


def kinds(source: str) -> list[Kind]:
    return [kind for kind, _ in reveal(source)]


E, D, U = frozenset({Mode.ENABLED}), frozenset({Mode.DISABLED}), frozenset({Mode.UNKNOWN})


@pytest.mark.parametrize(
    "imports, factory",
    [
        ("import torch", "torch.randn(3, requires_grad=True)"),
        ("import torch as T", "T.zeros(3, requires_grad=True)"),
        ("from torch import randn", "randn(3, requires_grad=True)"),
        ("import torch.nn as nn", "nn.Parameter(x)"),
        ("from torch.nn import Parameter", "Parameter(x)"),
        ("from torch.nn.parameter import Parameter", "Parameter(x)"),
        ("import torch", "torch.randn(3).requires_grad_()"),
    ],
)
def test_leaf_creation_through_aliases(imports: str, factory: str) -> None:
    assert kinds(f"{imports}\nw = {factory}\nreveal(w)\n") == [Kind.LEAF]


def test_unknown_call_and_unimported_names_are_unknown() -> None:
    assert kinds("w = make()\nreveal(w)\nreveal(torch.randn(3, requires_grad=True))\n") == [Kind.UNKNOWN, Kind.UNKNOWN]


def test_derived_values_depend_on_grad_mode() -> None:
    source = """
    import torch
    w = torch.randn(3, requires_grad=True)
    reveal(w * 2)
    with torch.no_grad():
        reveal(w * 2)
    reveal(w.detach())
    reveal(w.data)
    reveal(w.grad)
    reveal(w.double())
    reveal(w.float())
    """
    assert kinds(source) == [Kind.NONLEAF, Kind.PLAIN, Kind.PLAIN, Kind.PLAIN, Kind.PLAIN, Kind.NONLEAF, Kind.LEAF]


def test_rebinding_under_no_grad_then_requires_grad_releafs() -> None:
    source = """
    import torch
    w = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        w = w - 0.1
    reveal(w)
    w.requires_grad_()
    reveal(w)
    v = torch.randn(3, requires_grad=True)
    v = v - 0.1
    v.requires_grad_()
    reveal(v)
    """
    assert kinds(source) == [Kind.PLAIN, Kind.LEAF, Kind.NONLEAF]


def test_grad_mode_contexts_and_decorators() -> None:
    source = """
    import torch
    from torch import no_grad
    reveal(1)
    with no_grad():
        reveal(1)
        with torch.enable_grad():
            reveal(1)
    with torch.inference_mode():
        reveal(1)
    with torch.set_grad_enabled(False):
        reveal(1)
    with torch.set_grad_enabled(flag):
        reveal(1)

    @torch.no_grad()
    def a():
        reveal(1)

    @torch.no_grad
    def b():
        reveal(1)

    a(); b()
    """
    assert [modes for _, modes in reveal(source)] == [E, D, E, D, D, U, D, D]


def test_function_grad_mode_comes_from_call_sites() -> None:
    source = """
    import torch

    def only_under_no_grad():
        reveal(1)

    def mixed():
        reveal(1)

    def never_called():
        reveal(1)

    def main():
        with torch.no_grad():
            only_under_no_grad()
            mixed()
        mixed()

    main()
    """
    assert [modes for _, modes in reveal(source)] == [D, frozenset({Mode.ENABLED, Mode.DISABLED}), E]


def test_module_parameters_and_loop_variables() -> None:
    source = """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)
            self.scale = nn.Parameter(torch.ones(1))

        def forward(self, x):
            reveal(self.scale)
            return self.fc(x) * self.scale

    net = Net()
    reveal(net.fc.weight)
    reveal(net.scale)
    for p in net.parameters():
        reveal(p)
    for name, p in net.named_parameters():
        reveal(p)
    for i, p in enumerate([net.scale]):
        reveal(p)
    reveal(net(torch.ones(3)))
    """
    # (source order: forward()'s reveal first, though it is analysed after the code calling it)
    assert kinds(source) == [Kind.LEAF] * 6 + [Kind.NONLEAF]


def test_branches_join_to_unknown() -> None:
    source = """
    import torch
    w = torch.randn(3, requires_grad=True)
    if flag:
        w = w * 2
    reveal(w)
    v = torch.randn(3, requires_grad=True)
    if flag:
        pass
    else:
        pass
    reveal(v)
    """
    assert kinds(source) == [Kind.UNKNOWN, Kind.LEAF]


def test_function_parameters_whose_grad_is_read_are_leaves() -> None:
    source = """
    def step(w, x):
        reveal(w)
        reveal(x)
        return w.grad
    """
    assert kinds(source) == [Kind.LEAF, Kind.UNKNOWN]


def tags(source: str) -> list[frozenset[str]]:
    """The tags of every ``reveal(x)`` value."""
    return [value.tags for value, _ in _probe(source)]


def test_a_backpropagated_value_carries_a_graph_through_ops_and_helpers() -> None:
    source = """
        import torch
        def step(model, batch):
            loss = model.loss(batch)
            reveal(loss)
            loss.backward()
            return loss
        def train(model, batches):
            for batch in batches:
                a = compute(batch)
                a.backward()
                total = a + compute(batch) * 2
                reveal(total)
                reveal(step(model, batch))
    """
    found = tags(source)
    assert [("backpropagated" in t) for t in found] == [False, True, True]
    assert kinds(source) == [Kind.UNKNOWN] * 3  # (another framework's objects have backward() too)


def test_module_only_methods_make_an_unknown_value_a_module() -> None:
    source = """
        import torch
        def attack(model, net, x):
            reveal(model(x))
            model.eval()
            reveal(model(x))
            opt = torch.optim.Adam(net.parameters())
            reveal(net(x))
            with torch.no_grad():
                reveal(net(x))
    """
    assert kinds(source) == [Kind.UNKNOWN, Kind.NONLEAF, Kind.NONLEAF, Kind.PLAIN]


def test_a_leaf_moved_to_a_device_is_the_leaf_itself_on_the_cpu() -> None:
    source = """
        import torch
        def f(device):
            a = torch.zeros(1, requires_grad=True).to(device)
            b = torch.zeros(1, requires_grad=True).to(device, torch.float64)
            c = torch.zeros(1, requires_grad=True).to(torch.float64)
            reveal(a); reveal(b); reveal(c)
    """
    assert kinds(source) == [Kind.NONLEAF] * 3
    assert [("leaf-on-cpu" in t) for t in tags(source)] == [True, False, False]


def _element_kinds(source: str) -> list[Kind | None]:
    """What each ``reveal(xs)`` collection holds, per element."""
    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    seen: list[Kind | None] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "reveal":
                value = self.ctx.value_of(node.args[0].value)
                seen.append(value.element.kind if value.element is not None else None)

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    return seen


def test_comprehensions_hold_what_their_element_gives_with_the_targets_bound() -> None:
    source = """\
        import torch
        w = torch.randn(3, requires_grad=True)
        ws = [w, w]
        p = 1.0
        reveal([torch.ones(2, requires_grad=True) for _ in range(3)])
        reveal([p * 2 for p in ws])
        reveal(p * 2 for p in ws)
        reveal([p.item() for p in ws])
        reveal(p)
        """
    assert _element_kinds(source) == [Kind.LEAF, Kind.NONLEAF, Kind.NONLEAF, Kind.NUMBER, None]
    # the comprehension's `p` does not leak: the module's `p` is still the number
    assert kinds(source)[-1] is Kind.NUMBER


@pytest.mark.parametrize(
    "expr, kind",
    [
        ("p.data.clone().requires_grad_()", Kind.LEAF),
        ("p.detach().requires_grad_()", Kind.LEAF),
        ("p.detach().clone().requires_grad_()", Kind.LEAF),
        ("p.clone().requires_grad_()", Kind.UNKNOWN),  # a clone of a non-leaf stays a non-leaf
        ("p.data.float().requires_grad_()", Kind.UNKNOWN),  # not a copy the model knows
    ],
)
def test_requires_grad_on_a_graph_free_copy_of_an_unknown_tensor_is_a_leaf(expr: str, kind: Kind) -> None:
    assert kinds(f"import torch\np = make()\nreveal({expr})\n") == [kind]


def test_a_leaf_on_some_path_survives_joins_and_moves() -> None:
    source = """
    import torch
    if learn:
        w = torch.zeros(3, requires_grad=True)
    elif other:
        w = fixed
    else:
        w = loaded()
    reveal(w)
    reveal(w.to(device))
    reveal(w.cpu())
    v = fixed if flag else loaded()
    reveal(v)
    """
    assert tags(source) == [
        frozenset({"leaf-on-a-path"}), frozenset({"moved-leaf-on-a-path"}), frozenset(), frozenset()]


def test_values_given_call_sites_of_a_method_called_by_a_later_method() -> None:
    module = cst.parse_module(textwrap.dedent("""
        import torch.nn as nn
        gen = nn.Linear(2, 2)
        class T:
            def mix(self, real, fake):
                reveal((real + fake) / 2)
            def step(self, x):
                self.mix(x, gen(x))
        """))
    analyzer = Analyzer(module, module.code)
    asked: list = []

    class Ask(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "reveal":
                asked.append((self.ctx.value_of(node.args[0].value), self.ctx.value_given_call_sites(node.args[0].value)))

    analyzer.attach([Ask(analyzer, [], RuleOptions())])
    analyzer.run()
    (now, later), = asked
    assert now.kind is Kind.UNKNOWN  # analysed before `step`, its only caller
    assert later is not None and later().kind is Kind.NONLEAF
