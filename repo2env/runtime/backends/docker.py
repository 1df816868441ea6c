"""The Docker backend: the local engine through the Docker SDK (``DOCKER_HOST`` honoured).

This module is the engine connection and the start of a sandbox (the container's settings: see
:mod:`repo2env.runtime.backends.container` for what every sandbox guarantees);
:mod:`~repo2env.runtime.backends.docker_sandbox` runs commands in one,
:mod:`~repo2env.runtime.backends.docker_images` builds and moves images.

What survives a ``kill -9`` of the owner is caught twice: every container is labelled with its
owner (:mod:`repo2env.runtime.ownership`, reaped on the next start, by ``doctor`` and by
``images gc``), and its keepalive ends the container after ``limits.idle_timeout_s`` without a
command running. The same keepalive stops the container when what it wrote grows past
``limits.disk_bytes`` (overlay2 on ext4 cannot cap a writable layer, and ``docker cp`` cannot reach
into a tmpfs), and ``RLIMIT_FSIZE`` caps every single file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence

import docker
import docker.errors
import docker.types
import requests.exceptions

from repo2env.errors import DockerUnavailableError, InputError
from repo2env.models import Task
from repo2env.runtime.backend import BackendSettings, Capabilities, Preflight, SandboxRecord
from repo2env.runtime.backends import lifecycle
from repo2env.runtime.backends.container import short, task_image
from repo2env.runtime.backends.docker_images import DockerImages
from repo2env.runtime.backends.docker_sandbox import DockerSandbox
from repo2env.runtime.backends.keepalive import keepalive_command
from repo2env.runtime.ownership import SANDBOX_LABEL, owner_labels, reap_orphans_now_and_then
from repo2env.runtime.sandbox import MODEL_SOCKET_MOUNT, SandboxLimits


def connect_docker(timeout: float = 10.0, request_timeout: float | None = None) -> docker.DockerClient:
    """A client for the local engine (``DOCKER_HOST`` honoured), or a DockerUnavailableError saying
    how to get one. ``timeout`` bounds the wait for the engine's first answer; ``request_timeout``
    (default: the same) every request after it."""
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        if request_timeout is not None:
            client.api.timeout = request_timeout
    except ValueError as exc:
        # docker-py parses DOCKER_HOST with urllib: a malformed one surfaces as a bare ValueError.
        raise DockerUnavailableError(
            f"DOCKER_HOST={os.environ.get('DOCKER_HOST', '')!r} is not a usable engine address ({short(exc)})",
            hint="unset it for the local engine, or give unix:///path/docker.sock, tcp://host:port or ssh://user@host",
        ) from None
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise DockerUnavailableError(
            f"no Docker engine answers ({short(exc)})",
            hint="start one: 'make engine' installs docker.io and starts dockerd as root on Debian; "
            "elsewhere install Docker Engine, start it, and make sure 'docker info' works for your user",
        ) from None
    return client


class DockerBackend:
    """Images and sandboxes on one Docker engine."""

    name = "docker"
    capabilities = Capabilities(persistent_channel=True, push=True, storage_limits=True)

    def __init__(self, client: docker.DockerClient | None = None, limits: SandboxLimits | None = None) -> None:
        self.client = client or connect_docker(request_timeout=BackendSettings.request_timeout_s)
        self.limits = limits or SandboxLimits()
        self.images = DockerImages(self.client)

    @classmethod
    def open(cls, settings: BackendSettings) -> DockerBackend:
        """The local engine, connected (a DockerUnavailableError saying how to get one)."""
        return cls(connect_docker(timeout=settings.connect_timeout_s, request_timeout=settings.request_timeout_s),
                   limits=settings.limits)

    @classmethod
    def preflight(cls, settings: BackendSettings) -> Preflight:
        """Whether an engine answers here."""
        try:
            version = connect_docker(timeout=min(settings.connect_timeout_s, 5.0)).version()
        except DockerUnavailableError as exc:
            return Preflight(cls.name, False, exc.message, fix=exc.hint or "")
        return Preflight(cls.name, True, f"Docker {version.get('Version')} ({version.get('Os')}/{version.get('Arch')})")

    def describe(self) -> str:
        version = self.client.version()
        return f"Docker {version.get('Version')} ({version.get('Os')}/{version.get('Arch')})"

    def start(self, task: Task, *, limits: SandboxLimits | None = None) -> DockerSandbox:
        """A sandbox of ``task``'s built environment (``repo2env build`` first)."""
        return self.start_image(task_image(task), limits=limits, labels={"repo2env.instance_id": task.instance_id})

    def start_image(self, image: str, *, limits: SandboxLimits | None = None,
                    labels: dict[str, str] | None = None, workdir: str = "/testbed") -> DockerSandbox:
        """Start a locked-down container from ``image``, ready for its first command."""
        with lifecycle.starting():
            return self._start(image, limits or self.limits, labels, workdir)

    def _start(self, image: str, limits: SandboxLimits, labels: dict[str, str] | None, workdir: str) -> DockerSandbox:
        # Containers left by a killed repo2env go before new ones come (one filtered list call).
        reap_orphans_now_and_then(self)
        # A known name lets an interrupted start (Ctrl-C between the engine creating the container
        # and this call returning) find and remove what it created.
        name = f"repo2env-{secrets.token_hex(6)}"
        try:
            container = self.client.containers.run(
                image,
                name=name,
                command=keepalive_command(limits.idle_timeout_s, limits.disk_bytes),
                detach=True,
                init=True,
                # The keepalive runs as root (without capabilities) so the agent cannot kill it;
                # every exec runs as limits.user.
                user="root",
                working_dir=workdir,
                network_mode="bridge" if limits.network else "none",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit=limits.memory,
                memswap_limit=limits.memory,
                nano_cpus=int(limits.cpus * 1e9),
                pids_limit=limits.pids,
                ulimits=[docker.types.Ulimit(name="fsize", soft=limits.disk_bytes, hard=limits.disk_bytes)],
                labels={SANDBOX_LABEL: "1", **owner_labels(), **(labels or {})},
                volumes={limits.model_socket_dir: {"bind": MODEL_SOCKET_MOUNT, "mode": "ro"}}
                if limits.model_socket_dir else None,
                environment={"HOME": "/home/agent", "PYTHONDONTWRITEBYTECODE": "1"},
            )
        except docker.errors.ImageNotFound:
            raise InputError(
                f"image {image} does not exist", hint="run 'repo2env runtime bootstrap' (or 'repo2env build')"
            ) from None
        except docker.errors.APIError as exc:
            self.remove_sandbox(name)
            raise DockerUnavailableError(f"Docker could not start a sandbox from {image}: {short(exc)}") from None
        except BaseException:
            self.remove_sandbox(name)
            raise
        sandbox = DockerSandbox(self.client, container, limits)
        if limits.persistent_channel:
            # Opened and answering here (the server's Python takes a moment to start), so that a
            # pool's spare serves its first command as fast as its next ones.
            try:
                sandbox.exec("true", timeout=60)
            except BaseException:
                sandbox.close()
                raise
        return sandbox

    def sandboxes(self, *, labels: Sequence[str] = ()) -> list[SandboxRecord]:
        try:
            # The low-level listing: the high-level one inspects each container and races their removal.
            rows = self.client.api.containers(all=True, filters={"label": [SANDBOX_LABEL, *labels]})
        except docker.errors.DockerException:
            return []
        return [SandboxRecord(id=row["Id"], name=(row.get("Names") or [row["Id"][:12]])[0].lstrip("/"),
                              labels=row.get("Labels") or {}) for row in rows]

    def remove_sandbox(self, sandbox_id: str) -> None:
        try:
            self.client.api.remove_container(sandbox_id, force=True)
        except docker.errors.DockerException:
            pass  # never created, already gone, or its removal is under way
