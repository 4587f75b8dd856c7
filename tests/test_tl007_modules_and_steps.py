"""TL007 on in-place modules/functionals and optimizer steps, checked against torch 2.13.

Every program is linted and run: TL007 reports it exactly when running it raises M4
(the shapes of issue 11 class 8 and their look-alikes that are fine)."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

M4 = "one of the variables needed for gradient computation has been modified by an inplace operation"

PRELUDE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
lin = nn.Linear(3, 3)
x = torch.randn(4, 3)
"""

# (program, raises M4) -- the line TL007 must report carries `# M4`.
PROGRAMS = {
    "relu_module_then_augassign": ("out = nn.ReLU(inplace=True)(lin(x))\nout += x  # M4\nout.sum().backward()", True),
    "relu_module_then_add": ("out = nn.ReLU(inplace=True)(lin(x))\nout = out + x\nout.sum().backward()", False),
    "functional_relu_then_mul_": ("out = F.relu(lin(x), inplace=True)\nout.mul_(2)  # M4\nout.sum().backward()", True),
    "functional_relu_alone": ("out = F.relu(lin(x), inplace=True)\nout.sum().backward()", False),
    "elu_module_then_augassign": ("out = nn.ELU(inplace=True)(lin(x))\nout += 1  # M4\nout.sum().backward()", True),
    "elu_not_inplace_then_augassign": ("out = nn.ELU()(lin(x))\nout += 1\nout.sum().backward()", False),
    "hardtanh_module_then_augassign": ("out = nn.Hardtanh(inplace=True)(lin(x))\nout += 1\nout.sum().backward()", False),
    "dropout_module_then_augassign": ("out = nn.Dropout(inplace=True)(lin(x))\nout += 1\nout.sum().backward()", False),
    "relu_module_on_sigmoid": (
        "act = nn.ReLU(inplace=True)\nh = act(torch.sigmoid(lin(x)))  # M4\nh.sum().backward()", True),
    "relu_module_on_linear": ("act = nn.ReLU(inplace=True)\nh = act(lin(x))\nh.sum().backward()", False),
    "relu_module_on_batchnorm": (
        "bn = nn.BatchNorm1d(3)\nh = nn.ReLU(inplace=True)(bn(lin(x)))\nh.sum().backward()", False),
    "relu__on_exp": ("h = F.relu_(torch.exp(lin(x)))  # M4\nh.sum().backward()", True),
    "dropout_functional_on_softmax": (
        "s = torch.softmax(lin(x), 1)\nd = F.dropout(s, 0.5, inplace=True)  # M4\nd.sum().backward()", True),
    "leaky_relu_twice": ("a = nn.LeakyReLU(0.2, inplace=True)\nh = a(lin(x))\nh = a(h)  # M4\nh.sum().backward()", True),
    "alpha_dropout_module_on_sigmoid": (  # nn.AlphaDropout ignores inplace=True
        "d = nn.AlphaDropout(0.5, inplace=True)\nh = d(torch.sigmoid(lin(x)))\nh.sum().backward()", False),
    "sequential_elu_then_dropout": (
        "net = nn.Sequential(nn.Linear(3, 4), nn.ELU(inplace=True), nn.Dropout(inplace=True))  # M4\n"
        "net(x).sum().backward()", True),
    "sequential_named_layers": (
        "act = nn.ReLU(inplace=True)\nnet = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), act)  # M4\n"
        "net(x).sum().backward()", True),
    "sequential_alpha_dropout_after_sigmoid": (
        "net = nn.Sequential(nn.Linear(3, 4), nn.Sigmoid(), nn.AlphaDropout(0.5, inplace=True))\n"
        "net(x).sum().backward()", False),
    "sequential_relu_after_batchnorm": (
        "net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(inplace=True))\nnet(x).sum().backward()",
        False),
}

# G, D, their optimizers and data: the set-up of the fixture tests/fixtures/TL007/optimizer_step.py.
_FIXTURE = Path(__file__).parent / "fixtures" / "TL007" / "optimizer_step.py"
GAN_PRELUDE = _FIXTURE.read_text().split("for step in range(100):")[0] + (
    "for step in range(2):\n    fake = G(torch.randn(16, 2))\n"
)

