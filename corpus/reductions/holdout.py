"""Reductions behind the `check` fields of corpus/holdout/*.toml (our own code, torch 2.13 CPU).

    python corpus/reductions/holdout.py                    # run every reduction, print what happened
    python corpus/reductions/holdout.py ho_tl009_epoch_sum_plotted

Same style as measure.py: each reduction is the smallest program with the shape of a labelled line
of the held-out corpus and prints the observed outcome. matplotlib is not installed here:
`plt.plot(ys)` turns its data into an array with `np.asarray`, which is what the reductions call.
No GPU either: a move to the `meta` device stands in for `.cuda()` / `.to(cuda_device)`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from measure import _outcome
from torch import nn

REDUCTIONS: dict[str, Callable[[], str]] = {}
DEVICE = "meta"  # stands in for a GPU: a real device move, which CPU -> CPU is not


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


def _regression() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(16, 2)
    return x, x @ torch.tensor([[2.0], [-3.0]]) + 1.0


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))


# TL009 / TL015: loss histories -----------------------------------------------------------------
@reduction
def ho_tl009_epoch_sum_plotted() -> str:
    """`loss_D += loss` per batch (loss backpropagated and stepped), `epoch_losses.append(loss_D)`, then plotted."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history = []
    for _ in range(2):
        total = 0
        for batch in range(4):
            loss = ((model(x[batch::4]) - y[batch::4]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss
        history.append(total)
    return (f"history[0].requires_grad={history[0].requires_grad}, grad_fn={type(history[0].grad_fn).__name__}; "
            f"np.asarray(history) as plt.plot does: {_outcome(lambda: np.asarray(history).shape)}")


@reduction
def ho_tl009_item_history_ok() -> str:
    """`losses.append(loss.item())` / `total += loss.item()`, then plotted."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history = []
    for _ in range(3):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item())
    return f"type={type(history[0]).__name__}; np.asarray(history): {_outcome(lambda: np.asarray(history).shape)}"


# TL002 / TL001 / TL005: manual updates -------------------------------------------------------------
@reduction
def ho_tl002_no_grad_update_ok() -> str:
    """`with torch.no_grad(): w -= lr * w.grad` then `w.grad.zero_()` each step."""
    x, y = _regression()
    w = torch.zeros(2, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    losses = []
    for _ in range(30):
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
        w.grad.zero_()
        b.grad.zero_()
        losses.append(loss.item())
    return f"w.is_leaf={w.is_leaf}, loss {losses[0]:.2f} -> {losses[-1]:.3f}"


@reduction
def ho_tl001_plain_tensor_rebind_ok() -> str:
    """`w_t = w_t - lr * grad_w` on tensors that never required grad (gradient computed by hand)."""
    x, y = _regression()
    w, b = torch.zeros(2, 1), torch.zeros(1)
    first = last = 0.0
    for step in range(30):
        err = x @ w + b - y
        if step == 0:
            first = (err ** 2).mean().item()
        w = w - 0.1 * (2 * x.t() @ err / len(x))
        b = b - 0.1 * (2 * err.mean())
        last = (err ** 2).mean().item()
    return f"w.requires_grad={w.requires_grad}, loss {first:.2f} -> {last:.3f}"


@reduction
def ho_tl005_requires_grad_on_plain_copy_ok() -> str:
    """`w_v = w_init_t.clone().unsqueeze(1); w_v.requires_grad_(True)` on a plain tensor."""
    w_init = torch.rand(2)
    w_v = w_init.clone().unsqueeze(1)
    w_v.requires_grad_(True)
    x, y = _regression()
    ((x @ w_v - y) ** 2).mean().backward()
    return f"is_leaf={w_v.is_leaf}, requires_grad={w_v.requires_grad}, grad set={w_v.grad is not None}"


@reduction
def ho_tl002_inplace_on_plain_tensor_ok() -> str:
    """`w_t = w_init_t.clone(); w_t.unsqueeze_(1)`: in place on a tensor that does not require grad."""
    w_t = torch.rand(2).clone()
    return _outcome(lambda: tuple(w_t.unsqueeze_(1).shape))


@reduction
def ho_tl002_data_update_ok() -> str:
    """`with torch.no_grad(): for p in model.parameters(): p.data -= lr * p.grad` after `model.zero_grad()`."""
    x, y = _regression()
    model = nn.Linear(2, 1)
    losses = []
    for _ in range(30):
        loss = ((model(x) - y) ** 2).sum()
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param.data -= 0.005 * param.grad
        losses.append(loss.item())
    return f"loss {losses[0]:.1f} -> {losses[-1]:.2f}"


# TL007: GAN steps -------------------------------------------------------------------------------
@reduction
def ho_tl007_d_step_then_fresh_forward_ok() -> str:
    """D's backward(retain_graph=True) and step, then G's loss through a NEW forward of D on the same fake."""
    torch.manual_seed(0)
    gen, disc = nn.Linear(4, 3), nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
    opt_d, opt_g = torch.optim.Adam(disc.parameters()), torch.optim.Adam(gen.parameters())
    fake = gen(torch.randn(5, 4))
    loss_d = F.binary_cross_entropy(disc(fake), torch.zeros(5, 1))
    disc.zero_grad()
    loss_d.backward(retain_graph=True)
    opt_d.step()

    def generator_step() -> str:
        loss_g = F.binary_cross_entropy(disc(fake), torch.ones(5, 1))
        gen.zero_grad()
        loss_g.backward()
        opt_g.step()
        return "G's backward ran"
    return _outcome(generator_step)


# TL015: numpy of tensors --------------------------------------------------------------------------
@reduction
def ho_tl015_detached_numpy_ok() -> str:
    """`model(X).detach().numpy()`, `out.data.numpy()`, `out.cpu().data.numpy()` in grad mode."""
    out = _mlp()(torch.randn(3, 2))
    return (f"detach: {_outcome(lambda: out.detach().numpy().shape)}; .data: {_outcome(lambda: out.data.numpy().shape)}; "
            f"bare: {_outcome(lambda: out.numpy())}")


# TL008 / TL017 / TL016 / TL004: loops ------------------------------------------------------------------
@reduction
def ho_tl017_step_then_zero_grad_ok() -> str:
    """`loss.backward(); optimizer.step(); optimizer.zero_grad()` (zeroing after the step)."""
    x, y = _regression()
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    before = model.weight.detach().clone()
    losses = []
    for _ in range(20):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    moved = (model.weight.detach() - before).abs().max().item()
    return f"max weight change {moved:.3f}, loss {losses[0]:.2f} -> {losses[-1]:.3f}"


@reduction
def ho_tl004_leaf_grad_read_ok() -> str:
    """`x = torch.tensor(1.0, requires_grad=True); y = x**2 + z**3; y.backward(); x.grad`."""
    x, z = torch.tensor(1.0, requires_grad=True), torch.tensor(2.0, requires_grad=True)
    (x ** 2 + z ** 3).backward()
    return _outcome(lambda: f"x.grad={x.grad.item()}, z.grad={z.grad.item()}")


def main(names: list[str]) -> int:
    for name in names or list(REDUCTIONS):
        print(f"{name}: {REDUCTIONS[name]()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
