"""The incremental parser builds exactly the tree ``cst.parse_module`` builds, over edits of
real files, and a lint with it is the lint without it; the lint worker gives up a lint
when interrupted."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from conftest import FIXTURES, ROOT

from torchlint import engine, interrupt
from torchlint.analysis.positions import statement_starts
from torchlint.incremental import IncrementalParser, chunk_starts
from torchlint.lsp import worker
from torchlint.lsp.program import Program, analyse
from torchlint.settings import Settings

SOURCES = (
    sorted((ROOT / "examples").glob("**/*.py"))
    + sorted((ROOT / "benchmarks" / "corpus").glob("*.py"))
    + sorted(FIXTURES.glob("**/*.py"))
)
# Shapes where a cut at a column-0 line is no statement start, or the chunks disagree.
ODD = [
    '"""A docstring.\n\nUsage: python train.py\n"""\nimport torch\n\nx = 1\n',  # column-0 lines in a string
    "@decorator\ndef f():\n    pass\n\n\n@a.b(\n    1)\nclass C:\n    pass\nx = 1\n",
    "if a:\n    b = 1\n# between\nelse:\n    b = 2\ntry:\n    pass\nexcept E:\n    pass\nfinally:\n    pass\n",
    "x = [\n1,\n2,\n]\ny = (\n'a'\n)\nz = 3\n",  # closing brackets and items at column 0
    "def f():\n    pass\n    # indented comment\n\n# column-0 comment\nx = 1\n   \ny = 2\n",
    "x = 1\n  # indented after a simple statement\ny = 2\n",
    "x = 1\r\ny = 2\r\ndef f():\r\n    pass\r\n",  # CRLF
    "x = 1\ny = 2\r\nz = 3\n",  # mixed line breaks
    "a = 1\rb = 2\rc = 3\r",  # CR only
    "x = 1\ndef f():\n  pass\ndef g():\n    pass\ny = 2\n",  # two indentations: the first is the default
    "x = 1\nif y: pass\nelse:\n   z\ndef f():\n  pass\n",
    "match x:\n    case 1:\n        pass\ny = 2\nmatch y:\n  case 2:\n    pass\n",
    "x = 1 \\\n  + 2\ny = 3\n",
    "# header\n\n# first statement's comment\nimport torch\n\n\nx = 1",  # no trailing newline
    "x = 1\n\n\n# only comments after\n\n",
    "x = 1; y = 2\nz = 3\n",
    "",
    "# only a comment\n",
]


def edits(text: str, seed: str, count: int) -> list[str]:
    """``count`` successive versions of ``text``, each one random line edit away from the last."""
    rng = random.Random(seed)
    versions = []
    for _ in range(count):
        lines = text.split("\n")
        at = rng.randrange(len(lines))
        kind = rng.randrange(5)
        if kind == 0:
            lines[at] += "  # typed"
        elif kind == 1:
            lines.insert(at, lines[rng.randrange(len(lines))])  # a copy of another line
        elif kind == 2:
            del lines[at]
        elif kind == 3:
            lines.insert(at, "")
        else:
            lines[at] = lines[at][: len(lines[at]) // 2]  # half a line: often a syntax error
        text = "\n".join(lines)
        versions.append(text)
    return versions


def assert_same_tree(parser: IncrementalParser, source: str) -> bool:
    """Whether the source was built (``engine.parse`` builds with the parser only what CPython accepts)."""
    try:
        compile(source, "<test>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    with engine._node_validation_skipped():
        built = parser(source)
        expected = cst.parse_module(source)
    assert built.deep_equals(expected)
    for attribute in ("default_indent", "default_newline", "has_trailing_newline", "encoding"):
        assert getattr(built, attribute) == getattr(expected, attribute), attribute
    assert [len(line.comment.value) if line.comment else 0 for line in built.header] == [
        len(line.comment.value) if line.comment else 0 for line in expected.header
    ]
    starts = parser.statement_starts(built)
    assert starts is None or starts == statement_starts(expected.body, source)
    return True


@pytest.mark.parametrize("source", ODD)
def test_odd_shapes_build_the_whole_tree(source: str):
    parser = IncrementalParser()
    assert_same_tree(parser, source)
    assert_same_tree(parser, "import torch\n" + source)  # every chunk but the first reused
    assert_same_tree(parser, source + "\nw = 1\n")


def test_real_files_edited_build_the_whole_tree_and_reuse_statements():
    reused = parsed = 0
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        parser = IncrementalParser()
        assert_same_tree(parser, text)
        for version in edits(text, path.name, 3):
            if assert_same_tree(parser, version):
                reused, parsed = reused + parser.reused, parsed + parser.parsed
    assert reused > 4 * parsed  # an edit parses few statements again


def test_a_lint_with_the_incremental_parser_is_the_lint_without():
    settings = Settings()
    for path in SOURCES[::4]:
        parser = IncrementalParser()
        for version in [path.read_text(encoding="utf-8"), *edits(path.read_text(encoding="utf-8"), path.name, 2)]:
            program = Program.of_file(str(path), path.as_uri(), version)
            assert analyse(program, settings, build=parser).outcome() == analyse(program, settings).outcome(), path


def test_chunks_start_at_column_zero_statements_with_their_comments():
    source = "import torch\n\n# about x\nx = 1\n    # indented\ny = (\n1)\n@d\ndef f():\n    pass\nelse_ = 2\n"
    lines = [source.count("\n", 0, offset) for offset, _ in chunk_starts(source)]
    # "1)" (line 6) starts no statement: its chunk does not parse, and is parsed with the one above.
    assert lines == [0, 1, 5, 6, 7, 10]
    assert [line for _, line in chunk_starts(source)] == lines


def test_the_worker_gives_up_an_interrupted_lint_and_lints_the_next_request():
    program = Program.of_file("interrupted.py", "file:///interrupted.py", "import torch\n\n\ndef f(w):\n    w -= w.grad\n")
    interrupt.request()  # as the signal handler does while the lint runs
    try:
        assert worker.handle((worker.LINT, "key", program, Settings())) == (False, worker.INTERRUPTED)
    finally:
        interrupt.clear()
    ok, outcome = worker.handle((worker.LINT, "key", program, Settings()))
    assert ok and [finding.code for finding in outcome.findings] == ["TL002"]
    worker.forget("key")


def test_an_interrupted_parse_keeps_the_chunks_it_parsed(monkeypatch: pytest.MonkeyPatch):
    source = (ROOT / "benchmarks" / "corpus" / "mnist.py").read_text(encoding="utf-8")
    parser = IncrementalParser()
    checks = 0

    def interrupt_at_the_fifth_chunk() -> None:
        nonlocal checks
        checks += 1
        if checks == 5:
            raise interrupt.Interrupted

    with monkeypatch.context() as patched:
        patched.setattr(interrupt, "check", interrupt_at_the_fifth_chunk)
        with pytest.raises(interrupt.Interrupted):
            parser(source)
    assert_same_tree(parser, "# changed\n" + source)
    assert parser.reused == 3  # the first chunk changed; the second to fourth were parsed before


# ---------------------------------------------------------------- what CPython accepts, by chunks
def parse_outcome(source: str, build=None) -> object:
    """``engine.parse``'s tree, or its error (message, line, column)."""
    try:
        return engine.parse(source, build)
    except engine.SourceError as error:
        return (str(error), error.line, error.col)


