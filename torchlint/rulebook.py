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
PAGE_URL = "https://github.com/torchlint/torchlint/blob/main/rules/{file}"


@dataclass(frozen=True)
class RulePage:
    code: str
    path: Path
    text: str
    blocks: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return PAGE_URL.format(file=self.path.name)

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
