"""The saved-tensor table (rules/_saved_tensors.toml) is re-derived from the installed torch.

Method: build a tiny graph, modify one tensor IN PLACE after the op ran, call backward().
Autograd raises M4 ("... modified by an inplace operation") exactly when the modified tensor
was saved for backward.  The op's input is a non-leaf that requires grad (``leaf.clone()``),
or, for binary ops, a plain tensor when only the other operand requires grad; binary ops are
probed in every requires-grad combination.  Modules: the output side by putting
``nn.ReLU(inplace=True)`` after the module in an ``nn.Sequential`` (what TL007 flags).

Every entry of the table must have a probe here and measure the same; the facts TL007 relies
on beyond the table (in-place spellings, views, ``.detach()`` vs ``.data``) are measured too.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable

import pytest

from torchlint.analysis.torch_api import OUT_OF_PLACE_TWINS, TORCH_INPLACE_FUNCTIONS
from torchlint.saved_tensors import (
    BOTH,
    DIVISOR,
    INPUT,
    NOTHING,
    OPERANDS,
    OTHER_OPERAND,
    OUT_OF_PLACE,
    OUTPUT,
    SAVES,
    saved_tensor_table,
)

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
pytestmark = pytest.mark.torch

M4 = "one of the variables needed for gradient computation has been modified by an inplace operation"


# ---------------------------------------------------------------- probing
def _data(shape=(4, 3)):
    # values in (0.25, 0.75): inside the domain of log, sqrt, acos, atanh, ...
    return torch.rand(*shape) * 0.5 + 0.25


def _first(out):
    """max(dim) and friends return (values, indices): keep the differentiable one."""
    return out[0] if isinstance(out, (tuple, list)) else out


def raises_m4(program: Callable[[], None]) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program()
    except RuntimeError as error:
        if M4 in str(error):
            return True
        if "refers to a single memory location" in str(error):
            return False  # an expanded tensor cannot be changed in place at all
        raise
    return False


def probe(op: Callable, make_args: Callable[[], tuple], nargs: int) -> dict:
    """{(requires_grad_mask, modified): raised M4}; modified is an argument index or "out"."""
    results = {}
    for mask in itertools.product([False, True], repeat=nargs):
        if not any(mask):
            continue
        for modified in [*range(nargs), "out"]:

            def program(mask=mask, modified=modified) -> None:
                torch.manual_seed(0)
                args = list(make_args())
                for i, needs_grad in enumerate(mask):
                    if needs_grad:
                        args[i] = args[i].requires_grad_().clone()  # a non-leaf that requires grad
                y = _first(op(*args))
                (y if modified == "out" else args[modified]).mul_(2)
                y.sum().backward()

            results[(mask, modified)] = raises_m4(program)
    return results


_IN_OUT = {(False, False): NOTHING, (True, False): INPUT, (False, True): OUTPUT, (True, True): BOTH}
_BINARY = {
    ("never", "never"): NOTHING,
    ("other", "other"): OTHER_OPERAND,
    ("other", "any"): DIVISOR,
    ("any", "any"): OPERANDS,
}


def classify(results: dict, nargs: int) -> str:
    out_saved = any(saved for (_, modified), saved in results.items() if modified == "out")
    if nargs == 1:
        return _IN_OUT[(results[((True,), 0)], out_saved)]
    masks = [(True, False), (False, True), (True, True)]
    conditions = []
    for i in (0, 1):
        saved = [results[(mask, i)] for mask in masks]
        if saved == [mask[1 - i] for mask in masks]:
            conditions.append("other")  # saved iff the other operand requires grad
        elif all(saved):
            conditions.append("any")
        elif not any(saved):
            conditions.append("never")
        else:
            conditions.append(f"irregular {saved}")
    assert not out_saved, f"a binary op saved its output: {results}"
    return _BINARY.get(tuple(conditions), f"unclassified {conditions}")


def _unary(*spellings, shape=(4, 3)):
    return [(name, fn, lambda: (_data(shape),), 1) for name, fn in spellings]


def _binary(*spellings, shape_a=(4, 3), shape_b=(4, 3)):
    return [(name, fn, lambda: (_data(shape_a), _data(shape_b)), 2) for name, fn in spellings]


def _spellings(name, *args):
    """torch.NAME(x, *args), x.NAME(*args), F.NAME(x, *args): those that exist."""
    found = []
    if hasattr(torch, name):
        found.append((f"torch.{name}", lambda x: getattr(torch, name)(x, *args)))
    if hasattr(torch.Tensor, name):
        found.append((f"x.{name}()", lambda x: getattr(x, name)(*args)))
    if hasattr(F, name):
        found.append((f"F.{name}", lambda x: getattr(F, name)(x, *args)))
    return _unary(*found)


OPS: dict[str, list] = {}
for _name in (
    "exp exp2 expm1 sqrt rsqrt reciprocal tan tanh sigmoid relu log log2 log10 log1p square abs erf sin cos "
    "sinh cosh asin acos atan asinh atanh selu gelu silu mish elu celu leaky_relu softplus hardtanh relu6 "
    "hardsigmoid hardswish logsigmoid softsign normalize var prod std amax amin max min norm neg sign floor "
    "round tanhshrink sum mean clone flatten t"
).split():
    OPS[_name] = _spellings(_name)
for _name in ("softmax", "log_softmax", "softmin", "logsumexp", "cumprod", "cumsum"):
    OPS[_name] = _spellings(_name, -1)
OPS["sigmoid"] += _unary(("torch.special.expit", torch.special.expit))
OPS["clamp"] = _unary(
    ("torch.clamp", lambda x: torch.clamp(x, 0.3, 0.6)),
    ("x.clamp()", lambda x: x.clamp(min=0.3, max=0.6)),
    ("x.clamp(min=)", lambda x: x.clamp(min=0.3)),
)
OPS["clip"] = _unary(("x.clip()", lambda x: x.clip(0.3, 0.6)), ("torch.clip", lambda x: torch.clip(x, 0.3, 0.6)))
OPS["clamp_min"] = _unary(("x.clamp_min()", lambda x: x.clamp_min(0.3)))
OPS["clamp_max"] = _unary(("x.clamp_max()", lambda x: x.clamp_max(0.6)))
OPS["pow"] = _unary(  # tensor ** scalar
    ("torch.pow(x, 3)", lambda x: torch.pow(x, 3)),
    ("x.pow(2)", lambda x: x.pow(2)),
    ("x ** 2", lambda x: x**2),
    ("x ** 0.5", lambda x: x**0.5),
)
OPS["__rpow__"] = _unary(("2 ** x", lambda x: 2**x), ("torch.pow(2, x)", lambda x: torch.pow(2, x)))
OPS["layer_norm"] = _unary(("F.layer_norm", lambda x: F.layer_norm(x, (3,))))
OPS["batch_norm"] = _unary(
    ("F.batch_norm", lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3), training=True))
)
OPS["group_norm"] = _unary(("F.group_norm", lambda x: F.group_norm(x, 1)))
OPS["instance_norm"] = _unary(("F.instance_norm", F.instance_norm), shape=(2, 3, 4))
OPS["max_pool1d"] = _unary(("F.max_pool1d", lambda x: F.max_pool1d(x, 2)), shape=(2, 3, 4))
OPS["avg_pool1d"] = _unary(("F.avg_pool1d", lambda x: F.avg_pool1d(x, 2)), shape=(2, 3, 4))
OPS["vector_norm"] = _unary(("torch.linalg.vector_norm", torch.linalg.vector_norm))
OPS["max(dim)"] = _spellings("max", -1)
OPS["min(dim)"] = _spellings("min", -1)
OPS["view"] = _unary(("x.view()", lambda x: x.view(-1)))
OPS["reshape"] = _unary(("x.reshape()", lambda x: x.reshape(-1)), ("torch.reshape", lambda x: torch.reshape(x, (-1,))))
OPS["transpose"] = _unary(("x.transpose()", lambda x: x.transpose(0, 1)))
OPS["permute"] = _unary(("x.permute()", lambda x: x.permute(1, 0)))
OPS["squeeze"] = _unary(("x.squeeze()", lambda x: x.squeeze()), shape=(1, 4, 3))
OPS["unsqueeze"] = _unary(("x.unsqueeze()", lambda x: x.unsqueeze(0)))
OPS["expand"] = _unary(("x.expand()", lambda x: x.expand(2, 4, 3)))
OPS["__getitem__"] = _unary(("x[1:3]", lambda x: x[1:3]), ("x[0]", lambda x: x[0]))
OPS["dropout"] = _unary(
    ("F.dropout", lambda x: F.dropout(x, 0.5, training=True)), ("torch.dropout", lambda x: torch.dropout(x, 0.5, True))
)
OPS["add"] = _binary(("a + b", lambda a, b: a + b), ("torch.add", torch.add), ("a.add()", lambda a, b: a.add(b)))
OPS["sub"] = _binary(("a - b", lambda a, b: a - b), ("torch.sub", torch.sub), ("a.sub()", lambda a, b: a.sub(b)))
OPS["cat"] = _binary(("torch.cat", lambda a, b: torch.cat([a, b])))
OPS["stack"] = _binary(("torch.stack", lambda a, b: torch.stack([a, b])))
OPS["l1_loss"] = _binary(("F.l1_loss", F.l1_loss))
OPS["mul"] = _binary(("a * b", lambda a, b: a * b), ("torch.mul", torch.mul), ("a.mul()", lambda a, b: a.mul(b)))
OPS["matmul"] = _binary(
    ("a @ b", lambda a, b: a @ b), ("torch.matmul", torch.matmul), ("a.matmul()", lambda a, b: a.matmul(b)),
    shape_b=(3, 2),
)
OPS["mm"] = _binary(("torch.mm", torch.mm), ("a.mm()", lambda a, b: a.mm(b)), shape_b=(3, 2))
OPS["linear"] = _binary(("F.linear", F.linear), shape_b=(2, 3))
OPS["outer"] = _binary(("torch.outer", torch.outer), shape_a=(4,), shape_b=(3,))
OPS["dot"] = _binary(("torch.dot", torch.dot), shape_a=(4,), shape_b=(4,))
OPS["div"] = _binary(("a / b", lambda a, b: a / b), ("torch.div", torch.div), ("a.div()", lambda a, b: a.div(b)))
OPS["maximum"] = _binary(("torch.maximum", torch.maximum))
OPS["minimum"] = _binary(("torch.minimum", torch.minimum))
OPS["mse_loss"] = _binary(("F.mse_loss", F.mse_loss))

MODULES: dict[str, tuple[Callable[[], object], tuple[int, ...]]] = {
    "Sigmoid": (nn.Sigmoid, (4, 3)),
    "Tanh": (nn.Tanh, (4, 3)),
    "Softmax": (lambda: nn.Softmax(dim=-1), (4, 3)),
    "LogSoftmax": (lambda: nn.LogSoftmax(dim=-1), (4, 3)),
    "Softmin": (lambda: nn.Softmin(dim=-1), (4, 3)),
    "ReLU": (nn.ReLU, (4, 3)),
    "ReLU6": (nn.ReLU6, (4, 3)),
    "LeakyReLU": (nn.LeakyReLU, (4, 3)),
    "PReLU": (nn.PReLU, (4, 3)),
    "ELU": (nn.ELU, (4, 3)),
    "SELU": (nn.SELU, (4, 3)),
    "CELU": (nn.CELU, (4, 3)),
    "GELU": (nn.GELU, (4, 3)),
    "SiLU": (nn.SiLU, (4, 3)),
    "Mish": (nn.Mish, (4, 3)),
    "Softplus": (nn.Softplus, (4, 3)),
    "Hardtanh": (nn.Hardtanh, (4, 3)),
    "Hardsigmoid": (nn.Hardsigmoid, (4, 3)),
    "Hardswish": (nn.Hardswish, (4, 3)),
    "LogSigmoid": (nn.LogSigmoid, (4, 3)),
    "Softsign": (nn.Softsign, (4, 3)),
    "Tanhshrink": (nn.Tanhshrink, (4, 3)),
    "Linear": (lambda: nn.Linear(3, 3), (4, 3)),
    "Conv1d": (lambda: nn.Conv1d(3, 3, 3), (2, 3, 5)),
    "Conv2d": (lambda: nn.Conv2d(3, 3, 3), (2, 3, 5, 5)),
    "BatchNorm1d": (lambda: nn.BatchNorm1d(3), (4, 3)),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(3), (2, 3, 4, 4)),
    "LayerNorm": (lambda: nn.LayerNorm(3), (4, 3)),
    "GroupNorm": (lambda: nn.GroupNorm(1, 3), (4, 3)),
    "InstanceNorm1d": (lambda: nn.InstanceNorm1d(3), (2, 3, 4)),
    "Dropout": (lambda: nn.Dropout(0.5), (4, 3)),
    "Identity": (nn.Identity, (4, 3)),
    "Flatten": (nn.Flatten, (4, 3)),
    "MaxPool1d": (lambda: nn.MaxPool1d(2), (2, 3, 4)),
    "MaxPool2d": (lambda: nn.MaxPool2d(2), (2, 3, 4, 4)),
    "AvgPool1d": (lambda: nn.AvgPool1d(2), (2, 3, 4)),
    "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d(1), (2, 3, 4, 4)),
}


def probe_module(make, shape, *, input_requires_grad: bool = True, freeze: bool = False) -> dict:
    def build():
        torch.manual_seed(0)
        module = make()
        if freeze:
            module.requires_grad_(False)
        x = torch.randn(*shape)
        return module, (x.requires_grad_().clone() if input_requires_grad else x)

    def output_modified() -> None:
        module, x = build()
        nn.Sequential(module, nn.ReLU(inplace=True))(x).sum().backward()

    def input_modified() -> None:
        module, x = build()
        y = module(x)
        x.mul_(2)
        y.sum().backward()

    return {"out": raises_m4(output_modified), "in": raises_m4(input_modified)}


def classify_module(make, shape) -> str:
    if not any(p.requires_grad for p in make().parameters()):
        result = probe_module(make, shape)
        return _IN_OUT[(result["in"], result["out"])]
    data_input = probe_module(make, shape, input_requires_grad=False)  # saved because the weight needs grad?
    frozen = probe_module(make, shape, freeze=True)  # saved even with frozen weights?
    trained = probe_module(make, shape)
    out_saved = trained["out"] or data_input["out"]
    if data_input["in"] and not frozen["in"] and not out_saved:
        return OTHER_OPERAND
    return _IN_OUT[(data_input["in"] or frozen["in"], out_saved)]


def measure_op(key: str) -> dict[str, str]:
    """Classification per spelling (every spelling of a key must agree)."""
    return {spelling: classify(probe(fn, make_args, nargs), nargs) for spelling, fn, make_args, nargs in OPS[key]}


# ---------------------------------------------------------------- the table
TABLE = saved_tensor_table()


def test_every_table_entry_has_a_probe_and_every_probe_an_entry() -> None:
    assert set(TABLE.ops) == set(OPS)
    assert set(TABLE.modules) == set(MODULES)
    assert all(OPS[key] for key in OPS), [key for key in OPS if not OPS[key]]


@pytest.mark.parametrize("key", sorted(OPS))
def test_op_saves_what_the_table_says(key: str) -> None:
    measured = measure_op(key)
    assert set(measured.values()) == {TABLE.op(key)}, f"table: {TABLE.op(key)!r}, torch measures {measured}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_saves_what_the_table_says(name: str) -> None:
    make, shape = MODULES[name]
    assert classify_module(make, shape) == TABLE.module(name)


def test_probe_detects_a_disagreement() -> None:
    """The probes can fail: a hand-made op that saves its output is not classified as saving nothing."""
    assert classify(probe(torch.sigmoid, lambda: (_data(),), 1), 1) == OUTPUT
    assert classify(probe(lambda x: x.clone(), lambda: (_data(),), 1), 1) == NOTHING


# ---------------------------------------------------------------- facts TL007 relies on
def _saved_output_program(change: Callable) -> Callable[[], None]:
    def program() -> None:
        x = _data().requires_grad_()
        y = torch.sigmoid(x)
        change(y)
        y.sum().backward()

    return program


@pytest.mark.parametrize("name", sorted(key for key, saves in TABLE.ops.items() if saves == OUTPUT))
def test_inplace_spelling_of_an_output_saving_op_saves_its_output(name: str) -> None:
    """``y.relu_()`` saves ``y`` like ``relu`` does: changing it again before backward raises M4."""
    if not hasattr(torch.Tensor, name + "_"):
        pytest.skip(f"no Tensor.{name}_")

    def program() -> None:
        y = _data().requires_grad_().clone()
        getattr(y, name + "_")()
        y.mul_(2)
        y.sum().backward()

    assert raises_m4(program)


@pytest.mark.parametrize(
    "change",
    [
        lambda y: y.detach().zero_(),  # .detach() shares the version counter
        lambda y: y[0:2].zero_(),  # a basic-indexing view shares it
        lambda y: y.view(-1).mul_(2),
        lambda y: y.t_(),  # metadata-only in-place ops count too
        lambda y: y.__setitem__(0, 0.0),
        lambda y: y.__iadd__(1),
        lambda y: F.relu(y, inplace=True),
        lambda y: torch.sigmoid_(y),
    ],
)
def test_changes_tl007_follows_raise_m4(change: Callable) -> None:
    assert raises_m4(_saved_output_program(change))


def test_change_through_data_is_silent_and_corrupts_the_gradient() -> None:
    x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    y = x.sigmoid()
    y.data.mul_(2)
    y.sum().backward()
    assert torch.allclose(x.grad, torch.tensor([0.2486, 0.0, -1.3416]), atol=1e-4)


def test_no_grad_does_not_protect_a_saved_tensor() -> None:
    def program() -> None:
        y = torch.sigmoid(_data().requires_grad_())
        with torch.no_grad():
            y.mul_(2)
        y.sum().backward()

    assert raises_m4(program)


def test_backward_frees_the_saved_tensors() -> None:
    x = _data().requires_grad_()
    y = torch.sigmoid(x)
    y.sum().backward()
    y.mul_(2)  # after the last backward through it: fine
    assert x.grad is not None


def test_out_of_place_twins_used_by_the_fixes_exist() -> None:
    assert all(hasattr(torch.Tensor, m) and hasattr(torch.Tensor, m + "_") for m in OUT_OF_PLACE_TWINS)
    assert all(hasattr(torch, f) and hasattr(torch, f + "_") for f in TORCH_INPLACE_FUNCTIONS)


# ---------------------------------------------------------------- loader
def test_table_is_loaded_once_and_well_formed() -> None:
    assert saved_tensor_table() is TABLE
    assert set(TABLE.ops.values()) | set(TABLE.modules.values()) <= SAVES
    assert TABLE.op("sigmoid") == OUTPUT and TABLE.op("log") == INPUT and TABLE.op("mul") == OTHER_OPERAND
    assert TABLE.module("Sigmoid") == OUTPUT and TABLE.op("no_such_op") is None


# ---------------------------------------------------------------- [inplace]: in-place modules and functionals
def _takes_inplace(function) -> bool:
    import inspect

    try:
        return "inplace" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


INPLACE_MODULES = sorted(
    name for name in dir(nn)
    if isinstance(getattr(nn, name), type) and issubclass(getattr(nn, name), nn.Module)
    and _takes_inplace(getattr(nn, name).__init__)
)
INPLACE_FUNCTIONALS = sorted(name for name in dir(F) if not name.startswith("_") and _takes_inplace(getattr(F, name)))


def _inplace_shape(name: str) -> tuple[int, ...]:
    lowered = name.lower()
    if lowered.endswith("3d"):
        return (2, 3, 2, 4, 4)
    if lowered.endswith("2d") or lowered.startswith("feature"):
        return (2, 3, 4, 4)
    if lowered.endswith("1d"):
        return (2, 3, 4)
    return (4, 3)


def _apply_inplace(name: str, x):
    if name[0].isupper():
        args = (0.5, 0.0) if name == "Threshold" else ()
        return getattr(nn, name)(*args, inplace=True).train()(x)
    function = getattr(F, name)
    if name == "threshold":
        return function(x, 0.5, 0.0, inplace=True)
    if "dropout" in name:
        return function(x, 0.5, True, inplace=True)
    if name == "rrelu":
        return function(x, training=True, inplace=True)
    return function(x, inplace=True)


def measure_inplace(name: str) -> str:
    shape = _inplace_shape(name)
    x = torch.rand(*shape).requires_grad_().clone()
    version = x._version
    _apply_inplace(name, x)
    if x._version == version:
        return OUT_OF_PLACE

    def result_changed() -> None:
        torch.manual_seed(0)
        y = _apply_inplace(name, torch.rand(*shape).requires_grad_().clone())
        y.mul_(2)
        y.sum().backward()

    def applied_to_a_saved_output() -> None:
        torch.manual_seed(0)
        _apply_inplace(name, torch.sigmoid(torch.rand(*shape).requires_grad_())).sum().backward()

    assert raises_m4(applied_to_a_saved_output), f"{name} overwrites its input, so a saved input raises M4"
    return OUTPUT if raises_m4(result_changed) else NOTHING


def test_inplace_table_lists_every_module_and_functional_with_an_inplace_parameter() -> None:
    assert "ReLU" in INPLACE_MODULES and "relu" in INPLACE_FUNCTIONALS  # the discovery finds them
    assert set(TABLE.inplace) == set(INPLACE_MODULES) | set(INPLACE_FUNCTIONALS)


@pytest.mark.parametrize("name", sorted(set(INPLACE_MODULES) | set(INPLACE_FUNCTIONALS)))
def test_inplace_form_does_what_the_table_says(name: str) -> None:
    assert measure_inplace(name) == TABLE.inplace_effect(name)


@pytest.mark.parametrize("name", sorted(n[:-1] for n in dir(F) if n.endswith("_") and not n.startswith("_")))
def test_underscore_functional_is_the_inplace_form(name: str) -> None:
    """``F.relu_(y)`` is ``F.relu(y, inplace=True)``: the table's entry for ``relu`` covers it."""
    shape = _inplace_shape(name)
    x = torch.rand(*shape).requires_grad_().clone()
    args = (0.5, 0.0) if name == "threshold" else ()
    version = x._version
    getattr(F, name + "_")(x, *args)
    assert x._version != version and TABLE.inplace_effect(name) in (OUTPUT, NOTHING)

    def result_changed() -> None:
        y = getattr(F, name + "_")(torch.rand(*shape).requires_grad_().clone(), *args)
        y.mul_(2)
        y.sum().backward()

    assert raises_m4(result_changed) is (TABLE.inplace_effect(name) == OUTPUT)
