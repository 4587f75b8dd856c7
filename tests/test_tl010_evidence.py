"""TL010's module-attribute fixture (``tests/fixtures/TL010/module_attributes.py``) run with
torch: every line it expects TL010 on raises the second-backward error there, and the
look-alikes it leaves alone train."""

from __future__ import annotations

import ast
import re
import traceback
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "TL010" / "module_attributes.py"
SECOND_BACKWARD = "backward through the graph a second time"


def _definitions() -> dict[str, object]:
    """The fixture's imports and classes, without running its module-level loops."""
    tree = ast.parse(FIXTURE.read_text())
    tree.body = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef))]
    namespace: dict[str, object] = {"__name__": "tl010_fixture"}
    exec(compile(tree, str(FIXTURE), "exec"), namespace)
    return namespace


def _expected_lines() -> set[int]:
    return {n for n, line in enumerate(FIXTURE.read_text().splitlines(), 1) if re.search(r"# expect: TL010", line)}


def _failing_line(error: BaseException) -> int:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == FIXTURE]
    return frames[-1].lineno  # type: ignore[return-value]


@pytest.mark.torch
def test_the_generator_steps_fail_where_tl010_reports_and_the_fixed_forms_train() -> None:
    torch = pytest.importorskip("torch")
    trainer = _definitions()["AdversarialTrainer"]()  # type: ignore[operator]
    x = torch.randn(4, 3)
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD) as raised:
        trainer.train_batch(x)
    assert _failing_line(raised.value) in _expected_lines()
    trainer.train_batch_fixed(x)
    trainer.train_batch_retained(x)


@pytest.mark.torch
def test_the_module_level_encoder_loop_fails_where_tl010_reports() -> None:
    pytest.importorskip("torch")
    source = FIXTURE.read_text()
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD) as raised:
        exec(compile(source, str(FIXTURE), "exec"), {"__name__": "tl010_fixture"})
    assert _failing_line(raised.value) in _expected_lines()
    # The last loop (a new graph each iteration) trains: run it alone.
    tree = ast.parse(source)
    last_loop = [node for node in tree.body if isinstance(node, ast.For)][-1]
    setup = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef))]
    setup.append(ast.parse("net = Holder()").body[0])
    tree.body = [*setup, last_loop]
    exec(compile(tree, str(FIXTURE), "exec"), {"__name__": "tl010_fixture"})  # (raises if it does not train)


TRAINED = Path(__file__).parent / "fixtures" / "TL010" / "trained_modules.py"


def _trained_attack(torch: object) -> object:
    """``Attack`` of the trained-modules fixture, with a small ``generators`` package (a class
    torchlint cannot see: two linear layers)."""
    import sys
    import types

    nn = torch.nn  # type: ignore[attr-defined]
    package = types.ModuleType("generators")
    package.Generator = lambda: nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))  # type: ignore[attr-defined]
    sys.modules["generators"] = package
    try:
        namespace: dict[str, object] = {"__name__": "tl010_trained_fixture"}
        exec(compile(TRAINED.read_text(), str(TRAINED), "exec"), namespace)
    finally:
        del sys.modules["generators"]
    return namespace["Attack"]()  # type: ignore[operator]


def _trained_cases() -> tuple[list[str], list[str], set[int]]:
    """(methods with an expected TL010, look-alike methods, the expected lines)."""
    source = TRAINED.read_text()
    expected = {n for n, line in enumerate(source.splitlines(), 1) if "# expect: TL010" in line}
    attack = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Attack")
    positives, look_alikes = [], []
    for method in attack.body:
        if isinstance(method, ast.FunctionDef) and method.name != "__init__":
            end = method.end_lineno or method.lineno
            inside = any(method.lineno <= line <= end for line in expected)
            (positives if inside else look_alikes).append(method.name)
    return positives, look_alikes, expected


@pytest.mark.torch
def test_trained_module_outputs_built_before_the_loop_fail_where_tl010_reports() -> None:
    torch = pytest.importorskip("torch")
    positives, look_alikes, expected = _trained_cases()
    assert positives and look_alikes
    x = torch.randn(4, 3)
    for name in positives:
        attack = _trained_attack(torch)
        with pytest.raises(RuntimeError, match=SECOND_BACKWARD) as raised:
            getattr(attack, name)(x)
        frames = [f for f in traceback.extract_tb(raised.value.__traceback__) if Path(f.filename) == TRAINED]
        assert frames[-1].lineno in expected, name
    for name in look_alikes:
        getattr(_trained_attack(torch), name)(x)  # (raises if it does not train)


SHARED = Path(__file__).parent / "fixtures" / "TL010" / "shared_subgraph.py"


@pytest.mark.torch
def test_a_second_loss_through_a_freed_shared_subgraph_fails_where_tl010_reports() -> None:
    torch = pytest.importorskip("torch")
    source = SHARED.read_text()
    expected = {n for n, line in enumerate(source.splitlines(), 1) if "# expect: TL010" in line}
    namespace: dict[str, object] = {"__name__": "tl010_shared_fixture"}
    exec(compile(source, str(SHARED), "exec"), namespace)
    functions = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    positives = [f.name for f in functions if any(f.lineno <= line <= (f.end_lineno or 0) for line in expected)]
    look_alikes = [f.name for f in functions if f.name not in positives]
    assert positives and look_alikes
    batches = [torch.randn(4, 3) for _ in range(2)]
    # A loop over batches, or one training step on a batch.
    argument = {f.name: batches if f.args.args[0].arg == "batches" else batches[0] for f in functions}
    for name in positives:
        with pytest.raises(RuntimeError, match=SECOND_BACKWARD) as raised:
            namespace[name](argument[name])  # type: ignore[operator]
        frames = [f for f in traceback.extract_tb(raised.value.__traceback__) if Path(f.filename) == SHARED]
        assert frames[-1].lineno in expected, name
    for name in look_alikes:
        namespace[name](argument[name])  # type: ignore[operator]  # (raises if it does not train)
