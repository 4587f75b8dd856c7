"""Reductions behind the `check` fields of corpus/holdout/round2.toml (our own code, torch 2.13 CPU).

    python corpus/reductions/holdout2.py                     # run every reduction, print what happened
    python corpus/reductions/holdout2.py r2_tl019_softmax_into_ce
    python corpus/reductions/holdout2.py --json /tmp/r2.json # the same, also as {name: result}

Same style as holdout.py: each reduction is the smallest program with the shape of a labelled line
and prints the observed outcome. There is no GPU here: a move to the `meta` device stands in for
`.cuda()` / `.to(cuda_device)` (a real device move, which CPU -> CPU is not). matplotlib is not
installed: `plt.plot(ys)` turns its data into an array with `np.asarray`, which is what is called.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from holdout import _mlp, _regression  # the same seeded data and model as round 1
from measure import _outcome
from measure import main as run_reductions
from torch import nn

REDUCTIONS: dict[str, Callable[[], str]] = {}
DEVICE = "meta"  # stands in for a GPU


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


def _classification(classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    return x, (x[:, :classes]).argmax(1)


def _train_classifier(head: Callable[[torch.Tensor], torch.Tensor], loss_fn: Callable, steps: int = 300) -> tuple[float, float]:
    """Train nn.Linear(6, 4) with `loss_fn(head(logits), y)`; return (final cross-entropy of the logits, accuracy)."""
    x, y = _classification()
    torch.manual_seed(1)
    model = nn.Linear(6, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(steps):
        loss = loss_fn(head(model(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = model(x)
        return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


# TL019 ------------------------------------------------------------------------------------------
@reduction
def r2_tl019_softmax_into_ce() -> str:
    """nn.CrossEntropyLoss on softmax(scores) (the bug) against on the raw scores (the ok form)."""
    ce = nn.CrossEntropyLoss()
    bad = _train_classifier(lambda z: torch.softmax(z, dim=1), ce)
    good = _train_classifier(lambda z: z, ce)
    return (f"300 SGD steps: CE(softmax(z)) -> logit cross-entropy {bad[0]:.3f}, accuracy {bad[1]:.2f}; "
            f"CE(z) -> {good[0]:.3f}, accuracy {good[1]:.2f}")


@reduction
def r2_tl019_log_softmax_into_ce_ok() -> str:
    """A model ending in nn.LogSoftmax trained with nn.CrossEntropyLoss: log_softmax is idempotent."""
    torch.manual_seed(0)
    z = torch.randn(5, 3)
    y = torch.tensor([0, 2, 1, 1, 0])
    same = torch.allclose(F.cross_entropy(F.log_softmax(z, dim=-1), y), F.cross_entropy(z, y))
    trained = _train_classifier(lambda s: F.log_softmax(s, dim=-1), nn.CrossEntropyLoss())
    return f"CE(log_softmax(z)) == CE(z): {same}; trained: logit cross-entropy {trained[0]:.3f}, accuracy {trained[1]:.2f}"


# TL009 / TL015 ------------------------------------------------------------------------------------
@reduction
def r2_tl009_loss_sum_after_backward() -> str:
    """`total += loss` where `loss` was returned by a step function that already ran backward/step."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_batch() -> torch.Tensor:
        loss = ((model(x) - y) ** 2).mean()
        model.zero_grad()
        loss.backward()
        opt.step()
        return loss

    total = 0
    for _ in range(3):
        total += train_batch()
    chain, node = 0, total.grad_fn
    while node is not None and node.next_functions:
        chain += 1
        node = node.next_functions[0][0]
    return (f"total.requires_grad={total.requires_grad}, grad_fn={type(total.grad_fn).__name__}, "
            f"{chain} autograd nodes chained after 3 batches; np.asarray([total]): "
            f"{_outcome(lambda: np.asarray([total]).shape)}")


@reduction
def r2_tl009_loss_list_printed() -> str:
    """Iterative attack: each step's loss (backpropagated) kept in a list, printed and returned."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    img = torch.randn(1, 4, requires_grad=True)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(img), torch.tensor([1]))
        loss.backward()
        img = torch.tensor(img.data + 0.1 * torch.sign(img.grad.data), requires_grad=True)
        losses.append(loss)
    return (f"losses[0].grad_fn={type(losses[0].grad_fn).__name__}; "
            f"np.asarray(losses) as a plot would: {_outcome(lambda: np.asarray(losses).shape)}")


@reduction
def r2_tl009_item_sum_ok() -> str:
    """`history.append(loss.item())` / `total += loss.item()` / a list of detached numpy values, then plotted."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    floats, arrays = [], []
    for _ in range(3):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        floats.append(loss.item())
        arrays.append(loss.detach().cpu().numpy())
    return (f"types {type(floats[0]).__name__} / {type(arrays[0]).__name__}; np.asarray: "
            f"{_outcome(lambda: (np.asarray(floats).shape, np.asarray(arrays).shape))}")


