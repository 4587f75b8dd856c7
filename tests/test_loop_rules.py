"""TL008-TL011: fixes (the fixtures check findings only), the measured module facts TL010
relies on, and the analysis query TL008 uses to see into helpers."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import Analyzer
from torchlint.engine import fix_source, lint_source
from torchlint.rules import rule_by_code


def fixed(code: str, source: str) -> str:
    return fix_source(textwrap.dedent(source), [rule_by_code(code)], unsafe=True).source


def fixes_of(code: str, source: str) -> list[str | None]:
    findings = lint_source(textwrap.dedent(source), [rule_by_code(code)]).findings
    return [f.fix.description if f.fix else None for f in findings]


# ---------------------------------------------------------------- TL008
def test_tl008_inserts_zero_grad_at_the_top_of_the_loop() -> None:
    source = """\
        import torch
        w = torch.zeros(3, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        for step in range(3):
            # forward
            loss = (w * 2).sum()
            loss.backward()
            opt.step()
        """
    assert "for step in range(3):\n    opt.zero_grad()\n    # forward\n" in fixed("TL008", source)


def test_tl008_manual_update_fix_resets_after_the_update() -> None:
    source = """\
        import torch
        w = torch.zeros(3, requires_grad=True)
        for step in range(3):
            (w * 2).sum().backward()
            with torch.no_grad():
                w -= 0.1 * w.grad  # update
        """
    assert "        w -= 0.1 * w.grad  # update\n        w.grad = None\n" in fixed("TL008", source)


def test_tl008_no_reset_fix_when_the_gradient_is_read_again() -> None:
    source = """\
        import torch
        w = torch.zeros(3, requires_grad=True)
        for step in range(3):
            (w * 2).sum().backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
            print(w.grad.norm())
        """
    assert fixes_of("TL008", source) == [None]


def test_tl008_no_fix_for_two_optimizers() -> None:
    source = """\
        import torch
        a = torch.zeros(3, requires_grad=True)
        b = torch.zeros(3, requires_grad=True)
        opt_a = torch.optim.SGD([a], lr=0.1)
        opt_b = torch.optim.SGD([b], lr=0.1)
        for step in range(3):
            (a * b).sum().backward()
            opt_a.step()
            opt_b.step()
        """
    assert fixes_of("TL008", source) == [None]


# ---------------------------------------------------------------- TL009
def test_tl009_detaches_a_loss_that_may_not_be_a_scalar() -> None:
    """``.item()`` would raise on a non-scalar; ``.detach()`` works for any shape."""
    source = """\
        import torch
        w = torch.zeros(3, requires_grad=True)
        total = 0.0
        for step in range(3):
            total += w * 2
        print(total)
        """
    assert fixes_of("TL009", source) == ["accumulate `(w * 2).detach()`"]


def test_tl009_wraps_a_compound_loss_before_item() -> None:
    source = """\
        import torch
        w = torch.zeros(3, requires_grad=True)
        total = 0.0
        for step in range(3):
            loss = (w * 2).sum()
            total += loss * 4
        print(total)
        """
    assert "    total += (loss * 4).item()\n" in fixed("TL009", source)


# ---------------------------------------------------------------- TL011
def test_tl011_fix_forms() -> None:
    # Consecutive rewrites share one no_grad block (the engine merges blocks fixes create).
    source = """\
        import torch
        w = torch.zeros(3, requires_grad=True)
        w.data.sub_(0.1)
        w.data -= 0.1
        snapshot = w.data
        w.grad = torch.ones(3)
        w.grad.data.zero_()
        with torch.no_grad():
            w.data.add_(1.0)
        w.data = torch.ones(3)
        """
    assert fixed("TL011", source) == textwrap.dedent("""\
        import torch
        w = torch.zeros(3, requires_grad=True)
        with torch.no_grad():
            w.sub_(0.1)
            w -= 0.1
        snapshot = w.detach()
        w.grad = torch.ones(3)
        w.grad.zero_()
        with torch.no_grad():
            w.add_(1.0)
        w.data = torch.ones(3)
        """)


def test_tl011_never_rewrites_an_object_that_is_only_assumed_to_be_a_tensor() -> None:
    # torch's MetaTensorDesc has `.grad` and `.data` fields: a `.grad` read is no proof of a tensor.
    source = """\
        def copy(t, out):
            if t.grad is not None:
                out.grad = t.grad
            return t.data
        """
    assert lint_source(textwrap.dedent(source), [rule_by_code("TL011")]).findings == []


# ---------------------------------------------------------------- analysis
def test_resolve_function_finds_helpers_and_methods() -> None:
    source = textwrap.dedent("""\
        def helper():
            pass

        class Trainer:
            def clear(self):
                pass

            def run(self):
                self.clear()
                helper()
                unknown()
        """)
    module = cst.parse_module(source)
    analyzer = Analyzer(module, source)
    resolved: dict[str, str | None] = {}

    class Probe:
        def __init__(self, ctx: Analyzer) -> None:
            self.ctx = ctx

        def visit_Call(self, node: cst.Call) -> None:
            info = self.ctx.resolve_function(node.func)
            resolved[cst.Module(body=[]).code_for_node(node.func)] = info.name if info else None

        def finish(self) -> None:
            pass

    analyzer.attach([Probe(analyzer)])  # type: ignore[list-item]
    analyzer.run()
    assert resolved == {"self.clear": "clear", "helper": "helper", "unknown": None}


# ---------------------------------------------------------------- TL010's measured facts
@pytest.mark.torch
def test_tl010_saving_modules_fail_a_second_backward() -> None:
    """Every built-in module TL010 treats as saving tensors really does (torch disagrees -> fail)."""
    torch = pytest.importorskip("torch")
    from torchlint.analysis.torch_api import SAVING_PARAMETER_MODULES as _SAVING_PARAMETER_MODULES

    nn = torch.nn
    x = torch.randn(2, 3)
    makers = {
        "Linear": (lambda: nn.Linear(3, 4), lambda m: m(x)),
        "Bilinear": (lambda: nn.Bilinear(3, 3, 2), lambda m: m(x, x)),
        "Conv1d": (lambda: nn.Conv1d(3, 4, 1), lambda m: m(x[None].transpose(1, 2))),
        "Conv2d": (lambda: nn.Conv2d(3, 4, 1), lambda m: m(x[None, :, :, None].transpose(1, 2))),
        "Conv3d": (lambda: nn.Conv3d(3, 4, 1), lambda m: m(x[None, :, :, None, None].transpose(1, 2))),
        "ConvTranspose1d": (lambda: nn.ConvTranspose1d(3, 4, 1), lambda m: m(x[None].transpose(1, 2))),
        "ConvTranspose2d": (lambda: nn.ConvTranspose2d(3, 4, 1), lambda m: m(x[None, :, :, None].transpose(1, 2))),
        "ConvTranspose3d": (
            lambda: nn.ConvTranspose3d(3, 4, 1), lambda m: m(x[None, :, :, None, None].transpose(1, 2))),
        "RNN": (lambda: nn.RNN(3, 4), lambda m: m(x[None])[0]),
        "LSTM": (lambda: nn.LSTM(3, 4), lambda m: m(x[None])[0]),
        "GRU": (lambda: nn.GRU(3, 4), lambda m: m(x[None])[0]),
        "RNNCell": (lambda: nn.RNNCell(3, 4), lambda m: m(x)),
        "LSTMCell": (lambda: nn.LSTMCell(3, 4), lambda m: m(x)[0]),
        "GRUCell": (lambda: nn.GRUCell(3, 4), lambda m: m(x)),
        "Embedding": (lambda: nn.Embedding(5, 3), lambda m: m(torch.tensor([1, 2]))),
        "LayerNorm": (lambda: nn.LayerNorm(3), lambda m: m(x)),
        "GroupNorm": (lambda: nn.GroupNorm(1, 3), lambda m: m(x)),
        "BatchNorm1d": (lambda: nn.BatchNorm1d(3), lambda m: m(x)),
        "BatchNorm2d": (lambda: nn.BatchNorm2d(3), lambda m: m(x[:, :, None, None])),
        "BatchNorm3d": (lambda: nn.BatchNorm3d(3), lambda m: m(x[:, :, None, None, None])),
        "PReLU": (lambda: nn.PReLU(), lambda m: m(x)),
    }
    assert set(makers) == set(_SAVING_PARAMETER_MODULES)
    for name, (make, call) in makers.items():
        out = call(make()).sum()
        out.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            out.backward()
        assert name
