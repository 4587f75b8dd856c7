"""How fast the language server answers, measured with a real client over stdio.

- Hover and code actions on one document are answered while a 6,000-line
  document is being linted (the lint runs in a worker process, not on the
  server's event loop).
- A 1,000-line document has its diagnostics soon after each change (30 changes of
  several kinds; debounce included), published or pulled, and they are those of a
  whole lint of that version.
- The diagnostics of a text that changed while it was linted are never published,
  and a long lint of such a text is given up (the worker interrupted, or killed where
  it cannot be).

The targets are 50 ms and 300 ms; the tests assert them scaled by the machine's load
(a loaded 2-core CI machine runs everything slower) and print the raw numbers.  To
measure a server (this one, or another checkout's, via PYTHONPATH), run this file:
``python tests/test_lsp_latency.py``.
"""

from __future__ import annotations

import asyncio
import os
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

from torchlint.lsp import worker  # noqa: E402

lsp = pytest.mark.asyncio(loop_scope="module")
SERVER = [sys.executable, "-m", "torchlint", "server"]
TIMEOUT = 60.0
# Asserted bounds, with room for a loaded 2-core CI machine: the median request meets the
# 50 ms target, nine in ten are answered within REQUEST_BOUND and all within SLOWEST_REQUEST
# (the server this replaces answered after the whole lint: over a second).  Nine changes in
# ten have their diagnostics within DIAGNOSTICS_TARGET times the load (see ``slowdown``).
REQUEST_TARGET = 0.05
REQUEST_BOUND = 0.25
SLOWEST_REQUEST = 1.0
DIAGNOSTICS_TARGET = 0.3
CHANGES = 30

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


def edited_versions(text: str, count: int = CHANGES) -> list[str]:
    """``count`` successive versions of ``text`` (``module_of``'s), each one edit away from
    the last, in turn: a comment line above everything (every finding moves down), a
    comment typed at a line's end in the middle, a statement added to a function's body,
    a new finding at the module's end."""
    lines, versions = text.split("\n"), []
    for number in range(count):
        kind = number % 4
        if kind == 0:
            lines.insert(0, f"# edit {number}")
        elif kind == 1:
            lines[300 + 17 * number] += "  # typed"
        elif kind == 2:
            at = next(i for i in range(400 + 13 * number, len(lines)) if lines[i].strip() == "optimizer.zero_grad()")
            lines.insert(at, lines[at].replace("optimizer.zero_grad()", f"print({number})"))
        else:
            at = max(i for i, line in enumerate(lines) if line.startswith("def train_"))
            lines[at:at] = [f"v_{number} = torch.randn(3, requires_grad=True)", f"v_{number} -= 0.1 * v_{number}.grad", "", ""]
        versions.append("\n".join(lines))
    return versions


def expected_ranges(path: Path, text: str) -> list[tuple[int, int, str]]:
    """Where a whole lint of ``text`` (in this process, no incremental parse) finds what."""
    from torchlint.lsp.program import Program, analyse
    from torchlint.settings import Settings

    findings = analyse(Program.of_file(str(path), path.as_uri(), text), Settings()).findings
    return sorted((finding.line - 1, finding.col - 1, finding.code) for finding in findings)


def ranges(diagnostics: list[types.Diagnostic]) -> list[tuple[int, int, str]]:
    return sorted((d.range.start.line, d.range.start.character, str(d.code)) for d in diagnostics)


async def diagnostics_after_changes(client: LanguageClient, root: Path, lines: int = 1000) -> list[float]:
    """Seconds from each change of a 1,000-line document to its diagnostics being published
    (a change every 0.2 s, as keys typed at a moderate pace); some versions' diagnostics
    are compared with a whole lint's afterwards."""
    path = root / "thousand.py"
    uri = open_document(client, path, module_of(lines))
    await published(client, uri, 1)
    latencies, checked = [], []
    for version, text in enumerate(edited_versions(module_of(lines)), start=2):
        await asyncio.sleep(0.2)
        changed = time.monotonic()
        change_document(client, uri, version, text)
        latencies.append(await published(client, uri, version, since=changed) - changed)
        if version % 7 == 0:
            checked.append((text, ranges(client.diagnostics[uri])))
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    for text, found in checked:
        assert found == expected_ranges(path, text)
    return latencies


