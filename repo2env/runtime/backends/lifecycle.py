"""The sandboxes this process has open, on every backend, and how they all end.

Sandboxes are removed on ``close()``, on leaving a ``with`` block (exceptions and Ctrl-C included)
and at interpreter exit; :func:`stop_all_sandboxes` (a signal) refuses new sandboxes and image
builds and removes every open one, whichever thread and backend owns it. What survives a ``kill
-9`` of the process is caught by the owner labels (:mod:`repo2env.runtime.ownership`) and by each
sandbox's keepalive (:mod:`repo2env.runtime.backends.keepalive`).
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Protocol

from repo2env.errors import StoppingError


class _Closable(Protocol):
    def close(self, *, wait: bool = True) -> None: ...

    def remove_now(self) -> None: ...


_open_sandboxes: weakref.WeakSet = weakref.WeakSet()
_removal_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="repo2env-remove")
_pending_removals: list[Future] = []
# Stopping the process (a signal): once set, no sandbox starts; starts under way are counted so
# that stop_all_sandboxes() can wait for them and remove what they created.
_stopping = threading.Event()
_starts = threading.Condition()
_starts_under_way = 0


def stopping() -> bool:
    """True once :func:`stop_all_sandboxes` was called: nothing new may start."""
    return _stopping.is_set()


def register(sandbox: _Closable) -> None:
    """Count ``sandbox`` as open (until :func:`forget`): it is closed at exit and by a stop."""
    _open_sandboxes.add(sandbox)


def forget(sandbox: _Closable) -> None:
    """``sandbox`` is gone."""
    _open_sandboxes.discard(sandbox)


@contextmanager
def starting() -> Iterator[None]:
    """Around a sandbox's start: refused once stopping, and waited for by :func:`stop_all_sandboxes`."""
    global _starts_under_way
    with _starts:
        if _stopping.is_set():
            raise StoppingError("stopping: no new sandbox starts")
        _starts_under_way += 1
    try:
        yield
    finally:
        with _starts:
            _starts_under_way -= 1
            _starts.notify_all()


def remove_later(removal: Callable[[], None]) -> None:
    """Run ``removal`` on a background thread; interpreter exit (and a stop) still waits for it.
    Once the interpreter is shutting down (its thread pools take no new work) it runs here and now."""
    _pending_removals[:] = [future for future in _pending_removals if not future.done()]
    try:
        _pending_removals.append(_removal_pool.submit(removal))
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        removal()


def wait_for_removals(deadline: float) -> None:
    """Wait until the removals handed to the background so far are done, or ``deadline``
    (:func:`time.monotonic`) passed. A removal that failed or hangs is not raised: its sandbox, if
    still open, is closed again by whoever stops everything."""
    for future in list(_pending_removals):
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - see above
            pass


def stop_all_sandboxes(*, wait_s: float = 30.0) -> int:
    """Stop this process's sandbox work for good: refuse new sandboxes (and image builds, see
    :mod:`repo2env.runtime.images`), wait up to ``wait_s`` for starts under way, then remove every
    open sandbox, whichever thread owns it. Returns how many were removed.

    Threads still running a command in a removed sandbox see it fail and end; an image build under
    way is not touched here (the engine abandons it when the process's connection closes)."""
    _stopping.set()
    deadline = time.monotonic() + wait_s
    with _starts:
        while _starts_under_way and time.monotonic() < deadline:
            _starts.wait(max(0.0, deadline - time.monotonic()))
    wait_for_removals(deadline)
    removed = 0
    for sandbox in list(_open_sandboxes):
        try:
            sandbox.close()
            removed += 1
        except Exception:  # noqa: BLE001 - best effort: the engine may already be gone
            pass
    # Threads still at work hand removals to the background meanwhile (a grader closes its sandbox
    # without waiting, and close() of a sandbox already closed that way returns at once): wait for
    # those too, or the exit that follows kills them half-way and the container stays.
    wait_for_removals(max(deadline, time.monotonic() + 10.0))
    # What is still open had its removal fail (a loaded engine may refuse one: "tried to kill
    # container, but did not receive an exit event") or still queued behind others: removed again,
    # here and now, or the exit leaves it running.
    for sandbox in list(_open_sandboxes):
        try:
            sandbox.remove_now()
        except Exception:  # noqa: BLE001 - best effort: the engine may already be gone
            pass
    return removed


@atexit.register
def _close_leftover_sandboxes() -> None:
    for future in _pending_removals:
        try:
            future.result()
        except Exception:  # noqa: BLE001 - a removal that failed: its sandbox is still open, below
            pass
    for sandbox in list(_open_sandboxes):
        try:
            sandbox.remove_now()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
