"""Reductions behind the `check` fields of corpus/holdout/round6.toml (our own code, torch 2.13 CPU).

    python corpus/reductions/holdout6.py                     # run every reduction, print what happened
    python corpus/reductions/holdout6.py r6_tl009_avg_cost_epoch_sum
    python corpus/reductions/holdout6.py --json /tmp/r6.json # the same, also as {name: result}

Same style as holdout.py to holdout5.py: each reduction is the smallest program with the shape of a
labelled line and prints the observed outcome; no third-party code is copied. matplotlib is not
installed here: `plt.plot(ys)` turns its data into an array with `np.asarray`, which is what the
reductions call. Shared helpers come from holdout.py (regression, MLP) and holdout3.py (graph size,
a small classifier trained with a chosen head and loss).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from holdout import _mlp, _regression
from holdout3 import _graph_size, _train_classifier
from measure import _outcome
from measure import main as run_reductions
from torch import nn

REDUCTIONS: dict[str, Callable[[], str]] = {}


def reduction(function: Callable[[], str]) -> Callable[[], str]:
    REDUCTIONS[function.__name__] = function
    return function


# TL019: softmax outputs into CrossEntropyLoss / NLLLoss -----------------------------------------
class _SoftmaxAttrHead(nn.Module):
    """A classifier whose forward ends in `self.softmax(logits, 1)` with `self.softmax = F.softmax`."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.classifier = nn.Linear(6, 4)
        self.softmax = nn.functional.softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax(self.classifier(x), 1)


@reduction
def r6_tl019_softmax_function_attribute_into_ce() -> str:
    """`self.softmax = nn.functional.softmax`; forward returns `self.softmax(logits, 1)`; CrossEntropyLoss on it."""
    model = _SoftmaxAttrHead()
    output = model(torch.randn(3, 6))
    row_sums = output.sum(1)
    probs = _train_classifier(lambda s: F.softmax(s, 1), nn.CrossEntropyLoss())
    logits = _train_classifier(lambda s: s, nn.CrossEntropyLoss())
    return (f"forward output rows sum to {[round(v, 3) for v in row_sums.tolist()]} (probabilities); "
            f"300 SGD steps, logit cross-entropy / accuracy: CE(softmax) {probs[0]:.3f}/{probs[1]:.2f} "
            f"against CE(logits) {logits[0]:.3f}/{logits[1]:.2f}")


@reduction
def r6_tl019_softmax_module_into_nll() -> str:
    """A model ending in `self.softmax = nn.Softmax(dim=1)` trained with NLLLoss / F.nll_loss (which expect log-probabilities)."""
    torch.manual_seed(0)
    z = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    value = F.nll_loss(nn.Softmax(dim=1)(z), y).item()
    nll_probs = _train_classifier(nn.Softmax(dim=1), nn.NLLLoss())
    nll_logprobs = _train_classifier(nn.LogSoftmax(dim=1), nn.NLLLoss())
    return (f"NLLLoss(softmax(z)) = {value:.3f} (minus the mean target probability, not a log-likelihood); "
            f"300 SGD steps, logit cross-entropy / accuracy: NLL(softmax) {nll_probs[0]:.3f}/{nll_probs[1]:.2f} "
            f"against NLL(log_softmax) {nll_logprobs[0]:.3f}/{nll_logprobs[1]:.2f}")


@reduction
def r6_tl019_softmax_into_ce_reduction_none() -> str:
    """An inverse model ending in F.softmax(y, dim=1), scored with nn.CrossEntropyLoss(reduction='none')."""
    torch.manual_seed(0)
    z = torch.randn(5, 12) * 10
    y = z.argmax(1)
    per_row = nn.CrossEntropyLoss(reduction="none")(F.softmax(z, dim=1), y)
    floor = -np.log(np.e / (np.e + 11))
    per_sample = nn.CrossEntropyLoss(reduction="none")
    probs = _train_classifier(lambda s: F.softmax(s, dim=1), lambda out, target: per_sample(out, target).mean())
    return (f"per-row loss of a confident, correct prediction over 12 classes: {per_row.min().item():.3f} "
            f"(floor -log(e/(e+11)) = {floor:.3f}, never near 0); "
            f"300 SGD steps, logit cross-entropy / accuracy with CE(softmax, reduction='none').mean(): "
            f"{probs[0]:.3f}/{probs[1]:.2f}")


