"""The conformance runner's crash-isolated worker processes (the mechanism; what they are asked
and how two answers combine is :mod:`.runner`'s).

``jobs`` workers (:class:`ctcop.process.workers.Worker`, forked by the run's ``ForkServer``, which
has imported :data:`PRELOAD`) each serve one runtime, built in the worker (:func:`.registry.find`),
one evaluation at a time, answering :func:`ctcop.conformance.verdict.judge`'s result as JSON. A
worker that dies costs its evaluation (``crash``, with the signal) and is replaced; one without an
answer within ``timeout_s`` is killed with its group and replaced (``timeout``). A worker that ran
an evaluation of ``Settings.alone`` is ended after it: what a runtime wrote outside its buffers
must not decide its next evaluations. Whatever a runtime does to its process costs its own
evaluations only. The exported models are shared through a folder of the run
(:data:`.runtimes.MODELS_VARIABLE`).
"""

from __future__ import annotations

import math
import os
import select
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from ..core import scheduler
from ..process.workers import Failed, ForkServer, Lost, Worker
from .result import Result, from_dict, to_dict
from .rows import parse
from .runtimes import MODELS_VARIABLE

if TYPE_CHECKING:
    from .case import Case

DEFAULT_TIMEOUT_S = 120.0
WORKER = "ctcop.conformance.pool:evaluate"
# What the fork server imports for every worker: numpy and ctcop's own modules, which start no
# thread a fork would lose (a framework, imported by a runtime, is its worker's own).
PRELOAD = (
    "numpy",
    "ctcop.conformance.case:warm",  # the reference's kernels, loaded once for every worker
    "ctcop.conformance.corpus",
    "ctcop.conformance.peers",
    "ctcop.conformance.pool",
    "ctcop.conformance.registry",
    "ctcop.conformance.runtimes",
    "ctcop.conformance.verdict",
)
Key = tuple[str, str]


@dataclass(frozen=True)
class Runtimes:
    """The rows of a run, by name (in order), and where a worker finds their runtimes:
    :func:`.registry.discover` of ``modules`` (``--runtime-module`` specs), entry points with
    ``with_plugins``; ``reduced``: the rows judged at a reduced precision (spec 10.5), and which;
    ``pythons``: the interpreters of the other environments' rows, by label (:mod:`.environments`)."""

    names: tuple[str, ...]
    modules: tuple[str, ...] = ()
    with_plugins: bool = True
    reduced: tuple[tuple[str, str], ...] = ()
    pythons: tuple[tuple[str, str], ...] = ()  # environment label, interpreter (spec 10.4)


@dataclass(frozen=True)
class Settings:
    """``jobs`` worker processes; ``timeout_s`` per evaluation; the (runtime, case) evaluations
    after which the worker is ended (``alone``: a runtime known to corrupt its process there,
    which kills it or, where it lives on, decides what its next evaluations return)."""

    jobs: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    alone: frozenset[Key] = frozenset()


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
class Slot:
    """A worker, the runtime it serves, and the task it is running (since ``started``)."""

    worker: Worker
    runtime: str
    task: Task | None = None
    started: float = 0.0


# -- the worker side -----------------------------------------------------------------------------


@cache
def _runtime(name: str, modules: tuple[str, ...], with_plugins: bool) -> Any:
    from .registry import find

    return find(name, modules, with_plugins)


@cache
def _case(folder: str) -> Case:
    from .corpus import load

    return load(folder)


def evaluate(request: Mapping[str, Any]) -> dict[str, Any]:
    """In a worker: one evaluation, ``{"runtime", "case" (its folder), "modules", "with_plugins",
    "reduced"}`` in, its result out (:func:`.result.to_dict`)."""
    from .verdict import judge

    name = request["runtime"]
    runtime = _runtime(name, tuple(request["modules"]), request["with_plugins"])
    return to_dict(judge(runtime, _case(request["case"]), name, request["reduced"]))


# -- the parent side -----------------------------------------------------------------------------


