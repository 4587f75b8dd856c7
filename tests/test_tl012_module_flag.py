"""TL012 on `module.requires_grad = False` (tests/fixtures/TL012/module_flag.py), measured with torch:
the assignment sets a plain attribute, the parameters keep requires_grad=True and an optimizer built
from them still changes them; the look-alikes the fixture keeps silent really freeze."""
from __future__ import annotations

import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 2)
        self.out = nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.proj(x))


class Model(nn.Module):
    """Stands in for `build_model(opt)`: a classifier submodule holding a conv."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.classifier = nn.Module()
        self.classifier.conv = nn.Conv1d(4, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier.conv(self.body(x).unsqueeze(-1)).squeeze(-1)


def _changed_by_a_step(model: nn.Module, frozen: nn.Module) -> bool:
    """One Adam step on all of `model`'s parameters: did any parameter of `frozen` change?"""
    torch.manual_seed(0)
    before = [p.detach().clone() for p in frozen.parameters()]
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()
    return any(not torch.equal(old, p) for old, p in zip(before, frozen.parameters()))


def test_assigning_the_flag_on_a_module_freezes_nothing() -> None:
    torch.manual_seed(0)
    head = Head()
    head.requires_grad = False
    assert head.requires_grad is False and "requires_grad" in vars(head)  # a plain attribute
    assert all(p.requires_grad for p in head.parameters())
    assert _changed_by_a_step(head, head)


def test_assigning_the_flag_on_a_submodule_freezes_nothing() -> None:
    torch.manual_seed(0)
    head = Head()
    head.proj.requires_grad = False
    assert _changed_by_a_step(head, head.proj)
    model = Model()
    prototypes = model.classifier.conv.weight.view(-1)  # the fixture's view: still a view of a trainable weight
    model.classifier.requires_grad = False
    assert prototypes.requires_grad and all(p.requires_grad for p in model.classifier.parameters())
    assert _changed_by_a_step(model, model.classifier)


def test_assigning_the_flag_on_a_builtin_layer_freezes_nothing() -> None:
    layer = nn.Linear(4, 3)
    layer.requires_grad = False
    assert layer.weight.requires_grad and layer.bias.requires_grad


def test_the_look_alikes_freeze() -> None:
    torch.manual_seed(0)
    head = Head()
    head.requires_grad_(False)
    assert not any(p.requires_grad for p in head.parameters())
    head = Head()
    for p in head.proj.parameters():
        p.requires_grad = False
    assert not _changed_by_a_step(head, head.proj) and _changed_by_a_step(head, head.out)
    model = Model()
    model.classifier.requires_grad_(False)
    assert not _changed_by_a_step(model, model.classifier)


def test_the_fix_freezes() -> None:
    """`head.requires_grad_(False)`, what the fix writes, leaves the parameters unchanged by a step."""
    torch.manual_seed(0)
    model = Model()
    model.classifier.requires_grad_(False)
    assert all(not p.requires_grad for p in model.classifier.parameters())
    assert _changed_by_a_step(model, model.body)