BASE = "import torch\n\n\ndef f(x):\n    return x\n\n\ny = f(1)\n\n\ndef g():\n    pass\n"
DEEP = "z = " + "-" * (engine.MAX_NESTING + 20) + "1\n"


@pytest.mark.parametrize(
    "version",
    [
        BASE.replace("def g():", 'x = """\ndef g():'),  # a chunk seen accepted is now inside a string
        BASE.replace("y = f(1)", "y = f(1\n"),  # an open bracket: the next chunks are inside it
        BASE.replace("y = f(1)", "y = (\n"),
        BASE + DEEP,  # a new chunk nested too deeply
        BASE.replace("y = f(1)", DEEP.rstrip("\n")),
        BASE.replace("y = f(1)", "y = 1\nglobal y"),  # ties two statements together
        BASE.replace("def g():\n    pass", "def g():\npass"),  # an indentation error
        BASE.replace("y = f(1)", "y = f(1))"),
        BASE + "\n" + "import os\nfrom __future__ import annotations\n",
        "# changed\n" + BASE,
        BASE.replace("return x", "return x.grad"),
    ],
)
def test_chunks_seen_accepted_tell_what_cpython_accepts_as_the_whole_source_does(version: str):
    parser = IncrementalParser()
    for source in (BASE, version, BASE, version + "w = 2\n"):
        with_parser, whole = parse_outcome(source, parser), parse_outcome(source)
        if isinstance(whole, cst.Module):
            assert isinstance(with_parser, cst.Module) and with_parser.deep_equals(whole)
        else:
            assert with_parser == whole, source


def test_only_the_chunks_not_seen_accepted_are_checked(monkeypatch: pytest.MonkeyPatch):
    checked: list[str] = []
    each = engine._each_passes_nesting_check

    def recording(texts):
        checked.extend(texts)
        return each(texts)

    monkeypatch.setattr(engine, "_each_passes_nesting_check", recording)
    parser = IncrementalParser()
    engine.parse(BASE, parser)  # a first version: checked whole
    engine.parse(BASE.replace("y = f(1)", "y = f(2)"), parser)
    assert checked == ["\n\ny = f(2)\n"]  # a chunk takes the blank lines above it