GANS = {
    "retain_graph_then_step": ("""\
d_fake = D(fake)
loss_D = bce(D(real), ones) + bce(d_fake, zeros)
loss_G = bce(d_fake, ones)
opt_D.zero_grad()
loss_D.backward(retain_graph=True)
opt_D.step()  # M4
opt_G.zero_grad()
loss_G.backward()
opt_G.step()""", True),
    "g_loss_built_before_d_step": ("""\
loss_G = bce(D(fake), ones)
loss_D = bce(D(real), ones) + bce(D(fake.detach()), zeros)
opt_D.zero_grad()
loss_D.backward()
opt_D.step()  # M4
opt_G.zero_grad()
loss_G.backward()
opt_G.step()""", True),
    "g_loss_recomputed_after_d_step": ("""\
loss_D = bce(D(real), ones) + bce(D(fake), zeros)
opt_D.zero_grad()
loss_D.backward(retain_graph=True)
opt_D.step()
loss_G = bce(D(fake), ones)
opt_G.zero_grad()
loss_G.backward()
opt_G.step()""", False),
    "detached_fake_for_d": ("""\
loss_D = bce(D(real), ones) + bce(D(fake.detach()), zeros)
opt_D.zero_grad()
loss_D.backward()
opt_D.step()
loss_G = bce(D(fake), ones)
opt_G.zero_grad()
loss_G.backward()
opt_G.step()""", False),
    "both_backwards_before_any_step": ("""\
d_fake = D(fake)
loss_D = bce(D(real), ones) + bce(d_fake, zeros)
loss_G = bce(d_fake, ones)
opt_D.zero_grad()
opt_G.zero_grad()
loss_G.backward(retain_graph=True)
opt_D.zero_grad()
loss_D.backward()
opt_D.step()
opt_G.step()""", False),
    "scaler_step_between": ("""\
scaler = torch.amp.GradScaler("cpu")
loss_G = bce(D(fake), ones)
loss_D = bce(D(real), ones) + bce(D(fake.detach()), zeros)
opt_D.zero_grad()
scaler.scale(loss_D).backward()
scaler.step(opt_D)  # M4
scaler.update()
opt_G.zero_grad()
loss_G.backward()""", True),
}


def _run(source: str) -> bool:
    """Whether running ``source`` raises M4 (any other error fails the test)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(source, "<program>", "exec"), {})
    except RuntimeError as error:
        if M4 in str(error):
            return True
        raise
    return False


def _reported_lines(source: str) -> set[int]:
    return {finding.line for finding in lint_source(source, [rule_by_code("TL007")]).findings}


def _marked_lines(source: str) -> set[int]:
    return {number for number, line in enumerate(source.splitlines(), 1) if line.endswith("# M4")}


def _check(source: str, raises: bool) -> None:
    assert _run(source) is raises, "the program's label disagrees with torch"
    assert bool(_marked_lines(source)) is raises
    assert _reported_lines(source) == _marked_lines(source)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_inplace_modules_and_functionals_agree_with_torch(name: str) -> None:
    body, raises = PROGRAMS[name]
    _check(PRELUDE + body + "\n", raises)


@pytest.mark.parametrize("name", sorted(GANS))
def test_optimizer_step_between_backwards_agrees_with_torch(name: str) -> None:
    body, raises = GANS[name]
    _check(GAN_PRELUDE + textwrap.indent(body, "    ") + "\n", raises)


def test_in_a_module_attribute_and_forward() -> None:
    source = PRELUDE + textwrap.dedent("""\
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.act = nn.ReLU(inplace=True)

            def forward(self, x):
                h = self.act(torch.sigmoid(self.lin(x)))  # M4
                return h

        Net()(x).sum().backward()
        """)
    _check(source, True)


# The real shapes of the optimizer-step mistake (corpus/dev/github2.toml) and their correct
# look-alikes, each a whole program run with torch: which modules a loss's graph went through
# (unknown calls, methods of a module, tuple outputs, submodules) and which an optimizer updates.
STEP_PRELUDE = _FIXTURE.read_text().split("for step in range(100):")[0] + """\


class VaeGan(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
        self.decoder = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x):
        z = self.encoder(x)
        return self.decoder(z), z

    def score(self, x):
        return self.decoder(x).sum(1, keepdim=True)


def loss_module(scores, target):
    return bce(scores, target)


net = VaeGan()
"""

STEPS = {
    # DSGAN: the steps in two `if` statements one after the other, G's loss via an unknown call
    "sibling_ifs_unknown_loss_call": ("""\
