from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(?P<items>[A-Z]+\d+(?::\d+)?(?:\s*,\s*[A-Z]+\d+(?::\d+)?)*)")


def expected_findings(source: str) -> set[tuple[int, int | None, str]]:
    """``# expect: TL001:5, TL002:9`` annotations as {(line, col, code)}."""
    expected: set[tuple[int, int | None, str]] = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = EXPECT.search(line)
        if not match:
            continue
        for item in match.group("items").split(","):
            code, _, col = item.strip().partition(":")
            expected.add((number, int(col) if col else None, code))
    return expected


def fixture_sections(code: str, filename: str) -> dict[str, str]:
    """The ``# %% case: <name>`` sections of ``tests/fixtures/<code>/<filename>``, each as a whole
    program: the set-up before the first section, then the section (name -> source)."""
    prelude, *sections = (FIXTURES / code / filename).read_text().split("\n# %% case: ")
    return {section.split("\n", 1)[0]: prelude + "\n# case: " + section for section in sections}


def marked_lines(source: str, code: str) -> set[int]:
    """The lines of ``source`` with a ``# expect: <code>:`` annotation."""
    return {number for number, line in enumerate(source.splitlines(), 1) if f"# expect: {code}:" in line}


def top_level_functions(source: str) -> dict[str, range]:
    """The lines of each top-level function of ``source``, by name (to tell which functions of a
    fixture a rule reported)."""
    tree = ast.parse(source)
    return {node.name: range(node.lineno, node.end_lineno + 1)  # type: ignore[operator]
            for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.fixture
def root() -> Path:
    return ROOT


# ---------------------------------------------------------------- fuzzing (test_fuzz.py, test_mutants.py)
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long", action="store_true", default=False,
        help="run the property-based fuzz tests with many more examples (minutes instead of seconds)",
    )


@pytest.fixture
def fuzz_long(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--fuzz-long"))


# A small training script with two fixable mistakes (TL012, TL001), shared by the CLI tests.
BAD = """import torch

w = torch.zeros(3, requires_grad=True)
b = torch.zeros(1)
b.require_grad = True
for step in range(3):
    loss = (w * 2).sum()
    loss.backward()
    w = w - 0.1 * w.grad
"""
FIXED = BAD.replace("b.require_grad", "b.requires_grad").replace("w = w - 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")
