"""Reductions behind the `check` fields of corpus/holdout/round4.toml (our own code, torch 2.13 CPU).

    python corpus/reductions/holdout4.py                     # run every reduction, print what happened
    python corpus/reductions/holdout4.py r4_tl007_inplace_dropout_after_relu
    python corpus/reductions/holdout4.py --json /tmp/r4.json # the same, also as {name: result}

Same style as holdout.py, holdout2.py and holdout3.py: each reduction is the smallest program with the
shape of a labelled line and prints the observed outcome. Cases whose shape an earlier round already
measured cite that round's reduction (holdout2.py / holdout3.py) instead of a copy here; the shared
helpers are imported from those files.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from holdout import _mlp, _regression  # the same seeded data and model as rounds 1 to 3
from holdout3 import _graph_size, _net
from measure import _outcome
from measure import main as run_reductions
from torch import nn

REDUCTIONS: dict[str, Callable[[], str]] = {}


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


def _max_change(before: list[torch.Tensor], module: nn.Module) -> float:
    return max((p.detach() - b).abs().max().item() for p, b in zip(module.parameters(), before))


# TL007: in-place writes into saved outputs -----------------------------------------------------
@reduction
def r4_tl007_inplace_dropout_after_relu() -> str:
    """Sequential(Linear, ReLU(), Dropout(0.5, inplace=True), Linear) in train mode, as SimpleClassifier."""
    results = []
    for inplace in (True, False):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.5, inplace=inplace), nn.Linear(8, 3)).train()
        out = model(torch.randn(4, 6))
        results.append(f"inplace={inplace}: {_outcome(lambda o=out: o.sum().backward())}")
    return "backward: " + "; ".join(results)


@reduction
def r4_tl007_inplace_dropout_on_linear_output_ok() -> str:
    """3detr layer: src + dropout1(self_attn(...)[0]) and src + dropout2(linear2(...)) with nn.Dropout(0.1, inplace=True), train mode."""
    torch.manual_seed(0)
    attn, linear2 = nn.MultiheadAttention(8, 2, dropout=0.1), nn.Linear(16, 8)
    drop1, drop2 = nn.Dropout(0.1, inplace=True), nn.Dropout(0.1, inplace=True)
    src = torch.randn(5, 2, 8, requires_grad=True)
    src2, _ = attn(src, src, value=src)
    out = src + drop1(src2)
    out = out + drop2(linear2(torch.randn(5, 2, 16)))
    return f"backward: {_outcome(lambda: out.sum().backward())}"


@reduction
def r4_tl007_index_write_into_relu_output() -> str:
    """USAM: att = relu(conv(x)); att[:, :, :, 0] = 0 (and the other borders); output = x + att * x."""
    results = []
    for clone in (False, True):
        torch.manual_seed(0)
        conv, relu = nn.Conv2d(2, 1, 3, padding=1), nn.ReLU()
        x = torch.randn(2, 2, 5, 5, requires_grad=True)
        att = relu(conv(x))
        if clone:
            att = att.clone()
        att[:, :, :, 0] = 0
        att[:, :, 0, :] = 0
        out = x + att * x
        results.append(f"{'att.clone() first' if clone else 'as written'}: {_outcome(lambda o=out: o.sum().backward())}")
    return "backward: " + "; ".join(results)


@reduction
def r4_tl007_iadd_into_relu_output() -> str:
    """GCN.forward: z = relu(bn(conv_adj(x))); z += x; z = relu(bn(conv_wg(z^T)))."""
    results = []
    for inplace in (True, False):
        torch.manual_seed(0)
        conv_adj, bn_adj, relu = nn.Conv1d(4, 4, 1, bias=False), nn.BatchNorm1d(4), nn.ReLU()
        conv_wg = nn.Conv1d(3, 3, 1, bias=False)
        x = torch.randn(2, 4, 3, requires_grad=True)
        z = relu(bn_adj(conv_adj(x)))
        if inplace:
            z += x
        else:
            z = z + x
        out = relu(conv_wg(z.transpose(1, 2).contiguous()))
        results.append(f"{'z += x' if inplace else 'z = z + x'}: {_outcome(lambda o=out: o.sum().backward())}")
    return "backward: " + "; ".join(results)


@reduction
def r4_tl007_write_into_detached_or_fresh_ok() -> str:
    """edge = torch.sigmoid(t.clone().detach()); edge[edge < 0.8] = 0; point_coords = zeros(..); point_coords[:, :, 0] = idx % W."""
    torch.manual_seed(0)
    conv = nn.Conv2d(1, 1, 1)
    logits = conv(torch.randn(1, 1, 4, 4))
    edge = torch.sigmoid(logits.clone().detach())
    edge[edge < 0.8] = 0
    idx = torch.topk(edge.view(1, 16), k=3, dim=1)[1]
    coords = torch.zeros(1, 3, 2)
    coords[:, :, 0] = idx % 4
    return (f"edge requires_grad {edge.requires_grad}; coords requires_grad {coords.requires_grad}; "
            f"backward of the conv output afterwards: {_outcome(lambda: logits.sum().backward())}")


@reduction
def r4_tl007_index_write_into_sum_output_ok() -> str:
    """loss_reg: group = einsum(inter**2, contacts).sum(dim=1); group[group==0] = group[group==0] + 1e10; sqrt(group)."""
    torch.manual_seed(0)
    inter = torch.rand(2, 3, 4, requires_grad=True)
    contacts = (torch.rand(2, 3, 3) > 0.5).float()
    group = torch.einsum("bij,bki->bjk", inter**2, contacts).sum(dim=1)
    group[group == 0] = group[group == 0] + 1e10
    reg = torch.sqrt(group).sum()
    return f"backward: {_outcome(reg.backward)}; inter.grad set: {inter.grad is not None}"


@reduction
def r4_tl007_inplace_relu_on_saved_conv_input() -> str:
    """XceptionUnit with a resized identity: identity = bn(conv1x1(x)); x = body(x) whose first op is ReLU(inplace=True)."""
    results = []
    for clone in (False, True):
        torch.manual_seed(0)
        identity_conv, bn = nn.Conv2d(2, 3, 1, stride=2, bias=False), nn.BatchNorm2d(3)
        relu = nn.ReLU(inplace=True)
        dw, pw, pool = nn.Conv2d(2, 2, 3, padding=1, groups=2, bias=False), nn.Conv2d(2, 3, 1, bias=False), nn.MaxPool2d(3, 2, 1)
        x = torch.randn(1, 2, 6, 6, requires_grad=True) * 1.0  # the previous unit's output
        identity = bn(identity_conv(x.clone() if clone else x))
        out = pool(pw(dw(relu(x)))) + identity
        results.append(f"{'identity from x.clone()' if clone else 'as written'}: {_outcome(lambda o=out: o.sum().backward())}")
    return "backward: " + "; ".join(results)


@reduction
def r4_tl007_sigmoid_inplace_on_conv_output_ok() -> str:
    """a = conv(x); torch.sigmoid_(a); a + b: the convolution saved its input and weight, not its output."""
    grads = []
    for inplace in (True, False):
        torch.manual_seed(0)
        conv = nn.Conv2d(2, 2, 3)
        x = torch.randn(1, 2, 5, 5, requires_grad=True)
        a = conv(x)
        a = torch.sigmoid_(a) if inplace else torch.sigmoid(a)
        out = a + 1.0
        result = _outcome(lambda o=out: o.sum().backward())
        grads.append((result, conv.weight.grad.clone() if conv.weight.grad is not None else None))
    same = grads[0][1] is not None and torch.allclose(grads[0][1], grads[1][1])
    return f"backward with sigmoid_: {grads[0][0]}; weight grad equal to the out-of-place version: {same}"


@reduction
def r4_tl007_d_step_between_backwards_through_d() -> str:
    """VAE-GAN step: loss_D.backward(retain_graph=True); D_opt.step(); loss_G (same D forward).backward()."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 6))
    disc = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 1), nn.Sigmoid())
    opt_d, opt_g = torch.optim.Adam(disc.parameters(), lr=0.01), torch.optim.Adam(gen.parameters(), lr=0.01)
    x_real, z = torch.randn(5, 6), torch.randn(5, 3)
    x_fake = gen(z)
    d_real, d_fake = disc(x_real), disc(x_fake)
    ones, zeros = torch.ones(5, 1), torch.zeros(5, 1)
    loss_d = F.binary_cross_entropy(d_real, ones) + F.binary_cross_entropy(d_fake, zeros)
    opt_d.zero_grad()
    loss_d.backward(retain_graph=True)
    opt_d.step()
    loss_g = F.binary_cross_entropy(d_fake, ones)
    opt_g.zero_grad()
    first = _outcome(loss_g.backward)
    # the decoder step of the same chain: dec step, then a loss through the decoder's forward
    torch.manual_seed(0)
    dec = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 6))
    opt_dec = torch.optim.Adam(dec.parameters(), lr=0.01)
    mu = torch.randn(5, 3, requires_grad=True)  # stands in for the encoder output
    x_tilde = dec(mu)
    dec_loss = (x_tilde - x_real).pow(2).mean()
    opt_dec.zero_grad()
    dec_loss.backward(retain_graph=True)
    opt_dec.step()
    enc_loss = (x_tilde - x_real).pow(2).mean() + mu.pow(2).mean()
    second = _outcome(enc_loss.backward)
    return f"loss_G.backward() after the D step: {first}; enc_loss.backward() after the decoder step: {second}"