@reduction
def r2_tl009_no_grad_sum_ok() -> str:
    """Evaluation loop under torch.no_grad(): summed losses and .numpy() of the outputs."""
    x, y = _regression()
    model = _mlp()
    total = 0
    with torch.no_grad():
        for _ in range(3):
            out = model(x)
            total += F.mse_loss(out, y)
            arr = out.numpy()
    return f"total.requires_grad={total.requires_grad}, out.numpy() shape {arr.shape}"


@reduction
def r2_tl009_leaf_grad_sum_ok() -> str:
    """Summing `.grad` of fresh leaves (integrated gradients / SmoothGrad)."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    total = 0
    for alpha in (0.5, 1.0):
        inp = torch.randn(1, 4).mul(alpha).requires_grad_()
        model(inp).sum().backward()
        total += inp.grad ** 2
    return f"total.requires_grad={total.requires_grad}, grad_fn={total.grad_fn}"


@reduction
def r2_tl009_sum_is_the_loss_ok() -> str:
    """Char-RNN: `loss += criterion(...)` over the characters, then one backward of that sum."""
    torch.manual_seed(0)
    cell = nn.GRUCell(3, 5)
    head = nn.Linear(5, 3)
    h = torch.zeros(1, 5)
    loss = 0
    for _ in range(4):
        h = cell(torch.randn(1, 3), h)
        loss += F.cross_entropy(head(h), torch.tensor([1]))
    loss.backward()
    return f"backward of the summed loss ran; head.weight.grad norm {head.weight.grad.norm().item():.3f}"


@reduction
def r2_tl015_data_numpy_ok() -> str:
    """`.data.numpy()` of a parameter, `.detach().numpy()` of a softmax output, `.numpy()` of topk indices."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    out = model(torch.randn(1, 4))
    probs = F.softmax(out, dim=1)
    idx = torch.topk(out, 2, dim=1)[1]
    return (f"{_outcome(lambda: model.weight.data.numpy().shape)}, {_outcome(lambda: probs.detach().numpy().shape)}, "
            f"indices requires_grad={idx.requires_grad}: {_outcome(lambda: idx.numpy().shape)}; "
            f"without detach: {_outcome(lambda: probs.numpy())}")


# TL003 / TL005 / TL018 ---------------------------------------------------------------------------
@reduction
def r2_tl003_randn_cuda_attribute() -> str:
    """`self.M = torch.randn(..., requires_grad=True).cuda()` in a module's __init__."""

    class Bilinear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.M = torch.randn(3, 3, requires_grad=True).to(DEVICE)

    m = Bilinear()
    return (f"M.is_leaf={m.M.is_leaf}, grad_fn={type(m.M.grad_fn).__name__}, "
            f"registered parameters: {len(list(m.parameters()))}; optimizer over it: "
            f"{_outcome(lambda: torch.optim.SGD([m.M], lr=0.1))}")


@reduction
def r2_tl003_type_inside_ok() -> str:
    """`Variable(torch.randn(...).type(dtype), requires_grad=True)`: the conversion is inside."""
    w = torch.autograd.Variable(torch.randn(3, 2).type(torch.FloatTensor), requires_grad=True)
    (w * 2).sum().backward()
    return f"w.is_leaf={w.is_leaf}, w.grad is set: {w.grad is not None}"


@reduction
def r2_tl005_param_flag_ok() -> str:
    """`embedding.weight.requires_grad = False` on a parameter (a leaf)."""
    emb = nn.Embedding(5, 3)
    result = _outcome(lambda: setattr(emb.weight, "requires_grad", False))
    return f"setting the flag: {result}; weight.requires_grad={emb.weight.requires_grad}"