@dataclass
class Pool:
    """``settings.jobs`` workers running tasks; ``on_run(task, answer)`` gets every evaluation."""

    runtimes: Runtimes
    cases: Mapping[str, Case]
    settings: Settings
    on_run: Callable[[Task, Result], None]
    slots: list[Slot | None] = field(default_factory=list)
    first: dict[Key, int] = field(default_factory=dict)  # who ran a case's first evaluation
    servers: dict[str, ForkServer] = field(default_factory=dict)  # by environment label ("": this one's)

    def __post_init__(self) -> None:
        self.slots = [None] * max(1, self.settings.jobs)

    def _end(self, slot: Slot) -> str:
        """End ``slot``'s worker (killed with its process group, reaped), free the slot; how it ended."""
        self.slots[self.slots.index(slot)] = None
        return slot.worker.end()

    def stop(self) -> None:
        """Kill and reap every worker (interruptions included: nothing outlives the pool)."""
        for slot in [s for s in self.slots if s is not None]:
            self._end(slot)

    def _allowed(self, task: Task, slot: Slot) -> bool:
        return len(self.slots) == 1 or task.run == 0 or self.first.get(task.key) != slot.worker.pid

    def _request(self, task: Task) -> dict[str, Any]:
        return {
            "runtime": task.runtime,
            "case": str(self.cases[task.case].stored_in()),
            "modules": list(self.runtimes.modules),
            "with_plugins": self.runtimes.with_plugins,
            "reduced": dict(self.runtimes.reduced).get(task.runtime),
        }

    def _choice(self, pending: list[Task], slot: Slot | None) -> int | None:
        """The pending task for ``slot`` (None: a fresh worker): its own runtime's first, else any.
        One pass that stops at the first task of its runtime: a scan of every pending task per
        dispatch would make a run quadratic in its evaluations."""
        if slot is None:
            return 0 if pending else None
        other = None
        for index, task in enumerate(pending):
            if not self._allowed(task, slot):
                continue
            if task.runtime == slot.runtime:
                return index
            if other is None:
                other = index
        return other

    def _assign(self, pending: list[Task]) -> None:
        for index, slot in enumerate(self.slots):
            if not pending:
                return
            if slot is not None and slot.task is not None:
                continue
            choice = self._choice(pending, slot)
            if choice is None:
                continue
            if slot is not None and pending[choice].runtime != slot.runtime:
                self._end(slot)  # a worker serves one runtime
                slot = None
            if slot is None:
                worker = Worker(WORKER, server=self.servers[parse(pending[choice].runtime).environment])
                slot = self.slots[index] = Slot(worker, pending[choice].runtime)
            task = pending.pop(choice)
            try:
                slot.worker.send(self._request(task))
            except Lost:  # it died idle: the task goes back, the slot is refilled
                pending.insert(choice, task)
                self._end(slot)
                continue
            if task.run == 0:
                self.first[task.key] = slot.worker.pid
            slot.task, slot.started = task, time.monotonic()

    def _finish(self, slot: Slot, answer: Result) -> None:
        """Hand on ``answer`` to ``slot``'s task, timed from when the task was sent."""
        task, slot.task = slot.task, None
        assert task is not None
        answer = replace(answer, seconds=time.monotonic() - slot.started)
        if task.key in self.settings.alone and slot in self.slots:
            self._end(slot)  # what the evaluation may have written goes with its worker
        self.on_run(task, answer)

    def _answer_for(self, slot: Slot, status: str, message: str, **facts: Any) -> None:
        """Finish ``slot``'s task, if it has one, with a result the pool makes: its worker gave none."""
        if slot.task is not None:
            self._finish(slot, Result(slot.task.case, slot.task.runtime, status, message, **facts))

    def _read(self, slot: Slot) -> None:
        """Take what ``slot``'s worker sent: its answer, or its death."""
        try:
            if slot.worker.arrived():
                answer = slot.worker.answer()
                try:
                    result = from_dict(answer)
                except ValueError:  # something in the worker wrote to its pipe: it cannot be trusted
                    slot.worker.end()
                    raise Lost("answered something that is not a result") from None
                self._finish(slot, result)
        except Failed as failed:  # the worker could not evaluate (its runtimes or the case did not load)
            self._answer_for(slot, "error", f"the worker failed: {failed}", answer="raised")
        except Lost as lost:
            self._end(slot)
            self._answer_for(slot, "crash", f"the worker process died ({lost.how})", death=lost.how, answer="crash")

    def _wait(self) -> None:
        """Wait for the next answer, death or timeout, and handle it."""
        live = [s for s in self.slots if s is not None]
        busy = [s for s in live if s.task is not None]
        now = time.monotonic()
        left = min((s.started + self.settings.timeout_s - now for s in busy), default=1.0)
        poller = select.poll()  # not select(): fds above 1023 are possible in a process with big libraries
        for slot in live:
            poller.register(slot.worker.fileno(), select.POLLIN)
        ready = {fd for fd, _ in poller.poll(max(0, math.ceil(left * 1000)))}
        for slot in [s for s in live if s.worker.fileno() in ready]:
            self._read(slot)
        now = time.monotonic()
        for slot in busy:
            if slot.task is not None and slot in self.slots and now - slot.started > self.settings.timeout_s:
                self._end(slot)
                self._answer_for(slot, "timeout", f"no answer within {self.settings.timeout_s:g} s", answer="timeout")

    def run(self, tasks: Sequence[Task]) -> None:
        """Run every task; the workers and their fork server are stopped however this ends (an
        interruption included). The workers share the exported models they build through a folder
        of the run's (:data:`.runtimes.MODELS_VARIABLE`), named in the environment the run's fork
        server gives them, and compute ctcop's own results on one thread each (the jobs run side by
        side: ctcop's pool would only compete with them)."""
        pending = list(tasks)
        with tempfile.TemporaryDirectory(prefix="ctcop-models-") as models:
            environment = {**os.environ, MODELS_VARIABLE: models, scheduler.THREADS_VARIABLE: "1"}
            pythons = {"": None, **dict(self.runtimes.pythons)}
            self.servers = {label: ForkServer(PRELOAD, environment, python) for label, python in pythons.items()}
            try:
                while pending or any(s is not None and s.task is not None for s in self.slots):
                    self._assign(pending)
                    self._wait()
            finally:
                try:
                    self.stop()
                finally:
                    for server in self.servers.values():
                        server.close()