@reduction
def r6_tl019_log_softmax_into_nll_ok() -> str:
    """A decoder ending in nn.LogSoftmax(dim=1), scored with nn.NLLLoss: the pairing CrossEntropyLoss stands for."""
    torch.manual_seed(0)
    z = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    same = torch.allclose(nn.NLLLoss()(nn.LogSoftmax(dim=1)(z), y), F.cross_entropy(z, y))
    trained = _train_classifier(nn.LogSoftmax(dim=1), nn.NLLLoss())
    return f"NLL(log_softmax(z)) == CE(z): {same}; 300 SGD steps: logit cross-entropy {trained[0]:.3f}, accuracy {trained[1]:.2f}"


# TL002: in-place writes into leaves -------------------------------------------------------------
@reduction
def r6_tl002_index_write_into_zeros_leaf() -> str:
    """`actor_loss = torch.zeros(3, requires_grad=True)`, then `actor_loss[step] = <a loss>` in grad mode."""
    w = torch.randn(4, requires_grad=True)
    actor_loss = torch.zeros(3, requires_grad=True)

    def body() -> str:
        actor_loss[0] = (w * 2).sum()
        return "no error"

    return f"actor_loss[0] = loss: {_outcome(body)}"


@reduction
def r6_tl002_index_write_into_clone_ok() -> str:
    """`target = pred.clone()`, `target[idx] = reward`, loss on `target.detach()`: an indexed write into a non-leaf copy."""
    torch.manual_seed(0)
    w = torch.randn(3, 4, requires_grad=True)
    pred = torch.randn(5, 3) @ w
    target = pred.clone()
    target[[0, 1], [1, 2]] = torch.tensor([1.0, 2.0])
    loss = F.mse_loss(pred, target.detach())
    loss.backward()
    return f"no error; target.is_leaf {target.is_leaf}; w.grad is set: {w.grad is not None}"


@reduction
def r6_tl002_init_normal_on_parameter_ok() -> str:
    """`torch.nn.init.normal_(w1)` on an nn.Parameter (init functions run under no_grad)."""
    w1 = torch.nn.Parameter(torch.empty(4, 3))
    return f"init.normal_: {_outcome(lambda: type(torch.nn.init.normal_(w1)).__name__)}; w1.is_leaf {w1.is_leaf}"


# TL005: requires_grad flags ---------------------------------------------------------------------
@reduction
def r6_tl005_bandaid_on_numpy_built_loss() -> str:
    """Policy loss built from torch.from_numpy(sampled log-probs); `loss.requires_grad = True`; backward; step."""
    torch.manual_seed(0)
    policy = nn.Linear(4, 2)
    opt = torch.optim.Adam(policy.parameters(), lr=0.1)
    with torch.no_grad():
        log_prob = F.log_softmax(policy(torch.randn(8, 4)), 1)[:, 0]
    samples = {"log_prob": log_prob.numpy(), "advantages": np.random.randn(8).astype(np.float32)}
    loss = -(torch.from_numpy(samples["log_prob"]) * torch.from_numpy(samples["advantages"])).mean()
    plain = _outcome(lambda: torch.clone(loss).backward())
    before = policy.weight.detach().clone()
    opt.zero_grad()
    loss.requires_grad = True
    loss.backward()
    opt.step()
    grads = [p.grad for p in policy.parameters()]
    return (f"without the flag backward raises: {plain}; with it: no error, loss.is_leaf {loss.is_leaf}, "
            f"parameter grads {grads}, max weight change after step {float((policy.weight.detach() - before).abs().max()):.1f}")


