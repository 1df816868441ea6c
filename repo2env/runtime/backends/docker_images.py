"""Docker's images behind :class:`~repo2env.runtime.backend.Images`: the Docker SDK, and the docker
command line for ``save`` (one archive of several images shares their layers, which the SDK's
one-image ``save`` cannot)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from repo2env.errors import BackendUnavailableError, DockerUnavailableError, InputError, Repo2EnvError
from repo2env.runtime.backend import DANGLING_AGE, BuildOutcome, ImageInfo
from repo2env.runtime.backends.container import plain_name, short

#: What the engine's failures look like (an engine gone mid-call, a refused request).
_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


class DockerImages:
    """The images of one Docker engine."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client

    def get(self, ref: str) -> ImageInfo | None:
        try:
            return _info(self.client.images.get(ref).attrs)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.NotFound:
            return None
        except _ENGINE_ERRORS as exc:
            raise DockerUnavailableError(f"Docker failed to inspect image {ref}: {short(exc)}") from None

    def list(self, *, labels: Sequence[str] = (), repository: str | None = None) -> list[ImageInfo]:
        filters: dict = {"label": list(labels)} if labels else {}
        if repository:
            filters["reference"] = [f"{repository}:*", repository]
        try:
            # The low-level listing reads every image in one call: listing Image objects inspects each
            # one, and an image another session removes meanwhile would fail the whole listing.
            rows = self.client.api.images(filters=filters)
        except _ENGINE_ERRORS as exc:
            raise DockerUnavailableError(f"Docker failed to list images: {short(exc)}") from None
        return [ImageInfo(id=row["Id"], tags=tuple(tag for tag in row.get("RepoTags") or () if tag != "<none>:<none>"),
                          labels=row.get("Labels") or {}, size_bytes=row.get("Size") or 0,
                          created=_iso(row.get("Created"))) for row in rows]

    def build(self, context: Path, tag: str, *, labels: Mapping[str, str] | None = None,
              build_args: Mapping[str, str] | None = None, network: bool = True) -> BuildOutcome:
        log: list[str] = []
        error = None
        try:
            stream = self.client.api.build(path=str(context), tag=tag, labels=dict(labels or {}), rm=True, forcerm=True,
                                           decode=True, buildargs=dict(build_args or {}),
                                           network_mode="bridge" if network else "none")
            for chunk in stream:
                if "stream" in chunk:
                    log.append(chunk["stream"].rstrip("\n"))
                if "error" in chunk:
                    error = chunk["error"].strip()
                    log.append(error)
        except docker.errors.APIError as exc:
            error = str(exc)
            log.append(error)
        except _ENGINE_ERRORS as exc:
            raise DockerUnavailableError(f"Docker failed during a build: {exc}") from None
        return BuildOutcome(log=log, error=error)

    def remove(self, ref: str, *, force: bool = False) -> bool:
        try:
            self.client.images.remove(ref, force=force, noprune=False)
        except docker.errors.ImageNotFound:
            return True
        except docker.errors.APIError:
            return False  # in use by an image built on it or a container
        return True

    def prune_dangling(self) -> None:
        try:
            # Only leftovers older than a build: a build under way on the same engine holds fresh
            # untagged layers, and removing one fails it ("unknown parent image ID").
            self.client.images.prune(filters={"dangling": True, "until": DANGLING_AGE})
        except docker.errors.APIError:
            pass  # another prune is running: the next one takes these

    def tag(self, ref: str, new_ref: str) -> None:
        repository, tag = split_reference(new_ref)
        try:
            self.client.images.get(ref).tag(repository, tag)
        except docker.errors.ImageNotFound:
            raise InputError(f"no image {ref} here") from None

    def push(self, ref: str) -> str:
        repository, tag = split_reference(ref)
        digest = None
        try:
            for event in self.client.api.push(repository, tag=tag, stream=True, decode=True):
                if event.get("error"):
                    raise Repo2EnvError(f"pushing {ref} failed: {event['error']}",
                                        hint="check that the registry is reachable and that 'docker login' was done for it")
                digest = (event.get("aux") or {}).get("Digest") or digest
        except Repo2EnvError:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's errors for an unreachable registry vary
            raise Repo2EnvError(f"pushing {ref} failed: {exc}",
                                hint="check that the registry is reachable (plain HTTP only on 127.0.0.1 unless dockerd "
                                     "lists it in insecure-registries)") from None
        if digest is None:
            raise Repo2EnvError(f"pushing {ref} gave no digest", hint="push again; check the registry's logs")
        return digest

    def pull(self, ref: str) -> ImageInfo:
        repository, tag = split_reference(ref)
        try:
            if "@" in ref:
                image = self.client.images.pull(ref)
            else:
                image = self.client.images.pull(repository, tag=tag)
        except docker.errors.APIError as exc:
            raise Repo2EnvError(f"no registry serves {ref} ({short(exc)})") from None
        except _ENGINE_ERRORS as exc:
            raise DockerUnavailableError(f"Docker failed to pull {ref}: {short(exc)}") from None
        return _info(image.attrs)

    def save(self, refs: Sequence[str], path: Path) -> None:
        # The docker CLI, talking to the same engine (DOCKER_HOST honoured).
        binary = shutil.which("docker")
        if binary is None:
            raise DockerUnavailableError("saving images needs the docker command line client", hint="install docker.io")
        path.parent.mkdir(parents=True, exist_ok=True)
        result = subprocess.run([binary, "save", "-o", str(path), *refs], capture_output=True, text=True)
        if result.returncode != 0:
            raise DockerUnavailableError(f"docker save failed: {result.stderr.strip()[-300:]}",
                                         hint="run 'repo2env build' so every image exists")

    def load(self, path: Path) -> list[str]:
        try:
            with path.open("rb") as handle:
                images = self.client.images.load(handle)
            tags = []
            for image in images:
                for tag in image.tags:
                    if plain_name(tag) != tag:
                        # An archive another engine wrote under its local registry (podman's
                        # localhost/): the name every backend writes, as the tasks record it.
                        self.tag(image.id, plain_name(tag))
                        self.client.images.remove(tag, noprune=True)
                    tags.append(plain_name(tag))
        except _ENGINE_ERRORS as exc:
            raise DockerUnavailableError(f"Docker failed to load {path}: {short(exc)}") from None
        return sorted(tags)

    def import_rootfs(self, tarball: Path, ref: str) -> None:
        repository, tag = split_reference(ref)
        try:
            self.client.api.import_image_from_file(str(tarball), repository=repository, tag=tag)
        except _ENGINE_ERRORS as exc:
            raise BackendUnavailableError(f"Docker failed to import {tarball} as {ref}: {short(exc)}") from None


def split_reference(ref: str) -> tuple[str, str]:
    """``host:5000/a/b:tag`` -> (``host:5000/a/b``, ``tag``); no tag -> ``latest``."""
    if "@" in ref:
        return ref.split("@", 1)[0], ref.split("@", 1)[1]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repository, _, tag = ref.rpartition(":")
        return repository, tag
    return ref, "latest"


def _iso(created) -> str:
    """The listing's creation time (seconds since the epoch) as the inspection writes it (ISO 8601)."""
    if isinstance(created, int | float):
        return datetime.fromtimestamp(created, UTC).isoformat().replace("+00:00", "Z")
    return str(created or "")


def _info(attrs: dict) -> ImageInfo:
    config = attrs.get("Config") or {}
    return ImageInfo(id=attrs["Id"], tags=tuple(attrs.get("RepoTags") or ()), labels=config.get("Labels") or {},
                     size_bytes=attrs.get("Size") or 0, created=str(attrs.get("Created", "")))
