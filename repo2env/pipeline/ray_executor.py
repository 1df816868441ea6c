"""The Ray executor: each task is a Ray task on whichever node of the cluster has its resources free.

A node needs only this package (``pip install 'repo2env-rl[ray]'``; settings are package data) and a
Docker engine: a task's sandboxes and images live on the node that runs it. The ``REPO2ENV_*``
variables of the driver travel to the workers with the job's runtime environment.

Ray is imported only when a RayExecutor is made, so the package works without the extra.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError, Future, InvalidStateError
from concurrent.futures import wait as wait_futures
from typing import Any

from repo2env import install_hint
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

#: Object store of a Ray head started here: repo2env moves task records, not tensors.
DEFAULT_OBJECT_STORE_BYTES = 256 * 2**20
#: The proxy settings while a local head starts: plain HTTP goes to a closed loopback port (discard),
#: with no exception (see RayExecutor._start_local_head).
_WHILE_HEAD_STARTS = {("http_proxy", "HTTP_PROXY"): "http://127.0.0.1:9", ("no_proxy", "NO_PROXY"): ""}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: Seconds a cluster's node list is trusted before the next feasibility check asks again.
_NODES_TTL_S = 10.0


def import_ray():
    """The ``ray`` module, or an InputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("the Ray executor needs Ray", hint=f"{install_hint('ray')} (on every node of the cluster too)") from None
    return ray


def worker_env_vars(environ: dict[str, str]) -> dict[str, str]:
    """What the driver's environment passes on to the workers: repo2env's own settings."""
    return {name: value for name, value in environ.items() if name.startswith("REPO2ENV_")}


