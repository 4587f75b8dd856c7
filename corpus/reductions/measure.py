"""Minimal reductions behind the corpus labels' `check` fields (our own code, torch 2.13 CPU).

    python corpus/reductions/measure.py            # run every reduction, print what happened
    python corpus/reductions/measure.py tl002_isub # one of them

Each reduction is the smallest program with the shape of a labelled line; it prints the observed
outcome (exception text, is_leaf, grad, weight change), which is what a case's `check` quotes.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Variable

REDUCTIONS: dict[str, Callable[[], str]] = {}


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(8, 3)
    return x, x @ torch.tensor([1.0, -2.0, 0.5]) + 0.3


def _outcome(body: Callable[[], object]) -> str:
    """What running ``body`` did: its return value, or the first line of the error it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = body()
        except Exception as error:  # noqa: BLE001 - the error is the measurement
            result = f"{type(error).__name__}: {str(error).splitlines()[0]}"
    notes = "; ".join(f"{w.category.__name__}: {str(w.message).splitlines()[0][:90]}" for w in caught)
    return f"{result}" + (f" [{notes}]" if notes else "")


# TL001 -----------------------------------------------------------------------------------------
@reduction
def tl001_rebind() -> str:
    def body() -> str:
        x, y = _data()
        w = torch.zeros(3, requires_grad=True)
        for _ in range(2):
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            w = w - 0.1 * w.grad
        return "trained"
    return _outcome(body)


@reduction
def tl001_rebind_no_grad() -> str:
    def body() -> str:
        x, y = _data()
        w = torch.zeros(3, requires_grad=True)
        for _ in range(2):
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                w = w - 0.1 * w.grad
        return "trained"
    return _outcome(body)


@reduction
def tl001_data_assign_ok() -> str:
    x, y = _data()
    w = torch.zeros(3, requires_grad=True)
    losses = []
    for _ in range(20):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        w.data = w.data - 0.1 * w.grad.data
        w.grad.data.zero_()
        losses.append(loss.item())
    return f"w.is_leaf={w.is_leaf}, loss {losses[0]:.2f} -> {losses[-1]:.2f}"


@reduction
def tl001_releaf_ok() -> str:
    x, y = _data()
    w = torch.zeros(3, requires_grad=True)
    losses = []
    for _ in range(20):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        w = (w - 0.1 * w.grad).detach().requires_grad_()
        losses.append(loss.item())
    return f"w.is_leaf={w.is_leaf}, loss {losses[0]:.2f} -> {losses[-1]:.2f}"


@reduction
def tl001_releaf_after_steps_ok() -> str:
    x = torch.rand(4, 3)
    adv = x.clone().requires_grad_()
    for _ in range(3):
        loss = (adv ** 2).sum()
        loss.backward()
        adv = adv + 0.01 * adv.grad.sign()
        adv = torch.clamp(adv, 0, 1)
        adv = adv.detach().requires_grad_(True)
    return f"adv.is_leaf={adv.is_leaf}, grad after 3 steps fine"


@reduction
def tl001_loop_param() -> str:
    model = nn.Linear(3, 1)
    before = model.weight.detach().clone()
    x, y = _data()
    for _ in range(3):
        loss = ((model(x)[:, 0] - y) ** 2).mean()
        loss.backward()
        for p in model.parameters():
            p = p - 0.1 * p.grad
    return f"max weight change {float((model.weight.detach() - before).abs().max()):.3g}"


@reduction
def tl001_module_attribute() -> str:
    model = nn.Linear(3, 1)
    x, y = _data()
    ((model(x)[:, 0] - y) ** 2).mean().backward()
    return _outcome(lambda: setattr(model, "weight", model.weight - 0.1 * model.weight.grad))


# TL002 -----------------------------------------------------------------------------------------
@reduction
def tl002_isub() -> str:
    def body() -> str:
        x, y = _data()
        w = torch.zeros(3, requires_grad=True)
        ((x @ w - y) ** 2).mean().backward()
        w -= 0.1 * w.grad
        return "ran"
    return _outcome(body)


@reduction
def tl002_index_write() -> str:
    w = torch.zeros(3, requires_grad=True)

    def body() -> str:
        w[0] = 1.0
        return "ran"
    return _outcome(body)


