"""Crash-isolated workers: a named function in a fresh interpreter, answering requests.

A :class:`Worker` runs ``package.module:function`` with this process's ``sys.path``, in a session
and process group of its own. Requests and answers are JSON lines over two pipes: the return value
is the answer, an exception an error (:class:`Failed`) and the worker goes on. A worker that dies
or misses the caller's timeout is killed with its process group, reaped, and :class:`Lost` says how
it ended. Workers ignore SIGINT. A :class:`Worker` is spawned (a process with a framework's thread
pools cannot fork safely), or forked by a :class:`ForkServer`, a spawned interpreter that has
imported only what is safe to fork; it holds its workers unreaped until asked (their pids stay
theirs) and they die with it (the parent-death signal). multiprocessing's forkserver is not used:
its workers hold its liveness pipe, so it outlives a caller killed while a worker runs, and so do
they. Whatever this module started and did not end is ended when its process exits. Core module:
standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from ..text import one_line

PATH_VARIABLE = "CTCOP_WORKER_PATH"  # the caller's sys.path, for the worker to import as it does
# Another interpreter (``python``) imports from its own sys.path, without the working folder that
# ``-c`` puts first (a checkout there is not what is installed): the variable is set for this one only.
_BOOT = (
    f"import json, os, sys; path = os.environ.pop({PATH_VARIABLE!r}, None); "
    "sys.path[:] = sys.path[1:] if path is None else json.loads(path); "
    "from ctcop.process.workers import {}; {}(*sys.argv[1:])"
)
_MESSAGE = 1 << 16  # the most a fork server's order or reply may hold (a target), well within a socket's buffer
Stream = int | IO[Any] | None  # what subprocess.Popen takes for stdin, stdout and stderr


class Failed(Exception):
    """The worker's function raised (``Type: message``, one line); the worker goes on."""


class Lost(Exception):
    """The worker ended without an answer (it is killed and reaped): ``how`` it ended, and
    whether it was killed for giving no answer in time (``timed_out``)."""

    def __init__(self, how: str, timed_out: bool = False) -> None:
        super().__init__(how)
        self.how, self.timed_out = how, timed_out


