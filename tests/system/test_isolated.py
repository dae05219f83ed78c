"""Crash-isolated workers (:mod:`ctcop.process.workers`): answers and errors as JSON lines, how a worker
ended, the timeout, SIGINT ignored, its own process group and streams, and nothing it started
outliving it, for spawned workers and workers a fork server forks alike; a fork server's
environment however large, and an exchange with it cut short. The workers run the functions of
tests/support/worker_targets.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

from ctcop.process import workers
from ctcop.process.workers import Failed, ForkServer, Lost, Worker, call

TARGETS = "support.worker_targets"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    forks = ForkServer(["numpy"])
    yield forks
    forks.close()


@pytest.fixture(params=["spawned", "forked"])
def started(request: pytest.FixtureRequest, server: ForkServer) -> dict[str, Any]:
    """How the test's workers start: :class:`Worker`'s ``server`` argument."""
    return {"server": server} if request.param == "forked" else {}


def python_path(*folders: Path) -> dict[str, str]:
    """This process's environment with ``folders`` first on a child Python's ``sys.path``."""
    path = [str(folder) for folder in folders]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_each_request_gets_its_answer(started: dict[str, Any]) -> None:
    with Worker(f"{TARGETS}:echo", **started) as worker:
        for request in (1, "two", [3.5, None, True], {"nested": {"list": [1, 2]}}):
            worker.send(request)
            assert worker.answer(60) == request


def test_an_exception_is_an_error_answer_and_the_worker_goes_on(started: dict[str, Any]) -> None:
    with Worker(f"{TARGETS}:refuse", **started) as worker:
        for _ in range(2):
            worker.send("luck")
            with pytest.raises(Failed, match=r"^ValueError: no luck second line$"):
                worker.answer(60)
        assert worker.process.poll() is None


@pytest.mark.parametrize(
    ("request_", "how"),
    [({"signal": "SIGSEGV", "code": 0}, "killed by SIGSEGV"), ({"code": 7}, "exited with code 7")],
)
def test_how_a_worker_ended_is_said(request_: dict[str, Any], how: str, started: dict[str, Any]) -> None:
    with pytest.raises(Lost) as lost:
        call(f"{TARGETS}:end_by", request_, 60, **started)
    assert (lost.value.how, lost.value.timed_out) == (how, False)


def test_a_worker_without_an_answer_in_time_is_killed_with_what_it_started(
    tmp_path: Path, started: dict[str, Any]
) -> None:
    marker = tmp_path / "grandchild"
    with Worker(f"{TARGETS}:start_then_hang", **started) as worker:
        worker.send(str(marker))
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchild = int(marker.read_text())
        with pytest.raises(Lost) as lost:
            worker.answer(0.5)
        assert lost.value.timed_out and lost.value.how == "no answer within 0.5 s"
        assert worker.ended == "killed by SIGKILL" and not alive(worker.pid)
        with pytest.raises(Lost):
            worker.send("anything")
    deadline = time.monotonic() + 30
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_sigint_is_ignored_in_the_worker(started: dict[str, Any]) -> None:
    assert call(f"{TARGETS}:interrupt_self", None, 60, **started) == "still here"


def test_the_worker_has_its_own_process_group_the_callers_streams_and_path(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with open(out, "wb") as stdout:
        got = call(f"{TARGETS}:describe", "printed", 60, stdout=stdout)
    assert got["group"] == got["pid"] != os.getpgid(0)
    assert got["path"] == sys.path
    assert out.read_text() == "printed\n"


def test_a_forked_worker_has_its_own_process_group_the_given_environment_and_the_callers_path() -> None:
    forks = ForkServer(["numpy"], {**os.environ, "CTCOP_TEST_VARIABLE": "given"})
    try:
        got = call(f"{TARGETS}:environment", "CTCOP_TEST_VARIABLE", 60, server=forks)
        assert forks.process is not None
        assert got["variable"] == "given" and "CTCOP_TEST_VARIABLE" not in os.environ
        assert got["group"] == got["pid"]
        assert got["group"] not in (os.getpgid(0), forks.process.pid, os.getpgid(forks.process.pid))
        assert got["path"] == sys.path
    finally:
        forks.close()


def test_a_forked_worker_takes_no_environment_or_streams_of_its_own(server: ForkServer) -> None:
    with pytest.raises(ValueError, match="its environment and interpreter its server's"):
        Worker(f"{TARGETS}:echo", env=dict(os.environ), server=server)
    with pytest.raises(ValueError, match="streams are /dev/null"):
        Worker(f"{TARGETS}:echo", stdout=subprocess.PIPE, server=server)


def test_a_fork_server_gives_its_workers_an_environment_larger_than_a_socket_message() -> None:
    """In a child process with a timeout: an environment sent in a message would hang the start.
    300 KB in three variables (Linux execs no single one over 128 KiB)."""
    script = textwrap.dedent(
        """
        import os
        from ctcop.process.workers import ForkServer, Worker

        names = [f"CTCOP_TEST_LARGE_{i}" for i in range(3)]
        forks = ForkServer([], {**os.environ, **{name: name[-1] * 100_000 for name in names}})
        try:
            with Worker("os:getenv", server=forks) as worker:
                for name in names:
                    worker.send(name)
                    print(worker.answer(60) == name[-1] * 100_000)
        finally:
            forks.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\nTrue\nTrue\n", "")