@reduction
def r6_tl005_requires_grad_on_detached_image_ok() -> str:
    """`adv = (img.clone().detach() + uniform noise).clamp(0, 1)`; `adv.requires_grad_(True)` in a loop, re-detached each step."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    image = torch.rand(2, 4)
    label = torch.tensor([0, 2])
    adv = image.clone().detach()
    adv = torch.clamp(adv + torch.zeros_like(adv).uniform_(-0.1, 0.1), 0, 1)
    leafs = []
    for _ in range(3):
        adv.requires_grad_(True)
        leafs.append(adv.is_leaf)
        loss = F.cross_entropy(model(adv), label)
        model.zero_grad()
        loss.backward()
        grad = adv.grad.data
        adv = adv + 0.01 * grad.sign()
        adv = torch.clamp(image + torch.clamp(adv - image, -0.1, 0.1), 0, 1).detach()
    return f"no error; adv is a leaf at every requires_grad_: {leafs}; adv.grad was set each step"


@reduction
def r6_tl005_clone_of_data_requires_grad_ok() -> str:
    """`generated = img.clone().requires_grad_(True)` of an image without grad; Adam([generated])."""
    img = torch.rand(1, 3, 4, 4)
    generated = img.clone().requires_grad_(True)
    opt = torch.optim.Adam([generated], lr=0.1)
    loss = ((generated - 0.5) ** 2).mean()
    loss.backward()
    opt.step()
    return f"generated.is_leaf {generated.is_leaf}; Adam accepted it; grad set: {generated.grad is not None}"


@reduction
def r6_tl005_arctanh_of_detached_requires_grad_ok() -> str:
    """`w = torch.arctanh(2 * (x.clone().detach() - 0.5).clamp(...))`; `w = w.requires_grad_(True)`; Adam([w])."""
    x = torch.rand(2, 3).clone().detach().clamp(0, 1)
    w = torch.arctanh(2 * (x - 0.5).clamp(min=-0.9999, max=0.9999))
    w = w.requires_grad_(True)
    opt = torch.optim.Adam([w], lr=0.01)
    ((torch.tanh(w) + 1) / 2).sum().backward()
    opt.step()
    return f"w.is_leaf {w.is_leaf} before requires_grad_ (no graph: x was detached); Adam accepted it"


# TL009: loss accumulators -----------------------------------------------------------------------
def _epoch_sum(batches: int, via_method: bool) -> torch.Tensor:
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def train_model(xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        opt.zero_grad()
        cost = F.mse_loss(model(xb), yb)
        cost.backward()
        opt.step()
        return cost

    avg_cost = 0
    for i in range(batches):
        xb, yb = x[i::batches], y[i::batches]
        if via_method:
            cost = train_model(xb, yb)
        else:
            opt.zero_grad()
            cost = F.mse_loss(model(xb), yb)
            cost.backward()
            opt.step()
        avg_cost += cost / batches
    return avg_cost


@reduction
def r6_tl009_avg_cost_epoch_sum() -> str:
    """`avg_cost += cost / total_batch` per batch (cost backpropagated and stepped), printed with '{:.9f}'.format."""
    small, large = _epoch_sum(2, False), _epoch_sum(8, False)
    return (f"avg_cost.requires_grad {large.requires_grad}, grad_fn {type(large.grad_fn).__name__}; "
            f"autograd nodes kept alive: {_graph_size(small)} after 2 batches, {_graph_size(large)} after 8; "
            f"'{{:.9f}}'.format(avg_cost) works: {'{:.9f}'.format(large)}")  # noqa: UP032 - str.format is what the lab calls


@reduction
def r6_tl009_avg_cost_of_method_result() -> str:
    """`cost = model.train_model(X, Y)` (a method that backpropagates, steps and returns self.cost); `avg_cost += cost / total_batch`."""
    small, large = _epoch_sum(2, True), _epoch_sum(8, True)
    return (f"avg_cost.requires_grad {large.requires_grad}; autograd nodes kept alive: {_graph_size(small)} after 2 batches, "
            f"{_graph_size(large)} after 8")


@reduction
def r6_tl009_numpy_element_accumulator_ok() -> str:
    """`avg_cost_list = np.zeros(n)`; `avg_cost_list[m_idx] += cost / total_batch` with a cost that requires grad."""
    x, y = _regression()
    model = _mlp()
    avg = np.zeros(2)
    cost = F.mse_loss(model(x), y)

    def body() -> str:
        avg[0] += cost / 4
        return f"element is a {type(avg[0]).__name__}, the array dtype {avg.dtype}"

    return f"{_outcome(body)} (the value is converted to a float: no graph is kept)"


@reduction
def r6_tl009_tuple_history() -> str:
    """`losses.append((q_loss.mean(), f_err.mean(), i_err.mean()))` every step while `loss` built from them is backpropagated."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        err = (model(x) - y) ** 2
        q_loss = err.mean()
        loss_list = (q_loss.mean(), err.flatten().mean())
        losses.append(loss_list)
        (q_loss + err.sum()).backward()
        opt.step()
    first = losses[0][0]
    return (f"kept elements require grad {first.requires_grad} with grad_fn {type(first.grad_fn).__name__} "
            f"({_graph_size(first)} autograd nodes each); np.array(losses): {_outcome(lambda: np.array(losses).shape)}")


