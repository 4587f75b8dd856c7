"""The language server: keeps one analysis per open Python file or notebook,
publishes diagnostics (or answers pull-diagnostic requests), and answers code-action
and hover requests from it.

The event loop never parses: lints and fix edits run in a worker process
(``torchlint.lsp.linter``), so a request is answered while a long lint runs.

A *target* is what gets linted as one program: a Python text document (keyed by
its uri) or a notebook (keyed by the notebook's uri; its cells are separate
text documents that receive their own diagnostics).
"""

from __future__ import annotations

import asyncio
import itertools
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from torchlint import __version__
from torchlint.config import CONFIG_NAME
from torchlint.files import PYTHON_SUFFIXES
from torchlint.lsp import worker
from torchlint.lsp.convert import FIX_ALL_KIND, CellTexts, code_actions, diagnostics_by_cell, hover
from torchlint.lsp.linter import Lint, Linter
from torchlint.lsp.program import Analysis, Cell, Program
from torchlint.lsp.text import UnitCounter
from torchlint.lsp.project import Project, load_project
from torchlint.settings import Settings

# Where the worker cannot be interrupted (see ``schedule``), changes closer together than
# this while it is busy are a burst (a paste, an editor's multi-step edit, fast keys),
# linted once at its end; the first change after a quiet spell is linted at once.
DEBOUNCE_SECONDS = 0.05
# A request waits for a lint at most this long (a worker that hangs must not hang the editor).
LINT_TIMEOUT = 60.0
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*")
    ],
    save=True,
)
DIAGNOSTIC_OPTIONS = types.DiagnosticOptions(
    identifier="torchlint", inter_file_dependencies=False, workspace_diagnostics=False
)


@dataclass
class Linted:
    """The last analysis of a target, with what it was run with (code actions need both)."""

    analysis: Analysis
    settings: Settings
    result_id: str = ""  # for pull diagnostics: unchanged while the analysis is the same
    _texts: CellTexts | None = field(default=None, repr=False)

    def texts(self, units: UnitCounter) -> CellTexts:
        if self._texts is None or self._texts.units != units:  # bound methods: equal, not identical
            self._texts = CellTexts(self.analysis, units, self.settings.rule_url)
        return self._texts


@dataclass
class Pending:
    """The newest lint asked for a target; ``done`` resolves when its result was handled."""

    request: Lint
    done: asyncio.Future[None]


class TorchlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self.projects: dict[Path | None, Project] = {}  # by the document's directory
        self.linted: dict[str, Linted] = {}  # by target
        self.pending: dict[str, Pending] = {}  # by target: the newest lint started
        self.published: dict[str, list[str]] = {}  # target -> uris that hold its diagnostics
        self.timers: dict[str, asyncio.Task[None]] = {}  # debounced lints
        self.last_change: dict[str, float] = {}  # by target: when it last changed (event loop time)
        self.reported_config_errors: set[str] = set()
        self.linter = Linter()
        self.results = itertools.count(1)

    # ------------------------------------------------------------ targets
    def open_document(self, uri: str) -> TextDocument | None:
        """An open document (the workspace keys documents by their unquoted uri)."""
        return self.workspace.text_documents.get(unquote(uri))

    def target_of(self, uri: str) -> str | None:
        """The target a document belongs to; None for documents the server does not lint."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return notebook.uri
        document = self.open_document(uri)
        if document is None:
            return None
        if document.language_id == "python" or uri.endswith(PYTHON_SUFFIXES):
            return uri
        return None

    def is_notebook(self, target: str) -> bool:
        return self.workspace.get_notebook_document(notebook_uri=target) is not None

    def program_of(self, target: str) -> Program | None:
        notebook = self.workspace.get_notebook_document(notebook_uri=target)
        if notebook is not None:
            documents = [self.open_document(cell.document) for cell in notebook.cells]
            cells = [
                Cell(document.uri, document.source)
                for cell, document in zip(notebook.cells, documents)
                if cell.kind == types.NotebookCellKind.Code and document is not None
                and document.language_id in (None, "python")
            ]
            return Program.of_notebook(_path_of(target), cells) if cells else None
        document = self.open_document(target)
        return Program.of_file(_path_of(target), target, document.source) if document is not None else None

    def project_of(self, target: str) -> Project:
        path = _path(target)
        key = path.parent if path is not None else None
        if key not in self.projects:
            root = self.workspace.root_path
            self.projects[key] = load_project(path, Path(root) if root else None)
        project = self.projects[key]
        if project.error and project.error not in self.reported_config_errors:
            self.reported_config_errors.add(project.error)
            self.window_show_message(
                types.ShowMessageParams(types.MessageType.Warning, f"torchlint: {project.error} (using the defaults)")
            )
        return project

    @property
    def units(self) -> UnitCounter:
        return self.workspace.position_codec.client_num_units

    @property
    def pulls_diagnostics(self) -> bool:
        """Whether the client asks for text documents' diagnostics (LSP 3.17 pull) instead of
        being sent them.  Notebook cells are always sent theirs: clients pull for text
        documents only (as ruff's server does)."""
        text_document = self.client_capabilities.text_document
        return text_document is not None and text_document.diagnostic is not None

    # ------------------------------------------------------------ linting
    def lint_request(self, target: str, program: Program) -> Lint | None:
        """What the worker lints; None for a file the settings exclude (the CLI skips it)."""
        project = self.project_of(target)
        path = _path(target)
        if path is not None and project.excludes(path):
            return None
        return Lint(program, project.settings)

    def lint(self, target: str) -> asyncio.Future[None]:
        """Lint the target's current text in the worker (unless that is done or under way), then
        publish; the future resolves once the result is handled.  Never raises."""
        self.cancel(target)
        try:
            program = self.program_of(target)
            if program is None:
                self.clear(target)
                return _done()
            linted = self.linted.get(target)
            if linted is not None and linted.analysis.program.cells == program.cells:
                self.show(target, linted)  # saved unchanged: the diagnostics stand
                return _done()
            pending = self.pending.get(target)
            if pending is not None and pending.request.program.cells == program.cells and not pending.done.done():
                return pending.done
            request = self.lint_request(target, program)
            if request is None:  # nothing to report, as nothing is linted
                self.pending.pop(target, None)
                settings = self.project_of(target).settings
                self.linted[target] = linted = Linted(Analysis(program), settings, str(next(self.results)))
                self.show(target, linted)
                return _done()
            done = asyncio.ensure_future(self._receive(target, self.linter.lint(target, request)))
            self.pending[target] = Pending(request, done)
            return done
        except Exception:  # noqa: BLE001
            self.log_error(f"torchlint: {traceback.format_exc()}")
            return _done()

    async def _receive(self, target: str, result: asyncio.Future[tuple[Lint, Analysis]]) -> None:
        try:
            request, analysis = await result
        except asyncio.CancelledError:  # the target was closed
            return
        pending, current = self.pending.get(target), self.program_of(target)
        if pending is None or pending.request is not request:
            return  # linted with settings that changed since, or closed
        if current is None or current.cells != analysis.program.cells:
            return  # a newer text exists: never show a stale lint's diagnostics
        previous = self.linted.get(target)
        if previous is not None and previous.analysis is analysis:
            return  # two waiters received the same (newest) lint
        if analysis.crash is not None:
            self.log_error(f"torchlint failed on {target}:\n{analysis.crash}")
        self.linted[target] = linted = Linted(analysis, request.settings, str(next(self.results)))
        self.show(target, linted)

    def show(self, target: str, linted: Linted) -> None:
        """Publish the diagnostics, unless the client pulls them."""
        if self.is_notebook(target) or not self.pulls_diagnostics:
            self.publish(target, linted)

    def schedule(self, target: str, delay: float = DEBOUNCE_SECONDS) -> None:
        """Lint a changed target.  At once if the worker is free, or can give up a stale lint
        (then a burst of changes costs a parse each, mostly of reused statements, and only
        the last one is analysed through: see ``Linter``); otherwise at once too if it had
        not changed for ``delay`` seconds (typed keys usually come further apart), else once
        ``delay`` seconds pass without a change (a burst is linted once).  A lint of an
        older text that is running meanwhile is not published (see ``_receive``)."""
        now = asyncio.get_running_loop().time()
        previous = self.last_change.get(target)
        self.last_change[target] = now
        quiet = target not in self.timers and (previous is None or now - previous >= delay)
        if quiet or self.linter.idle or worker.INTERRUPT_SIGNAL is not None:
            self.lint(target)
            return
        self.cancel(target)
        self.timers[target] = asyncio.ensure_future(self._after(delay, target))

    async def _after(self, delay: float, target: str) -> None:
        await asyncio.sleep(delay)
        self.timers.pop(target, None)
        await self.lint(target)

    def cancel(self, target: str) -> None:
        timer = self.timers.pop(target, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    async def settled(self, target: str, *, now: bool) -> Linted | None:
        """The analysis of the target's current text, waiting for the lint it needs.

        ``now`` lints at once (a hover, a code action: the user waits); otherwise a
        debounced lint is let run first (pull diagnostics while typing).  Meanwhile
        the event loop serves every other request.
        """
        deadline = asyncio.get_running_loop().time() + LINT_TIMEOUT
        while (remaining := deadline - asyncio.get_running_loop().time()) > 0:
            program = self.program_of(target)
            if program is None:
                return None
            linted = self.linted.get(target)
            if linted is not None and linted.analysis.program.cells == program.cells:
                return linted
            waiting = None if now else self.timers.get(target)
            # asyncio.wait: a timer cancelled by a newer change ends the wait, not this request.
            await asyncio.wait([waiting or self.lint(target)], timeout=remaining)
        return None

    async def linted_cell(self, uri: str) -> tuple[Linted, CellTexts, int] | None:
        """The current analysis of the document ``uri`` is (a cell of), and its cell index."""
        if (target := self.target_of(uri)) is None or (linted := await self.settled(target, now=True)) is None:
            return None
        cells = linted.analysis.program.cells
        cell = next((i for i, c in enumerate(cells) if c.uri == uri or unquote(c.uri) == unquote(uri)), None)
        if cell is None:
            return None
        return linted, linted.texts(self.units), cell

    async def action_edit(self, linted: Linted, data: dict[str, Any]) -> types.WorkspaceEdit | None:
        """A code action's edit, computed by the worker on the analysis the action came from."""
        analysis = linted.analysis
        uri = data.get("uri")
        target = self.target_of(uri) if isinstance(uri, str) else None
        if target is None:
            return None
        request = Lint(analysis.program, linted.settings)
        edits = await self.linter.edits(target, request, data)
        return linted.texts(self.units).workspace_edit(edits) if edits else None

    def publish(self, target: str, linted: Linted) -> None:
        by_cell = diagnostics_by_cell(linted.texts(self.units))
        uris = [cell.uri for cell in linted.analysis.program.cells]
        for index, uri in enumerate(uris):
            document = self.open_document(uri)
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri, by_cell[index], document.version if document else None)
            )
        for stale in set(self.published.get(target, ())) - set(uris):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(stale, []))
        self.published[target] = uris

    def clear(self, target: str) -> None:
        self.cancel(target)
        self.last_change.pop(target, None)
        self.linted.pop(target, None)
        self.pending.pop(target, None)
        self.linter.forget(target)
        for uri in self.published.pop(target, []):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))

    def reload_config(self) -> None:
        """A pyproject.toml changed: forget every loaded project and re-lint what is open."""
        self.projects.clear()
        self.reported_config_errors.clear()
        targets = set(self.linted) | set(self.published)
        self.linted.clear()
        self.pending.clear()
        for target in targets:
            self.lint(target)
        if self.pulls_diagnostics and _client_refreshes_diagnostics(self):
            self.workspace_diagnostic_refresh(None)

    def log_error(self, message: str) -> None:
        self.window_log_message(types.LogMessageParams(types.MessageType.Error, message))


