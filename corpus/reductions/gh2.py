"""Minimal reductions behind the `check` fields of corpus/dev/github2.toml (our own code, torch 2.13 CPU).

    python corpus/reductions/gh2.py                 # run every reduction, print what happened
    python corpus/reductions/gh2.py gh2_tl003_moved  # one of them

Same style as measure.py: each reduction is the smallest program with the shape of a labelled
line and prints the observed outcome. This machine has no GPU: a move to the `meta` device stands
in for `.cuda()` / `.to(cuda_device)` (both return a copy with `ToCopyBackward0`, a non-leaf).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from measure import _outcome
from torch import nn

REDUCTIONS: dict[str, Callable[[], str]] = {}
DEVICE = "meta"  # stands in for a GPU: a real device move, which CPU -> CPU is not


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


# TL003 -----------------------------------------------------------------------------------------
@reduction
def gh2_tl003_moved() -> str:
    """`torch.ones(2, requires_grad=True).to(device)` and `p.data.clone().requires_grad_().to(device)`."""
    factors = [torch.ones(2, requires_grad=True).to(DEVICE) for _ in range(2)]
    copies = [nn.Linear(2, 2).weight.data.clone().requires_grad_().to(DEVICE)]
    same = torch.ones(2, requires_grad=True).to("cpu")
    return (f"moved: is_leaf={factors[0].is_leaf}, {copies[0].is_leaf}; optimizer: "
            f"{_outcome(lambda: torch.optim.Adam(factors) and 'ran')}; to('cpu') on CPU: is_leaf={same.is_leaf}")


# TL001 -----------------------------------------------------------------------------------------
@reduction
def gh2_tl001_no_grad_rebind_then_requires_grad_ok() -> str:
    """ComplianceDex test: `with torch.no_grad(): w = w - gamma * w.grad` then `w.requires_grad = True`."""
    torch.manual_seed(0)
    x = torch.rand(100, 1) * 5
    y_obs = 2.3 + 5.1 * x + 0.2 * torch.randn(100, 1)
    w, b = torch.randn(1, requires_grad=True), torch.randn(1, requires_grad=True)
    losses = []
    for _ in range(50):
        mse = torch.mean((w * x + b - y_obs) ** 2)
        mse.backward()
        losses.append(mse.item())
        with torch.no_grad():
            w = w - 0.01 * w.grad
            b = b - 0.01 * b.grad
        w.requires_grad = True
        b.requires_grad = True
    return f"w.is_leaf={w.is_leaf}, loss {losses[0]:.2f} -> {losses[-1]:.2f}"


@reduction
def gh2_tl003_parameter_moved() -> str:
    """torchnca: `self.A = torch.nn.Parameter(a).to(self.device)`, then `torch.optim.SGD([self.A])`."""
    moved = torch.nn.Parameter(torch.randn(2, 3)).to(DEVICE)
    same = torch.nn.Parameter(torch.randn(2, 3)).to("cpu")
    return (f"moved: type={type(moved).__name__}, is_leaf={moved.is_leaf}; SGD: "
            f"{_outcome(lambda: torch.optim.SGD([moved], lr=0.1) and 'ran')}; "
            f"to('cpu') on CPU: type={type(same).__name__}, is_leaf={same.is_leaf}")


@reduction
def gh2_tl003_move_then_requires_grad_ok() -> str:
    """randomCNN-voice-transfer (fixed): `x = x.cuda(); x.requires_grad = True; Adam([x])`."""
    x = torch.randn(2, 3) * 1e-3
    x = x.to(DEVICE)
    x.requires_grad = True
    return f"moved then flagged: is_leaf={x.is_leaf}, requires_grad={x.requires_grad}; Adam: {_outcome(lambda: torch.optim.Adam([x]) and 'ran')}"


@reduction
def gh2_tl003_module_to_ok() -> str:
    """differentiable-mpc: `self.cell = nn.LSTMCell(n, n).to(self.device)` — Module.to moves parameters in place."""
    cell = nn.LSTMCell(3, 3).to(DEVICE)
    leaves = all(p.is_leaf for p in cell.parameters())
    return f"Module.to: returns the module, parameters still leaves: {leaves}; Adam: {_outcome(lambda: torch.optim.Adam(cell.parameters()) and 'ran')}"


@reduction
def gh2_tl003_moved_input_grad_read() -> str:
    """smoothgrad: `img = Variable(img, requires_grad=True); img = img.cuda()`, then backward and `img.grad.data`.

    A dtype copy stands in for the device copy here (both are ToCopyBackward0), since meta tensors have no backward.
    """
    import warnings
    model = nn.Linear(3, 2).double()
    img = torch.randn(1, 3, requires_grad=True)
    img = img.to(torch.float64)

    def body() -> str:
        model(img).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return str(img.grad.data)
    return (f"copied input: is_leaf={img.is_leaf}, grad_fn={type(img.grad_fn).__name__}; "
            f"reading img.grad.data after backward: {_outcome(body)}")


# TL007 -----------------------------------------------------------------------------------------
def _gen_disc() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    return (nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 3)),
            nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)))


@reduction
def gh2_tl007_g_step_then_d_backward() -> str:
    """CycleGAN shape: G's backward(retain_graph) and G's step, then D's loss on the same fake (not detached)."""
    g, d = _gen_disc()
    opt_g, opt_d = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())

    def body() -> str:
        fake = g(torch.randn(4, 3))
        loss_g = d(fake).mean()
        opt_g.zero_grad()
        loss_g.backward(retain_graph=True)
        opt_g.step()
        opt_d.zero_grad()
        loss_d = d(fake).mean() - d(torch.randn(4, 3)).mean()
        loss_d.backward()
        opt_d.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_vae_step_then_d_backward() -> str:
    """FactorVAE shape: D_z = D(z); VAE backward(retain_graph) and VAE step; D's loss on D_z backward."""
    enc, d = _gen_disc()
    opt_vae, opt_d = torch.optim.Adam(enc.parameters()), torch.optim.Adam(d.parameters())

    def body() -> str:
        z = enc(torch.randn(4, 3))
        d_z = d(z)
        vae_loss = z.pow(2).mean() + d_z.mean()
        opt_vae.zero_grad()
        vae_loss.backward(retain_graph=True)
        opt_vae.step()
        d_loss = d_z.mean() - d(torch.randn(4, 3)).mean()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_d_step_then_g_loss_built_before() -> str:
    """Vid-ODE shape: D's and G's adversarial losses built first; D backward (fake detached) and step; G backward."""
    g, d = _gen_disc()
    opt_g, opt_d = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())

    def body() -> str:
        fake = g(torch.randn(4, 3))
        loss_d = d(fake.detach()).mean() - d(torch.randn(4, 3)).mean()
        loss_g = -d(fake).mean()
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_critic_step_then_actor_backward() -> str:
    """Actor-critic tutorial shape: the critic returns its (not detached) td_error after its own backward and step;
    the actor's loss multiplies by it and backpropagates into the critic's graph."""
    torch.manual_seed(0)
    actor, critic = nn.Sequential(nn.Linear(4, 20), nn.ReLU(), nn.Linear(20, 2)), \
        nn.Sequential(nn.Linear(4, 20), nn.ReLU(), nn.Linear(20, 1))
    opt_a, opt_c = torch.optim.Adam(actor.parameters()), torch.optim.Adam(critic.parameters())

    def body() -> str:
        s, s_ = torch.randn(1, 4), torch.randn(1, 4)
        td_error = 1.0 + 0.9 * critic(s_) - critic(s)
        opt_c.zero_grad()
        (td_error ** 2).backward(retain_graph=True)
        opt_c.step()
        log_prob = torch.log(torch.softmax(actor(s), dim=1)[0, 0])
        loss = -torch.mean(log_prob * td_error)
        opt_a.zero_grad()
        loss.backward(retain_graph=True)
        opt_a.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_sac_q_step_then_policy_backward() -> str:
    """SAC trainer shape: policy_loss built through qf(obs, new_actions) first; Q backward and step; policy backward."""
    torch.manual_seed(0)
    policy, qf = nn.Linear(3, 2), nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_q, opt_pi = torch.optim.Adam(qf.parameters()), torch.optim.Adam(policy.parameters())

    def body() -> str:
        obs, actions = torch.randn(4, 3), torch.randn(4, 2)
        new_actions = torch.tanh(policy(obs))
        policy_loss = -qf(torch.cat([obs, new_actions], 1)).mean()
        qf_loss = (qf(torch.cat([obs, actions], 1)) - 1).pow(2).mean()
        opt_q.zero_grad()
        qf_loss.backward()
        opt_q.step()
        opt_pi.zero_grad()
        policy_loss.backward()
        opt_pi.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_step_of_an_unsaved_leaf_ok() -> str:
    """`alpha_loss.backward(); alpha_optimizer.step(); alpha = log_alpha.exp()`: the value is read after the step."""
    log_alpha = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([log_alpha], lr=0.1)
    log_pi = torch.randn(4, requires_grad=True)
    (-(log_alpha * (log_pi + 1).detach()).mean()).backward()
    opt.step()
    alpha = log_alpha.exp()
    (alpha * log_pi).mean().backward()
    return f"ran, alpha={float(alpha.detach()):.3f}"


