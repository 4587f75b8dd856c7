"""The language server, driven as a subprocess over stdio by a real LSP client (pytest-lsp).

One server serves the whole module (starting one costs ~1-2 s); every test uses
its own documents, and the configuration tests their own project directory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pygls.protocol import default_converter  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402

from torchlint.lsp import worker  # noqa: E402
from torchlint.lsp.server import DEBOUNCE_SECONDS  # noqa: E402

lsp = pytest.mark.asyncio(loop_scope="module")  # every server test shares the module's server

MISTAKE = "import torch\n\nw = torch.randn(3, requires_grad=True)\nlr = 0.1\nw -= lr * w.grad\n"
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workspace")


def make_client() -> LanguageClient:
    """pytest-lsp's client, also keeping every publishDiagnostics (with its document version)."""
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # type: ignore[attr-defined]

    def record(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.published.append(params)  # type: ignore[attr-defined]
        client.diagnostics[params.uri] = params.diagnostics

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: record})
    return client


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "torchlint", "server"], client_factory=make_client),
)
async def client(lsp_client: LanguageClient, workspace: Path):
    registrations: list[types.Registration] = []
    lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: registrations.extend(params.registrations))
    lsp_client.registrations = registrations  # type: ignore[attr-defined]
    capabilities = client_capabilities("visual-studio-code")
    assert capabilities.text_document is not None
    capabilities.text_document.diagnostic = None  # this client is sent diagnostics (see test_lsp_pull.py)
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()
    )
    result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="workspace")],
        )
    )
    assert result.capabilities.notebook_document_sync is not None
    yield
    await lsp_client.shutdown_session()


# ---------------------------------------------------------------- helpers
async def next_diagnostics(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    """Wait for the next diagnostics published for ``uri`` (call ``forget`` before triggering them)."""
    deadline = time.monotonic() + TIMEOUT
    while uri not in client.diagnostics:
        if time.monotonic() > deadline:
            raise AssertionError(f"no diagnostics published for {uri}")
        await asyncio.sleep(0.01)
    return list(client.diagnostics[uri])


def forget(client: LanguageClient, *uris: str) -> None:
    for uri in uris:
        client.diagnostics.pop(uri, None)


async def open_file(client: LanguageClient, path: Path, text: str) -> list[types.Diagnostic]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    forget(client, uri)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
    )
    return await next_diagnostics(client, uri)


async def change_file(client: LanguageClient, uri: str, version: int, text: str) -> list[types.Diagnostic]:
    forget(client, uri)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    return await next_diagnostics(client, uri)


async def actions_for(
    client: LanguageClient, uri: str, where: types.Range, only: list[str] | None = None
) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=where,
            context=types.CodeActionContext(diagnostics=[], only=only),
        )
    )
    return [action for action in result or [] if isinstance(action, types.CodeAction)]


def action_titled(actions: list[types.CodeAction], prefix: str) -> types.CodeAction:
    found = [action for action in actions if action.title.startswith(prefix)]
    assert len(found) == 1, [action.title for action in actions]
    return found[0]


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits the way a client does: positions are in UTF-16 code units."""

    def offset(position: types.Position) -> int:
        lines = text.splitlines(keepends=True)
        start = sum(len(line) for line in lines[: position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        units, chars = 0, 0
        while units < position.character and chars < len(line):
            units += len(line[chars].encode("utf-16-le")) // 2
            chars += 1
        return start + chars

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


async def edits_of(client: LanguageClient, action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    """The action's edits of ``uri`` (its only document), resolved the way an editor does it."""
    assert action.edit is None and action.data is not None  # computed only when picked
    action = await client.code_action_resolve_async(action)
    assert action.edit is not None and action.edit.changes is not None
    assert set(action.edit.changes) == {uri}
    return list(action.edit.changes[uri])


def whole_line(line: int) -> types.Range:
    return types.Range(types.Position(line, 0), types.Position(line, 1000))


