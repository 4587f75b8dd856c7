"""A fix must make the program work: generated broken training loops, fixed by torchlint,
run with real torch.

Each program is a small regression trained by hand, built from orthogonal choices: how the
parameters are made (plain leaves, legacy ``Variable``, a non-leaf initialisation, a module's
parameters), how they are updated (rebinding, augmented, a tuple of rebindings, an in-place
method, a loop over ``model.parameters()``), whether gradients are reset, and what happens to
the loss history.  After the default ``--fix`` a program either trains (its loss falls below
a small fraction of the first step's) or torchlint still reports what it could not fix
safely; after ``--fix --unsafe-fixes`` every program trains.  Never a program that runs,
does not train, and has nothing left reported.
"""

from __future__ import annotations

import itertools
import math
import textwrap
import warnings
from dataclasses import dataclass

import pytest

from torchlint.engine import fix_source, lint_source
from torchlint.rule import FixStyle, RuleOptions
from torchlint.settings import Settings, resolve_rules

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

DEFAULT_RULES = resolve_rules(Settings())
STEPS = 150
TRAINED = 0.05  # the last loss is below this fraction of the first

# --------------------------------------------------------------- the choices
# Tensors: (imports, creation of w and b).  ``w``/``b`` are what the updates name.
TENSOR_PARAMETERS = {
    "leaves": ("", "w = torch.zeros(3, requires_grad=True)\nb = torch.zeros(1, requires_grad=True)"),
    "variable": (
        "from torch.autograd import Variable",
        "w = Variable(torch.zeros(3), requires_grad=True)\nb = Variable(torch.zeros(1), requires_grad=True)",
    ),
    "scaled-init": (
        "",
        "w = torch.randn(3, requires_grad=True) * 0.01\nb = torch.zeros(1, requires_grad=True)",
    ),
    "moved-init": (
        "",
        "w = torch.randn(3, requires_grad=True).view(3)\nb = torch.zeros(1, requires_grad=True)",
    ),
}
TENSOR_UPDATES = {
    "rebind": "w = w - lr * w.grad\nb = b - lr * b.grad",
    "augmented": "w -= lr * w.grad\nb -= lr * b.grad",
    "tuple": "w, b = w - lr * w.grad, b - lr * b.grad",
    "method": "w.sub_(lr * w.grad)\nb.sub_(lr * b.grad)",
}
TENSOR_RESETS = {"none": "", "set-to-none": "w.grad = None\nb.grad = None", "zero": "w.grad.zero_()\nb.grad.zero_()"}
MODULE_UPDATES = {
    "parameters-loop-augmented": "for p in model.parameters():\n    p -= lr * p.grad",
    "parameters-loop-rebind": "for p in model.parameters():\n    p = p - lr * p.grad",
    "attribute-rebind": (
        "model.weight = model.weight - lr * model.weight.grad\nmodel.bias = model.bias - lr * model.bias.grad"
    ),
}
MODULE_RESETS = {"none": "", "zero-grad": "model.zero_grad()"}
# The loss history: (before the loop, in the loop, after the loop).
HISTORIES = {
    "none": ("", "", ""),
    "list-then-item": ("losses = []", "losses.append(loss)", "print(losses[0].item(), losses[-1].item())"),
    "total-then-item": ("total = 0.0", "total += loss", "print((total / STEPS).item())"),
    "list-then-stack": ("losses = []", "losses.append(loss)", "print(torch.stack(losses).mean())"),
    "list-then-print": ("losses = []", "losses.append(loss)", "print(losses[-1])"),
}


def program(imports: str, create: str, loss: str, update: str, reset: str, history: tuple[str, str, str]) -> str:
    before, during, after = history
    body = "\n".join(part for part in (loss, "loss.backward()", "TRACE.append(float(loss))", update, reset, during) if part)
    return "\n".join(
        part
        for part in (
            "import torch",
            imports,
            "torch.manual_seed(0)",
            "X = torch.randn(64, 3)",
            "y = X @ torch.tensor([1.0, -2.0, 0.5]) + 0.3",
            create,
            "lr = 0.1",
            f"STEPS = {STEPS}",
            before,
            "for step in range(STEPS):",
            textwrap.indent(body, "    "),
            after,
        )
        if part
    ) + "\n"