@reduction
def r4_tl007_steps_after_all_backwards_ok() -> str:
    """The same VAE-GAN graph with every backward first and the optimizer steps last."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 6))
    disc = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 1), nn.Sigmoid())
    opt_d, opt_g = torch.optim.Adam(disc.parameters(), lr=0.01), torch.optim.Adam(gen.parameters(), lr=0.01)
    d_fake = disc(gen(torch.randn(5, 3)))
    loss_d = F.binary_cross_entropy(d_fake, torch.zeros(5, 1))
    loss_g = F.binary_cross_entropy(d_fake, torch.ones(5, 1))
    opt_d.zero_grad()
    opt_g.zero_grad()
    first = _outcome(lambda: loss_d.backward(retain_graph=True))
    gen.zero_grad()
    second = _outcome(loss_g.backward)
    before = [p.detach().clone() for p in gen.parameters()]
    opt_d.step()
    opt_g.step()
    return f"loss_D.backward: {first}; loss_G.backward: {second}; steps ran, generator max change {_max_change(before, gen):.4f}"


@reduction
def r4_tl007_actor_step_before_independent_critic_backward_ok() -> str:
    """MADDPG learn: critic_loss on buffer actions built first, actor_loss backward + actor step, then critic_loss.backward()."""
    torch.manual_seed(0)
    actor, critic = _net(3, 2), _net(3 + 2, 1)
    actor_opt, critic_opt = torch.optim.Adam(actor.parameters(), lr=0.01), torch.optim.Adam(critic.parameters(), lr=0.01)
    o, u = torch.randn(8, 3), torch.randn(8, 2)  # observations and the buffer's actions
    critic_loss = (torch.randn(8, 1) - critic(torch.cat([o, u], 1))).pow(2).mean()
    actor_loss = -critic(torch.cat([o, actor(o)], 1)).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
    critic_opt.zero_grad()
    result = _outcome(critic_loss.backward)
    critic_opt.step()
    return f"critic_loss.backward() after the actor step: {result}"


@reduction
def r4_tl010_graph_rebuilt_each_iteration_ok() -> str:
    """stAdv: x_new = warp(x, f) before the loop; loss.backward(); opt.step(); x_new rebuilt from the stepped f."""
    torch.manual_seed(0)
    x = torch.rand(1, 1, 6, 6)
    f = torch.zeros(1, 6, 6, 2, requires_grad=True)
    nn.init.normal_(f, mean=0, std=0.01)
    base = F.affine_grid(torch.eye(2, 3).unsqueeze(0), (1, 1, 6, 6), align_corners=False)
    opt = torch.optim.Adam([f], lr=0.01)

    def warp() -> torch.Tensor:
        return F.grid_sample(x, (base + f).clamp(-1, 1), align_corners=False)

    x_new, outcomes = warp(), []
    for _ in range(3):
        loss = (x_new - 0.5).pow(2).mean() + f.pow(2).sum()
        opt.zero_grad()
        outcomes.append(_outcome(loss.backward))
        opt.step()
        x_new = warp()
    return f"three iterations, backward each: {outcomes}; f still a leaf: {f.is_leaf}"


# TL001 / TL002 / TL003: leaves --------------------------------------------------------------
@reduction
def r4_tl001_data_rebinding_ok() -> str:
    """w.data = w.data - lr * w.grad.data; w.grad.data.zero_() in a loop (and the FGSM inp.data = inp.data + eps*sign)."""
    x, y = _regression()
    torch.manual_seed(0)
    w = torch.randn(2, 1, requires_grad=True)
    losses = []
    for _ in range(20):
        loss = (x @ w - y).pow(2).mean()
        loss.backward()
        w.data = w.data - 0.05 * w.grad.data
        w.grad.data.zero_()
        losses.append(loss.item())
    inp = torch.rand(1, 4, requires_grad=True)
    (inp * 2).sum().backward()
    inp.data = inp.data + 0.1 * torch.sign(inp.grad.data)
    return (f"w is a leaf: {w.is_leaf}, grad after zero_: {w.grad.abs().sum().item()}, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
            f"FGSM inp is a leaf: {inp.is_leaf}, requires_grad {inp.requires_grad}")


@reduction
def r4_tl002_init_on_leaf_ok() -> str:
    """torch.nn.init.normal_(f, mean, std) on a leaf that requires grad."""
    f = torch.zeros(2, 3, requires_grad=True)
    result = _outcome(lambda: nn.init.normal_(f, mean=0, std=0.01) is f)
    return f"nn.init.normal_ on the leaf: {result}; f.is_leaf {f.is_leaf}, grad_fn {f.grad_fn}"


@reduction
def r4_tl003_parameter_of_scaled_ok() -> str:
    """nn.Parameter(torch.randn(.., requires_grad=True) * 0.01) and nn.Parameter(torch.ones(1) * p, requires_grad=True)."""
    w = nn.Parameter(torch.randn(3, 2, requires_grad=True) * 0.01)
    p = nn.Parameter(torch.ones(1) * 3, requires_grad=True)
    (torch.randn(4, 3) @ w * p).sum().backward()
    bare = torch.randn(3, 2, requires_grad=True) * 0.01
    return (f"Parameter(scaled): is_leaf {w.is_leaf}, grad set {w.grad is not None}; GeM p: is_leaf {p.is_leaf}, grad set {p.grad is not None}; "
            f"the bare scaled tensor: is_leaf {bare.is_leaf}")


# TL008 / TL017: zeroing ---------------------------------------------------------------------
@reduction
def r4_tl017_zero_after_step_ok() -> str:
    """loss.backward(); clip_grad_norm_; optimizer.step(); optimizer.zero_grad() every iteration."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.Adamax(model.parameters())
    losses = []
    for _ in range(30):
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; grads after the loop all zero/None: {all(p.grad is None or not p.grad.any() for p in model.parameters())}"