@reduction
def tl002_method_inplace() -> str:
    w = torch.rand(3, requires_grad=True)
    return " / ".join(_outcome(lambda m=m, a=a: (getattr(w, m)(*a), "ran")[1])
                      for m, a in (("clamp_", (0, 1)), ("zero_", ()), ("add_", (1.0,)), ("copy_", (torch.ones(3),))))


@reduction
def tl002_no_grad_ok() -> str:
    x, y = _data()
    w = torch.zeros(3, requires_grad=True)
    losses = []
    for _ in range(20):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            w.grad.zero_()
        losses.append(loss.item())
    return f"w.is_leaf={w.is_leaf}, loss {losses[0]:.2f} -> {losses[-1]:.2f}"


@reduction
def tl002_variable_leaf() -> str:
    w = Variable(torch.zeros(3), requires_grad=True)
    plain = Variable(torch.zeros(3))

    def body() -> str:
        w.add_(1.0)
        return "ran"
    return f"Variable(t, requires_grad=True): type={type(w).__name__} is_leaf={w.is_leaf}; " \
           f"Variable(t).requires_grad={plain.requires_grad}; in-place: {_outcome(body)}"


@reduction
def tl002_param_data_ok() -> str:
    p = nn.Parameter(torch.zeros(3))
    p.data.add_(1.0)
    p.data -= 0.5
    p.grad = torch.ones(3)
    p.grad.zero_()
    p.grad.data.zero_()
    nn.init.normal_(p)
    return "p.data ops, p.grad.zero_(), nn.init.normal_(p): all fine, p.is_leaf=" + str(p.is_leaf)


@reduction
def tl002_embedding_copy() -> str:
    emb = nn.Embedding(4, 3)
    return _outcome(lambda: emb.weight.copy_(torch.ones(4, 3)) is None) + " / under no_grad: " + \
        _outcome(lambda: f"ran, is_leaf={_no_grad(lambda: emb.weight.copy_(torch.ones(4, 3))).is_leaf}")


def _no_grad(body: Callable[[], object]) -> object:
    with torch.no_grad():
        return body()


# TL003 -----------------------------------------------------------------------------------------
@reduction
def tl003_same_expression() -> str:
    parts = []
    for label, make in (
        ("randn(3, requires_grad=True).double()", lambda: torch.randn(3, requires_grad=True).double()),
        ("randn(3, requires_grad=True) * 0.01", lambda: torch.randn(3, requires_grad=True) * 0.01),
        ("randn(3, requires_grad=True).to(float64)", lambda: torch.randn(3, requires_grad=True).to(torch.float64)),
        ("Variable(randn(3), requires_grad=True).double()", lambda: Variable(torch.randn(3), requires_grad=True).double()),
        ("randn(3, requires_grad=True).to('cpu')", lambda: torch.randn(3, requires_grad=True).to("cpu")),
    ):
        w = make()
        parts.append(f"{label}: is_leaf={w.is_leaf}")
    w = torch.randn(3, requires_grad=True) * 0.01
    parts.append("optimizer: " + _outcome(lambda: torch.optim.SGD([w], lr=0.1) and "ran"))
    (w * 2).sum().backward()
    parts.append("w.grad: " + _outcome(lambda: w.grad))
    return "; ".join(parts)


@reduction
def tl003_parameter_moved() -> str:
    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token = nn.Parameter(torch.randn(1, 3)).double()  # .cuda() in the real code; moves too
    head = Head()
    return f"self.token = nn.Parameter(t).double(): is_leaf={head.token.is_leaf}, registered=" \
           f"{any(p is head.token for p in head.parameters())}, parameters()={len(list(head.parameters()))}"


@reduction
def tl003_requires_grad_then_scale_ok() -> str:
    w = (torch.randn(3) * 0.01).requires_grad_()
    b = torch.randn(3).double().requires_grad_()
    return f"(randn*0.01).requires_grad_(): is_leaf={w.is_leaf}; .double().requires_grad_(): is_leaf={b.is_leaf}"


