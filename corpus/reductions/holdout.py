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


def _linear_sgd(lr: float) -> tuple[torch.Tensor, torch.Tensor, nn.Linear, torch.optim.SGD]:
    """The regression data, a fresh nn.Linear(2, 1) and plain SGD over it."""
    x, y = _regression()
    model = nn.Linear(2, 1)
    return x, y, model, torch.optim.SGD(model.parameters(), lr=lr)


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
    x, y, model, opt = _linear_sgd(0.05)
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


# TL006 / TL014: autograd-tutorial demos -------------------------------------------------------------
@reduction
def ho_tl006_int_arange_requires_grad() -> str:
    """`x = torch.arange(1, n + 1, requires_grad=True)` (an int64 range)."""
    return _outcome(lambda: torch.arange(1, 4, requires_grad=True))


@reduction
def ho_tl014_backward_under_no_grad() -> str:
    """`with torch.no_grad(): w = torch.ones(n, requires_grad=True); z = w @ x; z.backward()`."""
    def body() -> str:
        with torch.no_grad():
            w = torch.ones(3, requires_grad=True)
            z = w @ torch.arange(1.0, 4.0)
            z.backward()
        return "ran"
    literal = _outcome(lambda: torch.ones(3, requires_grad=True) @ torch.arange(1, 4))
    return f"float x: {_outcome(body)}; with the notebook's int x the matmul fails first: {literal}"


@reduction
def ho_tl004_plain_tensor_grad_none_ok() -> str:
    """`x = torch.arange(1, n + 1)` then `print(x.grad)`: a leaf that never required grad."""
    x = torch.arange(1, 4)
    return _outcome(lambda: f"x.grad={x.grad}, is_leaf={x.is_leaf}")


# TL002: writes into a Parameter -------------------------------------------------------------------
@reduction
def ho_tl002_slice_write_into_parameter() -> str:
    """`E = nn.Embedding(n, d).weight; E[:, 0::2] = torch.FloatTensor(np.sin(theta))` in grad mode."""
    E = nn.Embedding(6, 4).weight
    theta = np.arange(24, dtype=np.float64).reshape(6, 4)

    def write() -> str:
        E[:, 0::2] = torch.FloatTensor(np.sin(theta[:, 0::2]))
        return "written"

    def write_no_grad() -> str:
        with torch.no_grad():
            E[:, 0::2] = torch.FloatTensor(np.sin(theta[:, 0::2]))
        return f"written, is_leaf={E.is_leaf}"
    return f"grad mode: {_outcome(write)}; under no_grad: {_outcome(write_no_grad)}"


@reduction
def ho_tl002_row_write_into_plain_tensor_ok() -> str:
    """`code = torch.Tensor(N, 20); code[i] = a * mu[B].data + b * mu[A].data`."""
    mu = _mlp()(torch.randn(4, 2)).expand(4, 20)
    code = torch.Tensor(3, 20)

    def write() -> str:
        for i in range(3):
            code[i] = i / 2 * mu[1].data + (1 - i / 2) * mu[0].data
        return f"written, code.requires_grad={code.requires_grad}"
    return _outcome(write)


# TL007: in-place ops that autograd allows -----------------------------------------------------------
@reduction
def ho_tl007_vae_inplace_exp_add_ok() -> str:
    """`std = logvar.mul(0.5).exp_(); eps = std.data.new(std.size()).normal_(); z = eps.mul(std).add_(mu)`."""
    torch.manual_seed(0)
    enc = nn.Linear(4, 4)
    out = enc(torch.randn(5, 4))
    mu, logvar = out[:, :2], out[:, 2:]
    std = logvar.mul(0.5).exp_()
    eps = std.data.new(std.size()).normal_()
    z = eps.mul(std).add_(mu)

    def backward() -> str:
        z.pow(2).sum().backward()
        return f"backward ran, grad norm {enc.weight.grad.norm():.3f}"
    return _outcome(backward)


# TL019 / TL015: classifier heads and accuracy -------------------------------------------------------
@reduction
def ho_tl019_logits_to_cross_entropy_ok() -> str:
    """A model whose last layer is Linear (logits) fed to nn.CrossEntropyLoss / F.cross_entropy."""
    torch.manual_seed(0)
    x = torch.randn(200, 5)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(200):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    acc = (model(x).argmax(1) == y).float().mean().item()
    return f"final loss {loss.item():.3f}, accuracy {acc:.2f}"


