"""The local executor: a pool of worker processes (spawned, not forked) on this machine.

Unlike :class:`concurrent.futures.ProcessPoolExecutor`, whose pool breaks as a whole when one
worker dies, each worker here runs one task at a time and the pool knows which: a worker that
dies (a segfault, the OOM killer, ``os._exit``) fails only its own task and is replaced. Tasks are
started in submission order once their :class:`Resources` fit in what is free (``jobs`` CPUs, the
machine's memory), so a task that reserves every CPU runs alone.

One dispatcher thread owns the workers; callers only queue jobs and wake it.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from repo2env.errors import (
    InputError,
    TaskCancelledError,
    TaskCrashedError,
    TaskResultError,
    TaskTimeoutError,
)
from repo2env.pipeline.executor_base import (
    DEFAULT_GRACE_S,
    Resources,
    call_with_deadline,
    with_remote_traceback,
)

_PR_SET_PDEATHSIG = 1


def physical_memory_bytes() -> int:
    """This machine's RAM."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass
class _Job:
    future: Future
    payload: bytes
    resources: Resources
    started: float = 0.0
    #: When the dispatcher kills the worker: past the timeout plus grace, or a cancel plus grace.
    kill_at: float | None = None
    #: What the future gets if the worker has to be killed.
    kill_reason: type[Exception] = TaskTimeoutError


@dataclass
class _Worker:
    process: Any  # a SpawnProcess
    conn: Connection
    job: _Job | None = None
    signalled: bool = field(default=False)