@reduction
def r2_tl005_requires_grad_on_nonleaf_noop() -> str:
    """`(eps * real + (1 - eps) * fake).requires_grad_(True)` with `fake` a generator output."""
    torch.manual_seed(0)
    gen = nn.Linear(2, 3)
    fake = gen(torch.randn(4, 2))
    eps = torch.rand(4, 1)
    interp = (eps * torch.randn(4, 3) + (1 - eps) * fake).requires_grad_(True)
    return (f"interp.is_leaf={interp.is_leaf}, grad_fn={type(interp.grad_fn).__name__} (the call changed nothing); "
            f"`interp.requires_grad = True`: {_outcome(lambda: setattr(interp, 'requires_grad', True))}")


@reduction
def r2_tl018_tensor_copy_cuts_graph() -> str:
    """`model(torch.tensor(img))` then backward and `img.grad` (the bug) against `torch.tensor(img.data, requires_grad=True)`."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    img = torch.randn(1, 4, requires_grad=True)
    out = _outcome(lambda: F.cross_entropy(model(torch.tensor(img)), torch.tensor([1])).backward())
    fresh = torch.tensor(img.data, requires_grad=True)
    F.cross_entropy(model(fresh), torch.tensor([1])).backward()
    return f"backward through the copy: {out}; img.grad={img.grad}; fresh leaf from .data: grad set {fresh.grad is not None}"


# TL016 / TL008 / TL002 / TL017 ---------------------------------------------------------------------
@reduction
def r2_tl016_zero_before_first_backward() -> str:
    """`w1.grad.data.zero_()` at the top of the first iteration, before any backward."""
    w1 = torch.randn(3, 2, requires_grad=True)
    return f"first iteration: {_outcome(lambda: w1.grad.data.zero_())}"


@reduction
def r2_tl016_zero_after_update_ok() -> str:
    """Manual SGD through .data with `w.grad.data.zero_()` after the update (also over model.parameters())."""
    x, y = _regression()
    w = torch.zeros(2, 1, requires_grad=True)
    first = last = 0.0
    for step in range(30):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        w.data -= 0.1 * w.grad.data
        w.grad.data.zero_()
        first = loss.item() if step == 0 else first
        last = loss.item()
    return f"w.is_leaf={w.is_leaf}, loss {first:.2f} -> {last:.3f}"


@reduction
def r2_tl002_no_grad_momentum_ok() -> str:
    """Momentum by hand: `v += w.grad; w -= lr * v` under no_grad, `w.grad.zero_()` after."""
    w = torch.tensor(2.0, requires_grad=True)
    v = torch.tensor(0.0)
    values = []
    for _ in range(20):
        loss = w ** 2
        loss.backward()
        with torch.no_grad():
            v += w.grad
            w -= 0.1 * v
            w.grad.zero_()
        values.append(loss.item())
    return f"w.is_leaf={w.is_leaf}, v.requires_grad={v.requires_grad}, loss {values[0]:.2f} -> {min(values):.4f} (min)"


@reduction
def r2_tl002_param_add_in_grad_mode() -> str:
    """`for param in fc.parameters(): param.add_(-0.1 * param.grad)` after backward, outside no_grad."""
    x, y = _regression()
    fc = nn.Linear(2, 1)
    F.smooth_l1_loss(fc(x), y).backward()
    param = next(iter(fc.parameters()))
    return f"param.add_: {_outcome(lambda: param.add_(-0.1 * param.grad))}; param.data.add_: {_outcome(lambda: param.data.add_(-0.1 * param.grad).shape)}"


@reduction
def r2_tl002_view_of_bias_inplace() -> str:
    """`b = conv.bias.view(3, -1); b[:, 4] += c` in grad mode (the YOLO bias initialisation), and under no_grad."""
    conv = nn.Conv2d(4, 3 * 6, 1)
    b = conv.bias.view(3, -1)
    bad = _outcome(lambda: b[:, 4].add_(1.0))
    with torch.no_grad():
        conv.bias.view(3, -1)[:, 4] += 1.0
    return f"grad mode: {bad}; under no_grad: ran, bias.is_leaf={conv.bias.is_leaf}"


@reduction
def r2_tl017_zero_grad_in_helper_ok() -> str:
    """The loop calls a helper that zeroes, backpropagates and steps."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def train_batch() -> float:
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    losses = [train_batch() for _ in range(50)]
    return f"loss {losses[0]:.2f} -> {losses[-1]:.3f}"


