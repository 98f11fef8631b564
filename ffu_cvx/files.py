"""Atomic file output shared by the command line and the experiments.

Core layer: imports the standard library only.

A write goes to a temporary file in the target's folder, is flushed to disk and renamed
into place, so a reader never sees a half-written file and an interrupted write leaves
none behind: ``KeyboardInterrupt`` (SIGINT) and SIGTERM both remove the temporary file.
SIGTERM's default action kills the process without running any clean-up, so while a
write is in progress (and only then) SIGTERM is turned into :class:`Terminated`, an
exception that unwinds like ``SystemExit`` with status 143; the previous handler is put
back afterwards. A program that handles SIGTERM itself (the command line does, with
:func:`raise_terminated`) keeps its handler; so does a write outside the main thread,
where Python cannot install handlers.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Terminated", "raise_terminated", "atomic_write_bytes", "atomic_write_text"]


class Terminated(SystemExit):
    """SIGTERM as an exception: unwinds (running clean-ups) and exits with status 128 + 15."""

    def __init__(self):
        super().__init__(128 + signal.SIGTERM)


def raise_terminated(signum, frame):
    """A SIGTERM handler raising :class:`Terminated`."""
    raise Terminated()


@contextmanager
def _sigterm_unwinds():
    """SIGTERM raises :class:`Terminated` inside the block if it would otherwise kill the process."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, raise_terminated)
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
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
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