@reduction
def r6_tl009_no_grad_sum_and_plot_ok() -> str:
    """`bn_loss += criterion(pred, Y)` inside `with torch.no_grad():`, appended per epoch, then plotted."""
    x, y = _regression()
    model = _mlp()
    history = []
    with torch.no_grad():
        total = 0
        for i in range(4):
            total += F.mse_loss(model(x[i::4]), y[i::4])
        history.append([total / 4, total / 2])
    column = [row[0] for row in history]
    return f"total.requires_grad {total.requires_grad}; np.asarray(column): {_outcome(lambda: np.asarray(column).shape)}"


@reduction
def r6_tl009_sum_that_is_the_loss_ok() -> str:
    """`loss = 0`; `loss += criterion(out_t, target_t)` over the decoder steps; `loss.backward()` (the sum is the loss)."""
    torch.manual_seed(0)
    cell = nn.Linear(3, 3)
    h = torch.randn(1, 3)
    loss = 0
    for t in range(4):
        h = torch.tanh(cell(h))
        loss += F.nll_loss(F.log_softmax(h, 1), torch.tensor([t % 3]))
    loss.backward()
    return f"no error; the sum is backpropagated once per iteration and then freed; cell.weight.grad set: {cell.weight.grad is not None}"


# TL001: a parameter rebound to manual updates ---------------------------------------------------
@reduction
def r6_tl001_manual_backprop_rebinding() -> str:
    """`w1 = nn.Parameter(torch.Tensor(8, 3)).to('cpu')`, then `w1 = w1 - lr * d_w1` with d_w1 computed by hand from w1 each step."""
    torch.manual_seed(0)
    w1 = torch.nn.Parameter(torch.Tensor(8, 3)).to("cpu")
    torch.nn.init.normal_(w1)
    first_leaf = w1.is_leaf
    sizes = []
    for step in range(1, 51):
        x = torch.randn(4, 8)
        target = torch.zeros(4, 3)
        out = torch.sigmoid(x @ w1)
        d_out = (out - target) * out * (1 - out)
        d_w1 = x.t() @ d_out
        w1 = w1 - 0.5 * d_w1
        if step in (1, 10, 50):
            sizes.append((step, _graph_size(w1)))
    return (f"w1 starts as a leaf ({first_leaf}); after the first update is_leaf {w1.is_leaf}, grad_fn "
            f"{type(w1.grad_fn).__name__}; autograd nodes reachable from w1 (step, nodes): {sizes}: "
            "every step's history (with its saved activations) is kept")


