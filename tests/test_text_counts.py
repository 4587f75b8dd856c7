"""The call and header counts of ``names.py`` that compile no pattern per name count exactly
what the regular expressions they replace count (``count_after_non_word`` and the base-class
search), on the fixtures, the shipped examples and hand-made corner cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchlint.analysis.names import count_after_non_word, count_calls, count_headers, header_counts, names_in_class_bases

ROOT = Path(__file__).resolve().parent.parent
CORNERS = [
    "f(f (f\n(x.f(def f(def  f (deff(\tdef\tf\t(",
    "ff(f)(f  (f.f (_f( f_(f\u00e9( \u00e9f( f\u00a0(",
    "class A(B, f):\nclass f(object):\nclass C(\n  Base, f\n): pass\nclass D(f_, xf, f)",
    "class E(f.g): pass\nclass G(self.f) : x\nclass\nH(f",
    "def def f(def f(  class  f(class f(x(f)",
    "f",
    "",
    "(f(f(f(",
]


def _sources() -> list[str]:
    files = sorted((ROOT / "tests" / "fixtures").rglob("*.py"))[:120] + sorted((ROOT / "examples").rglob("*.py"))
    return CORNERS + [path.read_text(encoding="utf-8") for path in files]


def _names(source: str) -> list[str]:
    found = sorted(set(re.findall(r"\b(?:def|class)\s+(\w+)", source)))
    return found[:12] + ["f", "x", "self", "forward", "__init__", "\u00e9f"]


@pytest.mark.parametrize("after_dot", [True, False])
def test_call_counts_are_the_regex_counts(after_dot: bool) -> None:
    checked = 0
    for source in _sources():
        for name in _names(source):
            escaped = re.escape(name)
            assert count_calls(name, source, after_dot) == count_after_non_word(
                rf"{escaped}\s*\(", source, after_dot=after_dot
            ), (name, source[:80])
            checked += 1
    assert checked > 500


def test_header_counts_are_the_regex_counts() -> None:
    for source in _sources():
        for name in _names(source):
            escaped = re.escape(name)
            for keyword in ("def", "class"):
                assert count_headers(keyword, name, source) == count_after_non_word(
                    rf"{keyword}\s+{escaped}\s*\(", source
                ), (keyword, name, source[:80])


def test_header_counts_of_a_source_at_once_are_those_of_each_name() -> None:
    counted = 0
    for source in _sources():
        for keyword in ("def", "class"):
            counts = header_counts(keyword, source)
            for name in _names(source):
                assert counts.get(name, 0) == count_headers(keyword, name, source), (keyword, name, source[:80])
                counted += counts.get(name, 0)
    assert counted > 100


def test_base_class_search_is_the_regex_search() -> None:
    seen = set()
    for source in _sources():
        for name in _names(source):
            expected = re.search(rf"^[ \t]*class\s+\w+\s*\([^)]*\b{re.escape(name)}\b", source, re.MULTILINE) is not None
            assert names_in_class_bases(name, source) == expected, (name, source[:80])
            seen.add(expected)
    assert seen == {True, False}
