"""Property-based fuzzing with arbitrary valid Python (hypothesmith): linting never
crashes, and ``--fix --unsafe-fixes`` output always parses, keeps the line endings,
and is a fixed point (a second fix changes nothing).

The generated code is linted on its own and embedded in a small training loop, so
that the torch-aware analysis (leaves, grad mode, loops) meets it.  The default run
is bounded and derandomized (deterministic); ``pytest --fuzz-long`` runs far more
random examples.
"""

from __future__ import annotations

import textwrap
import warnings

import hypothesmith
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from torchlint.engine import FixError, SourceError, fix_source, lint_source
from torchlint.rule import FixStyle, RuleOptions
from torchlint.rules import all_rules

pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")

# Every rule's pre-filter tokens appear here, so every rule analyses the code.
TEMPLATE = """import torch
import torch.nn as nn
# requires_grad .grad Parameter parameters .weight .bias backward zero_grad .data autograd
w = torch.randn(3, requires_grad=True)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{module_code}
def train(x):
{function_code}
    for step in range(3):
        loss = (w * x).sum() + model(x).sum()
        loss.backward()
{loop_code}
        w = w - 0.1 * w.grad
        model.weight -= 0.1 * model.weight.grad
        opt.step()
"""
DEFAULT_EXAMPLES = {"grammar": 30, "node": 15, "text": 100}
LONG_EXAMPLES = {"grammar": 3000, "node": 1000, "text": 20000}
STYLES = [RuleOptions(fix_style=style) for style in FixStyle]
RULES = all_rules()


def embed(code: str) -> str | None:
    """``code`` at module level, in a function body and in a loop body (None if it
    cannot be indented, e.g. it mixes tabs and spaces)."""
    source = TEMPLATE.format(
        module_code=code,
        function_code=textwrap.indent(code, "    ") or "    pass",
        loop_code=textwrap.indent(code, "        "),
    )
    try:
        compile(source, "<fuzz>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return source


def check_source(source: str, styles: list[RuleOptions] = STYLES) -> None:
    """The properties, for one source."""
    try:
        lint_source(source, RULES)
    except SourceError:
        return  # a clear error is fine (libcst rejects a few valid programs); a crash is not
    for options in styles:
        try:
            first = fix_source(source, RULES, options, unsafe=True)
        except FixError as error:
            raise AssertionError(f"a fix broke the code: {error}\n--- source ---\n{source}") from None
        compile(first.source, "<fixed>", "exec", dont_inherit=True)
        second = fix_source(first.source, RULES, options, unsafe=True)
        assert second.source == first.source, (
            f"not idempotent\n--- once ---\n{first.source}\n--- twice ---\n{second.source}"
        )
        assert not second.applied
        if "\r\n" in source and "\n" not in source.replace("\r\n", ""):
            assert "\n" not in first.source.replace("\r\n", ""), "a fix wrote LF into a CRLF file"


def run(test, strategy, name: str, fuzz_long: bool) -> None:
    examples = (LONG_EXAMPLES if fuzz_long else DEFAULT_EXAMPLES)[name]
    configured = settings(
        max_examples=examples,
        deadline=None,
        derandomize=not fuzz_long,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    configured(given(strategy)(test))()


@pytest.mark.slow
def test_arbitrary_python_from_the_grammar(fuzz_long: bool) -> None:
    def check(code: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_source(code)
            embedded = embed(code)
            if embedded is not None:
                check_source(embedded)
                check_source(embedded.replace("\n", "\r\n"), STYLES[:1])

    run(check, hypothesmith.from_grammar(), "grammar", fuzz_long)


@pytest.mark.slow
def test_arbitrary_syntax_trees(fuzz_long: bool) -> None:
    def check(code: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            embedded = embed(code)
            assume(embedded is not None)
            check_source(embedded)

    run(check, hypothesmith.from_node(), "node", fuzz_long)


@pytest.mark.slow
def test_arbitrary_text_never_crashes(fuzz_long: bool) -> None:
    """Not even valid Python: any text gives findings or a SourceError."""

    def check(text: str) -> None:
        try:
            lint_source(TEMPLATE.format(module_code=text, function_code="    pass", loop_code=""), RULES)
        except SourceError:
            pass

    alphabet = st.sampled_from(
        list("()[]{}:;,.=+-*/%@&|^~<>!\\'\"#\n\r\t\x0c ") + ["w", "x", "0", "lambda", "not", "if", "else", "for", "in"]
    )
    run(check, st.lists(alphabet, max_size=200).map("".join), "text", fuzz_long)