@reduction
def ho_tl015_argmax_numpy_ok() -> str:
    """`(out.argmax(1) == y).cpu().numpy().mean()` on a module output in grad mode."""
    out = _mlp()(torch.randn(6, 2))
    y = torch.zeros(6, dtype=torch.long)
    return _outcome(lambda: f"{(out.argmax(1) == y).cpu().numpy().mean():.2f} (argmax has no grad)")


# TL009 / TL008: meta-learning loops -------------------------------------------------------------------
@reduction
def ho_tl009_validation_sum_keeps_graph() -> str:
    """`val_loss = torch.zeros(1)` then `val_loss += loss / n` per task, in grad mode, never backpropagated."""
    x, y = _regression()
    val_loss = torch.zeros(1)
    for task in range(3):
        val_model = _mlp()
        loss = F.mse_loss(val_model(x), y)
        val_loss += loss / 3
    return (f"val_loss.requires_grad={val_loss.requires_grad}, grad_fn={type(val_loss.grad_fn).__name__} "
            f"(each task's graph, and the deep-copied model it went through, stay referenced)")


@reduction
def ho_tl008_meta_accumulate_ok() -> str:
    """`meta_optim.zero_grad()` once per epoch, `meta_loss.backward()` per task, `meta_optim.step()` after the tasks."""
    x, y, model, opt = _linear_sgd(0.01)
    opt.zero_grad()
    per_task = []
    for task in range(3):
        loss = F.mse_loss(model(x[task::3]), y[task::3])
        loss.backward()
        per_task.append(torch.autograd.grad(F.mse_loss(model(x[task::3]), y[task::3]), model.weight)[0])
    summed = torch.stack(per_task).sum(0)
    return f"accumulated grad equals the sum over tasks: {torch.allclose(model.weight.grad, summed)}"