def _first_finding() -> int:
    """The offset of the first flagged line in ``module_of``'s text."""
    return module_of(100).index("w_0 -=")


async def pulled_after_changes(client: LanguageClient, root: Path, lines: int = 1000, edits: int = 10) -> list[float]:
    """Seconds from a change to the answer of the pull request sent right after it (as VS Code does)."""
    path = root / "pulled.py"
    uri = open_document(client, path, module_of(lines))
    # The client pulls once the document is open (as VS Code does); the first lint of a new
    # document is measured by its own test.
    await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri)))
    latencies = []
    for version, text in enumerate(edited_versions(module_of(lines), edits), start=2):
        await asyncio.sleep(0.2)
        changed = time.monotonic()
        change_document(client, uri, version, text)
        report = await client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri))
        )
        latencies.append(time.monotonic() - changed)
        assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
        if version == edits + 1:
            assert ranges(report.items) == expected_ranges(path, text)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    return latencies


def milliseconds(values: list[float]) -> str:
    ninth_decile = statistics.quantiles(values, n=10)[-1]
    raw = " ".join(f"{value * 1000:.0f}" for value in values)
    return (
        f"median {statistics.median(values) * 1000:.0f} ms, 90% within {ninth_decile * 1000:.0f} ms, "
        f"max {max(values) * 1000:.0f} ms ({len(values)} changes: {raw})"
    )


def lint_seconds(lines: int) -> float:
    """The engine's own time for ``module_of(lines)``, in this process: the floor under any latency."""
    from torchlint.runner import lint_content
    from torchlint.settings import Settings, resolve_rules

    settings, text = Settings(), module_of(lines)
    resolve_rules(settings)  # imports the rules
    started = time.perf_counter()
    lint_content("floor.py", text, settings)
    return time.perf_counter() - started


def slowdown() -> float:
    """How much slower than on a quiet machine things run now: runnable processes per core
    (the load average of the last minute), at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available here
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def check_latencies(what: str, latencies: list[float], slowed: float) -> None:
    """Nine changes in ten within the target, scaled by how loaded the machine was (the
    larger of the load before and after); the raw numbers are printed."""
    slowed = max(slowed, slowdown())
    bound = DIAGNOSTICS_TARGET * slowed
    print(f"\n{what}: {milliseconds(latencies)}; load {slowed:.1f} per core, bound {bound * 1000:.0f} ms")
    assert statistics.quantiles(latencies, n=10)[-1] < bound, milliseconds(latencies)


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
async def test_a_thousand_lines_have_their_diagnostics_soon_after_each_change(client: LanguageClient, workspace: Path):
    slowed = slowdown()
    latencies = await diagnostics_after_changes(client, workspace)
    check_latencies("1,000-line document, change to published diagnostics", latencies, slowed)


@lsp
@pytest.mark.skipif(not HAS_PROC, reason="reads the process table from /proc")
async def test_a_long_stale_lint_is_given_up(client: LanguageClient, workspace: Path):
    # A first lint of a big text tells the server how fast lints go (where the worker is
    # killed rather than interrupted, the server needs that to decide).
    await published(client, open_document(client, workspace / "measure.py", module_of(1000)), 1)
    (before,) = worker_pids(client._server.pid)  # type: ignore[union-attr]
    text = module_of(6000)
    uri = open_document(client, workspace / "long.py", text)
    await asyncio.sleep(0.2)
    change_document(client, uri, 2, "# changed\n" + text)
    await published(client, uri, 2)
    assert [p.version for _, p in client.arrivals if p.uri == uri] == [2]  # type: ignore[attr-defined]
    (after,) = worker_pids(client._server.pid)  # type: ignore[union-attr]
    if worker.INTERRUPT_SIGNAL is not None:
        assert after == before  # interrupted: the same worker, with the statements it parsed
    else:
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
        print(f"load: {slowdown():.1f} per core")
        await client.shutdown_session()
        await client.stop()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(measure(Path(directory)))
