"""Which modules a value's graph went through and which modules an optimizer updates
(torchlint.analysis.module_graph), asked at ``forwards(expr)`` / ``updates(opt)`` probes."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import Analyzer
from torchlint.rule import Rule, RuleOptions

PRELUDE = """\
import itertools
import torch
from torch import nn
from models import Encoder, make_model
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = make_model()
lin = nn.Linear(2, 2)
"""


def probe(source: str) -> list[object]:
    """What each probe call answers, in order: sorted module keys, or None (not known)."""
    module = cst.parse_module(PRELUDE + textwrap.dedent(source))
    analyzer = Analyzer(module, module.code)
    answers: list[object] = []

    class Probe(Rule):
        code, name, summary = "TL999", "probe", "probe"

        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            self.graph = self.ctx.track_module_graph()

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "forwards":
                answers.append(sorted(f.module for f in self.graph.forwards_of(node.args[0].value)))
            elif isinstance(node.func, cst.Name) and node.func.value == "updates":
                modules = self.graph.optimized_modules(node.args[0].value)
                answers.append(sorted(modules) if modules is not None else None)

    analyzer.attach([Probe(analyzer, [], RuleOptions())])
    analyzer.run()
    return answers


@pytest.mark.parametrize(
    "source, expected",
    [
        # D comes from an unknown factory and nothing in the file treats it as a module
        ("out = D(G(x))\nforwards(out)", [["G"]]),
        ("D.train()\nloss = crit(D(G(x)), y)\nforwards(loss)", [["D", "G"]]),
        ("fake = G(x)\nforwards(fake.detach())\nforwards(fake.item())", [[], []]),
        ("with torch.no_grad():\n    fake = G(x)\nforwards(fake)", [[]]),
        ("out, z = G(x)\nforwards(z)", [["G"]]),  # a model's tuple outputs
        ("D.eval()\nloss = D.adv_loss(fake_of(G(x)))\nforwards(loss)", [["D", "G"]]),  # a method of the module
        ("outs = []\nouts.append(G(x))\ntotal = 0\ntotal += outs[0].sum()\nforwards(total)", [["G"]]),
        ("h = lin(x)\nforwards(h)", [["lin"]]),
        ("fake = G(x)\nfake = x\nforwards(fake)", [[]]),  # rebound
    ],
)
def test_forwards(source: str, expected: list[object]) -> None:
    assert probe(source) == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        ("opt = torch.optim.Adam(G.parameters(), lr=1e-3)\nupdates(opt)", [["G"]]),
        ("opt = torch.optim.RMSprop(params=net.encoder.parameters())\nupdates(opt)", [["net.encoder"]]),
        ("opt = torch.optim.Adam(list(G.parameters()) + list(D.parameters()))\nupdates(opt)", [["D", "G"]]),
        ("opt = torch.optim.Adam(itertools.chain(G.parameters(), D.parameters()))\nupdates(opt)", [["D", "G"]]),
        ("opt = torch.optim.Adam([{'params': G.parameters()}, {'params': D.parameters(), 'lr': 1}])\nupdates(opt)",
         [["D", "G"]]),
        ("params = list(G.parameters())\nopt = torch.optim.Adam(params)\nupdates(opt)", [["G"]]),
        ("w = torch.zeros(3, requires_grad=True)\nopt = torch.optim.SGD([w], lr=0.1)\nupdates(opt)", [[]]),
        ("def train(opt):\n    updates(opt)\ntrain(None)", [None]),  # handed in: not known
        # every call hands it an optimizer of a model passed beside it: that model, in the callee's terms
        # (asked only of a function whose text steps)
        ("def fit(model, opt):\n    opt.step()\n    updates(opt)\nfit(G, torch.optim.SGD(G.parameters(), lr=1))\n"
         "o = torch.optim.SGD(net.enc.parameters(), lr=1)\nfit(net, o)", [["model", "model.enc"]]),
        ("def fit(model, opt):\n    opt.step()\n    updates(opt)\nfit(G, torch.optim.SGD(D.parameters(), lr=1))", [[]]),
        ("def fit(model, opt):\n    opt.step()\n    updates(opt)\nfit(G, torch.optim.SGD(G.parameters(), lr=1))\n"
         "fit(G, o)", [None]),  # one call hands something not known
        # a factory's optimizer: the other names it returns, but not one with an optimizer of its own
        ("enc, dec, opt = make_model()\nopt.zero_grad()\nupdates(opt)", [["dec", "enc"]]),
        ("enc, dec, opt = make_model()\nopt.step()\nopt_d = torch.optim.SGD(dec.parameters())\nupdates(opt)",
         [["enc"]]),
        ("model, opt, sched = make_model()\nopt.step()\nsched.step()\nupdates(opt)", [None]),  # two stepped
        ("enc, opt = make_model()\nopt.step()\nopt = make_opt()\nupdates(opt)", [[]]),  # rebound (as `make_opt()`)
        ("""\