# TL007 / TL010 ------------------------------------------------------------------------------------
@reduction
def r2_tl007_step_between_backwards() -> str:
    """`loss_G.backward(retain_graph=True); opt_G.step(); loss_V.backward()` with loss_V through G's graph."""
    torch.manual_seed(0)
    gen, value = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4)), nn.Linear(4, 1)
    opt_g = torch.optim.RMSprop(gen.parameters(), lr=0.01)
    fake = gen(torch.randn(5, 3))
    loss_g = -value(fake).mean()
    loss_v = value(fake).abs().mean()
    loss_g.backward(retain_graph=True)
    opt_g.step()
    return f"loss_V.backward() after the G step: {_outcome(loss_v.backward)}"


@reduction
def r2_tl007_d_step_then_fresh_forward_ok() -> str:
    """D step, then the generator loss from a fresh forward through G and the stepped D."""
    torch.manual_seed(0)
    gen, disc = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    opt_d = torch.optim.RMSprop(disc.parameters(), lr=0.01)
    loss_d = disc(gen(torch.randn(5, 3))).mean()
    loss_d.backward()
    opt_d.step()
    loss_g = -disc(gen(torch.randn(5, 3))).mean()
    return f"G backward after the D step: {_outcome(loss_g.backward)}"


@reduction
def r2_tl007_step_other_net_ok() -> str:
    """Two independent models: opt1.step() between loss1.backward() and loss2.backward()."""
    x, y = _regression()
    net1, net2 = nn.Linear(2, 1), _mlp()
    opt1 = torch.optim.SGD(net1.parameters(), lr=0.1)
    loss1, loss2 = F.mse_loss(net1(x), y), F.mse_loss(net2(x), y)
    loss1.backward()
    opt1.step()
    return f"loss2.backward(): {_outcome(loss2.backward)}"


@reduction
def r2_tl007_clone_fill_ok() -> str:
    """`grad_out = output.clone(); grad_out.fill_(0); grad_out.scatter_(...); output.backward(grad_out)`."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    inp = torch.randn(2, 4, requires_grad=True)
    output = model(inp)
    grad_out = output.clone()
    grad_out.fill_(0.0)
    grad_out.scatter_(1, torch.tensor([[0], [2]]), 1.0)
    return f"output.backward(grad_out): {_outcome(lambda: output.backward(grad_out))}; inp.grad set: {inp.grad is not None}"


@reduction
def r2_tl007_inplace_after_bn_ok() -> str:
    """Conv -> BatchNorm -> ReLU6(inplace) and BatchNorm -> Dropout2d(inplace) -> ReLU6(inplace)."""
    torch.manual_seed(0)
    a = nn.Sequential(nn.Conv2d(2, 4, 1), nn.BatchNorm2d(4), nn.ReLU6(inplace=True), nn.Conv2d(4, 2, 1))
    b = nn.Sequential(nn.Conv2d(2, 4, 1), nn.BatchNorm2d(4), nn.Dropout2d(0.5, inplace=True), nn.ReLU6(inplace=True))
    x = torch.randn(3, 2, 5, 5)
    return f"backward: {_outcome(lambda: a(x).sum().backward())} / {_outcome(lambda: b(x).sum().backward())}"


@reduction
def r2_tl007_inplace_add_on_relu_output() -> str:
    """Residual block: `out = relu(bn(conv(out)))` (nn.ReLU, not in place), then `out += residual`."""
    torch.manual_seed(0)
    conv, bn, relu, shortcut = nn.Conv2d(2, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(inplace=False), nn.Conv2d(2, 2, 1)
    x = torch.randn(2, 2, 5, 5)
    residual = shortcut(x)
    out = relu(bn(conv(x)))
    out += residual
    fixed = relu(bn(conv(x))) + shortcut(x)
    return f"backward: {_outcome(lambda: out.sum().backward())}; out = out + residual: {_outcome(lambda: fixed.sum().backward())}"


@reduction
def r2_tl010_retain_graph_loop_ok() -> str:
    """DeepFool: one logit per class backpropagated in a loop, each with retain_graph=True."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
    x = torch.randn(1, 4, requires_grad=True)
    logits = net(x)
    runs = []
    for c in range(3):
        x.grad = None
        runs.append(_outcome(lambda: logits[0, c].backward(retain_graph=True)))
    return f"three backwards through one graph: {runs}"


