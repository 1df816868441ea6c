"""What every executor shares: the resources a task asks for, the protocol, and how a task ends.

A task is a top-level function with picklable arguments (a worker process or a Ray node imports
the function by name). Whatever the executor, its future ends in one of these ways:

- the function's return value;
- the function's own exception, of its own type, whose ``__cause__`` is a :class:`RemoteTraceback`
  carrying the worker's traceback text (:func:`task_traceback` reads it);
- :class:`~repo2env.errors.TaskTimeoutError` past ``Resources.timeout_s`` (the function sees it
  raised where it runs, so its ``finally`` blocks remove its containers; one that ignores it is
  killed after a grace period);
- :class:`~repo2env.errors.TaskCrashedError` when the worker process died under it;
- cancelled, or :class:`~repo2env.errors.TaskCancelledError` for one stopped while it ran, after
  ``shutdown(cancel=True)``.

One task's end never touches another's.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from repo2env.errors import InputError, TaskTimeoutError

#: Seconds a task that ignored its timeout (or a cancel) keeps running before its worker is killed.
DEFAULT_GRACE_S = 10.0


@dataclass(frozen=True)
class Resources:
    """What one task reserves while it runs. The executor starts a task only when its node has
    these free; they are reservations for scheduling (as Ray's are), not limits enforced on the
    process: the sandboxes it starts carry their own CPU and memory limits."""

    #: CPUs reserved (fractions allowed; 0 reserves none).
    cpus: float = 1.0
    #: Bytes of memory reserved, or None to reserve none.
    memory_bytes: int | None = None
    #: Wall-clock seconds from the task's start before it is stopped, or None for no limit.
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if not self.cpus >= 0:
            raise InputError(f"a task cannot reserve {self.cpus} CPUs", hint="give 0 or more")
        if self.memory_bytes is not None and self.memory_bytes <= 0:
            raise InputError(f"a task cannot reserve {self.memory_bytes} bytes of memory",
                             hint="give a positive number of bytes, or none")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise InputError(f"a task timeout of {self.timeout_s} s cannot be met", hint="give a positive number of seconds, or none")

    def fits_in(self, capacity: Resources) -> bool:
        """Whether a node of ``capacity`` could ever run this task (a tiny slack for float sums)."""
        memory_fits = self.memory_bytes is None or (capacity.memory_bytes is not None
                                                    and self.memory_bytes <= capacity.memory_bytes)
        return self.cpus <= capacity.cpus + 1e-9 and memory_fits


class Executor(Protocol):
    """Runs tasks somewhere else (worker processes, a Ray cluster) and hands back futures."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, resources: Resources | None = None,
               **kwargs: Any) -> Future:
        """Queue ``fn(*args, **kwargs)`` to run once ``resources`` (default: one CPU) are free."""
        ...

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for every task, or with ``cancel`` drop the queued ones and stop the running ones;
        then release the workers. Submitting afterwards is an error."""
        ...


class RemoteTraceback(Exception):
    """The traceback text of an exception raised in a worker: set as that exception's ``__cause__``
    so that a printed traceback shows where the task failed, not only where the caller waited."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


def with_remote_traceback(exc: BaseException, text: str) -> BaseException:
    """``exc`` with the worker's traceback ``text`` attached as its cause."""
    exc.__cause__ = RemoteTraceback(text)
    return exc


def task_traceback(exc: BaseException) -> str | None:
    """The worker's traceback text of a task's exception, or None when it has none."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, RemoteTraceback):
            return current.text
        seen.add(id(current))
        current = current.__cause__
    return None


def call_with_deadline(fn: Callable[..., Any], args: tuple, kwargs: dict, timeout_s: float | None) -> Any:
    """Run ``fn(*args, **kwargs)`` in this (worker) process; past ``timeout_s``, raise
    TaskTimeoutError inside it so its ``finally`` blocks and context managers clean up.

    The alarm is a signal, so it only works on the main thread (where both executors run tasks);
    elsewhere the caller's kill after the grace period is the only limit."""
    if timeout_s is None or threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)

    def on_alarm(signum: int, frame: object) -> None:
        raise TaskTimeoutError(f"the task ran past its timeout of {timeout_s:g} s and was stopped",
                               hint="raise the stage's timeout in the pipeline spec if it needs longer")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
