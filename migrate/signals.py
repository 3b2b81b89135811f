"""Holding Ctrl-C, SIGTERM and SIGHUP back while a short step must not be cut in half (the renames
of a `--write`, verify's cleanup): they are blocked, then delivered when the step is done."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HELD = ("SIGINT", "SIGTERM", "SIGHUP")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Block SIGINT, SIGTERM and SIGHUP for the `with` block (main thread only, where Python's
    handlers run; a no-op where the platform cannot block signals)."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {getattr(signal, name) for name in HELD if hasattr(signal, name)}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
