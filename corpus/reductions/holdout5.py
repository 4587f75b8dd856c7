"""Reductions behind the `check` fields of corpus/holdout/round5.toml (our own code, torch 2.13 CPU).

    python corpus/reductions/holdout5.py                     # run every reduction, print what happened
    python corpus/reductions/holdout5.py r5_tl004_nonleaf_grad_print
    python corpus/reductions/holdout5.py --json /tmp/r5.json # the same, also as {name: result}

Same style as holdout.py to holdout4.py: each reduction is the smallest program with the shape of a
labelled line and prints the observed outcome. matplotlib is not installed here: `plt.plot(ys)` /
`plt.scatter(x, ys)` turn their data into arrays with `np.asarray`, which is what the reductions call.
The shared data and model come from holdout.py (the seeded regression of rounds 1 to 4).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from holdout import _mlp, _regression
from holdout3 import _graph_size
from measure import _outcome
from measure import main as run_reductions
from torch import nn

REDUCTIONS: dict[str, Callable[[], str]] = {}


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


def _linear_leaves() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The course's linear regression: x in [0, 10), y = 2x + 5 + noise, leaves w, b that require grad."""
    torch.manual_seed(10)
    x = torch.rand(20, 1) * 10
    y = 2 * x + (5 + torch.randn(20, 1))
    return x, y, torch.randn(1, requires_grad=True), torch.zeros(1, requires_grad=True)


def _course_graph() -> tuple[torch.Tensor, ...]:
    """w, x leaves; a = w + x, b = w + 1, y = a * b, as the computational-graph lessons build it."""
    w = torch.tensor([1.0], requires_grad=True)
    x = torch.tensor([2.0], requires_grad=True)
    a = torch.add(w, x)
    b = torch.add(w, 1)
    return w, x, a, b


# TL004: .grad of non-leaves ---------------------------------------------------------------------
@reduction
def r5_tl004_nonleaf_grad_print() -> str:
    """print(w.grad, x.grad, a.grad, b.grad, y.grad) after y.backward(); then with b.retain_grad() only, a.retain_grad() only."""
    results = []
    for retained in ((), ("b",), ("a",)):
        w, x, a, b = _course_graph()
        for name, tensor in (("a", a), ("b", b)):
            if name in retained:
                tensor.retain_grad()
        y = torch.mul(a, b)
        y.backward()

        def grads(tensors: tuple[torch.Tensor, ...] = (w, x, a, b, y)) -> list[object]:
            return [None if (g := t.grad) is None else g.item() for t in tensors]

        values = _outcome(grads)
        results.append(f"retain_grad on {list(retained) or 'nothing'}: [w, x, a, b, y].grad = {values}")
    return "; ".join(results)


# TL002: in-place on leaves ----------------------------------------------------------------------
@reduction
def r5_tl002_leaf_add_() -> str:
    """w.add_(1) on the leaf w that requires grad, in grad mode, after y = (w + x) * (w + 1)."""
    w, _, a, b = _course_graph()
    torch.mul(a, b)
    return f"w.add_(1): {_outcome(lambda: w.add_(1))}"


@reduction
def r5_tl002_inplace_on_plain_ok() -> str:
    """a = torch.ones((1,)); a += torch.ones((1,)); a.add_(1)."""
    a = torch.ones((1,))
    a += torch.ones((1,))
    a.add_(1)
    return f"a = {a.tolist()}, requires_grad {a.requires_grad}: no error"


@reduction
def r5_tl002_data_sub_ok() -> str:
    """w.data.sub_(lr * w.grad) / x.data -= lr * x.grad.data on leaves that require grad, outside no_grad."""
    x, y, w, b = _linear_leaves()
    loss = (0.5 * (y - (w * x + b)) ** 2).mean()
    loss.backward()
    w.data.sub_(0.05 * w.grad)
    b.data -= 0.05 * b.grad.data
    return f"no error; w.is_leaf {w.is_leaf}, w.requires_grad {w.requires_grad}, b.is_leaf {b.is_leaf}"