# ---------------------------------------------------------------- text documents
@lsp
async def test_diagnostic_quick_fix_then_clean(client: LanguageClient, workspace: Path):
    path = workspace / "step.py"
    (diagnostic,) = await open_file(client, path, MISTAKE)
    assert diagnostic.code == "TL002"
    assert diagnostic.source == "torchlint"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.range == types.Range(types.Position(4, 0), types.Position(4, 16))
    assert diagnostic.code_description is not None
    assert diagnostic.code_description.href.endswith("/rules/TL002-leaf-inplace.md")

    actions = await actions_for(client, path.as_uri(), diagnostic.range)
    fix = action_titled(actions, "Fix TL002: ")
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    assert "(unsafe)" not in fix.title
    assert fix.diagnostics and fix.diagnostics[0].code == "TL002"
    fixed = apply(MISTAKE, await edits_of(client, fix, path.as_uri()))
    assert fixed.splitlines()[4] == "w.data.sub_(lr * w.grad)"

    assert await change_file(client, path.as_uri(), 2, fixed) == []
    stale = await client.code_action_resolve_async(fix)  # offered for a text that is gone
    assert stale.edit is None


@lsp
async def test_positions_are_utf16_code_units(client: LanguageClient, workspace: Path):
    # "é" is one UTF-16 unit, each emoji two: the finding starts at character 13, not 11.
    prefix = 's = "é😀😀"; '
    text = f"import torch\nw = torch.randn(3, requires_grad=True)\n{prefix}w = w - 0.1 * w.grad\n"
    path = workspace / "a folder" / "ünïcode.py"  # the uri has percent-escapes
    (diagnostic,) = await open_file(client, path, text)
    assert diagnostic.code == "TL001"
    start = len(prefix.encode("utf-16-le")) // 2
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (2, start) == (2, 13)
    assert diagnostic.range.end.character == start + len("w = w - 0.1 * w.grad")

    actions = await actions_for(client, path.as_uri(), diagnostic.range)
    fixed = apply(text, await edits_of(client, action_titled(actions, "Fix TL001"), path.as_uri()))
    assert fixed.splitlines()[2] == f"{prefix}w.data.sub_(0.1 * w.grad)"
    noqa = apply(text, await edits_of(client, action_titled(actions, "Disable TL001"), path.as_uri()))
    assert noqa.splitlines()[2] == f"{prefix}w = w - 0.1 * w.grad  # noqa: TL001"


@lsp
async def test_hover_explains_the_rule(client: LanguageClient, workspace: Path):
    path = workspace / "hover.py"
    (diagnostic,) = await open_file(client, path, MISTAKE)
    result = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(path.as_uri()), types.Position(4, 5))
    )
    assert result is not None and isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.Markdown
    text = result.contents.value
    assert text.startswith("**TL002** (leaf-inplace)")
    assert "#### What it does" in text and "#### Why is this bad?" in text
    assert "TL002-leaf-inplace.md" in text
    assert result.range == diagnostic.range

    nothing = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(path.as_uri()), types.Position(0, 3))
    )
    assert nothing is None


@lsp
async def test_fix_all_applies_every_safe_fix(client: LanguageClient, workspace: Path):
    text = (
        "import torch\n\n"
        "w = torch.randn(3, requires_grad=True)\n"
        "b = torch.zeros(3, requires_grad=True)\n"
        "w -= 0.1 * w.grad\n"
        "b = b - 0.1 * b.grad\n"
    )
    path = workspace / "fix_all.py"
    diagnostics = await open_file(client, path, text)
    assert sorted(d.code for d in diagnostics) == ["TL001", "TL002"]

    actions = await actions_for(client, path.as_uri(), whole_line(0), only=[types.CodeActionKind.SourceFixAll])
    (fix_all,) = actions
    assert fix_all.title == "Fix all torchlint findings"
    assert fix_all.kind == "source.fixAll.torchlint"
    fixed = apply(text, await edits_of(client, fix_all, path.as_uri()))
    assert fixed.splitlines()[-2:] == ["w.data.sub_(0.1 * w.grad)", "b.data.sub_(0.1 * b.grad)"]
    assert await change_file(client, path.as_uri(), 2, fixed) == []

    # Asked for quick fixes only, the server does not offer source actions.
    quick = await actions_for(client, path.as_uri(), whole_line(0), only=[types.CodeActionKind.QuickFix])
    assert quick == []


