"""The backend registry: a name -> the module and class that implement
:class:`~repo2env.runtime.backend.Backend`, imported only when that backend is opened.

``docker`` (the Docker SDK against the local engine) and ``podman`` (the podman command line) are
the two here. A new backend is a new module in this folder, a line in :data:`BACKENDS`, and a
parameter of ``tests/test_runtime_contract.py`` it must pass unchanged; no stage changes. The name
comes from the caller (``--backend``, a pipeline spec's ``backend:``), else from
``REPO2ENV_BACKEND``, else :data:`DEFAULT_BACKEND`.
"""

from __future__ import annotations

import importlib
import os

from repo2env.errors import BackendUnavailableError, InputError
from repo2env.runtime.backend import Backend, BackendSettings, Preflight

#: name -> (module, class). The module is imported when the backend is first opened.
BACKENDS: dict[str, tuple[str, str]] = {
    "docker": ("repo2env.runtime.backends.docker", "DockerBackend"),
    "podman": ("repo2env.runtime.backends.podman", "PodmanBackend"),
}
DEFAULT_BACKEND = "docker"
#: The environment variable that names the backend when no caller does (RepoEnv, workers, tests).
BACKEND_VARIABLE = "REPO2ENV_BACKEND"


def backend_name(name: str | None = None) -> str:
    """``name``, else ``REPO2ENV_BACKEND``, else ``docker``; an InputError for a name no backend has."""
    chosen = (name or os.environ.get(BACKEND_VARIABLE, "") or DEFAULT_BACKEND).strip().lower()
    if chosen not in BACKENDS:
        source = f"{BACKEND_VARIABLE}={chosen!r}" if not name else f"backend {chosen!r}"
        raise InputError(f"{source}: no such backend", hint=f"use one of: {', '.join(BACKENDS)}")
    return chosen


def backend_class(name: str | None = None) -> type:
    """The class of backend ``name`` (its module imported now)."""
    module_name, class_name = BACKENDS[backend_name(name)]
    return getattr(importlib.import_module(module_name), class_name)


def open_backend(name: str | None = None, settings: BackendSettings | None = None) -> Backend:
    """The backend ``name`` (see :func:`backend_name`), connected: a
    :class:`~repo2env.errors.BackendUnavailableError` saying what to install or start when this
    machine cannot run it."""
    settings = settings or BackendSettings.from_environment()
    return backend_class(name).open(settings)


def preflight(name: str, settings: BackendSettings | None = None) -> Preflight:
    """Whether backend ``name`` runs here, in one line (never raises for a missing engine)."""
    settings = settings or BackendSettings.from_environment()
    try:
        kind = backend_class(name)
    except ImportError as exc:  # the backend's client library is not installed
        return Preflight(name, False, f"cannot load: {exc}", fix="pip install the project's dependencies again")
    try:
        return kind.preflight(settings)
    except BackendUnavailableError as exc:
        return Preflight(name, False, exc.message, fix=exc.hint or "")


def preflight_all(settings: BackendSettings | None = None) -> list[Preflight]:
    """:func:`preflight` of every registered backend, in registry order."""
    return [preflight(name, settings) for name in BACKENDS]
