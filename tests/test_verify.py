"""The rule book's evidence: every rule is proven with real torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchlint import verify
from torchlint.rulebook import RulePage, page_for
from torchlint.rules import all_rules, rule_by_code

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

EVIDENCE_RULES = [rule for rule in all_rules() if page_for(rule) is not None and "bad" in page_for(rule).blocks]


@pytest.mark.parametrize("rule", EVIDENCE_RULES, ids=lambda r: r.code)
def test_rule_is_confirmed_with_torch(rule) -> None:
    verdict = verify.verify_rule(rule)
    assert verdict.confirmed, verdict.detail


def _fake_page(monkeypatch: pytest.MonkeyPatch, code: str, **blocks: str) -> None:
    real = page_for(code)
    assert real is not None
    merged = {**real.blocks, **{tag.replace("_", "-"): body for tag, body in blocks.items()}}
    monkeypatch.setattr(verify, "page_for", lambda rule: RulePage(real.code, real.path, real.text, merged))


def test_verify_fails_when_the_bad_example_does_not_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    page = page_for("TL002")
    # Same program, but the flagged update sits under no_grad: torch raises nothing.
    harmless = page.blocks["fixed"]
    _fake_page(monkeypatch, "TL002", bad=harmless)
    verdict = verify.verify_rule(rule_by_code("TL002"))
    assert not verdict.confirmed


def test_verify_fails_when_the_fixer_output_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    page = page_for("TL001")
    _fake_page(monkeypatch, "TL001", fixed=page.blocks["fixed"] + "\n# edited by hand\n")
    verdict = verify.verify_rule(rule_by_code("TL001"))
    assert not verdict.confirmed
    assert "differs" in verdict.detail


def test_assert_trains_rejects_a_flat_loss() -> None:
    outcome = verify.Outcome(None, [], {"losses": [1.0, 1.0, 1.0], "params": []})
    with pytest.raises(verify.EvidenceError):
        verify.assert_trains(outcome)
    verify.assert_not_trains(outcome)


def test_cli_verify_prints_a_line_per_rule() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "--verify", "--select", "TL001,TL006"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["TL001", "TL006"]
    assert all("confirmed with torch" in line for line in lines)


def test_cli_verify_without_torch_explains_how_to_install(tmp_path) -> None:
    # Shadow torch with a module that fails to import.
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from torchlint.cli import main; sys.exit(main(['--verify']))"],
        capture_output=True, text=True, timeout=60, env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 2
    assert "pip install" in result.stderr
