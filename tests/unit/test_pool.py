"""The conformance runner's worker pool (:mod:`ctcop.conformance.pool`, spec 10): a worker asked
for a runtime that no source has says which; a run interrupted between an order to its fork server
and the reply raises the interruption, and neither a worker nor the server outlives it."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

from ctcop.conformance import corpus
from ctcop.conformance.pool import Pool, Runtimes, Settings, Task, evaluate
from ctcop.process import workers

CASE = "spec/hand_worked/float64"


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_worker_asked_for_a_runtime_that_no_source_has_names_it() -> None:
    with pytest.raises(LookupError, match=r"^no runtime is called 'no-such-runtime'$"):
        evaluate({"runtime": "no-such-runtime", "case": CASE, "modules": [], "with_plugins": False})


def test_an_interruption_between_an_order_and_its_reply_stops_the_workers_and_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = {case.id: case for case in corpus.load_all() if case.id == CASE}
    pool = Pool(Runtimes(("reference",)), cases, Settings(jobs=2), lambda task, result: None)
    sent = socket.send_fds
    orders: list[int] = []

    def interrupt_the_second(*args: Any) -> int:
        count = sent(*args)
        orders.append(count)
        if len(orders) == 2:  # the second worker's start, the first worker running its task
            raise KeyboardInterrupt
        return count

    monkeypatch.setattr(workers.socket, "send_fds", interrupt_the_second)
    with pytest.raises(KeyboardInterrupt):
        pool.run([Task(0, "reference", CASE, 0), Task(1, "reference", CASE, 1)])
    monkeypatch.undo()
    first = pool.first[("reference", CASE)]
    assert pool.servers[""].process is None and pool.slots == [None, None]
    deadline = time.monotonic() + 30
    while alive(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(first)
    pool.stop()
    pool.servers[""].close()
