"""Users' files, read and written safely: size limits, input files checked before anything reads
them, output paths checked before any work, and atomic writes (spec 13).

Core module: the exporters, ``ctcop eval`` and the command line share these; every refusal is an
:class:`InvalidInputError` naming the option or argument at fault.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from typing import NoReturn

from .errors import InvalidInputError

# The largest model file the exporters and ``ctcop eval`` read, and the largest tensor they load.
MAX_FILE_BYTES = 4 << 30
MAX_TENSOR_BYTES = 1 << 30


def _refuse(what: str, rule: str) -> NoReturn:
    raise InvalidInputError(what, rule)


def checked_input_file(path: str, what: str, limit: int = MAX_FILE_BYTES) -> int:
    """The size of ``path`` when it is a regular file (a symlink to one included) of at most
    ``limit`` bytes, checked before anything reads it: a device (/dev/zero), FIFO or directory
    would block or never end. Otherwise an :class:`InvalidInputError` naming ``what``."""
    try:
        status = os.stat(path)
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InvalidInputError(what, f"cannot read {path!r}: {reason}") from None
    if not stat.S_ISREG(status.st_mode):
        _refuse(what, f"{path!r} is not a regular file")
    if status.st_size > limit:
        _refuse(what, f"{path!r} is {status.st_size} bytes, over the limit of {limit}")
    return status.st_size


def _probe_folder(folder: str, what: str) -> None:
    """Refuse unless a file can be created in ``folder`` (tried, not guessed: root passes access checks)."""
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".ctcop-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        _refuse(what, f"cannot create a file in {folder!r}: {error.strerror}")


def checked_output(path: str, what: str, suffix: str = "") -> None:
    """Refuse an output path ctcop could not write, before any work: empty, a directory or other
    non-regular file, in a missing or unwritable folder, or without the required ``suffix``
    (``.xml``: the ``.bin`` beside it is checked too)."""
    if not path or "\0" in path:
        _refuse(what, f"{path!r} is not a file path")
    if suffix and not path.endswith(suffix):
        _refuse(what, f"{path!r} must end in {suffix}")
    others = [path[: -len(suffix)] + ".bin"] if suffix == ".xml" else []
    for target in (path, *others):
        if os.path.isdir(target):
            _refuse(what, f"{target!r} is a directory")
        if os.path.lexists(target) and not os.path.isfile(target):
            _refuse(what, f"{target!r} exists and is not a regular file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        _refuse(what, f"the folder of {path!r} does not exist")
    _probe_folder(folder, what)


def checked_output_folder(path: str, what: str) -> None:
    """Refuse a folder ctcop could not create or write files in."""
    if not path or "\0" in path:
        _refuse(what, f"{path!r} is not a folder path")
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        _refuse(what, f"{existing!r} exists and is not a folder")
    _probe_folder(existing, what)


def _same_file(first: str, second: str) -> bool:
    """Whether two paths name one file (links and relative spellings resolved)."""
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):  # one does not exist (yet), or a NUL in a path
        return "\0" not in first + second and os.path.realpath(first) == os.path.realpath(second)


def refuse_overwriting_inputs(output: str, what: str, inputs: Sequence[str]) -> None:
    """Refuse an output path that is one of the command's input files: writing it would replace
    the user's model, its weights or its inputs."""
    for given in inputs:
        if _same_file(output, given):
            _refuse(what, f"{output!r} is an input file of this command ({given!r}): choose another path")


@contextlib.contextmanager
def atomic_output(path: str, extension: str = ".tmp", companions: tuple[str, ...] = ()) -> Iterator[str]:
    """A temporary path in the folder of ``path``, ending in ``extension``, for the block to write;
    when the block ends without an exception it is renamed onto ``path`` (and each temporary
    ``stem + companion``, e.g. an IR's ``.bin``, onto ``path``'s stem + companion, first), else
    removed. A reader, a crash or an interruption never sees half a file. The file gets the
    permissions of a plain ``open``."""
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=extension)
    os.close(handle)
    stem, final_stem = temporary[: -len(extension)], target.removesuffix(extension)
    pairs = [*((stem + c, final_stem + c) for c in companions), (temporary, target)]
    try:
        yield temporary
        mask = os.umask(0)
        os.umask(mask)
        for written, final in pairs:
            os.chmod(written, 0o666 & ~mask)
            os.replace(written, final)
    finally:
        for written, _ in pairs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(written)


def write_atomically(path: str, text: str, what: str = "json") -> None:
    """Write ``text`` to ``path`` by way of :func:`atomic_output`, so that a reader (or an
    interruption) never sees half a report; a failure of the file system names ``what``."""
    try:
        with atomic_output(path) as temporary, open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        _refuse(what, f"cannot write {path!r}: {error.strerror or error}")


def fingerprint(paths: Sequence[str]) -> str:
    """A digest of the contents of ``paths`` (a missing or unreadable file counts as such), to tell
    whether files read at different moments were the same files."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.fsencode(path) + b"\0")
        try:
            with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:  # a FIFO does not block
                if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):  # /dev/zero, a FIFO: never read
                    raise OSError(0, "not a regular file")
                left = MAX_FILE_BYTES + 1  # what the checks read of a file, at most
                while left > 0 and (block := file.read(min(left, 1 << 20))):
                    digest.update(block)
                    left -= len(block)
        except OSError as error:
            digest.update(f"unreadable: {error.errno}".encode())
        digest.update(b"\0")
    return digest.hexdigest()