@lsp
async def test_noqa_action_adds_and_merges(client: LanguageClient, workspace: Path):
    path = workspace / "noqa.py"
    text = MISTAKE.replace("w -= lr * w.grad\n", "w -= lr * w.grad  # noqa: E501\n")
    (diagnostic,) = await open_file(client, path, text)
    actions = await actions_for(client, path.as_uri(), diagnostic.range)
    disable = action_titled(actions, "Disable TL002 for this line")
    silenced = apply(text, await edits_of(client, disable, path.as_uri()))
    assert silenced.splitlines()[4] == "w -= lr * w.grad  # noqa: E501, TL002"
    assert await change_file(client, path.as_uri(), 2, silenced) == []

    plain = await change_file(client, path.as_uri(), 3, MISTAKE)
    actions = await actions_for(client, path.as_uri(), plain[0].range)
    silenced = apply(MISTAKE, await edits_of(client, action_titled(actions, "Disable TL002"), path.as_uri()))
    assert silenced.splitlines()[4] == "w -= lr * w.grad  # noqa: TL002"
    assert await change_file(client, path.as_uri(), 4, silenced) == []


@lsp
async def test_bad_input_gets_one_diagnostic_and_the_server_keeps_serving(client: LanguageClient, workspace: Path):
    path = workspace / "broken.py"
    broken = "import torch\nw = torch.randn(3, requires_grad=True)\ndef f(:\n    pass\n"
    (diagnostic,) = await open_file(client, path, broken)
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.source == "torchlint" and "syntax error" in diagnostic.message
    assert diagnostic.range.start.line == 2
    assert await actions_for(client, path.as_uri(), whole_line(2)) == []
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(path.as_uri()), types.Position(2, 4))
    )
    assert hover is None

    for version, garbage in enumerate(["\0\0\0", "(" * 400 + "\n", "x = '\ud800'\n", ""], start=2):
        await change_file(client, path.as_uri(), version, garbage)
    (finding,) = await change_file(client, path.as_uri(), 10, MISTAKE)
    assert finding.code == "TL002"


@lsp
async def test_a_syntax_error_is_reported_without_any_rule_token(client: LanguageClient, workspace: Path):
    """No rule can fire on this file, so nothing but the syntax check looks at it."""
    (diagnostic,) = await open_file(client, workspace / "no_tokens.py", "x = 1\nif x\n    y = 2\n")
    assert diagnostic.severity == types.DiagnosticSeverity.Error and "syntax error" in diagnostic.message
    assert diagnostic.range.start.line == 1


@lsp
async def test_a_burst_of_changes_is_linted_once(client: LanguageClient, workspace: Path):
    path = workspace / "typing.py"
    await open_file(client, path, MISTAKE)
    uri = path.as_uri()
    forget(client, uri)
    before = len(client.published)  # type: ignore[attr-defined]
    started = time.monotonic()
    # Type a comment above the mistake, the keys closer together than a lint takes: the
    # first change is linted at once; a newer text replaces the lint waiting (or
    # interrupts the one running), so the burst is linted once more, at its end (where the
    # worker cannot be interrupted, once the debounce has passed).  The first lint's
    # diagnostics are published only if they come before the next change does.
    for version, typed in enumerate(["#", "# a", "# ab", "# abc\n"], start=2):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(text=typed + MISTAKE)],
            )
        )
    while not any(p.uri == uri and p.version == 5 for p in client.published[before:]):  # type: ignore[attr-defined]
        assert time.monotonic() - started < TIMEOUT
        await asyncio.sleep(0.01)
    if worker.INTERRUPT_SIGNAL is None:
        assert time.monotonic() - started >= DEBOUNCE_SECONDS
    versions = [p.version for p in client.published[before:] if p.uri == uri]  # type: ignore[attr-defined]
    assert versions[-1] == 5 and versions == sorted(versions)
    assert len(versions) < 4  # the burst was merged (normally [5], or [2, 5] when the first lint wins the race)
    (diagnostic,) = client.diagnostics[uri]
    assert diagnostic.range.start.line == 5  # positioned in the final text

    forget(client, uri)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert [d.code for d in await next_diagnostics(client, uri)] == ["TL002"]


