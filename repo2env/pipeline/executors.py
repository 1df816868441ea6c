"""Executors: where a stage's work runs. One interface, one class per backend.

A stage function handed to :meth:`Executor.submit` is a top-level function whose arguments are
picklable, so a backend may run it in another process or on another machine; the runner only
sees :class:`concurrent.futures.Future` objects.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from repo2env.errors import InputError


@dataclass(frozen=True)
class Resources:
    """What one stage call needs on the worker that runs it (a hint to schedulers; the local pool
    only bounds concurrency by ``jobs``)."""

    cpus: float = 1.0
    memory_mb: int | None = None


class Executor(Protocol):
    """Runs stage calls and hands back futures."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, resources: Resources | None = None,
               **kwargs: Any) -> Future: ...

    def shutdown(self, *, cancel: bool = False) -> None: ...


class LocalExecutor:
    """A pool of ``jobs`` threads in this process (the stages wait on Docker, not on the GIL)."""

    def __init__(self, jobs: int = 1, *, name: str = "repo2env-stage") -> None:
        self.jobs = max(1, jobs)
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix=name)

    def submit(self, fn: Callable[..., Any], /, *args: Any, resources: Resources | None = None,
               **kwargs: Any) -> Future:
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, *, cancel: bool = False) -> None:
        # Cancelling (an interrupt) must not wait for running calls: the caller stops their sandboxes.
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)


def make_executor(name: str, **options: Any) -> Executor:
    """The executor called ``name`` (``local``), built with ``options`` (``jobs``)."""
    if name == "local":
        return LocalExecutor(jobs=int(options.get("jobs") or 1))
    raise InputError(f"unknown executor {name!r}", hint="known: local")
