"""The tasks of benchmarks/executors.py, in a module of their own: workers (spawned processes, Ray
workers, whose path has the driver's script folder) import them by name, as they import a stage,
so a worker keeps its backend (opened through the registry: ``REPO2ENV_BACKEND``, else docker)
from one task to the next."""

from __future__ import annotations

import time

from repo2env.runtime.backend import Backend
from repo2env.runtime.backends import open_backend

_backend: Backend | None = None  # one per worker process, as a stage would keep


def noop() -> None:
    return None


def engine_round_trip(label: str) -> float:
    """One call to the engine through the backend (its sandboxes carrying ``label``, which must
    include the benchmark's); its own duration in seconds."""
    global _backend
    _backend = _backend or open_backend()
    started = time.perf_counter()
    if not _backend.sandboxes(labels=[label]):
        raise RuntimeError(f"the engine lists no sandbox labelled {label}")
    return time.perf_counter() - started
