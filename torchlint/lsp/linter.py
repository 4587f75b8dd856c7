"""The server's side of the lint worker (``torchlint.lsp.worker``): one persistent
process, fed one request at a time from two queues.

- Lints: at most one waiting per target.  A newer text of a target replaces its
  waiting lint, so a stale text is never linted once a newer one is known.  A lint
  already running is interrupted (the worker gets ``SIGUSR1``, stops before the next
  function it would analyse, and keeps its parsed statements for the newer text).
  Where there is no such signal, it is cancelled (its worker killed, and a new one
  started) when it would take longer to finish than a new worker takes to start;
  otherwise it finishes, and the server drops its result.
- Edits of code actions: answered before any waiting lint (the user is waiting).

If the worker dies (a crash in the parser, the system killing it), a new one is
started and the request sent again, once: a request that kills two workers fails
with an internal error (a diagnostic saying so), and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from torchlint.lsp import worker
from torchlint.lsp.program import Analysis, CellEdits, Outcome, Program
from torchlint.runner import Problem
from torchlint.settings import Settings

WORKER_COMMAND = (sys.executable, "-m", "torchlint.lsp.worker")
# Lints of texts shorter than this tell little about the time per character (start-up costs dominate).
MEASURED_SIZE = 10_000


class WorkerDied(Exception):
    pass


class LintInterrupted(Exception):
    """The worker gave the lint up, as asked (``WorkerProcess.interrupt``)."""


class WorkerProcess:
    """One running worker: sends a request, waits for its reply."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.startup = 0.0  # seconds from starting the process to its being ready

    @classmethod
    async def start(cls) -> WorkerProcess:
        started = time.monotonic()
        # The worker's stderr is the server's: what it logs reaches the client's log.
        process = await asyncio.create_subprocess_exec(
            *WORKER_COMMAND, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        worker_process = cls(process)
        await worker_process.call((worker.PING,))
        worker_process.startup = time.monotonic() - started
        return worker_process

    async def call(self, request: tuple[Any, ...]) -> Any:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(worker.encode(request))
            await stdin.drain()
            size = int.from_bytes(await stdout.readexactly(worker.HEADER), "big")
            ok, value = pickle.loads(await stdout.readexactly(size))
        except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError) as error:
            raise WorkerDied(f"the lint worker stopped (exit code {self.process.returncode})") from error
        if not ok:
            raise LintInterrupted() if value == worker.INTERRUPTED else RuntimeError(value)
        return value

    def interrupt(self) -> None:
        """Ask the worker to give up the lint it is running (``worker.INTERRUPT_SIGNAL``)."""
        assert worker.INTERRUPT_SIGNAL is not None
        if self.process.returncode is None:
            os.kill(self.process.pid, worker.INTERRUPT_SIGNAL)

    def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


@dataclass
class Lint:
    """What to lint, with what: a request to the worker (and, once done, its result)."""

    program: Program
    settings: Settings


@dataclass
class _Job:
    key: str
    request: Lint
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    data: dict[str, Any] | None = None  # a code action's data: the job computes its edits
    cancelled: bool = False  # its worker was killed on purpose: a newer lint of the key replaces it


@dataclass
class _Running:
    job: _Job
    process: WorkerProcess
    started: float


