"""Shared fixtures: a Docker engine with the base image (for tests marked ``docker``)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def docker_client():
    """A client for the local engine with the base image present; skips only outside CI.

    In CI (``CI=true``) a missing engine or image is a failure, never a skip: .ci/run starts the
    engine and bootstraps the image, so their absence means the set-up is broken.
    """
    from repo2env.errors import DockerUnavailableError
    from repo2env.runtime.bootstrap import find_base_image
    from repo2env.runtime.docker_backend import connect_docker

    try:
        client = connect_docker(timeout=5)
    except DockerUnavailableError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Docker is required in CI: {exc}")
        pytest.skip(f"no Docker engine: {exc.message}")
    if find_base_image(client, "3.11") is None:
        message = "base image missing: run 'repo2env runtime bootstrap'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return client


@pytest.fixture
def docker_runtime(docker_client):
    """A DockerRuntime on the session's engine."""
    from repo2env.runtime.docker_backend import DockerRuntime

    return DockerRuntime(docker_client)


@pytest.fixture(scope="session")
def demo_repo(tmp_path_factory):
    """The embedded demo repository (textkit), built once per session; a :class:`DemoRepo`.

    Treat it as read-only: clone or export it before checking out, patching or running tests.
    """
    from repo2env.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo"))