@reduction
def r2_tl007_inference_inplace_ok() -> str:
    """Detect head at inference: `y = x.sigmoid(); y[..., 0:2] = ...` with no backward afterwards."""
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 6, 1)
    y = conv(torch.randn(1, 2, 3, 3)).sigmoid()
    y[:, 0:2] = y[:, 0:2] * 2.0 - 0.5
    return f"in-place write into the sigmoid output: ran; y.grad_fn={type(y.grad_fn).__name__}, no backward follows; a backward would: {_outcome(lambda: y.sum().backward())}"


@reduction
def r2_tl010_state_repacked_ok() -> str:
    """LSTM state re-wrapped from .data before every batch (and a char-RNN whose hidden is new per call)."""
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True)
    states = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    results = []
    for _ in range(3):
        states = [s.data for s in states]
        out, states = lstm(torch.randn(2, 5, 3), states)
        results.append(_outcome(lambda: out.sum().backward()))
    carried = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    second = None
    for _ in range(2):
        out, carried = lstm(torch.randn(2, 5, 3), carried)
        second = _outcome(lambda: out.sum().backward())
    return f"repacked: {results}; without the repack, second backward: {second}"


@reduction
def r2_tl008_second_optimizer_never_zeroed() -> str:
    """Encoder/discriminator loop: opt_E.zero_grad() every step, opt_D never zeroed; D also gets E-loss grads."""
    torch.manual_seed(0)
    enc, disc = nn.Linear(3, 3), nn.Linear(3, 1)
    opt_e = torch.optim.Adam(enc.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    x = torch.randn(8, 3)
    norms = []
    for _ in range(4):
        rec = enc(x)
        d_loss = F.softplus(-disc(x)).mean() + F.softplus(disc(rec.detach())).mean()
        d_loss.backward()
        opt_d.step()
        norms.append(round(disc.weight.grad.norm().item(), 3))
        e_loss = ((x - rec) ** 2).mean() + F.softplus(-disc(rec)).mean()
        opt_e.zero_grad()
        e_loss.backward()
        opt_e.step()
    return f"D weight grad norm seen by opt_D.step() per iteration: {norms} (never zeroed: sums of all earlier D and E-loss gradients)"


@reduction
def r2_tl007_reparam_inplace_on_fresh_noise_ok() -> str:
    """`eps = torch.randn(...); res = eps.mul_(std).add_(mu)`: in-place on fresh noise, std/mu carry the graph."""
    torch.manual_seed(0)
    mu, logvar = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3, requires_grad=True)
    std = torch.exp(0.5 * logvar).unsqueeze(0)
    eps = torch.randn(4, 2, 3)
    res = eps.mul_(std).add_(mu.unsqueeze(0))
    outcome = _outcome(lambda: res.sum().backward()) or "ran"
    return f"backward: {outcome}; mu.grad sum={mu.grad.sum().item():.1f}, logvar.grad is None: {logvar.grad is None}"


@reduction
def r2_tl015_param_numpy_under_no_grad_ok() -> str:
    """`.cpu().numpy()` of an nn.Parameter: under no_grad (torch 2.13) it works, in grad mode it raises."""
    weight = nn.Embedding(5, 3).weight
    with torch.no_grad():
        inside = _outcome(lambda: weight.cpu().numpy().shape)
        row = _outcome(lambda: weight[2].cpu().numpy().shape)
    outside = _outcome(lambda: weight.cpu().numpy().shape)
    return f"under no_grad: {inside}, row: {row}; in grad mode: {outside}"


@reduction
def r2_tl002_data_clamp_ok() -> str:
    """WGAN weight clipping `p.data.clamp_(-c, c)` on parameters in grad mode, then the next step."""
    torch.manual_seed(0)
    disc = nn.Linear(4, 1)
    for p in disc.parameters():
        p.data.clamp_(-0.01, 0.01)
    leaf = all(p.is_leaf for p in disc.parameters())
    outcome = _outcome(lambda: disc(torch.randn(3, 4)).mean().backward())
    return f"clamped through .data: max |w|={disc.weight.abs().max().item():.3f}, still leaves: {leaf}, next backward: {outcome}"


@reduction
def r2_tl003_fixed_input_moved_ok() -> str:
    """`Variable(torch.randn(...), requires_grad=False).to(device)`: a fixed input, not a parameter."""
    from torch.autograd import Variable

    fixed = Variable(torch.randn(2, 3), requires_grad=False).to("cpu")
    gen = nn.Linear(3, 2)
    out = gen(fixed)
    return f"fixed.requires_grad={fixed.requires_grad}, is_leaf={fixed.is_leaf}; G(fixed) requires grad through G: {out.requires_grad}"