def check_cluster_answers(address: str, *, timeout_s: float = 5.0) -> None:
    """An InputError unless something listens at a ``HOST:PORT`` address (``auto`` and ``ray://``
    addresses are left to Ray): Ray itself retries a wrong address forever."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"{address!r} is not a Ray address", hint="give auto, HOST:PORT (the head's GCS port, 6379 by "
                                                                   "default) or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise InputError(f"no Ray cluster answers at {address!r} ({exc.strerror or exc})",
                         hint="check the head's address and port ('ray status' on the head prints it) "
                              "and that 'ray start --head' runs there") from None


def proxy_env_in_effect(environ: Mapping[str, str]) -> dict[str, str]:
    """Both spellings of each proxy variable set to the value in effect in ``environ`` ("" for
    none): urllib reads both, the lower-case one winning, and a worker's variables can be set but
    not unset."""
    effective = {}
    for lower, upper in _WHILE_HEAD_STARTS:
        value = environ.get(lower) if environ.get(lower) is not None else environ.get(upper, "")
        effective[lower] = effective[upper] = value
    return effective


class RayExecutor:
    """Runs tasks as Ray tasks: on the cluster at ``address`` (``"auto"``: the one started on
    this machine with ``ray start``, or ``RAY_ADDRESS``; ``"HOST:PORT"``; ``"ray://HOST:PORT"``
    for Ray Client), or on a Ray head started here when ``address`` is None.

    A process that is already connected to Ray (``ray.is_initialized()``) keeps that connection:
    the executor uses it and leaves it open at shutdown.
    """

    def __init__(self, address: str | None = "auto", *, runtime_env: dict[str, Any] | None = None,
                 num_cpus: int | None = None, object_store_memory: int | None = None,
                 grace_s: float = DEFAULT_GRACE_S, check_resources: bool = True) -> None:
        self._ray = ray = import_ray()
        self._grace_s = grace_s
        self._check_resources = check_resources
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            env = dict(runtime_env or {})
            env_vars = {**worker_env_vars(dict(os.environ)), **env.get("env_vars", {})}
            if address is None:
                self._start_local_head(env, env_vars, num_cpus=num_cpus or os.cpu_count() or 1,
                                       object_store_memory=object_store_memory or DEFAULT_OBJECT_STORE_BYTES)
            else:
                check_cluster_answers(address)
                if env_vars:
                    env["env_vars"] = env_vars
                try:
                    ray.init(address=address, runtime_env=env or None, log_to_driver=False, configure_logging=False)
                except ConnectionError as exc:
                    raise InputError(f"no Ray cluster answers at {address!r}: {exc}",
                                     hint="start one with 'ray start --head' (then --address auto), give its HOST:PORT, "
                                          "or leave --address out to start Ray on this machine") from None
        self._remote = ray.remote(_run_task)
        self._lock = threading.Lock()
        self._closed = False
        self._tasks: dict[Future, Any] = {}  # future -> ObjectRef, while unsettled
        self._nodes: tuple[float, list[Resources]] = (0.0, [])

    def _start_local_head(self, env: dict[str, Any], env_vars: dict[str, str], *, num_cpus: int,
                          object_store_memory: int) -> None:
        # Offline by default: no usage report, and the head's cloud-provider probe (an HTTP request
        # to the cloud metadata address that Ray makes even with usage stats off) goes to a closed
        # loopback port through the proxy variables, set only while the head starts. Workers get
        # the driver's own values back through the runtime environment.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        saved = {name: os.environ.get(name) for pair in _WHILE_HEAD_STARTS for name in pair}
        env["env_vars"] = {**proxy_env_in_effect(os.environ), **env_vars}
        for pair, value in _WHILE_HEAD_STARTS.items():
            os.environ.update(dict.fromkeys(pair, value))
        try:
            self._ray.init(address=None, num_cpus=num_cpus, object_store_memory=object_store_memory,
                           include_dashboard=False, _node_ip_address="127.0.0.1", runtime_env=env,
                           log_to_driver=False, configure_logging=False)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    @property
    def capacity(self) -> Resources:
        """The largest node's resources: more than this, no task can ever get."""
        nodes = self._node_resources()
        return Resources(cpus=max((node.cpus for node in nodes), default=0.0),
                         memory_bytes=max((node.memory_bytes or 0 for node in nodes), default=0) or None)

    def submit(self, fn: Callable[..., Any], /, *args: Any, resources: Resources | None = None, **kwargs: Any) -> Future:
        """Queue ``fn(*args, **kwargs)`` as a Ray task; see :class:`~repo2env.pipeline.executor_base.Executor`."""
        resources = resources or Resources()
        with self._lock:
            if self._closed:
                raise RuntimeError("this executor is shut down: submit before shutdown()")
        if self._check_resources and not any(resources.fits_in(node) for node in self._node_resources()):
            # Ray would keep such a task pending forever (it waits for a node that may be added).
            raise InputError(
                f"no node of the Ray cluster has {resources.cpus:g} CPUs and {_gib(resources.memory_bytes)} of memory "
                f"for a task (largest: {self.capacity.cpus:g} CPUs, {_gib(self.capacity.memory_bytes)})",
                hint="lower the stage's resources in the pipeline spec or add a node; on an autoscaling cluster "
                     "make the executor with check_resources=False",
            )
        # Ray would retry a task whose worker died on its own; a stage is retried by the pipeline
        # (--retry-failed), which records each attempt, so Ray must not run one twice unseen.
        options: dict[str, Any] = {"num_cpus": resources.cpus, "max_retries": 0, "retry_exceptions": False}
        if resources.memory_bytes is not None:
            options["memory"] = resources.memory_bytes
        submitted = time.monotonic()
        ref = self._remote.options(**options).remote(fn, resources.timeout_s, self._grace_s, args, kwargs)
        future: Future = Future()
        with self._lock:
            self._tasks[future] = ref
        ref.future().add_done_callback(lambda done: self._settle(future, done, resources, submitted))
        future.add_done_callback(self._forget)
        return future

    def _settle(self, future: Future, done: Future, resources: Resources, submitted: float) -> None:
        ray_exceptions = self._ray.exceptions
        try:
            result = done.result()
        except (ray_exceptions.TaskCancelledError, CancelledError):
            outcome: tuple[str, Any] = ("error", TaskCancelledError("the task was cancelled"))
        except ray_exceptions.WorkerCrashedError:
            timeout = resources.timeout_s
            if timeout is not None and time.monotonic() - submitted >= timeout + self._grace_s:
                error: BaseException = TaskTimeoutError(f"the task ran past its timeout of {timeout:g} s and did not "
                                                        "stop; its worker was killed")
            else:
                error = TaskCrashedError("the Ray worker running the task died",
                                         hint="a crash, the out-of-memory killer, or os._exit in the task; "
                                              "its logs are in the node's /tmp/ray/session_latest/logs")
            outcome = ("error", error)
        except ray_exceptions.RayTaskError as exc:
            text = _ANSI.sub("", getattr(exc, "traceback_str", None) or str(exc))
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if cause is None or isinstance(cause, ray_exceptions.RayError):
                cause = TaskResultError(f"the task failed, and its exception could not be rebuilt here: {exc.cause}")
            outcome = ("error", with_remote_traceback(cause, text))
        except ray_exceptions.RayError as exc:  # a node lost, the object store full, a runtime env that failed
            outcome = ("error", TaskCrashedError(f"Ray could not run the task: {_ANSI.sub('', str(exc))}"))
        else:
            outcome = ("ok", result)
        if future.done():
            return  # cancelled by its caller
        try:
            if outcome[0] == "ok":
                future.set_result(outcome[1])
            else:
                future.set_exception(outcome[1])
        except InvalidStateError:
            pass  # a caller's cancel won the race

    def _forget(self, future: Future) -> None:
        with self._lock:
            ref = self._tasks.pop(future, None)
        if future.cancelled() and ref is not None:
            self._ray.cancel(ref)  # a caller's cancel stops the Ray task, queued or running

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for every task (``cancel``: cancel them all, queued or running), then disconnect
        from Ray (and stop the head) when this executor connected."""
        with self._lock:
            self._closed = True
            pending = dict(self._tasks)
        if cancel:
            # Newest first: the queued tasks go before the running ones free their CPUs for them.
            # A running task sees KeyboardInterrupt, so its finally blocks run.
            for ref in reversed(list(pending.values())):
                self._ray.cancel(ref)
            _, stuck = wait_futures(pending, timeout=self._grace_s)
            for future in stuck:
                self._ray.cancel(pending[future], force=True)
            wait_futures(stuck, timeout=self._grace_s)
        else:
            wait_futures(pending)
        if self._owns_ray:
            self._ray.shutdown()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.shutdown(cancel=exc_type is not None)

    def _node_resources(self) -> list[Resources]:
        fetched, nodes = self._nodes
        if time.monotonic() - fetched > _NODES_TTL_S or not nodes:
            nodes = [Resources(cpus=float(node["Resources"].get("CPU", 0.0)),
                               memory_bytes=int(node["Resources"].get("memory", 0)) or None)
                     for node in self._ray.nodes() if node.get("Alive")]
            self._nodes = (time.monotonic(), nodes)
        return nodes


def _gib(size: int | None) -> str:
    return "no reserved memory" if size is None else f"{size / 2**30:.1f} GiB"


def _run_task(fn: Callable[..., Any], timeout_s: float | None, grace_s: float, args: tuple, kwargs: dict) -> Any:
    """The Ray task around ``fn``: the timeout raised inside it, and a watchdog that ends the worker
    when the task ignores it (Ray then reports the worker's death, which the driver names a timeout)."""
    if timeout_s is None:
        return fn(*args, **kwargs)
    finished = threading.Event()

    def watchdog() -> None:
        if not finished.wait(timeout_s + grace_s):
            os._exit(1)

    threading.Thread(target=watchdog, name="repo2env-task-watchdog", daemon=True).start()
    try:
        return call_with_deadline(fn, args, kwargs, timeout_s)
    finally:
        finished.set()
