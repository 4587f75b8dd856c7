"""The speed-ups must not change what torchlint finds:

- the token pre-filter (a file without any of a rule's tokens is not analysed
  for that rule) gives the same findings as analysing everything;
- the fast traversal (``torchlint/analysis/walk.py``) makes exactly the
  callbacks libcst's ``visit`` makes, in the same order.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES, ROOT
from torchlint import engine
from torchlint.analysis import analyzer
from torchlint.analysis.walk import TRIVIA_TYPES, walk
from torchlint.rules import all_rules

CORPUS = ROOT / "benchmarks" / "corpus"
SOURCES = sorted(FIXTURES.glob("**/*.py")) + sorted(CORPUS.glob("*.py"))

# Syntax the fixtures and the corpus may not cover: every kind of node field
# (optional, sentinel, sequence, the f-string format spec that is skipped when absent).
EXOTIC = '''
from __future__ import annotations
import a.b as c, d
from .. import (x as y, z,)
from . import *
x: int = 1; y += 2; z @= w
async def f[T: int, *Ts, **P](a, /, b: T = 3, *args: *Ts, c, **kw) -> T:
    global g
    found = [i async for i in aiter() if i if not i]
    await f(*a, **k)
    async with a as (b, c), d:
        async for i, j in k:
            yield from i
    return (yield)
type Alias[T] = list[T]
@dec
@dec2(1)
class C[T](B, metaclass=M):
    """doc"""
    def m(self): ...
match p:
    case [1, 2, *rest] if rest: pass
    case {"k": v, **kw}: pass
    case Point(x=0, y=_) | None: pass
    case str() as s: pass
    case -1j | 1.5 | "a" "b" | b"x": pass
s = f"{a!r:>{width}.{prec}} {b=} {c:%Y} {'nested' + f'{d}'}"
t = rb'\\x'; u = f"""{x
}"""
lam = lambda a, *b, c=1, **d: (a, b)
del a[1:2:3], b.c
try:
    pass
except* (A, B) as e:
    raise X from e
else:
    pass
finally:
    pass
while (n := n - 1) > 0:
    break
else:
    v = ~a ** -b // c % d << e >> f & g | h ^ i
assert a < b <= c is not d not in e, "msg"
with (open(a) as f, open(b) as g):
    print(*[1], sep='', end=''); x[...] = {**a, 'b': 1}; {1, *s}; (a, *b) = c
if a: pass  # comment
elif b: pass
else: pass
'''


def _findings(source: str) -> list[tuple]:
    return [
        (f.line, f.col, f.end_line, f.end_col, f.code, f.message, f.fix.description if f.fix else None)
        for f in engine.lint_source(source, all_rules()).findings
    ]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_prefilter_keeps_every_finding(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = path.read_text(encoding="utf-8")
    filtered = _findings(source)
    monkeypatch.setattr(engine, "active_rules", lambda source, rules: list(rules))
    assert _findings(source) == filtered


def test_prefilter_skips_files_without_tokens() -> None:
    rules = [rule for rule in all_rules() if rule.tokens]
    assert engine.active_rules("import os\nprint(os.getcwd())\n", rules) == []
    for rule in rules:
        assert rule in engine.active_rules(f"x = 1  # {rule.tokens[0]}\n", rules)


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)  # also exercise "do not descend"

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node)))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("visit_attribute", id(node), attribute))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("leave_attribute", id(original_node), attribute))


@pytest.mark.parametrize("name", ["exotic", *[str(p.relative_to(ROOT)) for p in SOURCES]])
def test_walk_makes_the_same_callbacks_as_libcst(name: str) -> None:
    source = EXOTIC if name == "exotic" else (ROOT / name).read_text(encoding="utf-8")
    module = cst.parse_module(source)
    expected, actual = _Recorder(), _Recorder()
    module.visit(expected)
    walk(module, actual)
    assert actual.events == expected.events


def test_walk_skips_only_trivia_when_asked() -> None:
    module = cst.parse_module(EXOTIC)
    everything, pruned = _Recorder(), _Recorder()
    walk(module, everything)
    walk(module, pruned, skip_trivia=True)
    trivia = {id(node) for node in _all_nodes(module) if type(node) in TRIVIA_TYPES}
    assert [e for e in everything.events if e[1] not in trivia] == pruned.events


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    nodes: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    module.visit(Collect())
    return nodes


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fast_walk_finds_what_libcst_visit_finds(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = path.read_text(encoding="utf-8")
    fast = _findings(source)

    def libcst_visit(self: analyzer.Analyzer, node: cst.CSTNode, visitor: cst.CSTVisitor | None = None) -> None:
        node.visit(visitor or self)

    monkeypatch.setattr(analyzer.Analyzer, "_walk", libcst_visit)
    assert _findings(source) == fast
