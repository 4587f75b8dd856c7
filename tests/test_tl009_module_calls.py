"""The fixture ``TL009/module_calls.py`` run with torch 2.13: module outputs reached through
``self.forward(x)``, ``torch.compile(m)``, ``DistributedDataParallel(m)`` (in a one-process gloo
group) and entries assigned into an ``nn.ModuleDict`` or a
dict.  Each shape prints its total; a reported shape's total keeps a graph (and after the unsafe
fix none does), a look-alike's keeps none.  ``torch.compile`` runs with the eager backend (no
compiler needed): the claim is about the module it returns, which runs the module passed and
reads its methods through whatever the backend."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import FIXTURES, expected_findings
from torchlint.engine import fix_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIXTURE = FIXTURES / "TL009" / "module_calls.py"


def _runs(ns: dict) -> dict[str, Callable[[list, object], None]]:
    """shape -> how to run it with a loader and an optimizer."""
    return {
        "fit_epoch": lambda loader, opt: ns["Regressor"]().fit_epoch(loader, opt),
        "forward_from_outside": lambda loader, opt: ns["forward_from_outside"](loader),
        "compiled": lambda loader, opt: ns["compiled"](loader),
        "compiled_method": lambda loader, opt: ns["compiled_method"](loader, opt),
        "module_dict_entry": lambda loader, opt: ns["module_dict_entry"](loader, opt),
        "dict_entry": lambda loader, opt: ns["dict_entry"](loader),
        "Trainer.train": lambda loader, opt: ns["Trainer"]().train(loader, opt),
        "distributed": lambda loader, opt: ns["distributed"](loader, ns["Regressor"]()),
        # look-alikes
        "eval_epoch": lambda loader, opt: ns["Regressor"]().eval_epoch(loader),
        "logged_epoch": lambda loader, opt: ns["Regressor"]().logged_epoch(loader, opt),
        "module_dict_detached_part": lambda loader, opt: ns["module_dict_detached_part"](loader, opt),
        "Trainer.train_logged": lambda loader, opt: ns["Trainer"]().train_logged(loader, opt),
    }


REPORTED = {"fit_epoch", "forward_from_outside", "compiled", "compiled_method", "module_dict_entry", "dict_entry",
            "Trainer.train", "distributed"}


def _printed_total(source: str, shape: str, monkeypatch: pytest.MonkeyPatch) -> object:
    """Run ``shape`` of ``source``; what it printed (its total)."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    printed: list[object] = []
    ns: dict = {"print": lambda *values: printed.extend(values)}
    exec(compile(source, str(FIXTURE), "exec"), ns)
    torch.manual_seed(0)
    loader = [(torch.randn(8, 3), torch.randn(8, 1))] * 3
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.01)
    _runs(ns)[shape](loader, opt)
    assert len(printed) == 1
    return printed[0]


def _keeps_graph(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.grad_fn is not None


def test_every_reported_line_of_the_fixture_is_a_run_shape() -> None:
    source = FIXTURE.read_text(encoding="utf-8")
    assert len({line for line, _, code in expected_findings(source) if code == "TL009"}) == len(REPORTED)


@pytest.fixture
def process_group(tmp_path: Path):
    """A one-process gloo group (DistributedDataParallel needs one; no GPU, no network)."""
    dist = torch.distributed
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_distributed_data_parallel_output_keeps_its_graph(process_group: None, monkeypatch: pytest.MonkeyPatch) -> None:
    test_module_outputs_keep_their_graph_where_reported("distributed", monkeypatch)


@pytest.mark.parametrize("shape", sorted(set(_runs({})) - {"distributed"}))
def test_module_outputs_keep_their_graph_where_reported(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = FIXTURE.read_text(encoding="utf-8")
    total = _printed_total(source, shape, monkeypatch)
    assert _keeps_graph(total) == (shape in REPORTED)
    if shape in REPORTED:
        fixed = fix_source(source, [rule_by_code("TL009")], unsafe=True).source
        assert fixed != source
        assert not _keeps_graph(_printed_total(fixed, shape, monkeypatch))