# TL004 / TL005 ---------------------------------------------------------------------------------
@reduction
def tl004_nonleaf_grad() -> str:
    x = torch.rand(3, requires_grad=True)
    y = x * 2
    y.sum().backward()
    return "y.grad -> " + _outcome(lambda: y.grad)


@reduction
def tl004_leaf_from_input_ok() -> str:
    def attack(img: torch.Tensor) -> torch.Tensor:
        img = img.to("cpu")
        img = img.unsqueeze(0)
        img.requires_grad = True
        (img ** 2).sum().backward()
        return img.grad
    return "img derived from a plain input, then requires_grad=True: grad -> " + \
        _outcome(lambda: tuple(attack(torch.rand(2)).shape))


@reduction
def tl005_nonleaf_requires_grad() -> str:
    x = torch.rand(3, requires_grad=True)
    y = x * 2
    return "y.requires_grad = True -> " + _outcome(lambda: setattr(y, "requires_grad", True))


@reduction
def tl005_requires_grad_method_nonleaf() -> str:
    model = nn.Linear(3, 2)
    embeddings = model(torch.rand(4, 3))
    anchor = embeddings[torch.tensor([0, 2])]
    anchor.requires_grad_()
    return f"model output indexed, then .requires_grad_(): no error, a no-op (is_leaf={anchor.is_leaf}, " \
           f"grad_fn={type(anchor.grad_fn).__name__})"


@reduction
def tl005_bandaid() -> str:
    model = nn.Linear(3, 1)
    x, y = _data()
    loss = torch.tensor(((model(x)[:, 0] - y) ** 2).mean().item())
    loss.requires_grad = True
    loss.backward()
    return f"loss from .item(), requires_grad=True: backward ran, model.weight.grad={model.weight.grad}"


# TL007 -----------------------------------------------------------------------------------------
@reduction
def tl007_output_inplace() -> str:
    x = torch.rand(3, requires_grad=True)
    parts = []
    for name, fn in (("sigmoid", torch.sigmoid), ("tanh", torch.tanh), ("exp", torch.exp),
                     ("softmax", lambda t: torch.softmax(t, 0))):
        def body(fn: Callable = fn) -> str:
            y = fn(x)
            y.mul_(2)
            y.sum().backward()
            return "ran"
        parts.append(f"{name} then mul_: {_outcome(body)[:60]}")
    return "; ".join(parts)


@reduction
def tl007_inplace_modules() -> str:
    lin = nn.Linear(3, 3)
    x = torch.rand(2, 3)

    def after_sigmoid() -> str:
        h = nn.ReLU(inplace=True)(torch.sigmoid(lin(x)))
        h.sum().backward()
        return "ran"

    def after_linear() -> str:
        h = nn.ReLU(inplace=True)(lin(x))
        h.sum().backward()
        return "ran"

    def then_add() -> str:
        out = nn.ReLU(inplace=True)(lin(x))
        out += x
        out.sum().backward()
        return "ran"

    def leaky_after_tanh() -> str:
        h = F.leaky_relu(torch.tanh(lin(x)), 0.2, inplace=True)
        h.sum().backward()
        return "ran"

    def relu_then_dropout_inplace() -> str:
        model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True), nn.Dropout(0.5, inplace=True), nn.Linear(3, 1))
        model(x).sum().backward()
        return "ran"
    return (f"ReLU(inplace) after sigmoid: {_outcome(after_sigmoid)[:70]}; after Linear: {_outcome(after_linear)}; "
            f"ReLU(inplace) output then +=: {_outcome(then_add)[:70]}; leaky_relu(inplace) after tanh: "
            f"{_outcome(leaky_after_tanh)[:70]}; Linear,ReLU(inplace),Dropout(inplace),Linear: "
            f"{_outcome(relu_then_dropout_inplace)[:70]}")


@reduction
def tl007_gan_step_between() -> str:
    torch.manual_seed(0)
    g, d = nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    opt_d = torch.optim.SGD(d.parameters(), lr=0.1)

    def body() -> str:
        fake = g(torch.randn(4, 2))
        out = d(fake)
        d_loss = out.mean()
        opt_d.zero_grad()
        d_loss.backward(retain_graph=True)
        opt_d.step()
        g_loss = -out.mean()
        g_loss.backward()
        return "ran"
    return _outcome(body)


