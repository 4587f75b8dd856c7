"""The flake8 plugin reports exactly what the CLI reports (same line and column)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SOURCE = """\
import torch

w = torch.randn(3, requires_grad=True)
for _ in range(3):
    (w * 2).sum().backward()
    w = w - 0.1 * w.grad
    \tb = torch.tensor([1, 2], requires_grad=True)
w.add_(1)  # noqa: TL002
"""


def _run(*args: str, cwd: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd)
    return sorted(line for line in result.stdout.splitlines() if " TL" in line)


def test_flake8_plugin_matches_cli(tmp_path: Path) -> None:
    # A tab in the indentation checks that both count columns in characters.
    (tmp_path / "train.py").write_text(SOURCE.replace("    \tb", "    b"))
    cli = _run("torchlint", "train.py", cwd=tmp_path)
    flake8 = _run("flake8", "--select", "TL", "train.py", cwd=tmp_path)
    assert cli, "the CLI should report findings"
    assert flake8 == [line.replace("./", "") for line in cli]
    assert not any(":8:" in line for line in flake8), "flake8 honours # noqa"