def _kill(pid: int) -> None:
    """SIGKILL to the process group that ``pid`` leads and to ``pid`` itself (it may not lead one yet)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def death(returncode: int) -> str:
    """How a process ended, from its return code (``subprocess``'s: -N for signal N)."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


_LIVE: set[Worker | ForkServer] = set()  # started and not yet ended: ended at the latest when this process exits
_DEFERRED = (signal.SIGINT, signal.SIGTERM)
_deferring: list[bool] = []


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive in the block are handled when it ends (by the handlers they
    had), so that a process is never started without being known to :data:`_LIVE`: an exception a
    signal handler raises inside ``subprocess.Popen`` would lose a child that was already
    started. Python runs signal handlers in the main thread only: elsewhere this changes nothing."""
    if _deferring or threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {signum: signal.getsignal(signum) for signum in _DEFERRED}
    if None in handlers.values():  # a handler installed outside Python, which cannot be put back
        yield
        return
    arrived: list[int] = []
    _deferring.append(True)
    try:
        for signum in _DEFERRED:
            signal.signal(signum, lambda number, _: arrived.append(number))
        yield
    finally:
        _deferring.pop()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        for number in arrived[:1]:
            handler = handlers[signal.Signals(number)]
            if callable(handler):
                handler(number, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(number)


@atexit.register
def _end_live() -> None:
    """End every worker and fork server this process started and has not ended (an interruption
    can come between a start and the block that ends it)."""
    for started in list(_LIVE):
        if isinstance(started, Worker):
            started.end()
    for started in list(_LIVE):
        if isinstance(started, ForkServer):
            started.close()


# -- the worker's side ---------------------------------------------------------------------------


def _function(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found  # type: ignore[no-any-return]


def serve(target: str, requests: str, answers: str) -> None:
    """The worker (started by :class:`Worker`): ``target`` called with each request read from the
    fd ``requests`` (``{"id", "request"}``), a reply ``{"id", "answer"}`` or ``{"id", "error":
    "Type: message"}`` written to the fd ``answers`` for each; ends when the requests' pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    function = _function(target)
    with os.fdopen(int(requests), "rb") as lines, os.fdopen(int(answers), "wb") as out:
        for line in lines:
            envelope = json.loads(line)
            try:
                reply = json.dumps({"id": envelope["id"], "answer": function(envelope["request"])})
            except Exception as error:  # the function's failure is an answer; the worker goes on
                reply = json.dumps({"id": envelope["id"], "error": f"{type(error).__name__}: {one_line(error, 2000)}"})
            out.write(reply.encode() + b"\n")
            out.flush()


def _forked(sock: socket.socket, order: Mapping[str, Any], fds: Sequence[int]) -> None:
    """In the fork server's child: become the worker ``order`` asks for, and end when it does."""
    code = 1
    try:
        sock.close()
        if sys.platform.startswith("linux"):  # dies with the server (its caller could not reap it)
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if os.getppid() != order["server"]:
                return
        os.setsid()
        os.environ.clear()
        os.environ.update(order["env"])
        serve(order["target"], str(fds[0]), str(fds[1]))
        code = 0
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 1
    finally:
        os._exit(code)


def fork_server(channel: str, preload: str) -> None:
    """The fork server (started by :class:`ForkServer`): import the modules of ``preload`` (JSON;
    ``module:function`` also calls the function, with no arguments), then answer each order read
    from the socket ``channel``: ``start`` (fork a worker running its ``target`` over the two pipe
    ends sent with it, in the environment the server started with: its pid), ``poll`` or ``wait``
    (its return code: null while it runs). Ends when the caller's end of the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    environment = dict(os.environ)  # the workers' (a preloaded module may change the server's own)
    for entry in json.loads(preload):
        if ":" in entry:
            _function(entry)()
        else:
            importlib.import_module(entry)
    sock = socket.socket(fileno=int(channel))
    server = os.getpid()
    while True:
        message, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 2)
        if not message:
            return
        order = json.loads(message)
        if order["op"] == "start":
            pid = os.fork()
            if pid == 0:
                _forked(sock, {**order, "server": server, "env": environment}, fds)
            for fd in fds:
                os.close(fd)
            reply: dict[str, Any] = {"pid": pid}
        else:
            done, status = os.waitpid(order["pid"], 0 if order["op"] == "wait" else os.WNOHANG)
            reply = {"returncode": os.waitstatus_to_exitcode(status) if done else None}
        sock.send(json.dumps(reply).encode())


# -- the caller's side ---------------------------------------------------------------------------


def _environment(env: Mapping[str, str] | None, python: str | None) -> dict[str, str]:
    """A child's environment: ``env`` (None: this process's) and, for this interpreter (``python``
    None), this process's ``sys.path``."""
    environment = dict(os.environ if env is None else env)
    if python is None:
        environment[PATH_VARIABLE] = json.dumps(sys.path)
    return environment


def _readable(fd: int, timeout_s: float | None) -> bool:
    poller = select.poll()  # not select(): fds above 1023 are possible in a process with big libraries
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout_s is None else max(0, math.ceil(timeout_s * 1000))))