@lsp
async def test_diagnostics_follow_edits_that_add_and_remove_findings(client: LanguageClient, workspace: Path):
    # The worker keeps what it found out about the statements an edit left alone (their
    # parse, facts of their subtrees: ``analysis/memo.py``); the findings in them still follow
    # the edits elsewhere (a call site, a flag), and are those of a whole lint of each text.
    from test_memo import EDITS, SOURCE

    from torchlint.lsp.program import Program, analyse
    from torchlint.settings import Settings

    path = workspace / "follows.py"
    found = [await open_file(client, path, SOURCE)]
    for version, text in enumerate([*EDITS, *EDITS[::-1]], start=2):
        found.append(await change_file(client, path.as_uri(), version, text))
        whole = analyse(Program.of_file(str(path), path.as_uri(), text), Settings()).findings
        assert sorted((d.range.start.line + 1, str(d.code)) for d in found[-1]) == sorted(
            (finding.line, finding.code) for finding in whole
        ), text
    lines = [sorted((d.range.start.line, str(d.code)) for d in diagnostics) for diagnostics in found[:6]]
    assert lines[0] == [(4, "TL002"), (10, "TL008")]
    assert lines[1:6] == [[(10, "TL008")], lines[0], [(4, "TL002")], [(5, "TL002"), (11, "TL008")], [(10, "TL008")]]


# ---------------------------------------------------------------- notebooks
def change_notebook(client: LanguageClient, notebook_uri: str, version: int, cells: types.NotebookDocumentCellChanges) -> None:
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=version, uri=notebook_uri),
            change=types.NotebookDocumentChangeEvent(cells=cells),
        )
    )


def edit_cell(version: int, cell_uri: str, change: types.TextDocumentContentChangeEvent) -> types.NotebookDocumentCellChanges:
    document = types.VersionedTextDocumentIdentifier(version=version, uri=cell_uri)
    return types.NotebookDocumentCellChanges(
        text_content=[types.NotebookDocumentCellContentChanges(document=document, changes=[change])]
    )


def change_cell(client: LanguageClient, notebook_uri: str, version: int, cell_uri: str, text: str) -> None:
    change_notebook(client, notebook_uri, version, edit_cell(version, cell_uri, types.TextDocumentContentChangeWholeDocument(text=text)))


def open_notebook(client: LanguageClient, notebook_uri: str, cells: dict[str, tuple[str, str]]) -> None:
    """Open a notebook of ``cells``: cell uri -> (language id, text); "markdown" cells are markup."""
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook_uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(
                        kind=types.NotebookCellKind.Markup if language == "markdown" else types.NotebookCellKind.Code,
                        document=uri,
                    )
                    for uri, (language, _) in cells.items()
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri, language, 1, text) for uri, (language, text) in cells.items()
            ],
        )
    )


@lsp
async def test_notebook_cells_are_one_program(client: LanguageClient, workspace: Path):
    notebook_uri = (workspace / "train.ipynb").as_uri()
    cells = {
        "setup": "import torch\nw = torch.randn(3, requires_grad=True)",  # no final newline
        "notes": "# Training\nw -= 1",  # a markdown cell: never linted
        "step": "%time x = 1\n!pip list\nfor _ in range(3):\n    w -= 0.1 * w.grad\n",
    }
    cell_uris = {name: f"{notebook_uri}#{name}" for name in cells}
    forget(client, *cell_uris.values())
    languages = {"setup": "python", "notes": "markdown", "step": "python"}
    open_notebook(client, notebook_uri, {cell_uris[name]: (languages[name], text) for name, text in cells.items()})
    (diagnostic,) = await next_diagnostics(client, cell_uris["step"])
    assert await next_diagnostics(client, cell_uris["setup"]) == []
    assert cell_uris["notes"] not in client.diagnostics
    assert diagnostic.code == "TL002"
    assert diagnostic.range == types.Range(types.Position(3, 4), types.Position(3, 21))

    actions = await actions_for(client, cell_uris["step"], diagnostic.range)
    fixed = apply(cells["step"], await edits_of(client, action_titled(actions, "Fix TL002"), cell_uris["step"]))
    assert fixed == "%time x = 1\n!pip list\nfor _ in range(3):\n    w.data.sub_(0.1 * w.grad)\n"
    (fix_all,) = await actions_for(client, cell_uris["step"], whole_line(0), only=["source.fixAll"])
    assert apply(cells["step"], await edits_of(client, fix_all, cell_uris["step"])) == fixed
    silenced = apply(cells["step"], await edits_of(client, action_titled(actions, "Disable TL002"), cell_uris["step"]))
    assert silenced.splitlines()[3] == "    w -= 0.1 * w.grad  # noqa: TL002"

    forget(client, *cell_uris.values())
    change_cell(client, notebook_uri, 2, cell_uris["step"], fixed)
    assert await next_diagnostics(client, cell_uris["step"]) == []

    # A syntax error is reported in the cell that has it, at its line.
    forget(client, *cell_uris.values())
    change_cell(client, notebook_uri, 3, cell_uris["setup"], "import torch\nw = torch.randn(3, requires_grad=True\n")
    (error,) = await next_diagnostics(client, cell_uris["setup"])
    assert error.severity == types.DiagnosticSeverity.Error and error.range.start.line == 1
    assert await next_diagnostics(client, cell_uris["step"]) == []

    forget(client, *cell_uris.values())
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(notebook_uri),
            cell_text_documents=[types.TextDocumentIdentifier(cell_uris[name]) for name in cells],
        )
    )
    assert await next_diagnostics(client, cell_uris["setup"]) == []


