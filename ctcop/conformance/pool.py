"""The conformance runner's crash-isolated worker processes (the mechanism; what they are asked
and how two answers combine is :mod:`.runner`'s).

``jobs`` worker processes are forked from this one (POSIX), each holding every runtime object; a
worker takes one evaluation at a time (a runtime and a case id) and answers one JSON line
(:func:`ctcop.conformance.verdict.judge`). A worker that dies costs the evaluation it was running,
recorded as a ``crash`` with the signal, and a fresh worker takes its place; one that gives no
answer within ``timeout_s`` is killed and replaced (``timeout``). Workers ignore SIGINT and run in
process groups of their own; their output goes to /dev/null. The libraries a worker imported
(:data:`PRELOADABLE`) are imported here before the next fork, so that a replacement starts warm.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .verdict import judge

if TYPE_CHECKING:
    from .corpus import CorpusCase

DEFAULT_TIMEOUT_S = 120.0
# Imported into this process once a worker has imported them (import only: no thread pool or
# model exists before the fork). Each is fork-safe after import (measured: openvino 2026.4,
# onnxruntime 1.32, torch 2.14, tensorflow 2.21, jax 0.10).
PRELOADABLE = (
    "ml_dtypes",
    "onnx",
    "onnx.reference",
    "onnxruntime",
    "openvino",
    "ctcop.onnx",
    "ctcop.openvino",
    "torch",
    "tensorflow",
    "jax",
    "optax",
)
Run = dict[str, Any]
Key = tuple[str, str]


@dataclass(frozen=True)
class Settings:
    """``jobs`` worker processes; ``timeout_s`` per evaluation; ``preload``: import the workers'
    libraries here before forking replacements."""

    jobs: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    preload: bool = True


@dataclass(frozen=True)
class Task:
    number: int
    runtime: str
    case: str
    run: int

    @property
    def key(self) -> Key:
        return (self.runtime, self.case)


@dataclass
class Worker:
    pid: int
    send: int
    receive: int
    buffer: bytes = b""
    task: Task | None = None
    started: float = 0.0


# -- the worker side -----------------------------------------------------------------------------


def _lines(fd: int) -> Iterator[bytes]:
    with os.fdopen(fd, "rb") as reader:
        yield from reader


def serve(receive: int, send: int, runtimes: Mapping[str, Any], cases: Mapping[str, CorpusCase]) -> None:
    """The worker's loop: a request ``{"task", "runtime", "case"}`` per line in, a verdict per line
    out (with ``"modules"``: the preloadable libraries imported since the fork, once they change)."""
    reported: set[str] = {name for name in PRELOADABLE if name in sys.modules}
    with os.fdopen(send, "wb", buffering=0) as writer:
        for line in _lines(receive):
            request = json.loads(line)
            answer: Run = {"task": request["task"]}
            answer |= judge(runtimes[request["runtime"]], cases[request["case"]])
            loaded = {name for name in PRELOADABLE if name in sys.modules} - reported
            if loaded:
                answer["modules"] = sorted(loaded)
                reported |= loaded
            writer.write(json.dumps(answer, allow_nan=True).encode() + b"\n")


def _child(receive: int, send: int, close: Sequence[int], runtimes: Mapping[str, Any], cases: Any) -> None:
    """The forked worker: never returns (``os._exit``), whatever happens."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setpgid(0, 0)  # its own process group: whatever a runtime starts is killed with it
        faulthandler.disable()  # a host's fault handler (pytest's) writes to a copy of its stderr
        for fd in close:
            os.close(fd)
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        serve(receive, send, runtimes, cases)
        code = 0
    except BaseException:  # a worker reports through its pipe or not at all
        code = 1
    finally:
        os._exit(code)