for it in range(2):
    fake = G(torch.randn(16, 2))
    fake_out = D(fake)
    if it % 1 == 0:
        loss_D = bce(D(real), ones) + bce(fake_out, zeros)
        opt_D.zero_grad()
        loss_D.backward(retain_graph=True)
        opt_D.step()  # M4
    if it % 1 == 0:
        loss_G = loss_module(fake_out, ones)
        opt_G.zero_grad()
        loss_G.backward()
        opt_G.step()
""", True),
    "if_else_branches": ("""\
for it in range(2):
    fake = G(torch.randn(16, 2))
    fake_out = D(fake)
    loss_G = bce(fake_out, ones)
    if it % 2 == 0:
        loss_D = bce(D(real), ones) + bce(fake_out, zeros)
        opt_D.zero_grad()
        loss_D.backward(retain_graph=True)
        opt_D.step()
    else:
        opt_G.zero_grad()
        loss_G.backward()
        opt_G.step()
""", False),
    # VAE-GAN: one forward returning a tuple, an optimizer over a submodule's parameters
    "submodule_optimizer_tuple_outputs": ("""\
opt_enc = torch.optim.RMSprop(params=net.encoder.parameters())
opt_dec = torch.optim.RMSprop(params=net.decoder.parameters())
x = torch.randn(16, 2)
out, z = net(x)
loss_enc = (out - x).pow(2).mean() + z.pow(2).mean()
loss_dec = (out - x).abs().mean()
net.zero_grad()
loss_enc.backward(retain_graph=True)
opt_enc.step()  # M4
net.zero_grad()
loss_dec.backward()
opt_dec.step()
""", True),
    "submodule_optimizer_forward_again": ("""\
opt_enc = torch.optim.RMSprop(params=net.encoder.parameters())
x = torch.randn(16, 2)
out, z = net(x)
loss_enc = (out - x).pow(2).mean() + z.pow(2).mean()
loss_enc.backward()
opt_enc.step()
out, z = net(x)
(out - x).abs().mean().backward()
""", False),
    # Vid-ODE: G's adversarial loss through a method of D, built before D's step
    "method_of_the_stepped_module": ("""\
opt_net = torch.optim.Adam(net.parameters())
x = torch.randn(16, 2)
fake = G(x)
loss_G = bce(net.score(fake), ones)
loss_D = bce(net.score(fake.detach()), zeros)
loss_D.backward()
opt_net.step()  # M4
loss_G.backward()
""", True),
    # PPO: one loss for actor and critic backpropagated twice, the optimizers handed in
    "same_loss_twice_optimizer_a_parameter": ("""\
def train_model(actor, critic, actor_optim, critic_optim):
    inputs = torch.randn(16, 2)
    loss = -actor(inputs).mean() + 0.5 * (critic(inputs) - 1).pow(2).mean()
    critic_optim.zero_grad()
    loss.backward(retain_graph=True)
    critic_optim.step()  # M4
    actor_optim.zero_grad()
    loss.backward()
    actor_optim.step()


train_model(G, D, opt_G, opt_D)
""", True),
    "same_loss_twice_steps_after_both": ("""\
def train_model(actor, critic, actor_optim, critic_optim):
    inputs = torch.randn(16, 2)
    loss = -actor(inputs).mean() + 0.5 * (critic(inputs) - 1).pow(2).mean()
    critic_optim.zero_grad()
    loss.backward(retain_graph=True)
    actor_optim.zero_grad()
    loss.backward()
    critic_optim.step()
    actor_optim.step()


train_model(G, D, opt_G, opt_D)
""", False),
    # MRI unlearning: models and optimizers handed in, a second loss on the same features
    "unknown_optimizer_second_loss_on_old_features": ("""\
def train(models, optimizers):
    [encoder, head, critic] = models
    [optimizer, optimizer_critic] = optimizers
    encoder.train()
    optimizer.zero_grad()
    features = encoder(torch.randn(16, 2))
    loss = bce(head(features), ones)
    loss.backward(retain_graph=True)
    optimizer.step()  # M4
    optimizer_critic.zero_grad()
    loss_conf = bce(critic(features), zeros)
    loss_conf.backward()
    optimizer_critic.step()