@reduction
def gh2_tl007_same_loss_twice_critic_step_between() -> str:
    """PPO tutorial shape: `loss.backward(retain_graph=True); critic_optim.step(); loss.backward()`, one loss
    for actor and critic."""
    torch.manual_seed(0)
    actor, critic = nn.Linear(3, 2), nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    opt_a, opt_c = torch.optim.Adam(actor.parameters()), torch.optim.Adam(critic.parameters())

    def body() -> str:
        inputs = torch.randn(4, 3)
        loss = -actor(inputs).mean() + 0.5 * (critic(inputs) - 1).pow(2).mean()
        opt_c.zero_grad()
        loss.backward(retain_graph=True)
        opt_c.step()
        opt_a.zero_grad()
        loss.backward()
        opt_a.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_recompute_after_step_ok() -> str:
    """SRGAN's fixed shape: D backward(retain_graph), D step, then G's loss from a fresh forward."""
    g, d = _gen_disc()
    opt_g, opt_d = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
    x = torch.randn(4, 3)
    fake = g(x)
    d_loss = 1 - d(torch.randn(4, 3)).mean() + d(fake).mean()
    d.zero_grad()
    d_loss.backward(retain_graph=True)
    opt_d.step()
    g.zero_grad()
    fake = g(x)
    g_loss = -d(fake).mean()
    g_loss.backward()
    opt_g.step()
    return "ran, G's backward goes through a forward made after D's step"