class Trainer:
    def __init__(self, optimizer_class=torch.optim.Adam):
        self.qf = make_model()
        self.qf_optimizer = optimizer_class(self.qf.parameters(), lr=1e-3)

    def train(self):
        updates(self.qf_optimizer)
""", [["self.qf"]]),
        # built from a local the method stored on self: the attribute (not when stored twice)
        ("""\
class GAN(nn.Module):
    def __init__(self):
        gen, dis = make_model(), make_model()
        self.add_module("gen", gen)
        self.dis = dis
        net = make_model()
        self.a = net
        self.b = net
        self.opt = torch.optim.Adam(list(gen.parameters()) + list(dis.parameters()))
        self.opt_net = torch.optim.Adam(net.parameters())

    def train(self):
        updates(self.opt)
        updates(self.opt_net)
""", [["self.dis", "self.gen"], ["net"]]),
    ],
)
def test_optimized_modules(source: str, expected: list[object]) -> None:
    assert probe(source) == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        # what a helper of the file that backpropagates or steps returns goes through the modules
        # its body ran
        ("def make(z, opt):\n    out = G(z)\n    opt.step()\n    return out\nout = make(x, o)\nforwards(out)\nout.sum().backward()",
         [["G"]]),
        ("def make(z, opt):\n    opt.step()\n    return G(z).detach()\nout = make(x, o)\nforwards(out)\nout.sum().backward()", [[]]),
        # a method run on an instance: its `self.net` is the instance's
        ("""\
class Critic:
    def __init__(self):
        self.net = make_model()
        self.net.train()

    def learn(self, s):
        v = self.net(s)
        v.sum().backward(retain_graph=True)
        return v

critic = Critic()
v = critic.learn(x)
forwards(v)
v.sum().backward()
""", [["critic.net"]]),
        # what one method leaves on `self` is what the others read; calling it binds it again
        ("""\
class Pair(nn.Module):
    def run(self, z):
        self.fake = G(z)

    def again(self, z):
        self.fake = z
        self.run(z)
        forwards(self.fake)

    def later(self):
        forwards(self.fake)
""", [["G"], ["G"]]),
        # a method without backward or step: what it returns is made again at each call
        ("""\
class Agent:
    def __init__(self):
        self.q = make_model()
        self.q.train()

    def loss(self, s):
        return self.q(s).mean()

    def update(self, s):
        first = self.loss(s)
        second = self.loss(s)
        forwards(first)
        forwards(second)
""", [["self.q"], ["self.q"]]),
        # a parameter of a method the file never calls: what one other method returns by that name
        ("""\
D.train()

class Model(nn.Module):
    def process(self, z):
        fake = G(z)
        gen_loss = D.adv(fake)
        dis_loss = D.adv(fake.detach())
        return fake, gen_loss, dis_loss

    def other(self):
        dis_loss = lin(x)
        return dis_loss

    def backward(self, gen_loss, dis_loss, fake):
        forwards(gen_loss)
        forwards(dis_loss)
""", [["D", "G"], []]),
    ],
)
def test_forwards_across_calls(source: str, expected: list[object]) -> None:
    assert probe(source) == expected