@reduction
def r6_tl001_data_rebind_ok() -> str:
    """`inp.data = inp.data + eps * torch.sign(inp.grad.data)` on a fresh Variable(..., requires_grad=True) each iteration."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    img = torch.rand(1, 4)
    leafs = []
    for _ in range(3):
        inp = torch.autograd.Variable(img.clone(), requires_grad=True)
        F.cross_entropy(model(inp), torch.tensor([1])).backward()
        inp.data = inp.data + 0.1 * torch.sign(inp.grad.data)
        inp.data = inp.data.clamp(min=-1, max=1)
        inp.grad.data.zero_()
        leafs.append(inp.is_leaf and inp.requires_grad)
        model(inp).data.cpu().numpy()
    return f"inp stays a leaf that requires grad: {leafs}; model(inp).data.cpu().numpy() works"


# TL007: optimizer steps between backwards -------------------------------------------------------
def _gan() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    return (nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.01), nn.Linear(8, 6), nn.Tanh()),
            nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.01), nn.Linear(8, 1), nn.Sigmoid()))


@reduction
def r6_tl007_d_step_then_fresh_d_forward_ok() -> str:
    """lossD.backward(retain_graph=True); opt_disc.step(); output = disc(fake); lossG.backward() (fake not detached)."""
    gen, disc = _gan()
    opt_d = torch.optim.Adam(disc.parameters(), lr=3e-4)
    opt_g = torch.optim.Adam(gen.parameters(), lr=3e-4)

    def body() -> str:
        for _ in range(2):
            fake = gen(torch.randn(5, 4))
            d_fake = disc(fake).view(-1)
            loss_d = F.binary_cross_entropy(disc(torch.rand(5, 6)).view(-1), torch.ones(5)) + F.binary_cross_entropy(d_fake, torch.zeros(5))
            disc.zero_grad()
            loss_d.backward(retain_graph=True)
            opt_d.step()
            output = disc(fake).view(-1)
            loss_g = F.binary_cross_entropy(output, torch.ones(5))
            gen.zero_grad()
            loss_g.backward()
            opt_g.step()
        return "no error"

    gen_b, disc_b = _gan()
    opt_db = torch.optim.Adam(disc_b.parameters(), lr=3e-4)

    def reused() -> str:
        fake = gen_b(torch.randn(5, 4))
        d_fake = disc_b(fake).view(-1)
        F.binary_cross_entropy(d_fake, torch.zeros(5)).backward(retain_graph=True)
        opt_db.step()
        F.binary_cross_entropy(d_fake, torch.ones(5)).backward()
        return "no error"

    return f"fresh D forward after the step: {_outcome(body)}; reusing d_fake instead: {_outcome(reused)}"


@reduction
def r6_tl007_critic_steps_and_clamp_then_fresh_forward_ok() -> str:
    """WGAN: 3 critic iterations (backward(retain_graph=True), step, p.data.clamp_), then gen_fake = critic(fake) and its backward."""
    gen, critic = _gan()
    critic = critic[:3]
    opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-5)
    opt_g = torch.optim.RMSprop(gen.parameters(), lr=5e-5)

    def body() -> str:
        for _ in range(3):
            fake = gen(torch.randn(5, 4))
            loss_c = -(critic(torch.rand(5, 6)).mean() - critic(fake).mean())
            critic.zero_grad()
            loss_c.backward(retain_graph=True)
            opt_c.step()
            for p in critic.parameters():
                p.data.clamp_(-0.01, 0.01)
        loss_g = -critic(fake).mean()
        gen.zero_grad()
        loss_g.backward()
        opt_g.step()
        return "no error"

    return f"{_outcome(body)}; the generator backward goes through a critic forward made after the last step"


@reduction
def r6_tl007_inplace_relu_after_linear_ok() -> str:
    """A generator `Sequential(Linear, ReLU(True), Linear, ReLU(True), Linear, Tanh)`: in-place ReLU right after Linear."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 8), nn.ReLU(True), nn.Linear(8, 8), nn.ReLU(True), nn.Linear(8, 6), nn.Tanh())
    return f"backward: {_outcome(lambda: gen(torch.randn(3, 4)).sum().backward() or 'no error')}"


# TL008: zeroing ---------------------------------------------------------------------------------
@reduction
def r6_tl008_optimizer_step_without_zero_grad() -> str:
    """`loss.backward(); optim.step()` per batch with no zero_grad anywhere in the loop."""
    x, y = _regression()
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    grads = []
    for i in range(3):
        loss = F.mse_loss(model(x[i::3]), y[i::3])
        own = torch.autograd.grad(loss, model[0].weight, retain_graph=True)[0]
        loss.backward()
        opt.step()
        grads.append(bool(torch.allclose(model[0].weight.grad, own)))
    return f".grad equals the batch's own gradient: {grads} (after the first step it is the running sum of all batches)"


@reduction
def r6_tl008_fresh_leaf_each_iteration_ok() -> str:
    """A loop that builds a new input leaf every iteration and updates it from its .grad (adversarial step)."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    img = torch.rand(1, 4)
    own = []
    for _ in range(3):
        adv = img.clone().detach().requires_grad_(True)
        loss = F.cross_entropy(model(adv), torch.tensor([0]))
        expected = torch.autograd.grad(loss, adv, retain_graph=True)[0]
        model.zero_grad()
        loss.backward()
        own.append(bool(torch.allclose(adv.grad, expected)))
        img = (adv + 0.01 * adv.grad.sign()).detach()
    return f"each iteration's adv.grad is that iteration's gradient: {own}"


def main(argv: list[str]) -> int:
    return run_reductions(argv, REDUCTIONS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