class ForkServer:
    """A spawned interpreter (``python``; None: this one) that has imported ``preload`` and forks
    workers from itself (module docstring) in the environment ``env`` (None: this process's when
    the server starts): pass it to :class:`Worker`. A server that died (something killed it) is
    replaced by a fresh one at the next start; :meth:`close` ends it and its workers."""

    def __init__(self, preload: Sequence[str], env: Mapping[str, str] | None = None, python: str | None = None) -> None:
        self.preload = list(preload)
        self.env = None if env is None else dict(env)
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None
        self._held: set[int] = set()  # the workers it forked and has not reaped (their pids are theirs)

    def _started(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            self.close()
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            environment = _environment(self.env, self.python)
            boot = _BOOT.format("fork_server", "fork_server")
            with _signals_deferred():  # started and registered, or not started
                try:
                    self.process = subprocess.Popen(
                        [self.python or sys.executable, "-c", boot, str(theirs.fileno()), json.dumps(self.preload)],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env=environment,
                        pass_fds=(theirs.fileno(),),
                        start_new_session=True,
                    )
                except BaseException:
                    mine.close()
                    raise
                finally:
                    theirs.close()
                self._socket = mine
                _LIVE.add(self)
        return self.process

    def _ask(self, order: Mapping[str, Any], fds: Sequence[int] = ()) -> Any:
        """The running server's reply to ``order``. An exchange cut short (the server gone, an
        interruption between the order and its reply) ends the server, so that no reply is left
        for a later order to read: :class:`Lost` when the server was gone."""
        message = json.dumps(order).encode()
        if len(message) > _MESSAGE:
            raise ValueError(f"a fork server's order holds at most {_MESSAGE} bytes, not {len(message)}")
        try:
            try:
                socket.send_fds(self._socket, [message], list(fds))
                reply = self._socket.recv(_MESSAGE)
            except OSError:  # the server is gone
                reply = b""
            if not reply:
                raise Lost(f"its fork server {death(self._end())}")
            return json.loads(reply)
        except BaseException:
            self.close()
            raise

    def start(self, target: str, fds: tuple[int, int]) -> Forked:
        """A worker running ``target`` over the pipe ends ``fds`` (requests, answers); a server
        found dead is replaced and asked again, once."""
        order = {"op": "start", "target": target}
        try:
            return self._fork(order, fds)
        except Lost:
            return self._fork(order, fds)

    def _fork(self, order: Mapping[str, Any], fds: Sequence[int]) -> Forked:
        server = self._started()
        pid: int = self._ask(order, fds)["pid"]
        self._held.add(pid)
        return Forked(self, server, pid)

    def returncode(self, server: subprocess.Popen[bytes], pid: int, wait: bool) -> int | None:
        """The return code of the worker ``pid`` that ``server`` forked (None while it runs);
        ``wait``: until it ends. A server that is gone took the worker with it: -SIGKILL."""
        if server is not self.process or server.poll() is not None:
            return -signal.SIGKILL
        try:
            code: int | None = self._ask({"op": "wait" if wait else "poll", "pid": pid})["returncode"]
        except Lost:
            return -signal.SIGKILL
        if code is not None:
            self._held.discard(pid)
        return code

    def close(self) -> None:
        """End the server: kill its workers with their process groups, then the server, and reap it."""
        if self.process is not None:
            self._end()

    def _end(self) -> int:
        """:meth:`close`, saying how the server ended (its return code)."""
        process = self.process
        assert process is not None
        self._socket.close()
        if process.poll() is None:  # unreaped, as are the workers it holds: their pids are theirs
            for pid in (*self._held, process.pid):
                _kill(pid)
        self._held.clear()
        code = process.wait()
        self.process = None
        _LIVE.discard(self)
        return code


class Forked:
    """A worker that a :class:`ForkServer` forked, seen as ``subprocess.Popen`` shows a child:
    ``pid``, ``returncode``, :meth:`poll`, :meth:`wait`, and whether it may still be signalled
    (``held``: unreaped by its server, so its pid is its own)."""

    def __init__(self, server: ForkServer, process: subprocess.Popen[bytes], pid: int) -> None:
        self.server, self._process, self.pid = server, process, pid
        self.returncode: int | None = None

    @property
    def held(self) -> bool:
        return self.returncode is None and self._process is self.server.process and self._process.poll() is None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.returncode(self._process, self.pid, wait=False)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = self.server.returncode(self._process, self.pid, wait=True)
        assert self.returncode is not None
        return self.returncode


class Worker:
    """``target`` (``package.module:function``) serving requests in a fresh process (module
    docstring), or in a process that ``server`` forks (then its streams are /dev/null and its
    environment is the server's); ``env`` replaces the environment of a spawned one, ``python``
    its interpreter (another environment's, which imports from its own ``sys.path``: ctcop must
    be installed there). Ends (:meth:`end`) when its ``with`` block does."""

    def __init__(
        self,
        target: str,
        stdin: Stream = subprocess.DEVNULL,
        stdout: Stream = subprocess.DEVNULL,
        stderr: Stream = subprocess.DEVNULL,
        env: Mapping[str, str] | None = None,
        server: ForkServer | None = None,
        python: str | None = None,
    ) -> None:
        if server is not None and (
            env is not None or python is not None or not stdin == stdout == stderr == subprocess.DEVNULL
        ):
            raise ValueError("a forked worker's streams are /dev/null and its environment and interpreter its server's")
        # Spawned: started and registered, or not started. Forked: an interruption while its server
        # forks it ends the server with its workers (ForkServer._ask), which may take a while to answer.
        with _signals_deferred() if server is None else contextlib.nullcontext():
            requests, self._requests = os.pipe()
            self._answers, answers = os.pipe()
            self.process: subprocess.Popen[bytes] | Forked
            try:
                if server is not None:
                    self.process = server.start(target, (requests, answers))
                else:
                    environment = _environment(env, python)
                    boot = _BOOT.format("serve", "serve")
                    self.process = subprocess.Popen(
                        [python or sys.executable, "-c", boot, target, str(requests), str(answers)],
                        stdin=stdin,
                        stdout=stdout,
                        stderr=stderr,
                        env=environment,
                        pass_fds=(requests, answers),
                        start_new_session=True,  # its own process group: killed with whatever it starts
                    )
            except BaseException:
                for fd in (self._requests, self._answers):
                    os.close(fd)
                raise
            finally:
                os.close(requests)
                os.close(answers)
            self.pid = self.process.pid
            self.ended: str | None = None
            self._buffer = b""
            self._sent = 0  # requests sent; answers come in the same order, each naming its request
            self._answered = 0
            _LIVE.add(self)

    def __enter__(self) -> Worker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.end()

    def fileno(self) -> int:
        """The answers' pipe, readable when an answer (or the worker's end) is there: for ``poll``."""
        return self._answers

    def send(self, request: Any) -> None:
        """Send one request (JSON); :class:`Lost` when the worker is gone (it is then ended)."""
        if self.ended is not None:
            raise Lost(self.ended)
        self._sent += 1
        data = json.dumps({"id": self._sent, "request": request}).encode() + b"\n"
        try:
            while data:
                data = data[os.write(self._requests, data) :]
        except BrokenPipeError:  # it died
            raise Lost(self.end()) from None

    def arrived(self) -> bool:
        """Read what the answers' pipe holds (once; call when it is readable): whether a whole
        answer is there. :class:`Lost` at the pipe's end (the worker died, and is ended)."""
        if self.ended is not None:
            raise Lost(self.ended)
        data = os.read(self._answers, 1 << 16)
        if not data:
            raise Lost(self.end())
        self._buffer += data
        return self.ready

    @property
    def ready(self) -> bool:
        """Whether a whole answer has been read and not yet taken (:meth:`answer`)."""
        return b"\n" in self._buffer

    def answer(self, timeout_s: float | None = None) -> Any:
        """The next answer, waiting up to ``timeout_s`` (None: for ever); :class:`Failed` when the
        function raised, :class:`Lost` when the worker died or timed out (it is then ended)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.ready:
            left = None if deadline is None else deadline - time.monotonic()
            if not _readable(self._answers, left):
                self.end()
                raise Lost(f"no answer within {timeout_s:g} s", timed_out=True)
            self.arrived()
        line, _, self._buffer = self._buffer.partition(b"\n")
        self._answered += 1
        try:
            reply = json.loads(line)
            fits = (
                isinstance(reply, dict)
                and reply.get("id") == self._answered
                and ("answer" in reply or "error" in reply)
            )
        except ValueError:
            fits = False
        if not fits:  # a write to its pipe by a process it started, or by the function itself
            self.end()
            raise Lost("answered out of turn (a reply to no request it was sent)")
        if "error" in reply:
            raise Failed(str(reply["error"]))
        return reply["answer"]

    def end(self) -> str:
        """Kill the worker's process group and the worker (if still running: its pipe may close
        before it ends), reap it and close its pipes; how it ended. Until reaped, its pid (and so
        its group's id) cannot have been reused."""
        if self.ended is None:
            if not isinstance(self.process, Forked) or self.process.held:
                _kill(self.pid)
            self.ended = death(self.process.wait())
            for fd in (self._requests, self._answers):
                with contextlib.suppress(OSError):
                    os.close(fd)
            _LIVE.discard(self)
        return self.ended


def call(target: str, request: Any, timeout_s: float | None, **streams: Any) -> Any:
    """``target(request)`` in a fresh worker (``streams``: :class:`Worker`'s ``stdin``,
    ``stdout``, ``stderr``, ``env``), the answer; the worker is ended after it, however it ends."""
    with Worker(target, **streams) as worker:
        worker.send(request)
        return worker.answer(timeout_s)