# -- the parent side -----------------------------------------------------------------------------


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exited with code {os.WEXITSTATUS(status)}"


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """fds 1 and 2 on /dev/null meanwhile (libraries print banners when imported)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    quiet = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, quiet):
            os.close(fd)


@dataclass
class Pool:
    """``settings.jobs`` workers running tasks; ``on_run(task, answer)`` gets every evaluation."""

    runtimes: Mapping[str, Any]
    cases: Mapping[str, CorpusCase]
    settings: Settings
    on_run: Callable[[Task, Run], None]
    slots: list[Worker | None] = field(default_factory=list)
    first: dict[Key, int] = field(default_factory=dict)  # who ran a case's first evaluation
    wanted: dict[str, None] = field(default_factory=dict)  # in the order workers first imported them
    loaded: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.slots = [None] * max(1, self.settings.jobs)

    def _preload(self) -> None:
        for name in [name for name in self.wanted if name not in self.loaded]:
            self.loaded.add(name)
            with _silenced(), contextlib.suppress(Exception):
                __import__(name)

    def _spawn(self) -> Worker:
        if self.settings.preload:
            self._preload()
        to_child, from_parent = os.pipe()
        from_child, to_parent = os.pipe()
        others = [fd for w in self.slots if w is not None for fd in (w.send, w.receive)]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            _child(to_child, to_parent, [from_parent, from_child, *others], self.runtimes, self.cases)
        with contextlib.suppress(OSError):  # also here, so that a kill never misses the group
            os.setpgid(pid, pid)
        os.close(to_child)
        os.close(to_parent)
        return Worker(pid, from_parent, from_child)

    def _end(self, worker: Worker) -> str:
        """Kill (if still running: its pipe may close before it ends) and reap ``worker``, close its
        pipes, free its slot; how it ended. Unreaped, its pid cannot have been reused."""
        for kill in (os.killpg, os.kill):  # the group (processes a runtime started), then the worker
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(worker.pid, signal.SIGKILL)
        _, status = os.waitpid(worker.pid, 0)
        for fd in (worker.send, worker.receive):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.slots[self.slots.index(worker)] = None
        return _death(status)

    def stop(self) -> None:
        """Kill and reap every worker (interruptions included: nothing outlives the pool)."""
        for worker in [w for w in self.slots if w is not None]:
            self._end(worker)

    def _allowed(self, task: Task, worker: Worker) -> bool:
        return len(self.slots) == 1 or task.run == 0 or self.first.get(task.key) != worker.pid

    def _assign(self, pending: list[Task]) -> None:
        for slot, worker in enumerate(self.slots):
            if not pending:
                return
            if worker is None:
                worker = self.slots[slot] = self._spawn()
            if worker.task is not None:
                continue
            choice = next((i for i, task in enumerate(pending) if self._allowed(task, worker)), None)
            if choice is None:
                continue
            task = pending.pop(choice)
            request = {"task": task.number, "runtime": task.runtime, "case": task.case}
            try:
                os.write(worker.send, json.dumps(request).encode() + b"\n")
            except BrokenPipeError:  # it died idle: the task goes back, the slot is refilled
                pending.insert(choice, task)
                self._end(worker)
                continue
            if task.run == 0:
                self.first[task.key] = worker.pid
            worker.task, worker.started = task, time.monotonic()

    def _answered(self, worker: Worker, data: bytes) -> None:
        worker.buffer += data
        while b"\n" in worker.buffer and worker.task is not None:
            line, _, worker.buffer = worker.buffer.partition(b"\n")
            answer: Run = json.loads(line)
            self.wanted |= dict.fromkeys(answer.pop("modules", []))
            task, worker.task = worker.task, None
            self.on_run(task, answer)

    def _lost(self, worker: Worker, timed_out: bool) -> None:
        task = worker.task
        how = self._end(worker)
        if task is None:
            return
        if timed_out:
            answer = {
                "kind": "timeout",
                "status": "timeout",
                "message": f"no answer within {self.settings.timeout_s:g} s",
            }
        else:
            answer = {"kind": "crash", "status": "crash", "message": f"the worker process died ({how})"}
        self.on_run(task, answer)

    def _wait(self) -> None:
        """Wait for the next answer, death or timeout, and handle it."""
        live = [w for w in self.slots if w is not None]
        busy = [w for w in live if w.task is not None]
        now = time.monotonic()
        left = min((w.started + self.settings.timeout_s - now for w in busy), default=1.0)
        poller = select.poll()  # not select(): fds above 1023 are possible in a process with big libraries
        for worker in live:
            poller.register(worker.receive, select.POLLIN)
        ready = {fd for fd, _ in poller.poll(max(0, math.ceil(left * 1000)))}
        for worker in [w for w in live if w.receive in ready]:
            data = os.read(worker.receive, 1 << 16)
            if data:
                self._answered(worker, data)
            else:
                self._lost(worker, timed_out=False)
        now = time.monotonic()
        for worker in busy:
            if worker.task is not None and worker in self.slots and now - worker.started > self.settings.timeout_s:
                self._lost(worker, timed_out=True)

    def run(self, tasks: Sequence[Task]) -> None:
        """Run every task; the workers are stopped however this ends."""
        pending = list(tasks)
        try:
            while pending or any(w is not None and w.task is not None for w in self.slots):
                self._assign(pending)
                self._wait()
        finally:
            self.stop()
