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
    """Torch agrees with the label, and TL007 reports the ``# M4`` lines; a ``# run: `` line is
    code that only the run executes (a caller outside the linted file)."""
    run = "\n".join(line.removeprefix("# run: ") for line in source.splitlines())
    assert _run(run) is raises, "the program's label disagrees with torch"
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
# look-alikes: each `case_<name>` function of the fixture tests/fixtures/TL007/real_steps.py is run
# as a whole program (the fixture's set-up, then the function's body) with torch.
_REAL_STEPS = (Path(__file__).parent / "fixtures" / "TL007" / "real_steps.py").read_text()
STEP_PRELUDE, *_CASES = _REAL_STEPS.split("\n\ndef case_")


def _step_program(case: str) -> tuple[str, bool]:
    """(the case's body as a program after the set-up, whether it is marked to raise M4)."""
    body = textwrap.dedent(case.split("\n", 1)[1])
    lines = [line.split("  # expect: TL007:")[0] + "  # M4" if "# expect: TL007:" in line else line
             for line in body.splitlines()]
    return STEP_PRELUDE + "\n" + "\n".join(lines) + "\n", "# case: positive" in body


STEPS = {case.split("(", 1)[0]: _step_program(case) for case in _CASES}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_real_optimizer_step_shapes_agree_with_torch(name: str) -> None:
    _check(*STEPS[name])
