"""Pull diagnostics (LSP 3.17 ``textDocument/diagnostic``), with a client that pulls.

Such a client is not also sent the text documents' diagnostics (no duplicates);
notebook cells are still sent theirs, since clients pull for text documents only.
This client also cannot resolve code actions: they come with their edits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402
from test_lsp import open_notebook  # noqa: E402
from test_lsp_latency import (  # noqa: E402
    HAS_PROC,
    MISTAKE,
    SERVER,
    change_document,
    check_latencies,
    initialize,
    make_client,
    open_document,
    published,
    pulled_after_changes,
    slowdown,
    worker_pids,
)

lsp = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pull")


def refresh(client: LanguageClient, params: None) -> None:
    client.refreshes.append(time.monotonic())  # type: ignore[attr-defined]


def make_pulling_client() -> LanguageClient:
    client = make_client({types.WORKSPACE_DIAGNOSTIC_REFRESH: refresh})
    client.refreshes = []  # type: ignore[attr-defined]
    return client


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, client_factory=make_pulling_client))
async def client(lsp_client: LanguageClient, workspace: Path):
    result = await initialize(lsp_client, workspace, pull=True, resolves=False)
    lsp_client.server_capabilities = result.capabilities  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def pull(client: LanguageClient, uri: str, previous: str | None = None) -> types.DocumentDiagnosticReport:
    return await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri), previous_result_id=previous)
    )


def published_for(client: LanguageClient, uri: str) -> list[types.PublishDiagnosticsParams]:
    return [params for _, params in client.arrivals if params.uri == uri]  # type: ignore[attr-defined]


@lsp
async def test_diagnostics_are_pulled_not_pushed(client: LanguageClient, workspace: Path):
    provider = client.server_capabilities.diagnostic_provider  # type: ignore[attr-defined]
    assert isinstance(provider, types.DiagnosticOptions)
    assert provider.identifier == "torchlint" and not provider.inter_file_dependencies

    uri = open_document(client, workspace / "step.py", MISTAKE)
    report = await pull(client, uri)
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport) and report.result_id
    (diagnostic,) = report.items
    assert diagnostic.code == "TL002" and diagnostic.range.start.line == 4
    assert published_for(client, uri) == []  # the lint is done: a publish would have come before the answer

    unchanged = await pull(client, uri, previous=report.result_id)
    assert isinstance(unchanged, types.RelatedUnchangedDocumentDiagnosticReport)
    assert unchanged.result_id == report.result_id

    # Two quick changes, then a pull: the answer is for the last text.
    change_document(client, uri, 2, "# one\n" + MISTAKE)
    change_document(client, uri, 3, "# one\n# two\n" + MISTAKE)
    newer = await pull(client, uri, previous=report.result_id)
    assert isinstance(newer, types.RelatedFullDocumentDiagnosticReport) and newer.result_id != report.result_id
    assert [d.range.start.line for d in newer.items] == [6]

    change_document(client, uri, 4, MISTAKE.replace("w -= lr * w.grad", "w.data.sub_(lr * w.grad)"))
    fixed = await pull(client, uri)
    assert isinstance(fixed, types.RelatedFullDocumentDiagnosticReport) and not fixed.items
    assert published_for(client, uri) == []


@lsp
async def test_code_actions_come_with_their_edits(client: LanguageClient, workspace: Path):
    uri = open_document(client, workspace / "eager.py", MISTAKE)
    (diagnostic,) = (await pull(client, uri)).items  # type: ignore[union-attr]
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(types.TextDocumentIdentifier(uri), diagnostic.range, types.CodeActionContext(diagnostics=[]))
    )
    assert actions is not None
    by_title = {action.title.split(":")[0]: action for action in actions if isinstance(action, types.CodeAction)}
    assert set(by_title) == {"Fix TL002", "Disable TL002 for this line", "Fix all torchlint findings"}
    for action in by_title.values():
        assert action.data is None and action.edit is not None and action.edit.changes is not None
    (fix,) = by_title["Fix TL002"].edit.changes[uri]  # type: ignore[union-attr, index]
    line = MISTAKE.splitlines()[4]
    assert line[: fix.range.start.character] + fix.new_text + line[fix.range.end.character :] == "w.data.sub_(lr * w.grad)"


@lsp
async def test_a_document_the_server_does_not_lint_has_no_diagnostics(client: LanguageClient, workspace: Path):
    readme = workspace / "README.md"
    readme.write_text("w -= lr * w.grad\n")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(readme.as_uri(), "markdown", 1, readme.read_text()))
    )
    report = await pull(client, readme.as_uri())
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport) and not report.items


@lsp
async def test_notebook_cells_are_still_published(client: LanguageClient, workspace: Path):
    notebook_uri = (workspace / "train.ipynb").as_uri()
    cells = {"setup": "import torch\nw = torch.randn(3, requires_grad=True)\n", "step": "w -= 0.1 * w.grad\n"}
    cell_uris = {name: f"{notebook_uri}#{name}" for name in cells}
    open_notebook(client, notebook_uri, {cell_uris[name]: ("python", text) for name, text in cells.items()})
    await published(client, cell_uris["step"], 1)
    assert [d.code for d in client.diagnostics[cell_uris["step"]]] == ["TL002"]
    # A pull for a cell gets nothing more: its diagnostics were published (no duplicates).
    report = await pull(client, cell_uris["step"])
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport) and not report.items


@lsp
async def test_a_config_change_asks_the_client_to_pull_again(client: LanguageClient, workspace: Path):
    project = workspace / "project"
    project.mkdir()
    config = project / "pyproject.toml"
    config.write_text('[tool.torchlint]\nignore = ["TL002"]\n')
    uri = open_document(client, project / "train.py", MISTAKE)
    report = await pull(client, uri)
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport) and not report.items

    config.write_text("[tool.torchlint]\n")
    before = len(client.refreshes)  # type: ignore[attr-defined]
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(config.as_uri(), types.FileChangeType.Changed)])
    )
    deadline = time.monotonic() + 10
    while len(client.refreshes) == before and time.monotonic() < deadline:  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)
    assert len(client.refreshes) > before  # type: ignore[attr-defined]
    again = await pull(client, uri, previous=report.result_id)
    assert isinstance(again, types.RelatedFullDocumentDiagnosticReport)
    assert [d.code for d in again.items] == ["TL002"]


@lsp
async def test_pulled_diagnostics_come_soon_after_each_change(client: LanguageClient, workspace: Path):
    slowed = slowdown()
    check_latencies("1,000-line document, change to pulled diagnostics", await pulled_after_changes(client, workspace), slowed)


@lsp
@pytest.mark.skipif(not HAS_PROC, reason="reads the process table from /proc")
async def test_a_killed_worker_is_replaced(client: LanguageClient, workspace: Path):
    (worker,) = worker_pids(client._server.pid)  # type: ignore[union-attr]
    os.kill(worker, signal.SIGKILL)
    uri = open_document(client, workspace / "after_crash.py", MISTAKE)
    report = await pull(client, uri)
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
    assert [d.code for d in report.items] == ["TL002"]
    (replacement,) = worker_pids(client._server.pid)  # type: ignore[union-attr]
    assert replacement != worker