class LocalExecutor:
    """Runs tasks in up to ``jobs`` CPUs' worth of worker processes on this machine."""

    def __init__(self, jobs: int = 1, *, memory_bytes: int | None = None, grace_s: float = DEFAULT_GRACE_S) -> None:
        if jobs < 1:
            raise InputError(f"--jobs {jobs} runs nothing", hint="give 1 or more")
        #: What this pool can run at once (the local machine's memory unless ``memory_bytes``).
        self.capacity = Resources(cpus=float(jobs), memory_bytes=memory_bytes or physical_memory_bytes())
        self._grace_s = grace_s
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._queue: deque[_Job] = deque()
        self._closed = False
        self._cancel = False
        self._wake_reader, self._wake_writer = self._context.Pipe(duplex=False)
        self._workers: list[_Worker] = []  # the dispatcher's alone
        self._used_cpus = 0.0
        self._used_memory = 0
        self._dispatcher = threading.Thread(target=self._dispatch, name="repo2env-local-executor", daemon=True)
        self._dispatcher.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, resources: Resources | None = None, **kwargs: Any) -> Future:
        """Queue ``fn(*args, **kwargs)``; see :class:`~repo2env.pipeline.executor_base.Executor`."""
        resources = resources or Resources()
        if not resources.fits_in(self.capacity):
            raise InputError(
                f"a task reserves {resources.cpus:g} CPUs and {_gib(resources.memory_bytes)} of memory, more than this "
                f"local pool has ({self.capacity.cpus:g} jobs, {_gib(self.capacity.memory_bytes)})",
                hint="raise --jobs, or lower the stage's resources in the pipeline spec",
            )
        try:
            payload = pickle.dumps((fn, args, kwargs))
        except Exception as exc:  # noqa: BLE001 - pickle raises many types (PicklingError, TypeError, AttributeError)
            raise InputError(f"cannot send {getattr(fn, '__qualname__', fn)!r} to a worker process: {exc}",
                             hint="pass a module-level function and picklable arguments") from None
        job = _Job(Future(), payload, resources)
        with self._lock:
            if self._closed:
                raise RuntimeError("this executor is shut down: submit before shutdown()")
            self._queue.append(job)
        self._wake()
        return job.future

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for every task (``cancel``: drop queued ones, stop running ones), then stop the workers."""
        with self._lock:
            self._closed = True
            if cancel:
                self._cancel = True
                dropped = list(self._queue)
                self._queue.clear()
        if cancel:
            for job in dropped:
                job.future.cancel()
        self._wake()
        self._dispatcher.join()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.shutdown(cancel=exc_type is not None)

    # -- the dispatcher thread ------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            self._wake_writer.send_bytes(b"")
        except OSError:
            pass  # the dispatcher is gone: nothing left to wake

    def _dispatch(self) -> None:
        try:
            while True:
                self._start_what_fits()
                with self._lock:
                    cancel = self._cancel
                    finished = self._closed and not self._queue
                busy = [worker for worker in self._workers if worker.job is not None]
                if cancel:
                    self._stop_running(busy)
                if finished and not busy:
                    return
                self._wait_and_collect(busy)
        except BaseException as exc:
            # A bug here must not leave callers waiting forever on futures nobody will settle.
            self._fail_everything(exc)
            raise
        finally:
            self._stop_workers()

    def _fail_everything(self, exc: BaseException) -> None:
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
        for job in queued + [worker.job for worker in self._workers if worker.job is not None]:
            if not job.future.done():
                job.future.set_exception(TaskCrashedError(f"the local executor failed: {exc!r}"))

    def _start_what_fits(self) -> None:
        while True:
            with self._lock:
                # First come, first served: a large task at the head is not overtaken forever.
                if not self._queue or not self._free_for(self._queue[0].resources):
                    return
                job = self._queue.popleft()
            if not job.future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            self._used_cpus += job.resources.cpus
            self._used_memory += job.resources.memory_bytes or 0
            worker = next((worker for worker in self._workers if worker.job is None), None) or self._spawn()
            job.started = time.monotonic()
            timeout = job.resources.timeout_s
            job.kill_at = None if timeout is None else job.started + timeout + self._grace_s
            worker.job = job
            try:
                worker.conn.send_bytes(pickle.dumps((timeout, job.payload)))
            except OSError:
                self._finish(worker, error=TaskCrashedError("the worker process died before its task started"), dead=True)

    def _free_for(self, resources: Resources) -> bool:
        memory = resources.memory_bytes or 0
        return (self._used_cpus + resources.cpus <= self.capacity.cpus + 1e-9
                and self._used_memory + memory <= (self.capacity.memory_bytes or 0))

    def _spawn(self) -> _Worker:
        parent_conn, child_conn = self._context.Pipe()
        process = self._context.Process(target=_worker_main, args=(child_conn, os.getpid()),
                                        name="repo2env-worker", daemon=False)
        process.start()
        child_conn.close()
        worker = _Worker(process, parent_conn)
        self._workers.append(worker)
        return worker

    def _wait_and_collect(self, busy: list[_Worker]) -> None:
        deadlines = [worker.job.kill_at for worker in busy if worker.job.kill_at is not None]
        timeout = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
        waitables: list[Any] = [self._wake_reader]
        for worker in busy:
            waitables += [worker.conn, worker.process.sentinel]
        ready = wait(waitables, timeout=timeout)
        if self._wake_reader in ready:
            while self._wake_reader.poll():
                self._wake_reader.recv_bytes()
        for worker in busy:
            if worker.conn in ready:
                self._collect(worker)
            elif worker.process.sentinel in ready:
                worker.process.join()
                self._finish(worker, error=self._death(worker), dead=True)
            elif worker.job.kill_at is not None and time.monotonic() >= worker.job.kill_at:
                job = worker.job
                worker.process.kill()
                reason = job.kill_reason
                message = ("the task was cancelled and did not stop; its worker was killed" if reason is TaskCancelledError
                           else f"the task ran past its timeout of {job.resources.timeout_s:g} s and did not stop; "
                                "its worker was killed")
                self._finish(worker, error=reason(message), dead=True)

    def _collect(self, worker: _Worker) -> None:
        try:
            status, body, text = pickle.loads(worker.conn.recv_bytes())
        except (EOFError, OSError):
            worker.process.join()
            self._finish(worker, error=self._death(worker), dead=True)
            return
        if status == "ok":
            try:
                self._finish(worker, result=pickle.loads(body))
            except Exception as exc:  # noqa: BLE001 - any unpickling failure of the caller's types
                self._finish(worker, error=TaskResultError(f"the task's result could not be rebuilt here: {exc}"))
            return
        try:
            error = pickle.loads(body)
        except Exception as exc:  # noqa: BLE001 - an exception type whose constructor pickle cannot replay
            error = TaskResultError(f"the task failed, and its exception could not be rebuilt here ({exc})")
        self._finish(worker, error=with_remote_traceback(error, text))

    def _death(self, worker: _Worker) -> Exception:
        job = worker.job
        if job.kill_reason is TaskCancelledError and worker.signalled:
            return TaskCancelledError("the task was cancelled while it ran")
        code = worker.process.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
        return TaskCrashedError(f"the worker process running the task died ({how})",
                                hint="a crash, the out-of-memory killer, or os._exit in the task; the other tasks go on")

    def _finish(self, worker: _Worker, *, result: Any = None, error: BaseException | None = None,
                dead: bool = False) -> None:
        job, worker.job = worker.job, None
        self._used_cpus -= job.resources.cpus
        self._used_memory -= job.resources.memory_bytes or 0
        if dead:
            # Its pipe and sentinel close while it exits, before it can be reaped: wait for that
            # (and make sure of it: a worker whose pipe broke may still run).
            worker.process.kill()
            worker.process.join()
            worker.conn.close()
            self._workers.remove(worker)
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)

    def _stop_running(self, busy: list[_Worker]) -> None:
        for worker in busy:
            if not worker.signalled:
                worker.signalled = True
                worker.job.kill_reason = TaskCancelledError
                worker.job.kill_at = time.monotonic() + self._grace_s
                try:
                    os.kill(worker.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass  # it just ended: its sentinel tells

    def _stop_workers(self) -> None:
        for worker in self._workers:
            try:
                worker.conn.send_bytes(b"")
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for worker in self._workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._workers.clear()
        self._wake_reader.close()
        self._wake_writer.close()


def _gib(size: int | None) -> str:
    return "no reserved memory" if size is None else f"{size / 2**30:.1f} GiB"


# -- the worker process ---------------------------------------------------------------------------

_task_running = False


def _worker_main(conn: Connection, parent_pid: int) -> None:
    """A worker's loop: one task at a time from ``conn``, its outcome back; an empty message ends it."""
    _die_with_parent(parent_pid)
    # Ctrl-C reaches the whole terminal's process group: the parent decides what stops (through
    # shutdown(cancel=True), which sends SIGTERM), so a worker does not die in the middle of a task.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_term)
    global _task_running
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not message:
            return
        timeout, payload = pickle.loads(message)
        _task_running = True
        try:
            fn, args, kwargs = pickle.loads(payload)
            reply = ("ok", _dumps_result(call_with_deadline(fn, args, kwargs, timeout)), "")
        except BaseException as exc:  # noqa: BLE001 - every failure of the task is its outcome
            reply = ("error", _dumps_error(exc), traceback.format_exc())
        finally:
            _task_running = False
        conn.send_bytes(pickle.dumps(reply))


