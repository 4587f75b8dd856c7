"""How fast the language server answers, measured with a real client over stdio.

- Hover and code actions on one document are answered while a 6,000-line
  document is being linted (the lint runs in a worker process, not on the
  server's event loop).
- A 1,000-line document has its diagnostics soon after its last change
  (debounce included), published or pulled.
- The diagnostics of a text that changed while it was linted are never published,
  and a long lint of such a text is cancelled.

The targets are 50 ms and 300 ms; the tests assert looser bounds, for a loaded
2-core CI machine.  To measure a server (this one, or another checkout's, via
PYTHONPATH), run this file: ``python tests/test_lsp_latency.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pygls.protocol import default_converter  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402

lsp = pytest.mark.asyncio(loop_scope="module")
SERVER = [sys.executable, "-m", "torchlint", "server"]
TIMEOUT = 60.0
# Asserted bounds, with room for a loaded 2-core CI machine: the median request meets the
# 50 ms target, nine in ten are answered within REQUEST_BOUND and all within SLOWEST_REQUEST
# (the server this replaces answered after the whole lint: over a second); the median change
# has its diagnostics within DIAGNOSTICS_BOUND, or twice the engine's own time for the text.
REQUEST_TARGET = 0.05
REQUEST_BOUND = 0.25
SLOWEST_REQUEST = 1.0
DIAGNOSTICS_BOUND = 1.0

MISTAKE = "import torch\n\nw = torch.randn(3, requires_grad=True)\nlr = 0.1\nw -= lr * w.grad\n"
BLOCK = '''

def train_{i}(model, loader, epochs=3):
    """Training loop number {i}."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = torch.nn.functional.mse_loss(outputs, targets)
            loss.backward()
            optimizer.step()
        total = sum(p.numel() for p in model.parameters())
        print(f"epoch {{epoch}}: loss {{loss.item():.4f}} over {{total}} parameters")
    return model