@reduction
def gh2_tl007_g_steps_over_one_fake() -> str:
    """SinGAN shape: `fake` made in the D loop; `for j in range(Gsteps)`: D(fake) backward(retain_graph), G step."""
    g, d = _gen_disc()
    opt_g = torch.optim.Adam(g.parameters())
    fake = g(torch.randn(4, 3))

    def body() -> str:
        for _ in range(3):  # Gsteps = 3 (SinGAN's default)
            g.zero_grad()
            err_g = -d(fake).mean()
            err_g.backward(retain_graph=True)
            opt_g.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_d_steps_fresh_forward_ok() -> str:
    """SinGAN D loop: every Dstep rebuilds D(real) and D(G(noise).detach()) before D's step."""
    g, d = _gen_disc()
    opt_d = torch.optim.Adam(d.parameters())

    def body() -> str:
        for _ in range(3):
            d.zero_grad()
            err_real = -d(torch.randn(4, 3)).mean()
            err_real.backward(retain_graph=True)
            fake = g(torch.randn(4, 3))
            err_fake = d(fake.detach()).mean()
            err_fake.backward(retain_graph=True)
            opt_d.step()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_step_then_unrelated_backward_ok() -> str:
    """D's step, then a backward whose graph does not go through D."""
    g, d = _gen_disc()
    opt_d = torch.optim.Adam(d.parameters())
    x = torch.randn(4, 3)
    pred = g(x)
    d(pred.detach()).mean().backward(retain_graph=True)
    opt_d.step()
    (pred ** 2).mean().backward()
    return "ran: the stepped module's weights are not in the second backward's graph"


