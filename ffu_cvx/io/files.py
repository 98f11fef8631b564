"""Atomic file output shared by the command line and the experiments.

IO layer, its bottom: imports the standard library only (``fcntl``, or ``msvcrt`` on Windows, when a
lock is taken).

A write goes to a temporary file in the target's folder, is flushed to disk and renamed
into place, so a reader never sees a half-written file and an interrupted write leaves
none behind: ``KeyboardInterrupt`` (SIGINT) and SIGTERM both remove the temporary file.
SIGTERM's default action kills the process without running any clean-up, so while a
write is in progress (and only then) SIGTERM is turned into :class:`Terminated`, an
exception that unwinds like ``SystemExit`` with status 143; the previous handler is put
back afterwards. A program that handles SIGTERM itself (the command line does, through
:func:`signals_unwind`) keeps its handler; so does a write outside the main thread,
where Python cannot install handlers.

A library can swallow the exception a signal raised: CVXPY logs any failure to import a
solver and goes on, and a Ctrl-C during its import of HiGHS's extension becomes such a
failure (``ImportError('initialization failed')``), so the solve then finished and wrote
its output (3 of 80 Ctrl-Cs in the SDP signal test). Inside :func:`signals_unwind` every
signal is remembered, and a write raises the exception again before it begins and
before its rename.

Files that belong together (a release's answers and its privacy statement) are written
by :func:`atomic_write_group`: every temporary file first, then, holding an exclusive
lock on the folder (so that concurrent writers of the same names take turns) and with
SIGINT and SIGTERM held back until they are done, the renames in order, so an interrupt never lands between
them. :func:`check_output` is the one check of an output path before any work: not a
folder, not one of the inputs, not read-only, and not an existing file unless
``overwrite``.
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Terminated", "signals_unwind", "raise_if_signalled", "held_signals", "check_output", "locked",
           "atomic_write_bytes", "atomic_write_text", "atomic_write_group"]

#: Write permission for anyone: a file with none is read-only, even to root.
_ANY_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
#: The signals held back while a group of files is renamed into place.
_HELD = (signal.SIGINT, signal.SIGTERM)

#: Signals received inside :func:`signals_unwind` (emptied when the outermost block is entered and left).
_RECEIVED: set[int] = set()


class Terminated(SystemExit):
    """SIGTERM as an exception: unwinds (running clean-ups) and exits with status 128 + 15."""

    def __init__(self):
        super().__init__(128 + signal.SIGTERM)


def _raise_terminated(signum, frame):
    """A SIGTERM handler raising :class:`Terminated`."""
    raise Terminated()


def _remember_and_raise(signum, frame):
    """The handler :func:`signals_unwind` installs: remember ``signum``, then raise its exception."""
    _RECEIVED.add(signum)
    raise_if_signalled()


def raise_if_signalled() -> None:
    """Raise ``KeyboardInterrupt`` (SIGINT) or :class:`Terminated` (SIGTERM) if either was
    received inside :func:`signals_unwind`, even if the exception it raised then was swallowed."""
    if signal.SIGTERM in _RECEIVED:
        raise Terminated()
    if _RECEIVED:
        raise KeyboardInterrupt


@contextmanager
def signals_unwind():
    """For the block's duration (main thread only), SIGINT raises ``KeyboardInterrupt`` and
    SIGTERM :class:`Terminated`, and both are remembered for :func:`raise_if_signalled`.

    The outermost block forgets them when it is entered and left; a nested one keeps them,
    so that a signal an inner block saw still stops the outer one.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    outermost = signal.getsignal(signal.SIGINT) is not _remember_and_raise
    previous = {sig: signal.signal(sig, _remember_and_raise) for sig in (signal.SIGINT, signal.SIGTERM)}
    if outermost:
        _RECEIVED.clear()
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if outermost:
            _RECEIVED.clear()


@contextmanager
def _sigterm_unwinds():
    """SIGTERM raises :class:`Terminated` inside the block if it would otherwise kill the process."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def check_output(path, what: str, inputs: dict | None = None, overwrite: bool = True) -> Path:
    """``path`` as a Path, or ``ValueError`` (naming ``what`` and the path) before any work.

    Refused: a folder; a missing or read-only folder; the same file as one of ``inputs``
    (``{description: path}``; same device and inode, so links count); an existing
    read-only file; and an existing file at all unless ``overwrite``.
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{what} {p} is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"cannot write {what} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"cannot write {what} {p}: directory {parent} is not writable")
    if not p.exists():
        return p
    for name, src in (inputs or {}).items():
        if src is not None and Path(src).exists() and os.path.samefile(p, src):
            raise ValueError(f"{what} {p} is the same file as the {name} {src}; writing it would destroy the "
                             f"input: choose another {what}")
    if not os.access(p, os.W_OK) or not p.stat().st_mode & _ANY_WRITE:
        raise ValueError(f"{what} {p} exists and is read-only; it is left as it is: choose another {what} or make "
                         "it writable")
    if not overwrite:
        raise ValueError(f"{what} {p} exists; it is left as it is: choose another path, or pass overwrite=True "
                         "(--overwrite) to replace it")
    return p