def _done() -> asyncio.Future[None]:
    future = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


def _client_refreshes_diagnostics(ls: TorchlintServer) -> bool:
    workspace = ls.client_capabilities.workspace
    return bool(workspace and workspace.diagnostics and workspace.diagnostics.refresh_support)


def _path(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


def _path_of(target: str) -> str:
    """The path the settings see for a target (per-file-ignores): its file, or its uri if unsaved."""
    path = _path(target)
    return str(path) if path is not None else target


def _is_config(uri: str) -> bool:
    return uri.endswith("/" + CONFIG_NAME)


# ---------------------------------------------------------------- handlers
def initialized(ls: TorchlintServer, params: types.InitializedParams) -> None:
    """Start the lint worker; ask the client to tell us about pyproject.toml changes."""
    ls.linter.start()
    capabilities = ls.client_capabilities.workspace
    watched = capabilities.did_change_watched_files if capabilities else None
    if watched is None or not watched.dynamic_registration:
        return
    registration = types.Registration(
        id="torchlint-config-watcher",
        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=f"**/{CONFIG_NAME}")]
        ),
    )
    future = ls.client_register_capability(types.RegistrationParams([registration]))
    future.add_done_callback(lambda done: done.cancelled() or done.exception())  # a refusal is fine


def did_open(ls: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
    if (target := ls.target_of(params.text_document.uri)) is not None:
        ls.lint(target)


def did_change(ls: TorchlintServer, params: types.DidChangeTextDocumentParams) -> None:
    if (target := ls.target_of(params.text_document.uri)) is not None:
        ls.schedule(target)


def did_save(ls: TorchlintServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if _is_config(uri):
        ls.reload_config()
    elif (target := ls.target_of(uri)) is not None:
        ls.lint(target)


def did_close(ls: TorchlintServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.clear(params.text_document.uri)


def notebook_did_open(ls: TorchlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    ls.lint(params.notebook_document.uri)


def notebook_did_change(ls: TorchlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    ls.schedule(params.notebook_document.uri)


def notebook_did_save(ls: TorchlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    ls.lint(params.notebook_document.uri)


def notebook_did_close(ls: TorchlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    ls.clear(params.notebook_document.uri)


def did_change_watched_files(ls: TorchlintServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(_is_config(change.uri) for change in params.changes):
        ls.reload_config()


async def document_diagnostic(
    ls: TorchlintServer, params: types.DocumentDiagnosticParams
) -> types.DocumentDiagnosticReport:
    """Pull diagnostics: the document's current diagnostics, once its (debounced) lint is done."""
    uri = params.text_document.uri
    target = ls.target_of(uri)
    if target is None or ls.is_notebook(target):  # a cell's diagnostics are published
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    linted = await ls.settled(target, now=False)
    if linted is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    if params.previous_result_id == linted.result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=linted.result_id)
    items = diagnostics_by_cell(linted.texts(ls.units))[0]
    return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=linted.result_id)


async def code_action(ls: TorchlintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    if (found := await ls.linted_cell(params.text_document.uri)) is None:
        return None
    linted, texts, cell = found
    actions = code_actions(texts, cell, params.range, params.context.only)
    if _client_resolves_edits(ls):  # the edit is computed when the user picks the action
        return actions or None
    for action in actions:
        assert isinstance(action.data, dict)
        action.edit, action.data = await ls.action_edit(linted, action.data), None
    return [action for action in actions if action.edit is not None] or None


async def code_action_resolve(ls: TorchlintServer, action: types.CodeAction) -> types.CodeAction:
    """Compute the edit of the action the user picked, on the document as it is now."""
    data = action.data if isinstance(action.data, dict) else {}
    if isinstance(uri := data.get("uri"), str) and (found := await ls.linted_cell(uri)) is not None:
        action.edit = await ls.action_edit(found[0], data)
    return action


def _client_resolves_edits(ls: TorchlintServer) -> bool:
    text_document = ls.client_capabilities.text_document
    capability = text_document.code_action if text_document else None
    if capability is None or not capability.data_support or capability.resolve_support is None:
        return False
    return "edit" in capability.resolve_support.properties


async def hover_text(ls: TorchlintServer, params: types.HoverParams) -> types.Hover | None:
    if (found := await ls.linted_cell(params.text_document.uri)) is None:
        return None
    _, texts, cell = found
    return hover(texts, cell, params.position)


def shutdown(ls: TorchlintServer, params: None) -> None:
    ls.linter.stop()


def create_server() -> TorchlintServer:
    server = TorchlintServer()
    features = {
        types.INITIALIZED: initialized,
        types.SHUTDOWN: shutdown,
        types.TEXT_DOCUMENT_DID_OPEN: did_open,
        types.TEXT_DOCUMENT_DID_CHANGE: did_change,
        types.TEXT_DOCUMENT_DID_SAVE: did_save,
        types.TEXT_DOCUMENT_DID_CLOSE: did_close,
        types.NOTEBOOK_DOCUMENT_DID_OPEN: notebook_did_open,
        types.NOTEBOOK_DOCUMENT_DID_CHANGE: notebook_did_change,
        types.NOTEBOOK_DOCUMENT_DID_SAVE: notebook_did_save,
        types.NOTEBOOK_DOCUMENT_DID_CLOSE: notebook_did_close,
        types.WORKSPACE_DID_CHANGE_WATCHED_FILES: did_change_watched_files,
        types.TEXT_DOCUMENT_HOVER: hover_text,
    }
    for method, handler in features.items():
        server.feature(method)(handler)
    server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, DIAGNOSTIC_OPTIONS)(document_diagnostic)
    server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True),
    )(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(code_action_resolve)
    return server


def serve() -> None:
    create_server().start_io()