@reduction
def ho_tl019_softmax_then_cross_entropy() -> str:
    """A model ending in nn.Softmax fed to nn.CrossEntropyLoss (which applies log_softmax again)."""
    torch.manual_seed(0)
    x = torch.randn(300, 8)
    y = (x[:, :4].argmax(1) + 3 * (x[:, 4] > 0).long()) % 6
    results = []
    for head in (nn.Identity(), nn.Softmax(dim=-1)):
        torch.manual_seed(1)
        model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 6), head)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(300):
            loss = nn.CrossEntropyLoss()(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        results.append(f"{loss.item():.2f}")
    return f"final loss with logits {results[0]}, with a softmax last layer {results[1]} (floor of CE on probabilities: {-np.log(np.e / (np.e + 5)):.2f})"


@reduction
def ho_tl005_freeze_parameters_ok() -> str:
    """`for param in pretrained.parameters(): param.requires_grad = False` (leaves)."""
    net = nn.Linear(3, 3)
    for param in net.parameters():
        param.requires_grad = False
    return _outcome(lambda: f"frozen: {[p.requires_grad for p in net.parameters()]}")


@reduction
def ho_tl010_hidden_state_reset_each_batch_ok() -> str:
    """An LSTM wrapper keeps `self.hidden_state`, reset to None before every batch's single forward."""
    lstm = nn.LSTM(3, 4, batch_first=True)
    hidden = None
    opt = torch.optim.SGD(lstm.parameters(), lr=0.1)

    def two_batches() -> str:
        nonlocal hidden
        for _ in range(2):
            hidden = None
            out, hidden = lstm(torch.randn(2, 5, 3), hidden)
            opt.zero_grad()
            out.sum().backward()
            opt.step()
        return "both backwards ran"
    return _outcome(two_batches)


@reduction
def ho_tl009_penalty_summed_into_loss_ok() -> str:
    """`value_loss += param.pow(2).sum() * l2_reg` for every parameter, then `value_loss.backward()`."""
    x, y = _regression()
    net = _mlp()
    value_loss = F.mse_loss(net(x), y)
    for param in net.parameters():
        value_loss += param.pow(2).sum() * 1e-3
    return _outcome(lambda: value_loss.backward() or f"backward ran, grad set: {net[0].weight.grad is not None}")


@reduction
def ho_tl010_fake_detached_for_d_ok() -> str:
    """D's loss on `fake.detach()`, D's backward and step, then G's loss through D(fake) and its backward."""
    def run(detach: bool) -> str:
        torch.manual_seed(0)
        gen, disc = nn.Linear(4, 3), nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
        opt_d = torch.optim.Adam(disc.parameters())
        fake = gen(torch.randn(5, 4))
        d_loss = F.binary_cross_entropy(disc(fake.detach() if detach else fake), torch.zeros(5, 1))
        d_loss.backward()
        opt_d.step()
        g_loss = F.binary_cross_entropy(disc(fake), torch.ones(5, 1))
        g_loss.backward()
        return "G's backward ran"
    return f"with detach: {_outcome(lambda: run(True))}; without: {_outcome(lambda: run(False))}"


@reduction
def ho_tl006_float_fill_ok() -> str:
    """`torch.full((n,), 1., dtype=torch.float)` labels (float fill, no requires_grad)."""
    return _outcome(lambda: f"dtype={torch.full((3,), 1., dtype=torch.float).dtype}")


@reduction
def ho_tl015_leaf_numpy_under_no_grad_ok() -> str:
    """`w = torch.zeros(D, requires_grad=True)`; later `with torch.no_grad(): print(w.numpy())`."""
    w = torch.zeros(2, requires_grad=True)

    def under_no_grad() -> str:
        with torch.no_grad():
            return f"{w.numpy()}"
    return f"under no_grad: {_outcome(under_no_grad)}; in grad mode: {_outcome(lambda: w.numpy())}"


@reduction
def ho_tl009_eval_loss_history_plotted() -> str:
    """Per epoch: `model.eval(); loss = F.cross_entropy(model(X), Y); losses.append(loss)`, then `plt.plot(epochs, losses)`."""
    torch.manual_seed(0)
    x, y = torch.randn(20, 4), torch.randint(0, 3, (20,))
    model = nn.Linear(4, 3)
    losses, accuracies = [], []
    for _ in range(2):
        model.eval()
        logits = model(x)
        losses.append(F.cross_entropy(logits, y))
        accuracies.append(torch.mean((logits.argmax(dim=1) == y).float()))
        model.train()
    return (f"model.eval() keeps grad mode: losses[0].requires_grad={losses[0].requires_grad}; "
            f"np.asarray(losses): {_outcome(lambda: np.asarray(losses).shape)}; "
            f"np.asarray(accuracies): {_outcome(lambda: np.asarray(accuracies).shape)}")


# Added with the third batch of held-out files ---------------------------------------------------
@reduction
def ho_tl019_softmax_in_forward_then_cross_entropy() -> str:
    """`forward` ends with `out = out.softmax(dim=1)` and the loop applies `nn.CrossEntropyLoss()` to it."""
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    y = (x @ torch.randn(8) > 0).long()  # separable labels, as a fine-tuned head can reach
    results = []
    for with_softmax in (True, False):
        torch.manual_seed(1)
        fc = nn.Linear(8, 2)
        opt = torch.optim.SGD(fc.parameters(), lr=0.5)
        for _ in range(300):
            out = fc(x)
            if with_softmax:
                out = out.softmax(dim=1)
            loss = nn.CrossEntropyLoss()(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        results.append(loss.item())
    floor = -np.log(np.e / (np.e + 1))
    return (f"2 classes, 300 SGD steps: loss {results[0]:.3f} with the softmax (floor -log(e/(e+1)) = {floor:.3f}) "
            f"against {results[1]:.3f} on logits; no error either way")


@reduction
def ho_tl008_train_step_without_zero_grad() -> str:
    """A `train_step(self, data)` that runs `loss.backward()` and applies `[v.grad ...]` but never zeroes; fit() calls it per batch."""
    x, y = _regression()
    model = nn.Linear(2, 1)

    def train_step() -> float:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return model.weight.grad.norm().item()

    single = train_step()
    for _ in range(2):
        third = train_step()
    model.zero_grad()
    fresh = train_step()
    return (f"same weights, three calls without zeroing: grad norm {single:.3f} -> {third:.3f} (x{third / single:.1f}); "
            f"after zero_grad: {fresh:.3f}")


@reduction
def ho_tl008_zero_grad_after_apply_ok() -> str:
    """`loss.backward(); gradients = [...grad...]; optimizer.apply(...) under no_grad; model.zero_grad()`."""
    x, y = _regression()
    model = nn.Linear(2, 1)
    norms = []
    for _ in range(3):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        norms.append(model.weight.grad.norm().item())
        model.zero_grad()
    return "grad norms per call (weights unchanged): " + ", ".join(f"{n:.3f}" for n in norms)


@reduction
def ho_tl019_probability_target_ok() -> str:
    """`nn.CrossEntropyLoss()(input, target)` with raw `input` and a float (class-probability) `target`."""
    torch.manual_seed(0)
    logits = torch.randn(3, 5, requires_grad=True)
    soft = torch.randn(3, 5).softmax(dim=1)
    loss = nn.CrossEntropyLoss()(logits, soft)
    loss.backward()
    manual = -(soft * logits.log_softmax(dim=1)).sum(dim=1).mean()
    return (f"probability targets accepted (loss {loss.item():.4f} = -sum(p*log_softmax(input)) {manual.item():.4f}); "
            f"input.grad set: {logits.grad is not None}")


@reduction
def ho_tl019_logits_from_linear_ok() -> str:
    """`model = nn.Linear(...)`, `output = model(x)`, `loss = criterion(output, target)` (CrossEntropyLoss on raw scores)."""
    torch.manual_seed(0)
    model = nn.Linear(10, 2)
    output = model(torch.randn(5, 10))
    loss = nn.CrossEntropyLoss()(output, torch.randint(0, 2, (5,)))
    loss.backward()
    return f"rows of output sum to {output.sum(dim=1)[0].item():.3f} (not probabilities); loss {loss.item():.3f}; weight.grad set"


@reduction
def ho_tl003_device_kwarg_leaf_ok() -> str:
    """`b = torch.randn(1, requires_grad=True, dtype=torch.float, device=device)`; `optim.SGD([b, w], lr=lr)`."""
    b = torch.randn(1, requires_grad=True, dtype=torch.float, device=DEVICE)
    moved = torch.randn(1, requires_grad=True).to(DEVICE)
    return (f"factory with device=: is_leaf={b.is_leaf}, SGD: {_outcome(lambda: type(torch.optim.SGD([b], lr=0.1)).__name__)}; "
            f"for contrast `.to(device)` after the factory: is_leaf={moved.is_leaf}, "
            f"SGD: {_outcome(lambda: torch.optim.SGD([moved], lr=0.1))}")


@reduction
def ho_tl003_scaled_then_requires_grad_ok() -> str:
    """`weights = torch.randn(784, 10) / math.sqrt(784); weights.requires_grad_()` (scale first, then mark)."""
    weights = torch.randn(4, 3) / 2.0
    weights.requires_grad_()
    loss = (torch.randn(2, 4) @ weights).sum()
    loss.backward()
    return f"is_leaf={weights.is_leaf}, requires_grad={weights.requires_grad}, grad set after backward: {weights.grad is not None}"


@reduction
def ho_tl005_requires_grad_on_derived_plain_tensor_ok() -> str:
    """`a = torch.randn(2, 2); a = ((a * 3) / (a - 1)); a.requires_grad_(True)` (arithmetic on a plain tensor)."""
    a = torch.randn(2, 2)
    a = (a * 3) / (a - 1)
    leaf_before = a.is_leaf
    a.requires_grad_(True)
    b = (a * a).sum()
    b.backward()
    return f"a.is_leaf={leaf_before} (no grad history), requires_grad_ ran, b.grad_fn={type(b.grad_fn).__name__}, a.grad set: {a.grad is not None}"


@reduction
def ho_tl006_float_arange_ok() -> str:
    """`x = torch.arange(4.0, requires_grad=True)` (float start)."""
    x = torch.arange(4.0, requires_grad=True)
    (x * x).sum().backward()
    return f"dtype={x.dtype}, x.grad={x.grad.tolist()}"


@reduction
def ho_tl014_backward_without_requires_grad() -> str:
    """`a = Variable(torch.ones(2, 2))` (no requires_grad), `out = ((a + 2) ** 2).sum()`, `out.backward()`."""
    from torch.autograd import Variable
    a = Variable(torch.ones(2, 2))
    out = ((a + 2) ** 2).sum()
    return f"out.requires_grad={out.requires_grad}; out.backward(): {_outcome(out.backward)}"


@reduction
def ho_tl016_grad_read_after_backward_ok() -> str:
    """`loss.backward()`, then `w.grad.item()`, the update under no_grad, then `w.grad.zero_()`, all in the loop body."""
    w = torch.tensor(1.0, requires_grad=True)
    x, y = torch.tensor([2.0, 4.0]), torch.tensor([20.0, 40.0])
    seen = []
    for _ in range(2):
        loss = ((w * x - y) ** 2).mean()
        loss.backward()
        seen.append(w.grad.item())
        with torch.no_grad():
            w -= 0.001 * w.grad
        w.grad.zero_()
    return f"w.grad read after each backward: {[round(g, 3) for g in seen]}; w={w.item():.4f}"


@reduction
def ho_tl018_tensor_of_numpy_ok() -> str:
    """`torch_inputs = torch.tensor(inputs)` where `inputs` is a NumPy array (no graph to cut)."""
    import warnings
    inputs = np.random.rand(4, 2).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = torch.tensor(inputs)
    return f"dtype={t.dtype}, requires_grad={t.requires_grad}, warnings={len(caught)}"


@reduction
def ho_tl003_parameter_wrap_ok() -> str:
    """`self.W = torch.nn.Parameter(torch.rand(input_dim, output_dim))` in a Module's __init__."""
    W = nn.Parameter(torch.rand(2, 1))
    opt = torch.optim.SGD([W], lr=0.1)
    (torch.randn(3, 2) @ W).sum().backward()
    opt.step()
    return f"is_leaf={W.is_leaf}, requires_grad={W.requires_grad}, grad set: {W.grad is not None}"


@reduction
def ho_tl018_tensor_of_python_list_ok() -> str:
    """`tensor_inputs = torch.Tensor(inputs)` where `inputs` is a list of tuples of Python floats."""
    inputs = [(0.1, 1.0, 2.0), (0.2, 1.5, 2.5)]
    t = torch.Tensor(inputs)
    return f"shape={tuple(t.shape)}, dtype={t.dtype}, requires_grad={t.requires_grad} (no tensor, no graph to cut)"


@reduction
def ho_tl009_history_of_returned_item_ok() -> str:
    """`num_correct, loss = train(...)` where train() ends with `return num_correct, loss.item()`; `history['loss'].append(loss)`; plotted."""
    x, y, model, opt = _linear_sgd(0.05)

    def train() -> float:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    history = {"loss": []}
    for _ in range(3):
        history["loss"].append(train())
    return f"type={type(history['loss'][0]).__name__}; np.asarray(history['loss']): {_outcome(lambda: np.asarray(history['loss']).shape)}"


@reduction
def ho_tl015_input_batch_numpy_ok() -> str:
    """`data = torch.from_numpy(batch).float()`; `model(data)`; then `data.numpy()` (the input, not the output)."""
    data = torch.from_numpy(np.random.rand(4, 3)).float()
    output = nn.Linear(3, 2)(data)
    return (f"data.requires_grad={data.requires_grad}, data.numpy(): {_outcome(lambda: data.numpy().shape)}; "
            f"for contrast output.numpy(): {_outcome(lambda: output.numpy())}")


@reduction
def ho_tl009_accuracy_tensor_sum_ok() -> str:
    """`accuracy += equality.type_as(torch.FloatTensor()).mean()` with `equality = (labels == ps.max(1)[1])`, called under no_grad."""
    model = nn.Linear(4, 3)
    accuracy = 0
    with torch.no_grad():
        for _ in range(3):
            x, labels = torch.randn(8, 4), torch.randint(0, 3, (8,))
            ps = torch.exp(F.log_softmax(model(x), dim=1))
            equality = labels == ps.max(1)[1]
            accuracy += equality.type_as(torch.FloatTensor()).mean()
    grad_mode = (torch.randint(0, 3, (8,)) == torch.exp(model(torch.randn(8, 4))).max(1)[1]).float().mean()
    return (f"under no_grad: requires_grad={accuracy.requires_grad}, grad_fn={accuracy.grad_fn}; "
            f"even in grad mode the comparison has no graph: requires_grad={grad_mode.requires_grad}")


@reduction
def ho_tl019_log_softmax_nll_ok() -> str:
    """`forward` ends with `F.log_softmax(x, dim=1)` (or nn.LogSoftmax) and the loop uses `F.nll_loss(output, target)`."""
    torch.manual_seed(0)
    logits = torch.randn(6, 4)
    target = torch.randint(0, 4, (6,))
    a = F.nll_loss(F.log_softmax(logits, dim=1), target)
    b = F.cross_entropy(logits, target)
    return f"nll_loss(log_softmax(z)) = {a.item():.4f}, cross_entropy(z) = {b.item():.4f} (the same loss)"


def main(names: list[str]) -> int:
    for name in names or list(REDUCTIONS):
        print(f"{name}: {REDUCTIONS[name]()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
