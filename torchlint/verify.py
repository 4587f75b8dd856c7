"""Evidence checks: every rule's page is proven with real torch.

For each rule: its bad example must be flagged with its code, the fixer must
turn it into the page's fixed example, the fixed example must be clean, and
both must behave under the installed torch the way the page's ``evidence``
block asserts (the bad one fails as documented, the fixed one trains).
"""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torchlint.engine import fix_source, lint_source
from torchlint.rule import FixStyle, Rule, RuleOptions
from torchlint.rulebook import page_for


class EvidenceError(AssertionError):
    pass


@dataclass
class Outcome:
    """What running an example program did."""

    error: BaseException | None
    warnings: list[str] = field(default_factory=list)
    ns: dict[str, Any] = field(default_factory=dict)

    @property
    def losses(self) -> list[float] | None:
        return self.ns.get("losses")

    def __repr__(self) -> str:
        error = f"{type(self.error).__name__}: {self.error}" if self.error else "no error"
        return f"Outcome({error}; losses={self.losses})"


def run_program(source: str, name: str = "<example>") -> Outcome:
    namespace: dict[str, Any] = {"__name__": "__torchlint_example__"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(compile(source, name, "exec"), namespace)
            error = None
        except Exception as exc:  # the bad examples are supposed to fail
            error = exc
    return Outcome(error, [str(w.message) for w in caught], namespace)


# ---------------------------------------------------------------- assertions
def assert_raises(outcome: Outcome, exc_type_name: str, substring: str) -> None:
    if outcome.error is None:
        raise EvidenceError(f"expected {exc_type_name} containing {substring!r}, but nothing was raised")
    if type(outcome.error).__name__ != exc_type_name or substring not in str(outcome.error):
        raise EvidenceError(
            f"expected {exc_type_name} containing {substring!r}, got {type(outcome.error).__name__}: {outcome.error}"
        )


def assert_warns(outcome: Outcome, substring: str) -> None:
    if not any(substring in message for message in outcome.warnings):
        raise EvidenceError(f"expected a warning containing {substring!r}, got {outcome.warnings}")


def _training_problem(outcome: Outcome) -> str | None:
    import torch

    if outcome.error is not None:
        return f"raised {type(outcome.error).__name__}: {outcome.error}"
    losses = outcome.losses
    if not losses or len(losses) < 3:
        return f"fewer than 3 recorded losses: {losses}"
    if any(later >= earlier for earlier, later in zip(losses, losses[1:])) or losses[-1] >= losses[0]:
        return f"losses do not strictly decrease: {[round(float(x), 4) for x in losses]}"
    for index, param in enumerate(outcome.ns.get("params", [])):
        if not isinstance(param, torch.Tensor) or not param.is_leaf or not param.requires_grad:
            return f"params[{index}] is not a leaf that requires grad"
    return None


def assert_trains(outcome: Outcome) -> None:
    problem = _training_problem(outcome)
    if problem is not None:
        raise EvidenceError(f"expected the program to train, but it {problem}")


def assert_not_trains(outcome: Outcome) -> None:
    if _training_problem(outcome) is None:
        raise EvidenceError("expected the program not to train, but its losses decrease")


# ---------------------------------------------------------------- per rule
@dataclass
class Verdict:
    code: str
    name: str
    confirmed: bool
    detail: str


def verify_rule(rule: type[Rule]) -> Verdict:
    try:
        detail = _verify(rule)
        return Verdict(rule.code, rule.name, True, detail)
    except EvidenceError as error:
        return Verdict(rule.code, rule.name, False, str(error))
    except Exception as error:  # a broken page must be reported, not crash the run
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        return Verdict(rule.code, rule.name, False, f"evidence crashed: {last}")


def _verify(rule: type[Rule]) -> str:
    page = page_for(rule)
    if page is None:
        raise EvidenceError("no rule-book page")
    for tag in ("bad", "fixed", "evidence"):
        if tag not in page.blocks:
            raise EvidenceError(f"the page has no `python {tag}` block")
    bad_source, fixed_source = page.blocks["bad"], page.blocks["fixed"]
    codes = {f.code for f in lint_source(bad_source, [rule]).findings}
    if rule.code not in codes:
        raise EvidenceError("the linter does not flag the bad example")
    if rule.code in {f.code for f in lint_source(fixed_source, [rule]).findings}:
        raise EvidenceError("the linter still flags the fixed example")
    outcomes = {"bad": run_program(bad_source, f"<{rule.code} bad>"), "fixed": run_program(fixed_source, f"<{rule.code} fixed>")}
    styles = {"fixed": FixStyle.DATA, "fixed-no_grad": FixStyle.NO_GRAD}
    if rule.fix_safety is not None:
        for tag, style in styles.items():
            if tag not in page.blocks:
                continue
            produced = fix_source(bad_source, [rule], RuleOptions(fix_style=style), unsafe=True).source
            if produced != page.blocks[tag]:
                raise EvidenceError(f"the fixer's output differs from the page's `{tag}` example:\n{produced}")
    fixed_no_grad = None
    if "fixed-no_grad" in page.blocks:
        fixed_no_grad = run_program(page.blocks["fixed-no_grad"], f"<{rule.code} fixed-no_grad>")
    import torch

    namespace = {
        "torch": torch,
        "bad": outcomes["bad"],
        "fixed": outcomes["fixed"],
        "fixed_no_grad": fixed_no_grad,
        "assert_raises": assert_raises,
        "assert_warns": assert_warns,
        "assert_trains": assert_trains,
        "assert_not_trains": assert_not_trains,
    }
    try:
        exec(compile(page.blocks["evidence"], f"<{rule.code} evidence>", "exec"), namespace)
    except EvidenceError:
        raise
    except AssertionError as error:
        raise EvidenceError(f"evidence assertion failed: {error or 'assert'} (bad: {outcomes['bad']!r}, fixed: {outcomes['fixed']!r})") from None
    bad = outcomes["bad"]
    symptom = f"{type(bad.error).__name__}: {str(bad.error).splitlines()[0][:90]}" if bad.error else "fails silently"
    return f"bad example: {symptom}; fixed example behaves"


def has_torch_evidence(rule: type[Rule]) -> bool:
    """Rules about torch behaviour have a ``python bad`` example on their page; a rule
    about torchlint itself (e.g. TL100 unused-noqa) declares none and is not verified.
    A rule without a page is verified (and fails: every rule needs one)."""
    page = page_for(rule)
    return page is None or "bad" in page.blocks


def verify_rules(rules: Sequence[type[Rule]]) -> list[Verdict]:
    return [verify_rule(rule) for rule in rules if has_torch_evidence(rule)]