@reduction
def gh2_tl007_quadrant_write_into_shared_input() -> str:
    """TSAN CSB: `out = x; out[:, :, :h, :w] = f_all[...]` while another branch's conv saved x (MCAB: drb(x), csb(x))."""
    torch.manual_seed(0)
    conv_a, conv_b = nn.Conv2d(2, 2, 1), nn.Conv2d(8, 8, 1)
    x = nn.Conv2d(2, 2, 1)(torch.randn(1, 2, 4, 4))   # an intermediate, as first_out in TSAN

    def body() -> str:
        down = conv_a(x)                                   # saves x for the weight gradient
        quads = [x[:, :, :2, :2], x[:, :, 2:, :2], x[:, :, :2, 2:], x[:, :, 2:, 2:]]
        f_all = conv_b(torch.cat(quads, 1))
        out = x
        out[:, :, :2, :2] = f_all[:, :2]
        (down * out).sum().backward()
        return "ran"
    return _outcome(body)


@reduction
def gh2_tl007_inplace_relu_after_conv_ok() -> str:
    """`nn.ConvTranspose2d(...), nn.ReLU(inplace=True)` and `Conv2d, BatchNorm2d, LeakyReLU(inplace=True)`."""
    decoder = nn.Sequential(nn.ConvTranspose2d(2, 2, 4, 2, 1), nn.ReLU(inplace=True), nn.ConvTranspose2d(2, 1, 4, 2, 1))
    encoder = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.LeakyReLU(0.2, inplace=True))

    def body() -> str:
        decoder(torch.randn(1, 2, 3, 3)).sum().backward()
        encoder(torch.randn(2, 1, 5, 5)).sum().backward()
        return "ran: the conv / batch-norm output is not needed by their backward"
    return _outcome(body)


# TL005 -----------------------------------------------------------------------------------------
@reduction
def gh2_tl005_moved_data_leaf_ok() -> str:
    """`Variable(v).cuda().requires_grad_()` on loader data: the moved copy of a plain tensor is a leaf."""
    v = torch.randn(2, 3).to(DEVICE).requires_grad_()
    return f"moved plain tensor then requires_grad_(): is_leaf={v.is_leaf}, requires_grad={v.requires_grad}"


# TL016 -----------------------------------------------------------------------------------------
def _leaf(*shape: int) -> torch.Tensor:
    return (torch.randn(*shape) * 0.1).requires_grad_()


@reduction
def gh2_tl016_reset_unfilled_grad() -> str:
    """InfoGAN shape: reset_grad() zeroes p.grad.data of G, D and Q after D's backward, which never reached Q."""
    g, d, q = _leaf(3, 3), _leaf(3, 1), _leaf(3, 2)
    params = [g, d, q]

    def reset_grad() -> str:
        for p in params:
            p.grad.data.zero_()
        return "ran"
    x = torch.randn(4, 3)
    (x @ g @ d).mean().backward()  # D's loss goes through G (fake not detached), not through Q
    return _outcome(reset_grad)