def generated() -> dict[str, str]:
    programs: dict[str, str] = {}
    loss = "loss = ((X @ w + b - y) ** 2).mean()"
    for (p, (imports, create)), (u, update), (r, reset), (h, history) in itertools.product(
        TENSOR_PARAMETERS.items(), TENSOR_UPDATES.items(), TENSOR_RESETS.items(), HISTORIES.items()
    ):
        if h != "none" and (p, r) != ("leaves", "none"):
            continue  # histories are orthogonal to the rest: vary them on one base
        programs[f"{p}/{u}/{r}/{h}"] = program(imports, create, loss, update, reset, history)
    module_loss = "loss = ((model(X).squeeze(1) - y) ** 2).mean()"
    for (u, update), (r, reset) in itertools.product(MODULE_UPDATES.items(), MODULE_RESETS.items()):
        programs[f"module/{u}/{r}/none"] = program(
            "", "torch.manual_seed(1)\nmodel = torch.nn.Linear(3, 1)", module_loss, update, reset, HISTORIES["none"]
        )
    return programs


PROGRAMS = generated()


# --------------------------------------------------------------- running them
@dataclass(frozen=True)
class Run:
    error: str | None
    losses: tuple[float, ...]

    def __repr__(self) -> str:
        ends = f"{self.losses[0]:.4g} -> {self.losses[-1]:.4g}" if self.losses else "no step"
        return f"Run(error={self.error!r}, steps={len(self.losses)}, loss {ends})"

    @property
    def trains(self) -> bool:
        if self.error is not None or len(self.losses) < STEPS:
            return False
        first, last = self.losses[0], self.losses[-1]
        return math.isfinite(last) and last < TRAINED * first


def run(source: str) -> Run:
    trace: list[float] = []
    namespace: dict[str, object] = {"__name__": "__generated__", "TRACE": trace, "print": lambda *a, **k: None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(compile(source, "<generated>", "exec"), namespace)
        except Exception as error:  # noqa: BLE001 - any error is the outcome
            return Run(f"{type(error).__name__}: {error}", tuple(trace))
    return Run(None, tuple(trace))


def outcome_after_fix(source: str, *, unsafe: bool, style: FixStyle | None = None) -> tuple[Run, list[str], str]:
    result = fix_source(source, DEFAULT_RULES, RuleOptions(fix_style=style), unsafe=unsafe)
    remaining = [f.code for f in lint_source(result.source, DEFAULT_RULES).findings]
    return run(result.source), remaining, result.source


# --------------------------------------------------------------- the tests
def test_the_generator_covers_the_shapes_the_issue_names() -> None:
    names = set(PROGRAMS)
    assert len(names) >= 70
    for shape in ("variable/", "/tuple/", "/none/", "module/parameters-loop", "module/attribute", "scaled-init/",
                  "moved-init/", "total-then-item", "list-then-stack"):
        assert any(shape in name for name in names), shape


def test_most_generated_programs_are_broken_before_the_fix() -> None:
    broken = [name for name, source in PROGRAMS.items() if not run(source).trains]
    assert len(broken) >= 0.8 * len(PROGRAMS), sorted(set(PROGRAMS) - set(broken))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_default_fix_trains_or_still_reports(name: str) -> None:
    source = PROGRAMS[name]
    trained, remaining, fixed = outcome_after_fix(source, unsafe=False)
    assert trained.trains or remaining, f"runs, does not train, nothing reported:\n{fixed}\n{trained}"


@pytest.mark.parametrize("style", [FixStyle.DATA, FixStyle.NO_GRAD], ids=lambda s: s.value)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_unsafe_fixes_train(name: str, style: FixStyle) -> None:
    source = PROGRAMS[name]
    trained, remaining, fixed = outcome_after_fix(source, unsafe=True, style=style)
    assert trained.trains, f"does not train after --fix --unsafe-fixes ({remaining=}):\n{fixed}\n{trained}"
