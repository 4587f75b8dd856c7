"""Whether the file treats an attribute chain of unknown value as an ``nn.Module``, read from its text.

``self.model = get_model(opt)`` comes from another package, so what ``self.model.outc`` holds is
not known; but ``self.model.outc.conv.weight`` elsewhere in the file reads a parameter below it
(a tensor has no ``conv``, nor a ``weight``), and ``self.model.outc.parameters()`` iterates over
its parameters: either way it is a module.  The text is searched, not the flow: the evidence may
come later in the file (``get_optimizers`` builds the optimizer from ``model.parameters()``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from torchlint.analysis import torch_api as api

@functools.cache
def _below_a_module() -> re.Pattern[str]:
    """After ``<key>.``: links to a parameter attribute (``conv.weight``, ``weight``) that is read
    (not called, not assigned), or a call of a method only a module has (``parameters()``,
    ``eval()``).  Compiled on first use: most runs never ask."""
    return re.compile(
        r"(?:(?P<links>(?:\w+\s*\.\s*)*)(?:%s)\b(?!\s*[(\w]|\s*=[^=])|(?:%s)\s*\()"
        % ("|".join(sorted(api.BUILTIN_PARAMETER_ATTRS)), "|".join(sorted(api.MODULE_EVIDENCE_METHODS)))
    )


def treated_as_module(source: str, key: str) -> bool:
    """``key`` (``self.model.outc``) is followed somewhere in ``source`` by a parameter read below
    it or a module-only method call, through no configuration link (``key.config.weight``)."""
    if _through_configuration(key):
        return False
    pattern = _below_a_module()
    for end in _ends_of(source, key + "."):
        match = pattern.match(source, end)
        if match is not None and not _through_configuration(match.group("links")):
            return True
    return False


def _through_configuration(links: str | None) -> bool:
    return bool(links) and any(link.strip() in api.NOT_SUBMODULE_ATTRIBUTES for link in links.split("."))


def called_in(source: str, key: str) -> bool:
    """``key(`` appears in ``source``: it is called (an optimizer, which also has ``load_state_dict``, is not)."""
    return any(source.startswith("(", end) for end in _ends_of(source, key))


def _ends_of(source: str, literal: str) -> Iterator[int]:
    """Where each occurrence of ``literal`` not after a word character or a dot ends (the literal is
    searched for, then what precedes it: a leading lookbehind would be tried at every position)."""
    start = source.find(literal)
    while start >= 0:
        before = source[start - 1] if start else " "
        if not (before.isalnum() or before in "_."):
            yield start + len(literal)
        start = source.find(literal, start + 1)