w_{i} = torch.randn(3, requires_grad=True)
w_{i} -= 0.1 * w_{i}.grad
'''


def module_of(lines: int) -> str:
    """A training module of about ``lines`` lines, with one TL002 finding every 20 lines."""
    blocks = [BLOCK.format(i=i) for i in range(lines // BLOCK.count("\n") + 1)]
    text = "import torch\n" + "".join(blocks)
    return "\n".join(text.split("\n")[:lines]) + "\n"


# ---------------------------------------------------------------- the client
def make_client(extra_features: dict[str, Any] | None = None) -> LanguageClient:
    """pytest-lsp's client, keeping every publishDiagnostics with the time it arrived."""
    client = LanguageClient(converter_factory=default_converter)
    client.arrivals = []  # type: ignore[attr-defined]

    def record(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.arrivals.append((time.monotonic(), params))  # type: ignore[attr-defined]
        client.diagnostics[params.uri] = params.diagnostics

    features = {
        **DEFAULT_CLIENT_FEATURES,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: record,
        types.CLIENT_REGISTER_CAPABILITY: accept,
        **(extra_features or {}),
    }
    register_lsp_features(client, features)
    return client


def accept(client: LanguageClient, params: types.RegistrationParams) -> None:
    """The server may ask to watch pyproject.toml files: fine."""


def capabilities(pull: bool, resolves: bool = True) -> types.ClientCapabilities:
    """VS Code's capabilities; with ``pull``, also those of pull diagnostics (LSP 3.17);
    without ``resolves``, code actions must come with their edits."""
    capabilities = client_capabilities("visual-studio-code")
    assert capabilities.text_document is not None and capabilities.workspace is not None
    assert capabilities.text_document.code_action is not None
    if not resolves:
        capabilities.text_document.code_action.resolve_support = None
    if pull:
        capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(related_document_support=False)
        capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    else:
        capabilities.text_document.diagnostic = None
    return capabilities


async def initialize(client: LanguageClient, root: Path, pull: bool, resolves: bool = True) -> types.InitializeResult:
    return await client.initialize_session(
        types.InitializeParams(capabilities=capabilities(pull, resolves), root_uri=root.as_uri())
    )


async def published(client: LanguageClient, uri: str, version: int, since: float = 0.0) -> float:
    """When the diagnostics of ``uri`` at ``version`` arrived (waiting for them)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for arrived, params in client.arrivals:  # type: ignore[attr-defined]
            if params.uri == uri and params.version == version and arrived >= since:
                return arrived
        await asyncio.sleep(0.002)
    raise AssertionError(f"no diagnostics for {uri} version {version}")


def open_document(client: LanguageClient, path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(path.as_uri(), "python", 1, text)))
    return path.as_uri()


def change_document(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def started_workers(server_pid: int, timeout: float = 30.0) -> list[int]:
    """The worker the server starts at initialisation, once it is up (slow on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not (found := worker_pids(server_pid)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return found


def worker_pids(server_pid: int) -> list[int]:
    """The server's lint worker processes (read from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == server_pid and b"torchlint.lsp.worker" in command:
            pids.append(int(entry.name))
    return pids


HAS_PROC = Path("/proc/self/stat").exists()


# ---------------------------------------------------------------- scenarios
@dataclass
class Timings:
    hover: list[float] = field(default_factory=list)
    code_action: list[float] = field(default_factory=list)
    lint_seconds: float = 0.0  # how long the big document's lint took, seen from the client

    def summary(self) -> str:
        def describe(values: list[float]) -> str:
            if len(values) < 2:
                return f"{len(values)} answered, in {max(values) * 1000:.0f} ms"
            ninth_decile = statistics.quantiles(values, n=10)[-1]
            return (
                f"{len(values)} answered, median {statistics.median(values) * 1000:.0f} ms, "
                f"90% within {ninth_decile * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"
            )

        return f"hover: {describe(self.hover)}; code action: {describe(self.code_action)}; lint {self.lint_seconds:.2f} s"


async def requests_while_linting(client: LanguageClient, root: Path, lines: int = 6000) -> Timings:
    """Hover and code actions on a small document, sent while a big one is being linted
    (before the big document's diagnostics arrive)."""
    small = open_document(client, root / "small.py", MISTAKE)
    await published(client, small, 1)
    where = types.Range(types.Position(4, 0), types.Position(4, 16))
    timings = Timings()
    started = time.monotonic()
    big = open_document(client, root / "big.py", module_of(lines))
    while not any(p.uri == big for _, p in client.arrivals):  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)
        sent = time.monotonic()
        hover = await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(small), where.start)
        )
        answered = time.monotonic()
        assert hover is not None and "TL002" in str(hover.contents)
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(types.TextDocumentIdentifier(small), where, types.CodeActionContext(diagnostics=[]))
        )
        assert actions and any("TL002" in action.title for action in actions)
        timings.hover.append(answered - sent)
        timings.code_action.append(time.monotonic() - answered)
    timings.lint_seconds = await published(client, big, 1) - started
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(big)))
    return timings


async def diagnostics_after_changes(client: LanguageClient, root: Path, lines: int = 1000, edits: int = 5) -> list[float]:
    """Seconds from a change of a 1,000-line document to its diagnostics being published."""
    text = module_of(lines)
    uri = open_document(client, root / "thousand.py", text)
    await published(client, uri, 1)
    latencies = []
    for version in range(2, edits + 2):
        text = f"# edit {version}\n" + text  # moves every finding one line down
        changed = time.monotonic()
        change_document(client, uri, version, text)
        latencies.append(await published(client, uri, version, since=changed) - changed)
        assert client.diagnostics[uri][0].range.start.line == module_of(lines).count("\n", 0, _first_finding()) + version - 1
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    return latencies


def _first_finding() -> int:
    """The offset of the first flagged line in ``module_of``'s text."""
    return module_of(100).index("w_0 -=")


async def pulled_after_changes(client: LanguageClient, root: Path, lines: int = 1000, edits: int = 5) -> list[float]:
    """Seconds from a change to the answer of the pull request sent right after it (as VS Code does)."""
    text = module_of(lines)
    uri = open_document(client, root / "pulled.py", text)
    latencies = []
    for version in range(2, edits + 2):
        text = f"# edit {version}\n" + text
        changed = time.monotonic()
        change_document(client, uri, version, text)
        report = await client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri))
        )
        latencies.append(time.monotonic() - changed)
        assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
        assert report.items[0].range.start.line == module_of(lines).count("\n", 0, _first_finding()) + version - 1
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    return latencies


def milliseconds(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms ({len(values)} changes)"


def lint_seconds(lines: int) -> float:
    """The engine's own time for ``module_of(lines)``, in this process: the floor under any latency."""
    from torchlint.runner import lint_content
    from torchlint.settings import Settings, resolve_rules

    settings, text = Settings(), module_of(lines)
    resolve_rules(settings)  # imports the rules
    started = time.perf_counter()
    lint_content("floor.py", text, settings)
    return time.perf_counter() - started


def check_latencies(what: str, latencies: list[float], lines: int = 1000) -> None:
    floor = lint_seconds(lines)
    print(f"\n{what}: {milliseconds(latencies)}; the engine alone: {floor * 1000:.0f} ms")
    assert statistics.median(latencies) < max(DIAGNOSTICS_BOUND, 2 * floor), milliseconds(latencies)


# ---------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("latency")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, client_factory=make_client))
async def client(lsp_client: LanguageClient, workspace: Path):
    await initialize(lsp_client, workspace, pull=False)
    yield
    await lsp_client.shutdown_session()


@lsp
async def test_a_stale_lint_is_never_published(client: LanguageClient, workspace: Path):
    # The module's first lint: the server cannot yet tell how long a lint takes, so it lets
    # the stale one finish (it is not cancelled, see below) and drops its result.
    workers = await started_workers(client._server.pid) if HAS_PROC else []  # type: ignore[union-attr]
    text = module_of(3000)  # its lint takes longer than the 0.1 s before the change
    uri = open_document(client, workspace / "stale.py", text)
    await asyncio.sleep(0.1)
    change_document(client, uri, 2, "# changed\n" + text)
    await published(client, uri, 2)
    assert [p.version for _, p in client.arrivals if p.uri == uri] == [2]  # type: ignore[attr-defined]
    assert client.diagnostics[uri][0].range.start.line == text.count("\n", 0, _first_finding()) + 1
    if HAS_PROC:
        assert worker_pids(client._server.pid) == workers  # type: ignore[union-attr]


@lsp
async def test_hover_and_code_actions_are_answered_while_a_big_module_is_linted(client: LanguageClient, workspace: Path):
    timings = await requests_while_linting(client, workspace)
    print(f"\n6,000-line lint in progress: {timings.summary()}")
    assert len(timings.hover) >= 3, timings.summary()  # the lint takes over a second: several rounds fit
    for latencies in (timings.hover, timings.code_action):
        ninth_decile = statistics.quantiles(latencies, n=10)[-1]
        assert statistics.median(latencies) < REQUEST_TARGET, timings.summary()
        assert ninth_decile < REQUEST_BOUND and max(latencies) < SLOWEST_REQUEST, timings.summary()


@lsp
async def test_a_thousand_lines_have_their_diagnostics_soon_after_the_last_change(client: LanguageClient, workspace: Path):
    check_latencies("1,000-line document, change to published diagnostics", await diagnostics_after_changes(client, workspace))


@lsp
@pytest.mark.skipif(not HAS_PROC, reason="reads the process table from /proc")
async def test_a_long_stale_lint_is_cancelled(client: LanguageClient, workspace: Path):
    # A first lint of a big text tells the server how fast lints go.
    await published(client, open_document(client, workspace / "measure.py", module_of(1000)), 1)
    (before,) = worker_pids(client._server.pid)  # type: ignore[union-attr]
    text = module_of(6000)
    uri = open_document(client, workspace / "long.py", text)
    await asyncio.sleep(0.2)
    change_document(client, uri, 2, "# changed\n" + text)
    await published(client, uri, 2)
    assert [p.version for _, p in client.arrivals if p.uri == uri] == [2]  # type: ignore[attr-defined]
    (after,) = worker_pids(client._server.pid)  # type: ignore[union-attr]
    assert after != before  # the worker linting the old text was killed, and replaced


# ---------------------------------------------------------------- measuring a server by hand
async def measure(root: Path) -> None:
    print(f"in-process lint: 1,000 lines {lint_seconds(1000):.2f} s, 6,000 lines {lint_seconds(6000):.2f} s")
    for pull in (False, True):
        client = make_client()
        await client.start_io(*SERVER)
        result = await initialize(client, root, pull)
        if pull and result.capabilities.diagnostic_provider is None:
            print("pull diagnostics: not supported by this server")
        elif pull:
            print(f"pull diagnostics, 1,000 lines, change to answer: {milliseconds(await pulled_after_changes(client, root))}")
        else:
            print(f"6,000-line lint in progress: {(await requests_while_linting(client, root)).summary()}")
            print(f"1,000 lines, change to published diagnostics: {milliseconds(await diagnostics_after_changes(client, root))}")
        await client.shutdown_session()
        await client.stop()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(measure(Path(directory)))
