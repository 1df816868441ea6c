"""Executors: where the pipeline's tasks run. One interface (:class:`Executor`), one file per kind:

- ``local`` (:class:`~repo2env.pipeline.local_executor.LocalExecutor`): worker processes on this
  machine, ``--jobs N`` CPUs' worth of them (the default);
- :class:`~repo2env.pipeline.local_executor.ThreadExecutor`: threads in this process, for the
  ``build``/``validate`` commands, whose stage work shares one backend;
- ``ray`` (:class:`~repo2env.pipeline.ray_executor.RayExecutor`): Ray tasks on a cluster
  (``--executor ray --address auto|HOST:PORT``), or on a Ray head started here.

See :mod:`repo2env.pipeline.executor_base` for how a task's future ends (result, its own exception
with the worker's traceback, timeout, crash, cancel).
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

from repo2env.errors import InputError
from repo2env.pipeline.executor_base import (
    DEFAULT_GRACE_S,
    Executor,
    RemoteTraceback,
    Resources,
    task_traceback,
)
from repo2env.pipeline.local_executor import LocalExecutor, ThreadExecutor
from repo2env.pipeline.ray_executor import RayExecutor

__all__ = ["DEFAULT_GRACE_S", "EXECUTORS", "Executor", "LocalExecutor", "RayExecutor", "RemoteTraceback",
           "Resources", "ThreadExecutor", "make_executor", "task_traceback"]

EXECUTORS = {"local": LocalExecutor, "ray": RayExecutor}


def make_executor(name: Literal["local", "ray"], **options: Any) -> Executor:
    """The executor called ``name``, made with ``options`` (``jobs`` for local; ``address``,
    ``runtime_env`` … for ray)."""
    try:
        kind = EXECUTORS[name]
    except KeyError:
        raise InputError(f"unknown executor {name!r}", hint=f"use one of: {', '.join(EXECUTORS)}") from None
    try:
        inspect.signature(kind).bind(**options)
    except TypeError as exc:
        raise InputError(f"the {name} executor does not take these options: {exc}") from None
    return kind(**options)