class Linter:
    def __init__(self) -> None:
        self.lints: dict[str, _Job] = {}  # waiting lints by target, in arrival order
        self.edits_waiting: deque[_Job] = deque()
        self.forgotten: set[str] = set()
        self.process: WorkerProcess | None = None
        self.starting: asyncio.Task[WorkerProcess] | None = None
        self.wakeup = asyncio.Event()
        self.pump: asyncio.Task[None] | None = None
        self.running: _Running | None = None
        self.seconds_per_char: float | None = None  # how fast lints go (measured, smoothed)

    def start(self) -> None:
        """Start the worker now, so that it is ready (rules imported) by the first lint."""
        self._ensure_pump()
        self._worker_starting()

    def lint(self, key: str, request: Lint) -> asyncio.Future[tuple[Lint, Analysis]]:
        """The analysis of the newest request for ``key`` that is linted: awaiting an older
        request, replaced while it waited, gives the newer one's (which says what it linted)."""
        self.forgotten.discard(key)
        job = self.lints.get(key)
        if job is not None:
            job.request = request
            return job.future
        job = self.lints[key] = _Job(key, request)
        self._cancel_stale(key)
        self._ensure_pump()
        return job.future

    def edits(self, key: str, request: Lint, data: dict[str, Any]) -> asyncio.Future[CellEdits]:
        job = _Job(key, request, data=data)
        self.edits_waiting.append(job)
        self._ensure_pump()
        return job.future

    def forget(self, key: str) -> None:
        """The target was closed: drop its waiting lint and, in the worker, its tree."""
        job = self.lints.pop(key, None)
        if job is not None:
            job.future.cancel()
        self.forgotten.add(key)
        self._ensure_pump()

    def stop(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        if self.process is not None:
            self.process.stop()

    @property
    def idle(self) -> bool:
        """Whether a lint asked for now would start at once."""
        return self.running is None and not self.lints and not self.edits_waiting

    def _cancel_stale(self, key: str) -> None:
        """Interrupt the worker if it is linting an older text of ``key``; where it cannot
        be interrupted, kill it if the lint would take longer to finish than a new worker
        takes to start."""
        running = self.running
        if running is None or running.job.key != key or running.job.data is not None:
            return
        if worker.INTERRUPT_SIGNAL is not None:
            running.job.cancelled = True
            running.process.interrupt()  # its call raises LintInterrupted, or returns if it was done
            return
        if self.seconds_per_char is None:
            return  # no lint measured yet: no estimate
        elapsed = time.monotonic() - running.started
        remaining = self.seconds_per_char * len(running.job.request.program.content) - elapsed
        if remaining > running.process.startup:
            running.job.cancelled = True
            running.process.stop()  # its call raises WorkerDied

    def _measure(self, request: Lint, seconds: float) -> None:
        size = len(request.program.content)
        if size >= MEASURED_SIZE:
            rate = seconds / size
            previous = self.seconds_per_char
            self.seconds_per_char = rate if previous is None else 0.7 * previous + 0.3 * rate

    # ------------------------------------------------------------ the pump
    def _ensure_pump(self) -> None:
        if self.pump is None or self.pump.done():
            self.pump = asyncio.ensure_future(self._run())
        self.wakeup.set()

    def _worker_starting(self) -> asyncio.Task[WorkerProcess]:
        if self.starting is None:
            self.starting = asyncio.ensure_future(WorkerProcess.start())
        return self.starting

    async def _worker(self) -> WorkerProcess:
        if self.process is None or self.process.process.returncode is not None:
            try:
                self.process = await self._worker_starting()
            finally:
                self.starting = None
        return self.process

    async def _run(self) -> None:
        while True:
            await self.wakeup.wait()
            self.wakeup.clear()
            while (job := self._next()) is not None:
                await self._serve(job)
            while self.forgotten:
                try:
                    await self._call(None, (worker.FORGET, self.forgotten.pop()))
                except Exception:  # noqa: BLE001 - a dead worker has forgotten everything anyway
                    pass

    def _next(self) -> _Job | None:
        if self.edits_waiting:
            return self.edits_waiting.popleft()
        if self.lints:
            return self.lints.pop(next(iter(self.lints)))
        return None

    async def _serve(self, job: _Job) -> None:
        request = job.request
        arguments = (job.key, request.program, request.settings)
        try:
            if job.data is None:
                started = time.monotonic()
                outcome = await self._call(job, (worker.LINT, *arguments))
                self._measure(request, time.monotonic() - started)
                result: Any = (request, Analysis.of(request.program, outcome))
            else:
                result = await self._call(job, (worker.EDITS, *arguments, job.data))
        except Exception as error:  # noqa: BLE001 - the server must keep serving
            if job.cancelled:
                self._hand_over(job)
                return
            result = self._failure(job, error)
        if not job.future.done():
            job.future.set_result(result)

    def _hand_over(self, cancelled: _Job) -> None:
        """Who waited for a cancelled lint gets the newer lint's result (it says what it linted)."""
        newer = self.lints.get(cancelled.key)
        if newer is None:
            cancelled.future.cancel()
            return

        def copy(done: asyncio.Future[Any]) -> None:
            if cancelled.future.done():
                return
            if done.cancelled():
                cancelled.future.cancel()
            else:
                cancelled.future.set_result(done.result())

        newer.future.add_done_callback(copy)

    async def _call(self, job: _Job | None, request: tuple[Any, ...]) -> Any:
        """The worker's reply; a worker found dead is replaced, and the request sent again once
        (a request that kills the worker twice fails, and a cancelled one is not sent again).
        A lint interrupted though it was not cancelled (the signal for the lint before it
        came late) is sent again."""
        deaths = 0
        while True:
            process = await self._worker()
            self.running = _Running(job, process, time.monotonic()) if job is not None else None
            try:
                return await process.call(request)
            except LintInterrupted:
                if job is not None and job.cancelled:
                    raise
            except WorkerDied:
                process.stop()
                self.process = None
                deaths += 1
                if deaths == 2 or (job is not None and job.cancelled):
                    raise
            finally:
                self.running = None

    @staticmethod
    def _failure(job: _Job, error: Exception) -> Any:
        if job.data is not None:
            return {}  # no edit rather than a failed request
        # A failure inside the worker comes with the worker's traceback.
        crash = str(error) if isinstance(error, RuntimeError) else "".join(traceback.format_exception(error))
        problem = Problem(crash.strip().splitlines()[-1])
        return job.request, Analysis.of(job.request.program, Outcome([], [problem], crash))
