"""The rule book: one Markdown page per rule, shipped inside the package.

Pages have ruff's sections and executable code blocks tagged by their info
string: ``python bad``, ``python fixed``, ``python fixed-no_grad`` and
``python evidence``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from torchlint.rule import Rule

_BLOCK = re.compile(r"^```python[ \t]+(?P<tag>[\w-]+)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class RulePage:
    code: str
    path: Path
    text: str
    blocks: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The page shipped with the package, as a file URI (see ``rule_url`` for a configured base)."""
        return self.path.as_uri()

    def section(self, heading: str) -> str:
        match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", self.text, re.MULTILINE | re.DOTALL)
        return match.group(1).strip() if match else ""


def rulebook_dir() -> Path:
    """Installed wheels carry the pages in ``torchlint/_rulebook``; a source checkout in ``rules/``."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_rulebook", package.parent / "rules"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the rule book is missing from this installation")


@cache
def pages() -> dict[str, RulePage]:
    found: dict[str, RulePage] = {}
    for path in sorted(rulebook_dir().glob("TL*.md")):
        text = path.read_text(encoding="utf-8")
        code = path.name.split("-", 1)[0]
        blocks = {m.group("tag"): m.group("body") for m in _BLOCK.finditer(text)}
        found[code] = RulePage(code, path, text, blocks)
    return found


def page_for(rule: type[Rule] | str) -> RulePage | None:
    code = rule if isinstance(rule, str) else rule.code
    return pages().get(code.upper())


# ---------------------------------------------------------------- cheap metadata
@dataclass(frozen=True)
class RuleMeta:
    """What output formats need to name a rule, read from the rule book without importing
    any rule (or libcst): code and name from the page's file name, the summary from the
    page's first paragraph."""

    code: str
    name: str
    path: Path

    @property
    def summary(self) -> str:
        return _summary(self.path)


@cache
def rule_index() -> dict[str, RuleMeta]:
    """Every rule with a page, by code: from the page files' names alone (``TL001-rebind-update.md``)."""
    index: dict[str, RuleMeta] = {}
    for path in sorted(rulebook_dir().glob("TL*.md")):
        code, _, name = path.stem.partition("-")
        index[code] = RuleMeta(code, name, path)
    return index


@cache
def _summary(path: Path) -> str:
    """The page's first paragraph after the title and the status line (only its top is read)."""
    with open(path, encoding="utf-8") as handle:
        head = handle.read(2048)
    paragraphs = [p.strip() for p in head.split("\n\n")]
    summary = next((p for p in paragraphs[1:] if p and not p.startswith(("#", "**"))), "")
    return " ".join(summary.split())


def rule_url(code: str, base: str | None = None) -> str | None:
    """Where a rule's page is: the page shipped with the package (a file URI), or under the
    ``rule-url`` base the user configured (``{code}``, ``{name}`` and ``{file}`` are filled in;
    a base without them gets the page's file name appended).  None for an unknown code."""
    meta = rule_index().get(code.upper())
    if meta is None:
        return None
    if not base:
        return meta.path.as_uri()
    if "{" in base:
        return base.format(code=meta.code, name=meta.name, file=meta.path.name)
    return f"{base.rstrip('/')}/{meta.path.name}"