@reduction
def r4_tl017_zero_between_two_backwards_ok() -> str:
    """loss_enc.backward(retain_graph=True); decoder.zero_grad(); loss_dec.backward(); decoder_opt.step()."""
    torch.manual_seed(0)
    enc, dec = nn.Linear(4, 3), nn.Linear(3, 4)
    enc_opt, dec_opt = torch.optim.SGD(enc.parameters(), lr=0.1), torch.optim.SGD(dec.parameters(), lr=0.1)
    x = torch.randn(5, 4)
    z = enc(x)
    x_tilde = dec(z)
    loss_enc = (x_tilde - x).pow(2).mean() + z.pow(2).mean()
    loss_dec = (x_tilde - x).pow(2).mean()
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    loss_enc.backward(retain_graph=True)
    dec.zero_grad()
    loss_dec.backward()
    before = [p.detach().clone() for p in dec.parameters()]
    enc_opt.step()
    dec_opt.step()
    return f"decoder grad after the second backward nonzero: {dec.weight.grad.abs().sum().item() > 0}; decoder max change {_max_change(before, dec):.4f}"


# TL009: values read out of the graph ---------------------------------------------------------
@reduction
def r4_tl009_score_from_indices_ok() -> str:
    """compute_score_with_logits: torch.max(logits, 1)[1].data, one_hots.scatter_(1, idx, 1), scores = one_hots * labels."""
    torch.manual_seed(0)
    model = nn.Linear(6, 4)
    logits = model(torch.randn(5, 6))
    labels = torch.rand(5, 4)
    idx = torch.max(logits, 1)[1].data
    one_hots = torch.zeros(*labels.size())
    one_hots.scatter_(1, idx.view(-1, 1), 1)
    scores = one_hots * labels
    history = [scores.sum()]
    with torch.no_grad():
        c = (model(torch.randn(5, 6)).argmax(1) == torch.tensor([0, 1, 2, 3, 0])).squeeze()
        correct = [0.0] * 4
        correct[0] += c[0].item()
    return (f"score requires_grad {history[0].requires_grad}, grad_fn {history[0].grad_fn}, graph nodes {_graph_size(history[0])}; "
            f"c[i].item() is a {type(c[0].item()).__name__}")


@reduction
def r4_tl009_item_read_ok() -> str:
    """loss.item() printed / summed per batch."""
    x, y = _regression()
    model = _mlp()
    total = 0.0
    for _ in range(3):
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        total += loss.item()
    return f"loss.item() is a {type(loss.item()).__name__}; the total is a {type(total).__name__} (no graph)"


# TL018 ------------------------------------------------------------------------------------
@reduction
def r4_tl018_tensor_of_numpy_ok() -> str:
    """torch.tensor(transitions[key]) on replay-buffer numpy arrays."""
    buffer = {"o_0": np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)}
    t = torch.tensor(buffer["o_0"])
    return f"input is a {type(buffer['o_0']).__name__}; result requires_grad {t.requires_grad}, grad_fn {t.grad_fn}: no graph to cut"


def main(argv: list[str]) -> int:
    return run_reductions(argv, REDUCTIONS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