def cli_report(path: Path) -> tuple[list[dict], str]:
    """``torchlint check --output-format json`` of a file: its findings, and what it says on stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "check", "--output-format", "json", str(path)],
        capture_output=True, text=True, timeout=60,
    )
    return json.loads(result.stdout), result.stderr


@lsp
async def test_a_notebook_cell_that_does_not_parse_and_indented_cells_as_the_cli_sees_them(
    client: LanguageClient, workspace: Path
):
    # The same cells as a notebook file on disk and as a notebook open in the editor.
    cells = {
        "setup": ("python", "import torch\nw = torch.randn(3, requires_grad=True)\n"),
        "notes": ("markdown", "# Training"),
        "broken": ("python", "x = 1\nif x\n    y = 2\n"),
        # Every line indented: IPython dedents the cell before it runs it (magics included).
        "step": ("python", "    %time z = 1\n    !nvidia-smi\n    for _ in range(2):\n        w -= 0.1 * w.grad\n"),
    }
    path = workspace / "as_cli.ipynb"
    path.write_text(json.dumps({
        "cells": [{"cell_type": "code" if language == "python" else "markdown", "source": text, "metadata": {},
                   **({"outputs": [], "execution_count": None} if language == "python" else {})}
                  for language, text in cells.values()],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }))
    cli_findings, cli_errors = cli_report(path)
    uris = {name: f"{path.as_uri()}#{name}" for name in cells}
    forget(client, *uris.values())
    open_notebook(client, path.as_uri(), {uris[name]: cell for name, cell in cells.items()})

    # The cell that does not parse is reported where the CLI reports it (cell 3, line 2, column 5) ...
    (error,) = await next_diagnostics(client, uris["broken"])
    assert "cell 3:2:5: error: syntax error: expected ':'" in cli_errors
    assert error.severity == types.DiagnosticSeverity.Error and error.message == "syntax error: expected ':'"
    assert error.range.start == types.Position(1, 4)
    # ... and the other cells are still one program: `w` of the first cell is a leaf in the last.
    assert await next_diagnostics(client, uris["setup"]) == []
    (finding,) = await next_diagnostics(client, uris["step"])
    (expected,) = cli_findings
    assert (finding.code, expected["cell"]) == (expected["code"], 4)
    # Columns count in the cell as stored, with the indentation IPython removed.
    start, end = expected["location"], expected["end_location"]
    assert finding.range == types.Range(types.Position(start["row"] - 1, start["column"] - 1),
                                        types.Position(end["row"] - 1, end["column"] - 1))
    assert finding.range.start == types.Position(3, 8)

    step = cells["step"][1]
    actions = await actions_for(client, uris["step"], finding.range)
    fixed = apply(step, await edits_of(client, action_titled(actions, "Fix TL002"), uris["step"]))
    assert fixed == step.replace("w -= 0.1 * w.grad", "w.data.sub_(0.1 * w.grad)")
    (fix_all,) = await actions_for(client, uris["step"], whole_line(0), only=["source.fixAll"])
    assert apply(step, await edits_of(client, fix_all, uris["step"])) == fixed
    silenced = apply(step, await edits_of(client, action_titled(actions, "Disable TL002"), uris["step"]))
    assert silenced == step.replace("w.grad\n", "w.grad  # noqa: TL002\n")
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uris["step"]), types.Position(3, 10))
    )
    assert hover is not None and "TL002" in str(hover.contents)

    # Once the broken cell parses, it is part of the program again (its `x` is linted too).
    forget(client, *uris.values())
    change_cell(client, path.as_uri(), 2, uris["broken"], "x = 1\nif x:\n    y = 2\n")
    assert await next_diagnostics(client, uris["broken"]) == []
    assert [d.code for d in await next_diagnostics(client, uris["step"])] == ["TL002"]


@lsp
async def test_vscode_notebook_cells_added_edited_and_removed(client: LanguageClient, workspace: Path):
    # VS Code names cells with the vscode-notebook-cell scheme and an escaped fragment.
    path = workspace / "vscode.ipynb"
    notebook_uri = path.as_uri()
    cell = {name: f"vscode-notebook-cell:{path}#{tag}" for name, tag in [("setup", "W0sZmlsZQ%3D%3D"), ("step", "W1sZmlsZQ%3D%3D"), ("more", "W2sZmlsZQ%3D%3D")]}
    open_notebook(
        client, notebook_uri,
        {cell["setup"]: ("python", "import torch\nw = torch.randn(3, requires_grad=True)\n"), cell["step"]: ("python", "lr = 0.1\n")},
    )
    assert await next_diagnostics(client, cell["step"]) == []

    # A cell is added after the others (a structure change), with a mistake that needs the first cell's `w`.
    forget(client, *cell.values())
    added = "for _ in range(2):\n    w -= lr * w.grad\n"
    new_cell = types.NotebookCell(kind=types.NotebookCellKind.Code, document=cell["more"])
    structure = types.NotebookDocumentCellChangeStructure(
        array=types.NotebookCellArrayChange(start=2, delete_count=0, cells=[new_cell]),
        did_open=[types.TextDocumentItem(cell["more"], "python", 1, added)],
    )
    change_notebook(client, notebook_uri, 2, types.NotebookDocumentCellChanges(structure=structure))
    (diagnostic,) = await next_diagnostics(client, cell["more"])
    assert diagnostic.code == "TL002" and diagnostic.range.start == types.Position(1, 4)

    # An incremental edit of that cell (VS Code sends ranges), then the cell that defines `w` removed.
    forget(client, *cell.values())
    top = types.Range(types.Position(0, 0), types.Position(0, 0))
    change_notebook(client, notebook_uri, 3, edit_cell(2, cell["more"], types.TextDocumentContentChangePartial(range=top, text="# train\n")))
    (moved,) = await next_diagnostics(client, cell["more"])
    assert moved.range.start == types.Position(2, 4)
    forget(client, *cell.values())
    structure = types.NotebookDocumentCellChangeStructure(
        array=types.NotebookCellArrayChange(start=0, delete_count=1),
        did_close=[types.TextDocumentIdentifier(cell["setup"])],
    )
    change_notebook(client, notebook_uri, 4, types.NotebookDocumentCellChanges(structure=structure))
    assert await next_diagnostics(client, cell["more"]) == []  # `w` is no longer known to require grad
    assert await next_diagnostics(client, cell["setup"]) == []  # the removed cell's diagnostics are cleared


@lsp
async def test_jupyterlab_lsp_virtual_document(client: LanguageClient, workspace: Path):
    # jupyterlab-lsp sends a notebook as one Python text document under .virtual_documents/,
    # named like the notebook: the code cells joined by blank lines, IPython syntax replaced by calls.
    cells = [
        'import torch\nget_ipython().run_line_magic("time", " w = torch.randn(3, requires_grad=True)")\nw = torch.randn(3, requires_grad=True)',
        'get_ipython().getoutput("nvidia-smi")\nlr = 0.1',
        'get_ipython().run_cell_magic("capture", "", """print(1)\n""")',
        "w -= lr * w.grad",
    ]
    text = "\n\n\n".join(cells) + "\n"
    path = workspace / ".virtual_documents" / "train.ipynb"
    line = text.splitlines().index("w -= lr * w.grad")
    (diagnostic,) = await open_file(client, path, text)
    assert diagnostic.code == "TL002" and diagnostic.range.start == types.Position(line, 0)
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(path.as_uri()), types.Position(line, 3))
    )
    assert hover is not None and "TL002" in str(hover.contents)
    actions = await actions_for(client, path.as_uri(), diagnostic.range)
    fixed = apply(text, await edits_of(client, action_titled(actions, "Fix TL002"), path.as_uri()))
    assert fixed.splitlines()[line] == "w.data.sub_(lr * w.grad)"
    # jupyterlab-lsp sends the whole text on every change.
    assert await change_file(client, path.as_uri(), 2, fixed) == []


# ---------------------------------------------------------------- configuration
@lsp
async def test_pyproject_config_is_used_and_reloaded(client: LanguageClient, workspace: Path):
    # The client said it can watch files, so the server asked it to watch pyproject.toml files.
    (watch,) = client.registrations  # type: ignore[attr-defined]
    assert watch.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    project = workspace / "project"
    config = project / "pyproject.toml"
    project.mkdir()
    config.write_text('[tool.torchlint]\nignore = ["TL002"]\nextend-exclude = ["generated"]\n')
    path = project / "src" / "train.py"
    assert await open_file(client, path, MISTAKE) == []
    assert await open_file(client, project / "generated" / "model.py", MISTAKE.replace("-=", "= w -")) == []

    config.write_text('[tool.torchlint]\nignore = []\n')
    forget(client, path.as_uri())
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(config.as_uri(), types.FileChangeType.Changed)])
    )
    assert [d.code for d in await next_diagnostics(client, path.as_uri())] == ["TL002"]

    # An invalid configuration is reported and the defaults are used meanwhile.
    config.write_text('[tool.torchlint]\nselct = ["TL001"]\n')
    forget(client, path.as_uri())
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(config.as_uri())))
    assert [d.code for d in await next_diagnostics(client, path.as_uri())] == ["TL002"]
    assert any("selct" in message.message for message in client.messages)


@lsp
async def test_per_file_ignores_and_file_level_noqa_as_in_the_cli(client: LanguageClient, workspace: Path):
    project = workspace / "ignores"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\nper-file-ignores = { "scripts/*" = ["TL002"] }\nrule-url = "https://docs.example.org/{code}"\n'
    )
    files = {
        project / "scripts" / "run.py": MISTAKE,
        project / "quiet.py": "# flake8: noqa\n" + MISTAKE,
        project / "loud.py": "# flake8: noqa: E501\n" + MISTAKE,  # only E501: not a file-level exemption
    }
    published = {path.name: await open_file(client, path, text) for path, text in files.items()}
    cli_findings, _ = cli_report(project)
    assert [Path(finding["filename"]).name for finding in cli_findings] == ["loud.py"]
    assert {name: [d.code for d in found] for name, found in published.items()} == {
        "run.py": [], "quiet.py": [], "loud.py": ["TL002"]
    }
    # Rule links point where the project's `rule-url` says, as in the CLI's output.
    (diagnostic,) = published["loud.py"]
    assert diagnostic.code_description is not None
    assert diagnostic.code_description.href == cli_findings[0]["url"] == "https://docs.example.org/TL002"
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier((project / "loud.py").as_uri()), diagnostic.range.start)
    )
    assert hover is not None and "(https://docs.example.org/TL002)" in str(hover.contents)


# ---------------------------------------------------------------- in-process
def test_server_without_pygls_explains_how_to_install(monkeypatch: pytest.MonkeyPatch, capsys):
    from torchlint.cli import main

    monkeypatch.setitem(sys.modules, "pygls", None)  # makes `import pygls` fail
    assert main(["server"]) == 2
    assert "pip install 'torchlint[lsp]'" in capsys.readouterr().err


def test_unsafe_fixes_are_labelled():
    from torchlint.engine import fixable
    from torchlint.lsp.convert import CellTexts, code_actions
    from torchlint.lsp.program import Program, action_edits, analyse
    from torchlint.lsp.text import utf16_units
    from torchlint.rule import FixSafety
    from torchlint.settings import Settings

    analysis = analyse(Program.of_file("/t.py", "file:///t.py", MISTAKE), Settings())
    (finding,) = analysis.findings
    assert finding.fix is not None
    unsafe = dataclasses.replace(finding, fix=dataclasses.replace(finding.fix, safety=FixSafety.UNSAFE))
    analysis.findings = [unsafe]
    assert not fixable(unsafe, unsafe=False)
    texts = CellTexts(analysis, utf16_units)
    actions = code_actions(texts, 0, whole_line(4), None)
    titles = [action.title for action in actions]
    # No "Fix all": it applies safe fixes only, and the one fix here is unsafe.
    assert titles == ["Fix TL002: update `w.data` in place (unsafe)", "Disable TL002 for this line"]
    assert actions[0].is_preferred is False
    assert all(action.edit is None and isinstance(action.data, dict) for action in actions)
    fix = action_edits(analysis, actions[0].data, Settings())  # what the worker computes
    (edit,) = fix[0]
    line = MISTAKE.splitlines()[4]
    assert edit.start.line == edit.end.line == 4
    assert line[: edit.start.char] + edit.text + line[edit.end.char :] == "w.data.sub_(lr * w.grad)"

    analysis.findings = [finding]
    (fix_all,) = code_actions(texts, 0, whole_line(4), ["source"])
    assert fix_all.title == "Fix all torchlint findings" and fix_all.data == {"uri": "file:///t.py", "action": "fixAll"}


def test_minimal_edit_keeps_crlf_pairs_whole():
    from torchlint.lsp.text import Point, line_starts, minimal_edit

    old, new = "a = 1\r\nb = 2\r\n", "a = 1\r\nc = 3\r\nb = 2\r\n"
    edit = minimal_edit(old, new)
    assert edit is not None
    starts = line_starts(old)
    start, end = starts[edit.start.line] + edit.start.char, starts[edit.end.line] + edit.end.char
    assert old[:start] + edit.text + old[end:] == new
    # A change right inside a "\r\n" pair is widened to cover the whole pair.
    split = minimal_edit("a\r\nb", "a\r\r\nb")
    assert split == type(edit)(Point(0, 1), Point(1, 0), "\r\r\n")
    assert minimal_edit(old, old) is None
    assert minimal_edit("x\n", "x\ny\n") == type(edit)(Point(1, 0), Point(1, 0), "y\n")


def test_a_crashing_rule_becomes_one_diagnostic():
    from torchlint.lsp.convert import CellTexts, diagnostics_by_cell
    from torchlint.lsp.program import Program, analyse
    from torchlint.lsp.text import utf16_units
    from torchlint.rule import Rule
    from torchlint.settings import Settings

    class Crashing(Rule):
        code, name, summary = "TL999", "crashing", "always crashes"

        def visit_Name(self, node: object) -> None:
            raise RuntimeError("boom")

    analysis = analyse(Program.of_file("/t.py", "file:///t.py", MISTAKE), Settings(), [Crashing])
    assert analysis.crash is not None and "RuntimeError: boom" in analysis.crash
    (diagnostic,) = diagnostics_by_cell(CellTexts(analysis, utf16_units))[0]
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert "a torchlint bug" in diagnostic.message and "boom" in diagnostic.message


def test_the_worker_collects_garbage_between_requests_not_during_them():
    import gc
    import os

    from torchlint.lsp.worker import MAX_UNCOLLECTED, Collector

    enabled = gc.isenabled()
    read_end, write_end = os.pipe()
    try:
        with open(read_end, "rb", buffering=0) as requests, open(write_end, "wb", buffering=0) as server:
            collector = Collector()
            assert not gc.isenabled()  # no automatic collection in the middle of a lint
            frozen = gc.get_freeze_count()
            collector.when_idle(requests)
            assert gc.get_freeze_count() == frozen  # nothing served yet: nothing to collect
            server.write(b"x")  # a request is waiting: it is served first
            for _ in range(MAX_UNCOLLECTED - 1):
                collector.served()
                collector.when_idle(requests)
                assert gc.get_freeze_count() == frozen
            collector.served()  # requests back to back for too long: collect anyway
            collector.when_idle(requests)
            assert gc.get_freeze_count() > frozen  # the survivors are frozen: never scanned again
            requests.read(1)
            kept = [[]]  # allocated after the freeze
            frozen = gc.get_freeze_count()
            collector.served()
            collector.when_idle(requests)  # idle: collects
            assert gc.get_freeze_count() > frozen and kept
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