@reduction
def gh2_tl016_guarded_zero_ok() -> str:
    """smoothgrad: `if x.grad is not None: x.grad.data.zero_()` before the first backward of a fresh leaf."""
    x = torch.randn(3, requires_grad=True)
    if x.grad is not None:
        x.grad.data.zero_()
    (x * 2).sum().backward()
    return f"guard skipped the None grad; after backward x.grad={x.grad.tolist()}"


@reduction
def gh2_tl016_reset_filled_grad_ok() -> str:
    """Vanilla GAN shape: every parameter in the reset list is reached by the first backward."""
    g, d = _leaf(3, 3), _leaf(3, 1)
    (torch.randn(4, 3) @ g @ d).mean().backward()
    for p in (g, d):
        p.grad.data.zero_()
    return f"first backward reached every parameter; p.grad.data.zero_() ran, grads sum {float(g.grad.sum() + d.grad.sum())}"


# TL008 / TL002 demos ---------------------------------------------------------------------------
@reduction
def gh2_tl008_backward_without_update_ok() -> str:
    """The course's accumulation demo: backward four times, print w.grad, no update anywhere."""
    w, x = torch.tensor([1.0], requires_grad=True), torch.tensor([2.0], requires_grad=True)
    grads = []
    for _ in range(4):
        (torch.add(w, x) * torch.add(w, 1)).backward()
        grads.append(float(w.grad))
    return f"w.grad after each backward: {grads} (accumulates, but nothing is updated from it)"


@reduction
def gh2_tl002_param_column_edit() -> str:
    """knowledge-neurons: `layer.output.dense.weight[:, pos] -= emb * lam` outside no_grad (model.eval() only)."""
    dense = nn.Linear(4, 3).eval()
    emb = nn.Embedding(5, 3).weight[1]

    def edit() -> str:
        dense.weight[:, 2] -= emb * 0.5
        return "ran"

    def edit_no_grad() -> str:
        with torch.no_grad():
            dense.weight[:, 2] -= emb * 0.5
        return f"ran, is_leaf={dense.weight.is_leaf}"
    return f"in grad mode: {_outcome(edit)} / under no_grad: {_outcome(edit_no_grad)}"


@reduction
def gh2_tl002_detached_alias_fill_ok() -> str:
    """`net.conv1.weight[0].detach().fill_(1)`: in-place through a detached alias of a Parameter."""
    conv = nn.Conv2d(1, 2, 3)
    outcome = _outcome(lambda: (conv.weight[0].detach().fill_(1), conv.bias.data.detach().zero_(), "ran")[2])
    return f"{outcome}; weight[0] all ones: {bool((conv.weight[0] == 1).all())}, still a leaf: {conv.weight.is_leaf}"


@reduction
def gh2_tl010_retained_second_backward_ok() -> str:
    """`y.backward(retain_graph=True); y.backward()` on the course's y = (w + x) * (w + 1)."""
    w, x = torch.tensor([1.0], requires_grad=True), torch.tensor([2.0], requires_grad=True)
    y = torch.mul(torch.add(w, x), torch.add(w, 1))
    y.backward(retain_graph=True)
    first = float(w.grad)
    y.backward()
    return f"second backward runs: w.grad {first} then {float(w.grad)}"


@reduction
def gh2_tl010_generator_output_reused_in_g_loop() -> str:
    """AdvGAN shape: `perturbation = G(x)` made before `for i in range(n_steps_G)`, each step backpropagates through it."""
    g, d = _gen_disc()
    opt_g = torch.optim.Adam(g.parameters())
    x = torch.randn(4, 3)
    adv = torch.clamp(g(x), -0.3, 0.3) + x

    def body() -> str:
        for _ in range(2):  # n_steps_G = 2
            opt_g.zero_grad()
            loss_g = d(adv).pow(2).mean() + adv.norm()
            loss_g.backward()
            opt_g.step()
        return "ran"
    return _outcome(body)


