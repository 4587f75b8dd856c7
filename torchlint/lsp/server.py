"""The language server: keeps one analysis per open Python file or notebook,
publishes diagnostics, and answers code-action and hover requests from it.

A *target* is what gets linted as one program: a Python text document (keyed by
its uri) or a notebook (keyed by the notebook's uri; its cells are separate
text documents that receive their own diagnostics).
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from torchlint import __version__
from torchlint.config import CONFIG_NAME
from torchlint.files import PYTHON_SUFFIXES
from torchlint.lsp.convert import FIX_ALL_KIND, CellTexts, action_edit, code_actions, diagnostics_by_cell, hover
from torchlint.lsp.program import Analysis, Cell, Program, analyse
from torchlint.lsp.project import Project, load_project
from torchlint.rule import Rule, RuleOptions

DEBOUNCE_SECONDS = 0.3
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*")
    ],
    save=True,
)


@dataclass
class Linted:
    """The last analysis of a target, with what it was run with (code actions need both)."""

    analysis: Analysis
    rules: list[type[Rule]]
    options: RuleOptions


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
        self.published: dict[str, list[str]] = {}  # target -> uris that hold its diagnostics
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.reported_config_errors: set[str] = set()

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
            return Program.of_notebook(cells) if cells else None
        document = self.open_document(target)
        return Program.of_file(target, document.source) if document is not None else None

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

    # ------------------------------------------------------------ linting
    def current(self, target: str) -> Linted | None:
        """The analysis of the target's current text (re-linting if it changed since)."""
        program = self.program_of(target)
        if program is None:
            return None
        linted = self.linted.get(target)
        if linted is None or linted.analysis.program.cells != program.cells:
            linted = self._analyse(target, program)
        return linted

    def linted_cell(self, uri: str) -> tuple[Linted, CellTexts, int] | None:
        """The current analysis of the document ``uri`` is (a cell of), and its cell index."""
        if (target := self.target_of(uri)) is None or (linted := self.current(target)) is None:
            return None
        cells = linted.analysis.program.cells
        cell = next((i for i, c in enumerate(cells) if c.uri == uri or unquote(c.uri) == unquote(uri)), None)
        if cell is None:
            return None
        return linted, CellTexts(linted.analysis, self.workspace.position_codec.client_num_units), cell

    def _analyse(self, target: str, program: Program) -> Linted:
        project = self.project_of(target)
        options = project.settings.rule_options
        rules = project.rules_for(_path(target))
        if rules is None:  # excluded by the settings, as the CLI would skip it
            linted = Linted(Analysis(program), [], options)
        else:
            linted = Linted(analyse(program, rules, options), rules, options)
        if linted.analysis.crash is not None:
            message = f"torchlint failed on {target}:\n{linted.analysis.crash}"
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, message))
        self.linted[target] = linted
        return linted

    def lint(self, target: str) -> None:
        """Lint now and publish; never raises (the server must keep serving)."""
        self.cancel(target)
        try:
            linted = self.current(target)
            if linted is None:
                self.clear(target)
                return
            self.publish(target, linted.analysis)
        except Exception:  # noqa: BLE001
            self.window_log_message(
                types.LogMessageParams(types.MessageType.Error, f"torchlint: {traceback.format_exc()}")
            )

    def schedule(self, target: str, delay: float = DEBOUNCE_SECONDS) -> None:
        """Lint after ``delay`` seconds without further changes (typing should not lint every key)."""
        self.cancel(target)
        self.timers[target] = asyncio.get_running_loop().call_later(delay, self.lint, target)

    def cancel(self, target: str) -> None:
        timer = self.timers.pop(target, None)
        if timer is not None:
            timer.cancel()

    def publish(self, target: str, analysis: Analysis) -> None:
        texts = CellTexts(analysis, self.workspace.position_codec.client_num_units)
        by_cell = diagnostics_by_cell(texts)
        uris = [cell.uri for cell in analysis.program.cells]
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
        self.linted.pop(target, None)
        for uri in self.published.pop(target, []):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))

    def reload_config(self) -> None:
        """A pyproject.toml changed: forget every loaded project and re-lint what is open."""
        self.projects.clear()
        self.reported_config_errors.clear()
        self.linted.clear()
        for target in list(self.published):
            self.lint(target)


def _path(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


def _is_config(uri: str) -> bool:
    return uri.endswith("/" + CONFIG_NAME)


# ---------------------------------------------------------------- handlers
def initialized(ls: TorchlintServer, params: types.InitializedParams) -> None:
    """Ask the client to tell us about pyproject.toml changes, when it can register watchers."""
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


def code_action(ls: TorchlintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    if (found := ls.linted_cell(uri)) is None:
        return None
    linted, texts, cell = found
    edits: Callable[[types.LSPObject], types.WorkspaceEdit | None] | None = None  # None: resolved when picked
    if not _client_resolves_edits(ls):
        edits = partial(action_edit, texts, rules=linted.rules, options=linted.options)
    return code_actions(texts, cell, params.range, params.context.only, edits) or None


def code_action_resolve(ls: TorchlintServer, action: types.CodeAction) -> types.CodeAction:
    """Compute the edit of the action the user picked, on the document as it is now."""
    data = action.data if isinstance(action.data, dict) else {}
    if isinstance(uri := data.get("uri"), str) and (found := ls.linted_cell(uri)) is not None:
        linted, texts, _ = found
        action.edit = action_edit(texts, data, linted.rules, linted.options)
    return action


def _client_resolves_edits(ls: TorchlintServer) -> bool:
    text_document = ls.client_capabilities.text_document
    capability = text_document.code_action if text_document else None
    if capability is None or not capability.data_support or capability.resolve_support is None:
        return False
    return "edit" in capability.resolve_support.properties


def hover_text(ls: TorchlintServer, params: types.HoverParams) -> types.Hover | None:
    if (found := ls.linted_cell(params.text_document.uri)) is None:
        return None
    _, texts, cell = found
    return hover(texts, cell, params.position)


def create_server() -> TorchlintServer:
    server = TorchlintServer()
    features = {
        types.INITIALIZED: initialized,
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
    server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True),
    )(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(code_action_resolve)
    return server


def serve() -> None:
    create_server().start_io()
