"""The analysis query "all uses of a name in its scope, and where each use's value goes"."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import Analyzer
from torchlint.analysis.uses import Sink, ValueFlow, references


def _module(source: str) -> tuple[cst.Module, Analyzer]:
    module = cst.parse_module(textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    analyzer.run()
    return module, analyzer


def sinks(source: str, key: str = "acc") -> list[tuple[str, bool]]:
    """(sink, needs a tensor) of every use of ``key`` after the first line (its binding)."""
    module, analyzer = _module("import numpy as np\nimport torch\nimport matplotlib.pyplot as plt\n" + textwrap.dedent(source))
    uses = ValueFlow(analyzer, module).follow(key)
    assert uses is not None
    return [(use.sink.value, use.needs_tensor) for use in uses[1:]]


def test_references_skip_nested_functions_with_their_own_binding() -> None:
    module, _ = _module("""\
        total = 0
        def f():
            total = 1
            return total
        def g():
            return total
        x.total = 2
        """)
    found = references(module, "total")
    assert [module.code_for_node(node) for node in found] == ["total", "total"]
    assert len(references(module, "x.total")) == 1


@pytest.mark.parametrize(
    "use, expected",
    [
        ("acc.backward()", [("backward", False)]),
        ("torch.stack(acc).mean().backward()", [("backward", True)]),
        ("criterion(torch.stack(acc), y).backward()", [("backward", True)]),
        ("torch.autograd.backward(acc)", [("backward", False)]),
        ("np.array(acc)", [("numpy", False)]),
        ("plt.plot(acc)", [("numpy", False)]),
        ("print(acc)", [("number", False)]),
        ("msg = f'{acc:.3f}'", [("number", False)]),
        ("msg = 'loss {}'.format(acc)", [("number", False)]),
        ("msg = '%f' % acc", [("number", False)]),
        ("v = (acc / 3).item()", [("number", True)]),
        ("v = acc[0].item()", [("number", True)]),
        ("v = acc.detach()", [("detached", True)]),
        ("v = torch.tensor(acc)", [("detached", False)]),
        ("if acc > 1: pass", [("dropped", False)]),
        ("s = acc.shape", [("dropped", True)]),
        ("acc.append(1)", [("dropped", False)]),
        ("log(acc)", [("escapes", False)]),
        ("log['loss'] = acc", [("dropped", False)]),  # followed into `log`, which nothing uses
        ("def f():\n    return acc / 2", [("escapes", False)]),
    ],
)
def test_where_a_use_goes(use: str, expected: list[tuple[str, bool]]) -> None:
    assert sinks("acc = []\n" + use + "\n") == expected


def test_aliases_are_followed_from_their_binding_on() -> None:
    source = """\
        acc = []
        avg = 0
        print(avg.item())
        avg = sum(acc) / 3
        v = avg.item()
        """
    # `avg.item()` before `avg` is bound to the accumulator's value is not one of its uses
    assert sinks(source) == [("dropped", False), ("number", True)]


def test_comprehension_targets_are_followed() -> None:
    # the `for` binds `l`; `l`'s uses: `l.item()`, and the target itself
    assert sinks("acc = []\nvalues = [l.item() for l in acc]\n") == [
        ("dropped", False), ("number", True), ("dropped", False)]


def test_through_unknown_calls_only_a_backward_counts() -> None:
    assert sinks("acc = []\nout = helper(acc)\nprint(out)\n") == [("dropped", False), ("escapes", False)]
    assert sinks("acc = []\nhelper(acc).backward()\n") == [("backward", False)]


def test_too_many_names_is_none() -> None:
    chain = "".join(f"a{i} = a{i - 1}\n" if i else "a0 = acc\n" for i in range(30))
    module, analyzer = _module("acc = []\n" + chain)
    assert ValueFlow(analyzer, module).follow("acc", max_names=20) is None
    assert Sink.BACKWARD.value == "backward"


def test_follow_value_starts_at_an_expression_and_follows_its_names() -> None:
    module, analyzer = _module("""\
        import numpy as np
        part = np.sum(xs)
        loss = part + 1
        loss.backward()
        shown = np.sum(ys)
        print(shown)
        """)
    first, second = (statement.body[0].value for statement in module.body[1:5:3])  # type: ignore[attr-defined]
    flow = ValueFlow(analyzer, module)
    assert Sink.BACKWARD in {use.sink for use in flow.follow_value(first) or []}
    assert Sink.BACKWARD not in {use.sink for use in flow.follow_value(second) or []}
    # an expression used in place: `np.sum(zs).backward()`
    _, analyzer = _module("import numpy as np\nnp.sum(zs).backward()\n")
    inline = analyzer.module.body[1].body[0].value.func.value  # type: ignore[attr-defined]
    assert [use.sink for use in ValueFlow(analyzer, analyzer.module).follow_value(inline) or []] == [Sink.BACKWARD]


def test_follow_value_stops_at_arithmetic_with_a_rejected_operand() -> None:
    module, analyzer = _module("""\
        import numpy as np
        loss = criterion(out) + np.sum(xs)
        loss.backward()
        """)
    reduction = module.body[1].body[0].value.right  # type: ignore[attr-defined]
    flow = ValueFlow(analyzer, module)
    assert Sink.BACKWARD in {use.sink for use in flow.follow_value(reduction) or []}
    rejected = flow.follow_value(reduction, combines=lambda operand: False)
    assert [use.sink for use in rejected or []] == [Sink.DROPPED]


def test_a_name_bound_again_later_is_followed_from_its_earlier_binding_too() -> None:
    # `acc` reaches `loss` bound in the first loop; the second loop binds `loss` again, and the
    # walk reaches that binding first: the first loop's `loss.backward()` is still a use
    source = """\
        acc = []
        for x in xs:
            loss = criterion(acc, x)
            loss.backward()
        for x in xs:
            loss = criterion(acc, x)
            print(loss)
        """
    assert ("backward", False) in sinks(source)


def test_a_keyword_argument_of_an_unseen_call_does_not_reach_its_result() -> None:
    # `tqdm(loader, total=n)` keeps its option; what it yields is the loader's
    source = """\
        acc = 3
        for x in tqdm(loader, total=acc):
            x.backward()
        """
    assert sinks(source) == [("escapes", False)]
    assert sinks("acc = 3\nfor x in tqdm(acc):\n    x.backward()\n")[-1] == ("backward", False)
