"""Unit tests of model queries that rules used to answer with private machinery."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis.flow import Flow


def _loop_and_calls(source: str) -> tuple[cst.For | cst.While, dict[str, cst.Call]]:
    """The first loop of ``source`` and each call ``name()`` in it by its function name."""
    module = cst.parse_module(textwrap.dedent(source))
    loop = next(s for s in module.body if isinstance(s, (cst.For, cst.While)))
    calls: dict[str, cst.Call] = {}

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name):
                calls[node.func.value] = node

    module.visit(Finder())
    return loop, calls


# ---------------------------------------------------------------- Flow.separating_node
@pytest.mark.parametrize(
    "body, separator",
    [
        ("if c:\n        a()\n    else:\n        b()\n", cst.If),
        ("if c:\n        a()\n    elif d:\n        b()\n", cst.If),
        ("try:\n        a()\n    except E:\n        b()\n", cst.Try),
        ("x = a() if c else b()\n", cst.IfExp),
        ("if c:\n        a()\n    if d:\n        b()\n", None),  # two ifs in a row
        ("if c:\n        a()\n        b()\n", None),  # one arm
        ("a()\n    b()\n", None),
    ],
)
def test_separating_node_is_the_statement_with_both_arms(body: str, separator: type | None) -> None:
    loop, calls = _loop_and_calls("for i in r:\n    " + body)
    node = Flow(loop).separating_node(calls["a"], calls["b"])
    if separator is None:
        assert node is None
    else:
        assert type(node) is separator
        # the very statement of the body that holds both (not a copy, not an inner one)
        assert calls["a"] in _descendants(node) and calls["b"] in _descendants(node)


def test_separating_node_of_an_elif_is_the_inner_if() -> None:
    loop, calls = _loop_and_calls("for i in r:\n    if c:\n        z()\n    elif d:\n        a()\n    else:\n        b()\n")
    node = Flow(loop).separating_node(calls["a"], calls["b"])
    assert isinstance(node, cst.If) and isinstance(node.test, cst.Name) and node.test.value == "d"
    outer = Flow(loop).separating_node(calls["z"], calls["b"])
    assert isinstance(outer, cst.If) and outer.test.value == "c"  # type: ignore[attr-defined]


def test_separating_node_ignores_nested_functions() -> None:
    loop, calls = _loop_and_calls(
        "for i in r:\n    def f():\n        if c:\n            a()\n        else:\n            b()\n"
    )
    assert Flow(loop).separating_node(calls["a"], calls["b"]) is None


def _descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, inner: cst.CSTNode) -> bool:
            found.append(inner)
            return True

    node.visit(Collect())
    return found


# ---------------------------------------------------------------- TensorIdentities
def _identities(source: str) -> list[tuple[object, frozenset[int], dict[int, str]]]:
    """For each ``probe(x)``: (the tensor ``x`` is, the saving ops its value came from, the
    source of each op by id), with ``sigmoid()`` calls as the saving ops and ``append`` as a
    store -- the way an owner rule (TL007) keeps the identities as it visits."""
    from torchlint.analysis import Analyzer
    from torchlint.analysis.tensor_identity import TensorIdentities
    from torchlint.rule import Rule, RuleOptions

    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    found: list[tuple[object, frozenset[int], dict[int, str]]] = []
    ops: dict[int, str] = {}

    class Owner(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            self.ids = TensorIdentities(self.ctx)

        def leave_Assign(self, node: cst.Assign) -> None:
            deps = self.ids.deps_of(node.value)
            self.ids.note_alias(node.value)
            for target in node.targets:
                self.ids.bind(target.target, node.value, deps)

        def leave_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "sigmoid":
                self.ids.note_saving(node)
                ops[id(node)] = module.code_for_node(node)
            elif isinstance(func, cst.Attribute) and func.attr.value == "append":
                self.ids.add_deps(self.ids.holder(func.value), self.ids.deps_of(node))
            elif isinstance(func, cst.Name) and func.value == "probe":
                value = node.args[0].value
                found.append((self.ids.resolve(value)[0], self.ids.deps_of(value), ops))

    analyzer.attach([Owner(analyzer, [], RuleOptions())])
    analyzer.run()
    return found


def test_views_and_inplace_results_are_their_base() -> None:
    probes = _identities(
        """
        import torch
        x = torch.randn(3, requires_grad=True) * 2
        y = x.view(3)
        z = y.t()[0:2]
        w = z.mul_(2)
        c = x.clone()
        a = x[torch.tensor([0])]
        probe(x); probe(y); probe(z); probe(w); probe(c); probe(a)
        """
    )
    x, y, z, w, c, a = (identity for identity, _, _ in probes)
    assert x is not None and x == y == z == w
    assert c not in (None, x)  # a copy: its own version counter
    assert a not in (None, x)  # advanced indexing copies


def test_graph_ancestry_follows_names_ops_and_stores() -> None:
    probes = _identities(
        """
        import torch
        w = torch.randn(3, requires_grad=True)
        h = w.sigmoid()
        out = (h * 3).sum()
        plain = w * 3
        losses = []
        losses.append(out)
        g = plain.sigmoid()
        probe(out); probe(plain); probe(losses); probe(g)
        """
    )
    (_, out, ops), (_, plain, _), (_, losses, _), (_, g, _) = probes
    assert [ops[op] for op in out] == ["w.sigmoid()"]
    assert plain == frozenset()  # computed from no saving op
    assert losses == out  # what was appended
    assert [ops[op] for op in g] == ["plain.sigmoid()"]


def test_tuple_targets_get_each_value() -> None:
    probes = _identities(
        """
        import torch
        w = torch.randn(3, requires_grad=True)
        a, b = w.sigmoid(), w * 2
        probe(a); probe(b)
        """
    )
    (_, a, ops), (_, b, _) = probes
    assert [ops[op] for op in a] == ["w.sigmoid()"] and b == frozenset()


# ---------------------------------------------------------------- Analyzer.builtin_module
def _builtin_modules(source: str) -> list[tuple[str, str] | None]:
    """``ctx.builtin_module`` of each ``probe(x)``'s value: (class name, constructor source)."""
    from torchlint.analysis import Analyzer
    from torchlint.rule import Rule, RuleOptions

    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    found: list[tuple[str, str] | None] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "probe":
                built = self.ctx.builtin_module(self.ctx.value_of(node.args[0].value))
                found.append(None if built is None else (built[0], module.code_for_node(built[1])))

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    return found