def _on_term(signum: int, frame: object) -> None:
    if _task_running:
        raise TaskCancelledError("the task was cancelled while it ran")
    sys.exit(0)


def _dumps_result(result: Any) -> bytes:
    try:
        return pickle.dumps(result)
    except Exception as exc:  # noqa: BLE001 - any pickling failure
        raise TaskResultError(f"the task's result ({type(result).__name__}) cannot be sent back: {exc}",
                              hint="return picklable values (models, dicts, strings)") from None


def _dumps_error(exc: BaseException) -> bytes:
    try:
        return pickle.dumps(exc)
    except Exception:  # noqa: BLE001 - an exception holding something unpicklable
        return pickle.dumps(TaskResultError(f"{type(exc).__name__}: {exc}"))


def _die_with_parent(parent_pid: int) -> None:
    # A worker must not outlive a runner killed with SIGKILL (it would go on with a task the resumed
    # run starts again). Linux delivers SIGKILL when the thread that spawned us (the dispatcher)
    # ends; elsewhere the closed pipe ends the worker after its current task.
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(0)


class ThreadExecutor:
    """``jobs`` threads in this process: for stage loops whose work shares objects that do not
    cross a process boundary (one Docker runtime and its sandboxes, as ``build`` and ``validate``
    run them). The work waits on Docker, not on the GIL. Resources are not scheduled here:
    ``jobs`` bounds what runs at once; per-task timeouts are the stage's own."""

    def __init__(self, jobs: int = 1, *, name: str = "repo2env-stage") -> None:
        if jobs < 1:
            raise InputError(f"--jobs {jobs} runs nothing", hint="give 1 or more")
        self.jobs = jobs
        self._pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix=name)

    def submit(self, fn: Callable[..., Any], /, *args: Any, resources: Resources | None = None,
               **kwargs: Any) -> Future:
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, *, cancel: bool = False) -> None:
        # Cancelling (an interrupt) must not wait for running calls: the caller stops their sandboxes.
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
