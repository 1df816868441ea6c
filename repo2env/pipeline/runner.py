"""The one stage runner: carries items (tasks) through a chain of stages on an executor.

A stage is a top-level function from a typed job to a typed output (:attr:`Stage.work`), run on
the executor (a thread here, another process or machine elsewhere), plus two steps that run in the
caller's thread: :attr:`Stage.prepare` (the job for an item, or ``None`` when the item has nothing
to do in this stage: resume) and :attr:`Stage.record` (write the output, under the output file's
lock, and hand the item on to the next stage). The runner does the ordering (items are submitted in
the order given; an item enters its next stage as soon as it leaves the previous one), the
bookkeeping, the progress events and the clean stop on an interrupt; it knows no stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from repo2env.pipeline.executors import Executor, Resources

Item = TypeVar("Item")


@dataclass(frozen=True)
class Stage(Generic[Item]):
    """One step of the chain."""

    name: str
    #: ``work(job, **work_options) -> output``: top-level and picklable, like its job.
    work: Callable[..., Any]
    #: The job for an item, or None when the item needs no work here (done before, or out of scope).
    prepare: Callable[[Item], Any | None]
    #: Write the output (caller's thread, one at a time); returns the item as the next stage sees it.
    record: Callable[[Item, Any, Any], Item]
    #: Keyword arguments for ``work`` that stay in this process (a runtime for the thread pool).
    work_options: dict[str, Any] = field(default_factory=dict)
    resources: Resources | None = None


class StageEvents(Protocol):
    """What the runner reports while it runs (progress bars, a state store)."""

    def started(self, stage: str, key: str) -> None: ...

    def skipped(self, stage: str, key: str) -> None: ...

    def finished(self, stage: str, key: str, output: Any, seconds: float) -> None: ...

    def failed(self, stage: str, key: str, error: BaseException, seconds: float) -> None: ...


class NoEvents:
    """Reports nothing."""

    def started(self, stage: str, key: str) -> None:
        pass

    def skipped(self, stage: str, key: str) -> None:
        pass

    def finished(self, stage: str, key: str, output: Any, seconds: float) -> None:
        pass

    def failed(self, stage: str, key: str, error: BaseException, seconds: float) -> None:
        pass


@dataclass
class RunStats:
    """What a run cost: the stages' own work against the runner's (and its callbacks') bookkeeping."""

    wall_s: float = 0.0
    work_s: float = 0.0  #: summed over calls, measured inside the workers
    bookkeeping_s: float = 0.0  #: prepare, record and events, in the caller's thread
    calls: int = 0
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  #: stage -> key -> error


def timed_call(work: Callable[..., Any], job: Any, /, **options: Any) -> tuple[Any, float]:
    """``work(job, **options)`` and how long it took, measured where it ran."""
    started = time.perf_counter()
    return work(job, **options), time.perf_counter() - started


def run_stages(items: Sequence[Item], stages: Sequence[Stage[Item]], *, executor: Executor,
               key: Callable[[Item], str], events: StageEvents | None = None,
               stop_on_error: bool = True) -> RunStats:
    """Carry every item through ``stages`` in order; returns what it cost.

    An exception raised by a stage call stops the run (queued calls cancelled, the exception
    raised here) when ``stop_on_error``; otherwise it is reported to ``events.failed`` and that
    item goes no further, while every other item carries on. An interrupt (Ctrl-C, SIGTERM as
    KeyboardInterrupt) cancels the queued calls and does not wait for the running ones.
    """
    events = events or NoEvents()
    stats = RunStats()
    started = time.perf_counter()
    running: dict[Future, tuple[Item, int, Any, float]] = {}  # future -> (item, stage index, job, submitted)

    def advance(item: Item, index: int) -> None:
        """Submit ``item`` to the first stage from ``index`` on that has work for it."""
        while index < len(stages):
            stage = stages[index]
            try:
                job = stage.prepare(item)
            except Exception as exc:  # noqa: BLE001 - e.g. a repository whose clone is gone: that item fails
                stats.failures.setdefault(stage.name, {})[key(item)] = f"{type(exc).__name__}: {exc}"
                events.failed(stage.name, key(item), exc, 0.0)
                if stop_on_error:
                    raise
                return
            if job is not None:
                events.started(stage.name, key(item))
                future = executor.submit(timed_call, stage.work, job, resources=stage.resources, **stage.work_options)
                running[future] = (item, index, job, time.perf_counter())
                return
            events.skipped(stage.name, key(item))
            index += 1

    try:
        bookkeeping = time.perf_counter()
        for item in items:
            advance(item, 0)
        stats.bookkeeping_s += time.perf_counter() - bookkeeping
        while running:
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            bookkeeping = time.perf_counter()
            # Completed futures are handled in submission order: the same input gives the same writes.
            for future in sorted(done, key=lambda future: running[future][3]):
                item, index, job, submitted = running.pop(future)
                stage = stages[index]
                stats.calls += 1
                try:
                    output, seconds = future.result()
                except Exception as exc:  # noqa: BLE001 - one item's failure is recorded, not fatal
                    seconds = time.perf_counter() - submitted
                    stats.work_s += seconds
                    stats.failures.setdefault(stage.name, {})[key(item)] = f"{type(exc).__name__}: {exc}"
                    events.failed(stage.name, key(item), exc, seconds)
                    if stop_on_error:
                        raise
                    continue
                stats.work_s += seconds
                item = stage.record(item, job, output)
                events.finished(stage.name, key(item), output, seconds)
                advance(item, index + 1)
            stats.bookkeeping_s += time.perf_counter() - bookkeeping
    except BaseException:
        # Interrupted or stopped: queued calls never start, and nothing waits for the running ones
        # (the caller stops their sandboxes: backends.lifecycle.stop_all_sandboxes).
        executor.shutdown(cancel=True)
        raise
    stats.wall_s = time.perf_counter() - started
    return stats
