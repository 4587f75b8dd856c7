"""torchlint: find and fix autograd mistakes in PyTorch training code before it runs."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext torchlint``: check each IPython/Jupyter cell before it runs."""
    from torchlint.ipython import load_ipython_extension as load  # the analysis: only now

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from torchlint.ipython import unload_ipython_extension as unload

    unload(ipython)
