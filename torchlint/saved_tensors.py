"""Which tensors an op saves for backward: the measured table ``rules/_saved_tensors.toml``.

The table is data, kept in one place (the rule book) and shipped in the wheel
next to the rule pages; ``tests/test_saved_tensors.py`` re-derives it from torch.
It is loaded on first use only, so linting files that never need it stays cheap.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from torchlint.rulebook import rulebook_dir

TABLE_FILE = "_saved_tensors.toml"

# What an op (or an nn module) saves for backward.
OUTPUT = "output"  # its result
INPUT = "input"  # its tensor input
BOTH = "both"  # input and result
OTHER_OPERAND = "other-operand"  # binary: each operand only when the other requires grad
DIVISOR = "divisor"  # a / b: a iff b requires grad; b whenever either does
OPERANDS = "operands"  # binary: both operands whenever either requires grad
NOTHING = "nothing"
BINARY_SAVES = frozenset({OTHER_OPERAND, DIVISOR, OPERANDS})  # the categories of a binary op
SAVES = frozenset({OUTPUT, INPUT, BOTH, OTHER_OPERAND, DIVISOR, OPERANDS, NOTHING})
# The [inplace] section: what an op's in-place form (``inplace=True``, ``F.NAME_``) does.
OUT_OF_PLACE = "out-of-place"  # ``inplace=True`` is accepted and ignored
INPLACE_EFFECTS = frozenset({OUTPUT, NOTHING, OUT_OF_PLACE})
_ALLOWED = {"ops": SAVES, "modules": SAVES, "inplace": INPLACE_EFFECTS}


@dataclass(frozen=True)
class SavedTensorTable:
    ops: Mapping[str, str]  # torch.NAME / x.NAME / F.NAME, operators as add/mul/pow/...
    modules: Mapping[str, str]  # nn.NAME
    # nn.NAME / F.NAME taking ``inplace=``: OUTPUT (overwrites its input, saves the result),
    # NOTHING (overwrites its input, saves nothing of it) or OUT_OF_PLACE
    inplace: Mapping[str, str]

    def op(self, name: str) -> str | None:
        return self.ops.get(name)

    def module(self, name: str) -> str | None:
        return self.modules.get(name)

    def certainly_saves(self, name: str) -> bool | None:
        """True: the op certainly saves a tensor whenever its result requires grad (measured with
        torch 2.13: ``w * 2`` saves the wrapped scalar too); None: not known.  ``nothing`` only
        says neither input nor output is saved (dropout still keeps its mask): never a reason to
        report, so it counts as "not known to save"."""
        return _certain(self.ops.get(name))

    def module_certainly_saves(self, name: str) -> bool | None:
        """``certainly_saves`` for the built-in module ``nn.NAME``."""
        return _certain(self.modules.get(name))

    def inplace_effect(self, name: str) -> str | None:
        """What ``nn.NAME(inplace=True)`` / ``F.NAME(..., inplace=True)`` does; None if it takes no ``inplace``."""
        return self.inplace.get(name)


def _certain(category: str | None) -> bool | None:
    return True if category is not None and category != NOTHING else None


def _load_toml(data: bytes) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the tomli dependency is declared for Python < 3.11
        import tomli as tomllib
    return tomllib.loads(data.decode("utf-8"))


@cache
def saved_tensor_table() -> SavedTensorTable:
    """The table, parsed once per process."""
    raw = _load_toml((rulebook_dir() / TABLE_FILE).read_bytes())
    sections = {}
    for section, allowed in _ALLOWED.items():
        entries = raw.get(section, {})
        unknown = {key: value for key, value in entries.items() if value not in allowed}
        if unknown:
            raise ValueError(f"{TABLE_FILE} [{section}]: unknown values {unknown}")
        sections[section] = dict(entries)
    return SavedTensorTable(sections["ops"], sections["modules"], sections["inplace"])
