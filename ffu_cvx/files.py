"""Atomic file output shared by the command line and the experiments.

Core layer: imports the standard library only.

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
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Terminated", "signals_unwind", "raise_if_signalled",
           "atomic_write_bytes", "atomic_write_text"]

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


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    A reader never sees a half-written file, and an interrupted write (SIGINT, SIGTERM,
    any exception) leaves no file behind. The result gets the user's umask permissions
    (``mkstemp`` would give 0600).
    """
    path = Path(path)
    with _sigterm_unwinds():
        tmp = None
        try:
            raise_if_signalled()
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            raise_if_signalled()
            os.replace(tmp, path)
        except BaseException:
            try:
                if tmp is not None:
                    os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
    return path


def atomic_write_text(path: Path | str, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))