# TL009 -----------------------------------------------------------------------------------------
@reduction
def gh2_tl009_no_grad_sum_ok() -> str:
    """A metric summed from module outputs inside `with torch.no_grad()`."""
    model = nn.Linear(3, 1)
    total = 0
    with torch.no_grad():
        for _ in range(3):
            total += ((model(torch.randn(4, 3)) - 1) ** 2).mean() * 4
    return f"sum under no_grad: requires_grad={total.requires_grad}, grad_fn={total.grad_fn}"


def _reachable_nodes(fn: object, name: str) -> int:
    """How many autograd nodes called ``name`` hang under ``fn`` (each batch adds one)."""
    seen, stack, count = set(), [fn], 0
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        count += type(node).__name__ == name
        stack.extend(child for child, _ in node.next_functions)
    return count


@reduction
def gh2_tl009_epoch_total_returned() -> str:
    """Unlearning shape: `regressor_loss += loss` per batch, `return regressor_loss / batches` from train()."""
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_epoch(batches: int) -> torch.Tensor:
        total = 0
        for _ in range(batches):
            opt.zero_grad()
            loss = model(torch.randn(4, 3)).pow(2).mean()
            loss.backward(retain_graph=True)
            opt.step()
            total += loss
        return total / batches
    av_loss = train_epoch(5)
    return (f"returned average: grad_fn={type(av_loss.grad_fn).__name__}, requires_grad={av_loss.requires_grad}; "
            f"batch graphs still reachable from it: {_reachable_nodes(av_loss.grad_fn, 'MeanBackward0')} of 5")


@reduction
def gh2_tl009_method_history_plotted() -> str:
    """DQN tutorial shape: `learn()` appends the loss to `self.cost_his`; `plot_cost()` plots the list."""
    import numpy as np

    class Agent:
        def __init__(self) -> None:
            self.q_eval = nn.Linear(3, 2)
            self.optimizer = torch.optim.RMSprop(self.q_eval.parameters(), lr=0.01)
            self.cost_his: list = []

        def learn(self) -> None:
            loss = self.q_eval(torch.randn(4, 3)).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.cost_his.append(loss)
    agent = Agent()
    for _ in range(3):
        agent.learn()
    kept = type(agent.cost_his[0].grad_fn).__name__
    return f"cost_his[0].grad_fn={kept} (graph kept); np.asarray(cost_his) as plt.plot does: " + \
        _outcome(lambda: np.asarray(agent.cost_his).shape)


@reduction
def gh2_tl009_helper_grad_disabled_ok() -> str:
    """CRU eval shape: the helper computes the loss under `torch.set_grad_enabled(track_gradient)`, called with False."""
    model = nn.Linear(3, 1)

    def interpolation(x: torch.Tensor, track_gradient: bool = True) -> torch.Tensor:
        with torch.set_grad_enabled(track_gradient):
            return model(x).pow(2).mean()
    epoch_ll = 0
    for _ in range(3):
        epoch_ll += interpolation(torch.randn(4, 3), track_gradient=False)
    train_ll = 0
    train_ll += interpolation(torch.randn(4, 3))
    return f"eval sum: grad_fn={epoch_ll.grad_fn}; the same helper in training: grad_fn={type(train_ll.grad_fn).__name__}"


