"""The tasks of benchmarks/executors.py, in a module of their own: workers (spawned processes, Ray
workers, whose path has the driver's script folder) import them by name, as they import a stage,
so a worker keeps its Docker client from one task to the next."""

from __future__ import annotations

import time

import docker

_client: docker.DockerClient | None = None  # one per worker process, as a stage would keep


def noop() -> None:
    return None


def docker_exec_true(container_id: str) -> float:
    """``docker exec <container> true`` through the SDK; its own duration in seconds."""
    global _client
    _client = _client or docker.from_env()
    started = time.perf_counter()
    exec_id = _client.api.exec_create(container_id, ["true"])["Id"]
    _client.api.exec_start(exec_id)
    if _client.api.exec_inspect(exec_id)["ExitCode"] != 0:
        raise RuntimeError("true failed")
    return time.perf_counter() - started