def _temporary(path: Path, data: bytes, made: list) -> None:
    """A complete, flushed temporary copy of ``data`` beside ``path`` (umask permissions; ``mkstemp``
    gives 0600), appended to ``made`` as soon as it exists (the caller removes what ``made`` holds)."""
    with held_signals():  # no signal between the file's creation and its record in ``made``
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        made.append(tmp)
        fh = os.fdopen(fd, "wb")
    with fh:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _remove(tmp: str | None) -> None:
    try:
        if tmp is not None:
            os.unlink(tmp)
    except FileNotFoundError:
        pass


def _os_error(exc: OSError, path: Path) -> OSError:
    """``exc`` re-raised naming the target ``path`` (never the hidden temporary file)."""
    return type(exc)(exc.errno, f"cannot write {path}: {exc.strerror or exc}")


@contextmanager
def held_signals():
    """SIGINT and SIGTERM wait until the block ends, then take effect as they would have.

    In the main thread their handlers are swapped for ones that only remember the signal
    (a blocked signal mask would not do: CPython runs handlers in the main thread
    whichever thread the kernel picked, e.g. a BLAS thread). Elsewhere nothing is needed:
    a handler never runs in another thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: got.append(signum)) for sig in _HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(got):
            if callable(previous[sig]):
                previous[sig](sig, None)
            elif previous[sig] == signal.SIG_DFL:
                os.kill(os.getpid(), sig)


@contextmanager
def locked(path: Path):
    """An exclusive advisory lock on the file ``path`` (created empty if missing; never removed):
    holders take turns, across processes."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with _exclusive(fd):
            yield fd
    finally:
        os.close(fd)


#: The lock file a file group's writers share on Windows, where a folder cannot be opened to lock it.
WINDOWS_FOLDER_LOCK = ".ffu-cvx.lock"


@contextmanager
def _folder_lock(folder: Path):
    """An exclusive advisory lock on ``folder`` (writers of a file group there take turns); on
    Windows, on the file :data:`WINDOWS_FOLDER_LOCK` in it."""
    if os.name == "nt":
        with locked(os.path.join(folder, WINDOWS_FOLDER_LOCK)) as fd:
            yield fd
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        with _exclusive(fd):
            yield fd
    finally:
        os.close(fd)


@contextmanager
def _exclusive(fd: int):
    """Hold an exclusive lock on the open file ``fd``, waiting for it: ``fcntl.flock``, or on Windows
    ``msvcrt.locking`` of its first byte (whose blocking mode gives up after 10 s, so it is retried)."""
    if os.name != "nt":
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
        return
    import msvcrt

    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        try:
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
            break
        except OSError:
            continue
    try:
        yield
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def _replace(tmp: str, path: Path) -> None:
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise _os_error(exc, path) from None


def atomic_write_group(items, written: list | None = None, before_rename=None) -> list[Path]:
    """Write each ``(path, data)`` of ``items`` (one folder) so that all appear or none change.

    Every file is first written in full to a temporary file beside its target; then,
    under an exclusive lock on the folder and with SIGINT and SIGTERM held back, the
    temporaries are renamed into place in the given order and the folder is synced. An
    exception (or a signal) before the renames leaves every target as it was and no
    temporary file; a signal during them is delivered once they are done, and the paths
    are appended to ``written`` (when given) before it is. ``before_rename`` (a callable, e.g.
    a ledger's charge) runs under the lock and the held signals just before the renames:
    if it raises, nothing is renamed. An operating-system error
    between two renames is the one way to part them: a reader that must never pair an
    old file with a new one checks the digest that the last file records of the others
    (see :func:`ffu_cvx.release.release.verify`).
    """
    items = [(Path(p), bytes(d)) for p, d in items]
    folders = {p.resolve().parent for p, _ in items}
    if len(folders) != 1:
        raise ValueError(f"a file group must lie in one folder, got {sorted(map(str, folders))}")
    tmps: list[str] = []
    with _sigterm_unwinds():
        try:
            raise_if_signalled()
            for path, data in items:
                try:
                    _temporary(path, data, tmps)
                except OSError as exc:
                    raise _os_error(exc, path) from None
            raise_if_signalled()
            with _folder_lock(folders.pop()) as fd, held_signals():
                if before_rename is not None:
                    before_rename()
                for (path, _), tmp in zip(items, tmps):
                    _replace(tmp, path)
                os.fsync(fd)
                if written is not None:
                    written.extend(p for p, _ in items)
        except BaseException:
            for tmp in tmps:
                _remove(tmp)
            raise
    return [p for p, _ in items]


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    A reader never sees a half-written file, and an interrupted write (SIGINT, SIGTERM,
    any exception) leaves no file behind. The result gets the user's umask permissions.
    """
    path = Path(path)
    with _sigterm_unwinds():
        tmps: list[str] = []
        try:
            raise_if_signalled()
            try:
                _temporary(path, data, tmps)
            except OSError as exc:
                raise _os_error(exc, path) from None
            raise_if_signalled()
            _replace(tmps[0], path)
        except BaseException:
            for tmp in tmps:
                _remove(tmp)
            raise
    return path


def atomic_write_text(path: Path | str, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))