@reduction
def r2_tl010_second_backward_shared_graph() -> str:
    """VAE + attribute loss: `total.backward(); e_opt.step(); extra.backward()` where both losses share the
    encoder/decoder forward. Two independent mistakes: the first backward frees the shared graph (no
    retain_graph), and the encoder step in between changes weights the second backward needs."""
    def run(retain: bool, step: bool) -> str:
        torch.manual_seed(0)
        enc, dec, disc = nn.Linear(3, 4), nn.Sequential(nn.Linear(4, 4), nn.Tanh()), nn.Linear(4, 2)
        e_opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
        out = dec(enc(torch.randn(5, 3)))
        total = out.pow(2).mean()
        extra = F.cross_entropy(disc(out), torch.tensor([0, 1, 0, 1, 0])) + enc(out[:, :3]).pow(2).mean()
        total.backward(retain_graph=retain)
        if step:
            e_opt.step()
        return _outcome(extra.backward)[:52]
    return (f"as written: {run(False, True)} | without the step: {run(False, False)} | "
            f"retain_graph=True but still stepping: {run(True, True)} | retain_graph=True, step after: {run(True, False)}")


@reduction
def r2_tl001_module_param_rebound() -> str:
    """PopArt update under no_grad: `self.weight = self.weight * old / new` on a registered nn.Parameter."""
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(2, 3)).to(dtype=torch.float32, device="cpu")
            self.stddev = nn.Parameter(torch.ones(2), requires_grad=False).to(dtype=torch.float32, device="cpu")

        @torch.no_grad()
        def rescale(self, old, new):
            self.weight = self.weight * old / new

    head = Head()
    registered = [n for n, _ in head.named_parameters()]
    outcome = _outcome(lambda: head.rescale(torch.ones(2, 1), torch.full((2, 1), 2.0)))
    return f"registered on CPU: {registered}; rebinding: {outcome}"


@reduction
def r2_tl003_parameter_to_other_device() -> str:
    """`nn.Parameter(t).to(device)`: same object on CPU/float32, a non-leaf copy on another device (meta here)."""
    p = nn.Parameter(torch.randn(2, 3))
    same = p.to(dtype=torch.float32, device="cpu") is p
    moved = nn.Parameter(torch.randn(2, 3)).to(device="meta")
    fixed = nn.Parameter(torch.ones(2), requires_grad=False).to(device="meta")
    return (f"cpu: same object {same}; other device: is_leaf={moved.is_leaf}, grad_fn={type(moved.grad_fn).__name__}, "
            f"is Parameter={isinstance(moved, nn.Parameter)}; requires_grad=False one moved: is_leaf={fixed.is_leaf}, requires_grad={fixed.requires_grad}")


@reduction
def r2_tl015_frozen_stats_numpy_ok() -> str:
    """`(x * sqrt(var) + mean).cpu().numpy()` with requires_grad=False Parameters as statistics."""
    mean = nn.Parameter(torch.zeros(3), requires_grad=False)
    var = nn.Parameter(torch.ones(3), requires_grad=False)
    out = torch.randn(2, 3) * torch.sqrt(var) + mean
    return f"out.requires_grad={out.requires_grad}; numpy: {_outcome(lambda: out.cpu().numpy().shape)}"


@reduction
def r2_tl002_regulariser_accumulator_ok() -> str:
    """`l1 = torch.tensor(0.); l1 += torch.norm(p, 1)` over parameters, then `loss += lam * l1` on the CE output."""
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    loss = F.cross_entropy(lin(torch.randn(6, 4)), torch.tensor([0, 1, 2, 0, 1, 2]))
    l1 = torch.tensor(0.0)
    for param in lin.parameters():
        l1 += torch.norm(param, 1)
    loss += 0.01 * l1
    outcome = _outcome(loss.backward)
    return f"l1.is_leaf={l1.is_leaf}, l1.grad_fn={type(l1.grad_fn).__name__}; backward: {outcome}; weight.grad norm {lin.weight.grad.norm().item():.3f}"