def test_an_exchange_cut_short_ends_the_server_and_its_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interruption between an order and its reply leaves no reply for the next order to read:
    the server and its workers are killed, what they started too, and a fresh server takes over."""
    forks = ForkServer([])
    try:
        marker = tmp_path / "grandchild"
        worker = Worker(f"{TARGETS}:start_then_hang", server=forks)
        worker.send(str(marker))
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchild = int(marker.read_text())
        first = forks.process
        sent = socket.send_fds

        def send_then_interrupt(*args: Any) -> int:
            sent(*args)
            raise KeyboardInterrupt

        with monkeypatch.context() as patched:
            patched.setattr(workers.socket, "send_fds", send_then_interrupt)
            with pytest.raises(KeyboardInterrupt):
                worker.process.poll()
        assert forks.process is None and first is not None and first.returncode is not None
        assert worker.end() == "killed by SIGKILL"
        deadline = time.monotonic() + 30
        while (alive(worker.pid) or alive(grandchild)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker.pid) and not alive(grandchild)
        forks.close()
        assert call(f"{TARGETS}:echo", "again", 60, server=forks) == "again"
    finally:
        forks.close()


def test_a_forked_worker_dies_with_its_server_and_a_fresh_server_forks_the_next() -> None:
    forks = ForkServer([])
    try:
        worker = Worker(f"{TARGETS}:echo", server=forks)
        assert forks.process is not None
        first = forks.process.pid
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while alive(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker.pid)
        with pytest.raises(Lost):
            worker.send("anything")
            worker.answer(60)
        assert worker.ended == "killed by SIGKILL"
        assert call(f"{TARGETS}:echo", "again", 60, server=forks) == "again"
        assert forks.process.pid != first
    finally:
        forks.close()


# A caller whose SIGTERM handler raises, and a signal that arrives inside ``subprocess.Popen``,
# after the worker's process has started: the worker is known, the exception is raised once it is,
# and the caller's exit ends it (it would otherwise sleep on, importing its target).
INTERRUPTED_WHILE_STARTING = """
import signal, subprocess

from ctcop.process import workers


class Interrupting(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        print(self.pid, flush=True)
        signal.raise_signal(signal.SIGTERM)


def stop(signum, frame):
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, stop)
subprocess.Popen = Interrupting
try:
    workers.Worker("slow_import:anything")
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_a_worker_started_as_a_signal_interrupts_its_caller_is_ended_when_the_caller_exits(tmp_path: Path) -> None:
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(600)\n")
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WHILE_STARTING],
        env=python_path(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pid, said = done.stdout.split()
    assert said == "interrupted"
    assert not alive(int(pid)), "the worker outlived its caller"


def test_a_worker_never_ended_is_ended_when_its_caller_exits(tmp_path: Path) -> None:
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(600)\n")
    # (A forked worker and its server need no such care: the server ends when its caller's socket
    # closes, and the worker with it.)
    script = "from ctcop.process import workers\nprint(workers.Worker('slow_import:anything').pid)"
    done = subprocess.run(
        [sys.executable, "-c", script], env=python_path(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert not alive(int(done.stdout)), "the worker outlived its caller"


# A caller with a busy forked worker, killed by SIGKILL (no exit handler runs): its fork server
# sees its socket close and ends, and the worker dies with the server.
KILLED_WITH_A_BUSY_WORKER = """
import sys, time

from ctcop.process.workers import ForkServer, Worker

worker = Worker("support.worker_targets:start_then_hang", server=ForkServer([]))
worker.send(sys.argv[1])
print(worker.pid, worker.process.server.process.pid, flush=True)
time.sleep(3600)
"""


def test_a_forked_worker_dies_when_its_caller_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild"
    root = ROOT
    caller = subprocess.Popen(
        [sys.executable, "-c", KILLED_WITH_A_BUSY_WORKER, str(marker)],
        env=python_path(root, root / "tests"),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert caller.stdout is not None
        worker, server = map(int, caller.stdout.readline().split())
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(worker) and marker.read_text()
    finally:
        caller.kill()
        caller.communicate()
    deadline = time.monotonic() + 30
    while (alive(worker) or alive(server)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(server), "the fork server outlived its caller"
    assert not alive(worker), "the worker outlived its caller"