@reduction
def tl007_gan_d_step_then_g_backward() -> str:
    """The 2017 GAN tutorial shape: one forward, D's backward(retain_graph) and step, then G's backward."""
    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 15))
    d = nn.Sequential(nn.Linear(15, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())
    opt_d, opt_g = torch.optim.Adam(d.parameters()), torch.optim.Adam(g.parameters())

    def body() -> str:
        paintings = g(torch.randn(4, 5))
        prob0, prob1 = d(torch.rand(4, 15)), d(paintings)
        d_loss = -torch.mean(torch.log(prob0) + torch.log(1.0 - prob1))
        g_loss = torch.mean(torch.log(1.0 - prob1))
        opt_d.zero_grad()
        d_loss.backward(retain_graph=True)
        opt_d.step()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        return "ran"
    kwarg = _outcome(lambda: torch.zeros(1, requires_grad=True).sum().backward(retain_variables=True))
    return f"{_outcome(body)[:110]}; the old kwarg: backward(retain_variables=True) -> {kwarg[:70]}"


@reduction
def tl007_data_silent() -> str:
    x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    y = x.sigmoid()
    y.data.mul_(2)
    y.sum().backward()
    return f"x.grad={x.grad.tolist()} (true grad [0.1966, 0.25, 0.105])"


# TL008 -----------------------------------------------------------------------------------------
@reduction
def tl008_no_zeroing() -> str:
    x, y = _data()
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    norms = []
    for _ in range(3):
        loss = ((model(x)[:, 0] - y) ** 2).mean()
        loss.backward()
        opt.step()
        norms.append(round(float(model.weight.grad.norm()), 2))
    return f"grad norm without zeroing, steps 1-3: {norms} (grows)"


@reduction
def tl008_manual_sgd_no_zeroing() -> str:
    x, y = _data()
    w = torch.zeros(3, requires_grad=True)
    losses = []
    for _ in range(8):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        losses.append(round(loss.item(), 2))
    return f"manual SGD without zeroing, losses {losses}"


@reduction
def tl008_model_zero_grad_not_input() -> str:
    model = nn.Linear(3, 2)
    x = torch.rand(1, 3).requires_grad_()
    norms = []
    for _ in range(3):
        model.zero_grad()
        model(x)[0, 1].backward()
        norms.append(round(float(x.grad.norm()), 3))
        with torch.no_grad():
            x += 0.0 * x.grad  # the update leaves x's values, only the grad is measured
    return f"model.zero_grad() in the loop, input leaf never zeroed: x.grad norm {norms} (grows linearly)"


# TL009 -----------------------------------------------------------------------------------------
@reduction
def tl009_history() -> str:
    x, y = _data()
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses, total = [], 0
    for _ in range(3):
        opt.zero_grad()
        loss = ((model(x)[:, 0] - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss)
        total += loss
    return (f"losses[0].grad_fn={type(losses[0].grad_fn).__name__} (graph kept); total.grad_fn="
            f"{type(total.grad_fn).__name__}; np.array(losses) -> {_outcome(lambda: np.array(losses))[:80]}")


@reduction
def tl009_backpropagated_history() -> str:
    """``running_loss += loss`` after each ``loss.backward()``, reset on a print cycle: backward()
    freed every step's saved activations, but the running loss still links every step's graph
    nodes until the reset (the PyTorch FAQ's "accumulating history across your training loop")."""
    import weakref

    x, y = _data()
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    running_loss, activations = 0.0, []
    for _ in range(50):
        opt.zero_grad()
        hidden = torch.tanh(model(x))
        activations.append(weakref.ref(hidden))
        loss = ((hidden[:, 0] - y) ** 2).mean()
        loss.backward()
        opt.step()
        running_loss += loss
        del hidden
    depth, node = 0, running_loss.grad_fn
    while node is not None and node.next_functions:
        depth, node = depth + 1, node.next_functions[0][0]
    alive = sum(ref() is not None for ref in activations)
    return (f"after 50 steps: running_loss.grad_fn chain {depth} nodes deep, saved activations alive: {alive}; "
            f"np.array([running_loss]) -> {_outcome(lambda: np.array([running_loss]))[:60]}")


@reduction
def tl009_item_ok() -> str:
    x, y = _data()
    model = nn.Linear(3, 1)
    loss = ((model(x)[:, 0] - y) ** 2).mean()
    history = [loss.item(), float(loss), loss.detach()]
    return f"loss.item()/float(loss)/loss.detach(): no graph kept, np.array -> {np.array(history[:2]).shape}"


# TL010 -----------------------------------------------------------------------------------------
@reduction
def tl010_second_backward() -> str:
    w = torch.rand(3, requires_grad=True)
    loss = (w * 2).sum()

    def body() -> str:
        for _ in range(2):
            loss.backward()
        return "ran"
    return _outcome(body)


@reduction
def tl010_hidden_not_detached() -> str:
    rnn = nn.RNNCell(3, 4)

    def body() -> str:
        h = torch.zeros(1, 4)
        for _ in range(2):
            h = rnn(torch.rand(1, 3), h)
            h.sum().backward()
        return "ran"
    return _outcome(body)


# TL012-TL019 -----------------------------------------------------------------------------------
@reduction
def tl012_typo() -> str:
    w = torch.zeros(3)
    w.require_grad = True
    return f"w.require_grad = True: w.requires_grad={w.requires_grad}"


@reduction
def tl013_missing_call() -> str:
    x, y = _data()
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    for _ in range(3):
        opt.zero_grad  # noqa: B018 - the mistake being measured
        ((model(x)[:, 0] - y) ** 2).mean().backward()
    model.eval  # noqa: B018
    return f"opt.zero_grad without (): grad norm after 3 steps {float(model.weight.grad.norm()):.2f}; " \
           f"model.eval without (): training={model.training}"


@reduction
def tl014_backward_without_graph() -> str:
    w = torch.rand(3, requires_grad=True)
    with torch.no_grad():
        loss = (w * 2).sum()
    return _outcome(lambda: loss.backward())


@reduction
def tl015_numpy_of_grad_tensor() -> str:
    model = nn.Linear(3, 1)
    out = model(torch.rand(2, 3))
    return f"out.numpy() -> {_outcome(lambda: out.numpy())}; leaf w.numpy() -> " \
           f"{_outcome(lambda: torch.zeros(2, requires_grad=True).numpy())[:40]}"


@reduction
def tl016_grad_none() -> str:
    w = torch.zeros(3, requires_grad=True)
    return f"w.grad.data.zero_() before backward -> {_outcome(lambda: w.grad.data.zero_())}"


@reduction
def tl017_step_order() -> str:
    x, y = _data()
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    for _ in range(5):
        loss = ((model(x)[:, 0] - y) ** 2).mean()
        loss.backward()
        opt.zero_grad()
        opt.step()
    return f"zero_grad between backward and step: max weight change {float((model.weight - before).abs().max())}"


@reduction
def tl018_tensor_copy() -> str:
    w = torch.rand(3, requires_grad=True)
    y = w * 2
    return _outcome(lambda: f"torch.tensor(y).requires_grad={torch.tensor(y).requires_grad}")


@reduction
def tl019_softmax_then_ce() -> str:
    torch.manual_seed(0)
    x = torch.randn(200, 10)
    target = x.argmax(1)
    results = []
    for use_softmax in (True, False):
        model = nn.Linear(10, 10)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        for _ in range(300):
            opt.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(F.softmax(logits, 1) if use_softmax else logits, target)
            loss.backward()
            opt.step()
        results.append(round(loss.item(), 2))
    return f"cross_entropy after softmax plateaus at {results[0]} vs {results[1]} on logits (300 steps)"


def main(argv: list[str], reductions: dict[str, Callable[[], str]] = REDUCTIONS) -> int:
    """Run the named reductions of ``reductions`` (all of them without names) and print the
    outcomes; ``--json FILE`` first also writes them to FILE."""
    out_json = None
    if argv[:1] == ["--json"]:
        out_json, argv = argv[1], argv[2:]
    results = {}
    for name in argv or list(reductions):
        results[name] = reductions[name]()
        print(f"{name}: {results[name]}")
    if out_json:
        with open(out_json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