@reduction
def r2_tl007_unsqueeze_inplace_on_relu_output() -> str:
    """`conv(x).unsqueeze_(dim=1)` where conv ends in ReLU (saves its output); the same on a Linear output is fine."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(inplace=False))
    fea = block(torch.randn(1, 1, 6, 6)).unsqueeze_(dim=1)
    relu_case = _outcome(lambda: fea.sum().backward())[:120]
    lin = nn.Linear(3, 4)
    vec = lin(torch.randn(2, 3)).unsqueeze_(dim=1)
    return f"after ReLU: {relu_case}; after Linear: {_outcome(lambda: vec.sum().backward())}"


@reduction
def r2_tl007_inplace_after_norm_ok() -> str:
    """GroupNorm -> ReLU(inplace=True), and `x = bn(x); x += temp` with BatchNorm2d(affine=False): norms save their input."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(inplace=True))
    first = _outcome(lambda: block(torch.randn(1, 1, 6, 6)).sum().backward())
    bn, conv = nn.BatchNorm2d(4, affine=False), nn.Conv2d(2, 4, 1)
    x = bn(conv(torch.randn(2, 2, 3, 3)))
    x += conv(torch.randn(2, 2, 3, 3))
    second = _outcome(lambda: bn(x).sum().backward())
    return f"GroupNorm+ReLU(inplace): {first}; BatchNorm output += shortcut: {second}"


@reduction
def r2_tl001_parameter_rewrapped_ok() -> str:
    """IRAT's PopArt copy: `self.weight = nn.Parameter(self.weight * old / new).to(**tpdv)` under no_grad."""
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(2, 3))

        @torch.no_grad()
        def rescale(self, old, new):
            self.weight = nn.Parameter(self.weight * old / new).to(dtype=torch.float32, device="cpu")

    head = Head()
    outcome = _outcome(lambda: head.rescale(torch.ones(2, 1), torch.full((2, 1), 2.0)))
    w = head.weight
    return (f"rebinding: {outcome}; weight is a Parameter: {isinstance(w, nn.Parameter)}, leaf: {w.is_leaf}, "
            f"requires_grad: {w.requires_grad}, registered: {[n for n, _ in head.named_parameters()]}")


@reduction
def r2_tl006_float_literal_ok() -> str:
    """`torch.tensor(1., requires_grad=True)` (the float literal of pull request #128) against `torch.tensor(1, ...)`."""
    x = torch.tensor(1.0, requires_grad=True)
    w = torch.tensor(2.0, requires_grad=True)
    (w * x + 3).backward()
    return f"float: x.grad={x.grad.item()}, w.grad={w.grad.item()}; int literal: {_outcome(lambda: torch.tensor(1, requires_grad=True))}"


@reduction
def r2_tl004_param_grad_read_ok() -> str:
    """`linear.weight.grad` after `loss.backward()`: a parameter is a leaf, its grad is filled."""
    torch.manual_seed(0)
    linear = nn.Linear(3, 2)
    F.mse_loss(linear(torch.randn(10, 3)), torch.randn(10, 2)).backward()
    return f"weight.is_leaf={linear.weight.is_leaf}, grad shape {tuple(linear.weight.grad.shape)}; from_numpy(int).numpy(): {_outcome(lambda: torch.from_numpy(np.array([[1, 2], [3, 4]])).numpy().dtype)}"


@reduction
def r2_tl006_parameter_of_byte_mask() -> str:
    """`Parameter(torch.from_numpy(mask).byte())`: nn.Parameter defaults to requires_grad=True."""
    mask = torch.from_numpy(np.array([[0, 1], [1, 0]], dtype=np.uint8)).byte()
    bad = _outcome(lambda: nn.Parameter(mask))
    good = nn.Parameter(mask, requires_grad=False)
    emb = nn.Parameter(torch.from_numpy(np.ones((2, 3))).float())
    return f"Parameter(byte mask): {bad}; with requires_grad=False: dtype {good.dtype}; float glove Parameter: requires_grad={emb.requires_grad}"


@reduction
def r2_tl007_masked_fill_on_linear_output_ok() -> str:
    """`h = linear(x).view(...); h.masked_fill_(mask, -1e8); softmax(h)`: linear does not save its output."""
    torch.manual_seed(0)
    lin = nn.Linear(4, 1)
    x = torch.randn(6, 4, requires_grad=True)
    h = lin(x).view(-1, 3)
    h.masked_fill_(torch.tensor([[False, True, False], [True, False, False]]), -1e8)
    out = F.softmax(h, dim=1)
    return f"backward: {_outcome(lambda: out[:, 0].sum().backward())}; x.grad is set: {x.grad is not None}"


def main(argv: list[str]) -> int:
    return run_reductions(argv, REDUCTIONS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