train([G, nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1)), D],
      [torch.optim.Adam(G.parameters()), opt_D])
""", True),
    # A GAN whose optimizers are handed in: D recomputed after its step, G's graph shared
    "unknown_optimizer_stepped_module_run_again": ("""\
def train(gen, disc, opt_disc, opt_gen):
    disc.train()
    fake = gen(torch.randn(16, 2))
    loss_D = bce(disc(real), ones) + bce(disc(fake), zeros)
    opt_disc.zero_grad()
    loss_D.backward(retain_graph=True)
    opt_disc.step()
    loss_G = bce(disc(fake), ones)
    opt_gen.zero_grad()
    loss_G.backward()
    opt_gen.step()


train(G, D, opt_D, opt_G)
""", False),
    # FactorVAE loss: the VAE's optimizer handed in, D has its own; D run again after the step
    "unknown_optimizer_other_module_has_its_own": ("""\
class FactorLoss:
    def __init__(self):
        self.discriminator = D
        self.optimizer_d = torch.optim.Adam(self.discriminator.parameters())

    def __call__(self, data, model, optimizer):
        latent = model(data)
        d_z = self.discriminator(latent)
        vae_loss = (latent - data).pow(2).mean() + d_z.mean()
        optimizer.zero_grad()
        vae_loss.backward(retain_graph=True)
        optimizer.step()  # M4
        d_z_perm = self.discriminator(model(data).detach())
        d_tc_loss = -(d_z.mean() + d_z_perm.mean())
        self.optimizer_d.zero_grad()
        d_tc_loss.backward()
        self.optimizer_d.step()


FactorLoss()(torch.randn(16, 2), G, opt_G)
""", True),
    # SinGAN: G's steps in a loop over one `fake` made before it; from the second iteration on
    # the retained backward goes through G's forward again
    "steps_in_a_loop_over_one_forward": ("""\
fake = G(torch.randn(16, 2))
for j in range(3):
    opt_G.zero_grad()
    err_G = -D(fake).mean()
    err_G.backward(retain_graph=True)
    opt_G.step()  # M4
""", True),
    "steps_in_a_loop_forward_again_each_iteration": ("""\
fake = G(torch.randn(16, 2))
for j in range(3):
    opt_G.zero_grad()
    err_G = -D(fake).mean()
    err_G.backward(retain_graph=True)
    opt_G.step()
    fake = G(torch.randn(16, 2))
""", False),
    "d_steps_in_a_loop_over_one_fake": ("""\
fake = G(torch.randn(16, 2)).detach()
for j in range(3):
    opt_D.zero_grad()
    err_D = bce(D(fake), zeros) + bce(D(real), ones)
    err_D.backward(retain_graph=True)
    opt_D.step()
""", False),
    # SAC: optimizers built in __init__ by a class handed in, the policy loss through Q first
    "optimizer_attribute_from_init": ("""\
class Trainer:
    def __init__(self, optimizer_class=torch.optim.Adam):
        self.policy, self.qf = G, D
        self.qf_optimizer = optimizer_class(self.qf.parameters(), lr=1e-3)
        self.policy_optimizer = optimizer_class(self.policy.parameters(), lr=1e-3)

    def train(self, obs):
        new_actions = self.policy(obs)
        policy_loss = -self.qf(new_actions).mean()
        qf_loss = (self.qf(obs) - 1).pow(2).mean()
        self.qf_optimizer.zero_grad()
        qf_loss.backward()
        self.qf_optimizer.step()  # M4
        self.policy_optimizer.zero_grad()
        policy_loss.backward()
        self.policy_optimizer.step()


Trainer().train(torch.randn(16, 2))
""", True),
    # Dreamer: the value model's output through an unknown helper, the step between
    "output_through_a_helper_of_another_file": ("""\
from torch.nn.functional import mse_loss as lambda_return
values = D(G(torch.randn(16, 2)))
target = values * 0.9 + lambda_return(values, ones)
value_loss = mse_loss = (values - target.detach()).pow(2).mean()
opt_D.zero_grad()
value_loss.backward(retain_graph=True)
opt_D.step()  # M4
action_loss = -target.mean()
opt_G.zero_grad()
action_loss.backward()
""", True),
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_real_optimizer_step_shapes_agree_with_torch(name: str) -> None:
    body, raises = STEPS[name]
    _check(STEP_PRELUDE + body, raises)