def test_builtin_module_names_the_torch_nn_class_and_its_constructor() -> None:
    assert _builtin_modules(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            pass

        act = nn.ReLU(inplace=True)
        lstm = torch.nn.LSTM(3, 4)
        mine = Net()
        t = torch.randn(3)
        probe(act); probe(lstm); probe(mine); probe(t)
        """
    ) == [("ReLU", "nn.ReLU(inplace=True)"), ("LSTM", "torch.nn.LSTM(3, 4)"), None, None]


# ---------------------------------------------------------------- ctx.loop_graph: modules on objects
def _freed_reached(source: str) -> list[list[str]]:
    """For each loop: the sources of the nodes its second iteration's backward() reaches after
    the first one freed them."""
    from torchlint.analysis import Analyzer
    from torchlint.rule import Rule, RuleOptions

    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    found: list[list[str]] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def visit_For(self, node: cst.For) -> None:
            graph = self.ctx.loop_graph(node)
            hits = graph.freed_reached() if graph is not None else []
            found.append(sorted(module.code_for_node(graph.expressions[n.expr]) for _, hit in hits for n in hit))

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    return found


def test_loop_graph_follows_modules_kept_on_objects() -> None:
    assert _freed_reached(
        """
        import torch
        import torch.nn as nn

        class Holder:
            def __init__(self):
                self.encoder = nn.Linear(3, 2)
                self.act = nn.Tanh()

        net = Holder()
        x = torch.randn(4, 3)
        features = net.act(net.encoder(x))
        for step in range(3):
            features.sum().backward()
        for step in range(3):
            net.act(net.encoder(x)).sum().backward()
        """
    ) == [["net.act(net.encoder(x))", "net.encoder(x)"], []]