@reduction
def gh2_tl009_meter_update_keeps_graph() -> str:
    """SpareNet shape: `self.losses.update([loss * 1000])` into an AverageMeter whose update does `_sum += v`."""
    class AverageMeter:
        def __init__(self) -> None:
            self._sum = [0]

        def update(self, values: list) -> None:
            for idx, v in enumerate(values):
                self._sum[idx] += v
    model, meter = nn.Linear(3, 1), AverageMeter()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(4):
        loss = model(torch.randn(4, 3)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        meter.update([loss * 1000])
    kept = _reachable_nodes(meter._sum[0].grad_fn, "MeanBackward0")
    return f"meter sum grad_fn={type(meter._sum[0].grad_fn).__name__}; step graphs reachable: {kept} of 4"


@reduction
def gh2_tl009_detached_append_ok() -> str:
    """SinGAN: `errD2plot.append(errD.detach())` once per epoch."""
    w = torch.ones(3, requires_grad=True)
    history = [((w * torch.randn(3)).sum()).detach() for _ in range(3)]
    return f"appended: grad_fn={history[0].grad_fn}, requires_grad={history[0].requires_grad}"


@reduction
def gh2_tl009_argmax_score_ok() -> str:
    """A score summed from argmax of a graph-carrying output: integer comparisons, no graph."""
    out = nn.Linear(3, 4)(torch.randn(5, 3))
    score = 0
    score += (out.argmax(1) == torch.zeros(5, dtype=torch.long)).float().sum()
    return f"argmax-based score: requires_grad={score.requires_grad}, grad_fn={score.grad_fn}"


# TL015 -----------------------------------------------------------------------------------------
@reduction
def gh2_tl015_np_sum_of_grad_losses() -> str:
    """FedGen: `np.sum([x * y for (x, y) in zip(counts, losses)])`, each loss summed in grad mode."""
    import numpy as np
    w = torch.ones(3, requires_grad=True)
    losses = [(w * torch.randn(3)).sum() for _ in range(2)]
    bare = _outcome(lambda: str(np.sum([n * y for n, y in zip([4, 5], losses)]).item()) and "ran")
    detached = _outcome(lambda: str(np.sum([n * y.detach() for n, y in zip([4, 5], losses)]).item()) and "ran")
    return f"np.sum of the losses: {bare}; with y.detach(): {detached}"


@reduction
def gh2_tl015_epoch_means_plotted() -> str:
    """Lofi: per-batch losses appended, `sum(list) / len(list)` per epoch, the epoch values appended and plotted.

    matplotlib is not installed here; np.asarray is the conversion its plot() applies to y data.
    """
    import numpy as np
    model = nn.Linear(3, 1)
    history = []
    for _ in range(2):  # epochs
        batch_losses = [model(torch.randn(4, 3)).pow(2).mean() for _ in range(3)]
        history.append(sum(batch_losses) / len(batch_losses))
    return (f"epoch mean: grad_fn={type(history[0].grad_fn).__name__}; "
            f"np.asarray(history): {_outcome(lambda: np.asarray(history) is not None and 'ran')}")


@reduction
def gh2_tl015_np_sum_of_layer_outputs() -> str:
    """DHCN HyperConv: `final = [embedding.weight, A @ emb, ...]; np.sum(final, 0)` inside forward."""
    import numpy as np
    emb = nn.Embedding(5, 3)
    adjacency = torch.rand(5, 5)
    final = [emb.weight]
    for _ in range(2):
        final.append(adjacency @ final[-1])
    return f"np.sum(final, 0): {_outcome(lambda: np.sum(final, 0) is not None and 'ran')}"


# TL019 -----------------------------------------------------------------------------------------
@reduction
def gh2_tl019_attention_probabilities_to_ce() -> str:
    """MatchingNetworks: preds = softmax(similarities) @ one-hot support labels, then F.cross_entropy(preds, y)."""
    import torch.nn.functional as F
    similarities = torch.tensor([[50.0, 0.0, 0.0, 0.0, 0.0]])  # all attention on the support image of class 0
    support_y = torch.eye(5).unsqueeze(0)  # 5-way, 1-shot, one-hot
    preds = F.softmax(similarities, 1).unsqueeze(1).bmm(support_y).squeeze(1)
    loss = F.cross_entropy(preds, torch.tensor([0]))
    return (f"rows sum to {preds.sum(1).item():.2f}; cross_entropy of a perfect prediction = {loss.item():.3f} "
            f"(floor -log(e/(e+4)) = {-torch.log(torch.e / (torch.e + torch.tensor(4.0))).item():.3f}), not 0")


def main(names: list[str]) -> int:
    for name in names or list(REDUCTIONS):
        print(f"{name}: {REDUCTIONS[name]()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