@reduction
def r5_tl002_detach_fill_ok() -> str:
    """net.conv.weight[0].detach().fill_(1) and net.conv.bias.detach().zero_() on a Conv2d."""
    conv = nn.Conv2d(1, 2, 3)
    conv.weight[0].detach().fill_(1)
    conv.bias.detach().zero_()
    return (f"no error; weight[0] all ones {bool((conv.weight[0] == 1).all())}, bias zero "
            f"{bool((conv.bias == 0).all())}, weight still a leaf Parameter {conv.weight.is_leaf}")


@reduction
def r5_tl002_no_grad_isub_ok() -> str:
    """with torch.no_grad(): w -= lr * w.grad, then w.grad.zero_() (or = None)."""
    x, y, w, b = _linear_leaves()
    losses = []
    for _ in range(3):
        loss = (0.5 * (y - (w * x + b)) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.01 * w.grad
            b -= 0.01 * b.grad
        w.grad.zero_()
        b.grad = None
        losses.append(round(loss.item(), 3))
    return f"no error, w.is_leaf {w.is_leaf}; losses {losses}"


# TL001: .data rebinding ------------------------------------------------------------------------
@reduction
def r5_tl001_data_rebind_ok() -> str:
    """w.data = w.data - lr * w.grad.data, then w.grad.data.zero_(), in grad mode."""
    x, y, w, b = _linear_leaves()
    first = None
    for _ in range(20):
        loss = ((w * x + b - y) ** 2).mean()
        loss.backward()
        w.data = w.data - 0.01 * w.grad.data
        b.data = b.data - 0.01 * b.grad.data
        w.grad.data.zero_()
        b.grad.data.zero_()
        first = loss.item() if first is None else first
    return f"w.is_leaf {w.is_leaf}, requires_grad {w.requires_grad}; loss {first:.2f} -> {loss.item():.2f}"


# TL005: requires_grad on a fresh leaf ----------------------------------------------------------
@reduction
def r5_tl005_flag_on_plain_leaf_ok() -> str:
    """one_hot = torch.zeros(1, 10).scatter_(1, index, 1); one_hot.requires_grad = True (also w = torch.Tensor([1.0]))."""
    one_hot = torch.zeros(1, 10).scatter_(1, torch.tensor([[3]]), 1)
    one_hot.requires_grad = True
    w = torch.Tensor([1.0])
    w.requires_grad = True
    (one_hot * torch.arange(10.0)).sum().backward()
    return f"no error; one_hot.is_leaf {one_hot.is_leaf}, one_hot.grad {one_hot.grad.tolist()[0][:4]}..., w.is_leaf {w.is_leaf}"


# TL008: zeroing ---------------------------------------------------------------------------------
def _manual_regression(zero: bool, steps: int = 8) -> list[float]:
    x, y, w, b = _linear_leaves()
    losses = []
    for _ in range(steps):
        loss = (0.5 * (y - (w * x + b)) ** 2).mean()
        loss.backward()
        b.data.sub_(0.01 * b.grad)
        w.data.sub_(0.01 * w.grad)
        if zero:
            w.grad.zero_()
            b.grad.zero_()
        losses.append(round(loss.item(), 2))
    return losses


@reduction
def r5_tl008_manual_no_zero() -> str:
    """The course's linear regression with b.data.sub_(lr * b.grad); w.data.sub_(...) and no grad.zero_()."""
    return f"losses without zeroing {_manual_regression(False)}; with zeroing {_manual_regression(True)}"


@reduction
def r5_tl008_manual_zero_each_step_ok() -> str:
    """Manual update from .grad followed by w.grad.zero_() every iteration: each step uses only its own gradient."""
    x, y, w, b = _linear_leaves()
    same = []
    for _ in range(3):
        loss = (0.5 * (y - (w * x + b)) ** 2).mean()
        expected = torch.autograd.grad(loss, w, retain_graph=True)[0]
        loss.backward()
        same.append(bool(torch.allclose(w.grad, expected)))
        w.data.sub_(0.01 * w.grad)
        b.data.sub_(0.01 * b.grad)
        w.grad.zero_()
        b.grad.zero_()
    return f"w.grad equals this step's gradient: {same}"


def _logistic(zero: bool, steps: int = 60) -> tuple[float, float]:
    torch.manual_seed(10)
    n_data = torch.ones(100, 2)
    x = torch.cat((torch.normal(1.7 * n_data, 1) + 1, torch.normal(-1.7 * n_data, 1) + 1), 0)
    y = torch.cat((torch.zeros(100), torch.ones(100)), 0)
    model = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.BCELoss()
    grad_norm = 0.0
    for _ in range(steps):
        if zero:
            optimizer.zero_grad()
        loss = loss_fn(model(x).squeeze(), y)
        loss.backward()
        grad_norm = model[0].weight.grad.norm().item()
        optimizer.step()
    return round(loss.item(), 3), round(grad_norm, 2)


@reduction
def r5_tl008_optimizer_no_zero() -> str:
    """Logistic regression: loss.backward(); optimizer.step() (SGD, momentum 0.9) with no zero_grad anywhere."""
    (loss_no, norm_no), (loss_yes, norm_yes) = _logistic(False), _logistic(True)
    return (f"after 60 steps without zero_grad: loss {loss_no}, weight.grad norm {norm_no} (the sum of every step's gradient); "
            f"with zero_grad: loss {loss_yes}, weight.grad norm {norm_yes}")


@reduction
def r5_tl008_optimizer_zero_each_step_ok() -> str:
    """optimizer.zero_grad() in every iteration before backward/step (also after step, as some loops do)."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    same = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        expected = torch.autograd.grad(loss, model[0].weight, retain_graph=True)[0]
        loss.backward()
        same.append(bool(torch.allclose(model[0].weight.grad, expected)))
        opt.step()
    return f".grad equals the batch's own gradient at every step: {same}"


@reduction
def r5_tl008_grad_none_each_step_ok() -> str:
    """a.grad = None after every manual update under no_grad (the PyTorch 'polynomial' example)."""
    x = torch.linspace(-3.0, 3.0, 50)
    y = torch.sin(x)
    a = torch.randn((), requires_grad=True)
    same = []
    for _ in range(3):
        loss = (a * x - y).pow(2).sum()
        expected = torch.autograd.grad(loss, a, retain_graph=True)[0]
        loss.backward()
        same.append(bool(torch.allclose(a.grad, expected)))
        with torch.no_grad():
            a -= 1e-3 * a.grad
            a.grad = None
    return f"a.grad equals this step's gradient: {same}"


# TL009: accumulations ---------------------------------------------------------------------------
@reduction
def r5_tl009_returned_epoch_total() -> str:
    """total_loss += loss / len(dataloader) per batch (loss backpropagated and stepped), returned from the epoch function."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_1_epoch(batches: int) -> torch.Tensor:
        total_loss = 0
        for i in range(batches):
            loss = F.mse_loss(model(x[i::batches]), y[i::batches])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total_loss += loss / batches
        return total_loss

    total = train_1_epoch(4)
    return (f"returned total requires_grad {total.requires_grad}, grad_fn {type(total.grad_fn).__name__}, "
            f"autograd nodes kept alive {_graph_size(total)} (one loss: {_graph_size(F.mse_loss(model(x), y))}); "
            f"`total > 0.001` is a {type(total > 0.001).__name__}")


@reduction
def r5_tl009_item_total_ok() -> str:
    """total_loss += loss.item() per batch (and returned / divided by len(loader))."""
    x, y = _regression()
    model = _mlp()
    total = 0.0
    for i in range(4):
        loss = F.mse_loss(model(x[i::4]), y[i::4])
        loss.backward()
        total += loss.item()
    return f"loss.item() is a {type(loss.item()).__name__}; the total is a {type(total).__name__} (no graph)"


@reduction
def r5_tl009_item_history_ok() -> str:
    """train_curve.append(loss.item()) per batch, then plotted; a history of floats returned by a helper."""
    x, y = _regression()
    model = _mlp()
    history = []
    for i in range(3):
        loss = F.mse_loss(model(x[i::3]), y[i::3])
        loss.backward()
        history.append(loss.item())
    return f"types {sorted({type(v).__name__ for v in history})}; np.asarray(history): {np.asarray(history).shape}"


# TL015: numpy of tensors ------------------------------------------------------------------------
@reduction
def r5_tl015_data_numpy_ok() -> str:
    """y_pred = w*x + b (a non-leaf with grad): y_pred.data.numpy() against y_pred.numpy()."""
    x, _, w, b = _linear_leaves()
    y_pred = w * x + b
    return (f"y_pred.data.numpy(): {_outcome(lambda: y_pred.data.numpy().shape)}; "
            f"y_pred.numpy(): {_outcome(lambda: y_pred.numpy().shape)}")


@reduction
def r5_tl015_param_data_numpy_ok() -> str:
    """layer.cpu().data.numpy() and layer.grad.cpu().data.numpy() of a Parameter after backward; w.data.numpy() of a leaf."""
    layer = nn.Linear(3, 2)
    layer(torch.randn(4, 3)).sum().backward()
    _, _, w, _ = _linear_leaves()
    return (f"weight.cpu().data.numpy(): {_outcome(lambda: layer.weight.cpu().data.numpy().shape)}; "
            f"weight.grad.cpu().data.numpy(): {_outcome(lambda: layer.weight.grad.cpu().data.numpy().shape)}; "
            f"w.data.numpy(): {_outcome(lambda: w.data.numpy().shape)}; weight.numpy(): {_outcome(lambda: layer.weight.numpy())}")


@reduction
def r5_tl015_max_indices_numpy_ok() -> str:
    """_, predicted = torch.max(outputs.data, 1) (or of F.softmax(out)); (predicted == labels).sum().numpy(), predicted[j].numpy()."""
    torch.manual_seed(0)
    outputs = nn.Linear(4, 3)(torch.randn(5, 4))
    labels = torch.tensor([0, 1, 2, 0, 1])
    _, predicted = torch.max(outputs.data, 1)
    _, from_softmax = torch.max(F.softmax(outputs, dim=1), 1)
    return (f"(predicted == labels).sum().numpy(): {_outcome(lambda: int((predicted == labels).squeeze().sum().numpy()))}; "
            f"predicted[0].numpy(): {_outcome(lambda: predicted[0].numpy().dtype)}; "
            f"indices of torch.max(F.softmax(out), 1): requires_grad {from_softmax.requires_grad}, "
            f".data.numpy() {_outcome(lambda: from_softmax.data.numpy().dtype)}")


@reduction
def r5_tl015_inference_mode_plot_ok() -> str:
    """predictions = model(X_test) under torch.inference_mode(), then plotted (np.asarray)."""
    x, _ = _regression()
    model = _mlp()
    with torch.inference_mode():
        predictions = model(x)
    return (f"requires_grad {predictions.requires_grad}; np.asarray(predictions): {_outcome(lambda: np.asarray(predictions).shape)}; "
            f"the same outside inference_mode: {_outcome(lambda: np.asarray(model(x)).shape)}")


# TL019: logits into cross-entropy ----------------------------------------------------------------
@reduction
def r5_tl019_logits_to_ce_ok() -> str:
    """loss = CrossEntropyLoss()(y_logits, y) while torch.softmax(y_logits) only feeds argmax for the accuracy."""
    torch.manual_seed(0)
    x = torch.randn(60, 2)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(200):
        y_logits = model(x)
        y_labels = torch.argmax(torch.softmax(y_logits, dim=1), dim=1)
        loss = loss_fn(y_logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    acc = (y_labels == y).float().mean().item()
    return (f"after 200 steps: cross-entropy {loss.item():.3f}, accuracy {acc:.2f}; argmax of the softmax equals argmax "
            f"of the logits: {bool((y_labels == y_logits.argmax(1)).all())}")


# TL014: backward of a loss whose weight never required grad -------------------------------------
@reduction
def r5_tl014_loss_without_requires_grad() -> str:
    """w = torch.tensor(0.0) (no requires_grad); l = ((w * X - Y) ** 2).mean(); l.backward()."""
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    y = 2 * x
    w = torch.tensor(0.0)
    loss = ((w * x - y) ** 2).mean()
    return f"loss.requires_grad {loss.requires_grad}; loss.backward(): {_outcome(loss.backward)}"


# TL017: zero_grad after step ----------------------------------------------------------------------
@reduction
def r5_tl017_step_then_zero_ok() -> str:
    """l.backward(); optimizer.step(); optimizer.zero_grad() each iteration: the step sees this batch's gradient."""
    torch.manual_seed(0)
    x = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    y = 2 * x
    model = nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    first = None
    for _ in range(100):
        loss = loss_fn(y, model(x))
        loss.backward()
        opt.step()
        opt.zero_grad()
        first = loss.item() if first is None else first
    return f"loss {first:.2f} -> {loss.item():.3f} after 100 steps, decreasing; weight.grad after zero_grad: {model.weight.grad}"


# TL003: a device move after requires_grad=True --------------------------------------------------
@reduction
def r5_tl003_moved_copy_grad() -> str:
    """x = torch.tensor([1.0, 2.0], requires_grad=True).cuda(); y = (x ** 2).sum(); y.backward(); print(x.grad).

    No GPU here: `.cuda()` itself is measured (it raises), and `.double()` stands in for the move, since a
    dtype change returns a new non-leaf copy exactly as a device change does."""
    cuda = _outcome(lambda: torch.tensor([1.0, 2.0], requires_grad=True).cuda())
    x = torch.tensor([1.0, 2.0], requires_grad=True).double()
    (x ** 2).sum().backward()
    return f"on this machine .cuda(): {cuda}; with the move as .double(): x.is_leaf {x.is_leaf}, x.grad: {_outcome(lambda: x.grad)}"


# TL006: integer literals with a float dtype -----------------------------------------------------
@reduction
def r5_tl006_float_dtype_int_literals_ok() -> str:
    """x = torch.tensor([2, 3, 4], dtype=torch.float, requires_grad=True): the dtype makes it a float leaf."""
    x = torch.tensor([2, 3, 4], dtype=torch.float, requires_grad=True)
    y = 3 * x ** 2 + 2 * x
    torch.autograd.backward(y, grad_tensors=torch.tensor([1, 1, 1], dtype=torch.float32))
    return f"no error; dtype {x.dtype}, is_leaf {x.is_leaf}, grad {x.grad.tolist()}; without dtype: {_outcome(lambda: torch.tensor([2, 3, 4], requires_grad=True))}"


@reduction
def r5_tl015_detach_numpy_ok() -> str:
    """predicted = model(x).detach().numpy() after training, then plotted."""
    torch.manual_seed(0)
    model = nn.Linear(1, 1)
    x = torch.randn(100, 1)
    predicted = model(x).detach().numpy()
    return f"model(x).detach().numpy(): {type(predicted).__name__} {predicted.shape}; np.asarray: {np.asarray(predicted).shape}"


# TL016: zeroing a grad that backward has filled ------------------------------------------------
@reduction
def r5_tl016_zero_after_backward_ok() -> str:
    """loss.backward(); w.grad.zero_(); b.grad.zero_(): the grads exist when they are zeroed."""
    w = torch.tensor(0.0, requires_grad=True)
    b = torch.tensor(0.0, requires_grad=True)
    loss = (w * 2.0 + b - 5.0) ** 2
    loss.backward()
    before = (w.grad.item(), b.grad.item())
    w.grad.zero_()
    b.grad.zero_()
    return f"grads after backward {before}; after zero_(): {(w.grad.item(), b.grad.item())}, no error"


@reduction
def r5_tl003_device_in_factory_ok() -> str:
    """x = torch.randn(N, D, requires_grad=True, device=device): the factory places the leaf, no move after it.

    No GPU here, so device='cpu'; the factory returns a leaf on any device."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True, device="cpu")
    y = torch.randn(3, 4)
    torch.sum(x * y + torch.randn(3, 4)).backward()
    return f"x.is_leaf {x.is_leaf}; x.grad equals y: {bool((x.grad == y).all())}"


def main(argv: list[str]) -> int:
    return run_reductions(argv, REDUCTIONS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
