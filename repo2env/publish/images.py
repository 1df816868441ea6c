"""Images travel with a published dataset: pushed to a registry (``--push-images REGISTRY``, the rows
record REGISTRY/NAME@sha256:DIGEST), saved as one tarball in the tree (``--save-images``), and made
runnable again on another machine by ``repo2env pull`` (load the tarball, pull the pushed reference,
or rebuild from a clone when the dataset carries neither).

One ``docker save`` of every task image shares the base and env layers between tasks, so a tarball
costs one copy of each env plus megabytes per task.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from repo2env.errors import DockerUnavailableError, InputError, Repo2EnvError
from repo2env.models import Task

# A registry and an optional path in it: host[:port][/path], no scheme, no tag.
_REGISTRY = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*")

IMAGES_TARBALL = "images/images.tar"


def save_images(tasks: Sequence[Task], root: Path) -> int:
    """Write ``root/images/images.tar`` holding every task's image; returns the number of images.

    Uses the docker CLI (``docker save`` of several tags in one archive dedups their layers, which
    the SDK's one-image ``save`` cannot), talking to the same engine (``DOCKER_HOST`` honoured)."""
    tags = sorted({task.env_spec.image for task in tasks if task.env_spec and task.env_spec.image})
    if not tags:
        return 0
    docker = shutil.which("docker")
    if docker is None:
        raise DockerUnavailableError("--save-images needs the docker command line client", hint="install docker.io")
    (root / "images").mkdir(parents=True, exist_ok=True)
    result = subprocess.run([docker, "save", "-o", str(root / IMAGES_TARBALL), *tags], capture_output=True, text=True)
    if result.returncode != 0:
        raise DockerUnavailableError(f"docker save failed: {result.stderr.strip()[-300:]}",
                                     hint="run 'repo2env build' so every published task's image exists")
    return len(tags)


def load_images(client, tarball: Path) -> list[str]:
    """``docker load`` a saved tarball; returns the tags it brought."""
    if not tarball.is_file():
        raise InputError(f"no image tarball at {tarball}")
    with tarball.open("rb") as handle:
        images = client.images.load(handle)
    return sorted(tag for image in images for tag in image.tags)


def runnable_here(client, task: Task) -> bool:
    """Whether the task's image exists on this engine with the id the dataset recorded."""
    import docker.errors

    spec = task.env_spec
    if spec is None or not spec.image:
        return False
    try:
        image = client.images.get(spec.image)
    except docker.errors.ImageNotFound:
        return False
    return not spec.image_digest or image.id == spec.image_digest


def push_images(tasks: Sequence[Task], registry: str, *, client=None) -> list[Task]:
    """Push every task's image to ``registry`` (``host[:port][/path]``) as ``REGISTRY/<name>:<tag>``
    of its local tag, and return the tasks with ``env_spec.pushed_image`` set to the pushed
    reference with the registry's digest (``REGISTRY/<name>@sha256:...``), which pins the content."""
    registry = registry.strip().rstrip("/")
    if not _REGISTRY.fullmatch(registry):
        raise InputError(f"--push-images {registry!r}: not a registry address",
                         hint="give host[:port][/path] without a scheme, e.g. ghcr.io/org or 127.0.0.1:5000/envs")
    if client is None:
        from repo2env.runtime.backends.docker import connect_docker

        client = connect_docker()
    import docker.errors

    pushed: dict[str, str] = {}
    updated = []
    for task in tasks:
        spec = task.env_spec
        if spec is None or not spec.image:
            updated.append(task)
            continue
        if spec.image not in pushed:
            repository, _, tag = spec.image.rpartition(":") if ":" in spec.image.rsplit("/", 1)[-1] else (spec.image, "", "latest")
            target = f"{registry}/{repository.rsplit('/', 1)[-1]}"
            try:
                client.images.get(spec.image).tag(target, tag)
            except docker.errors.ImageNotFound:
                raise InputError(f"no image {spec.image} here for {task.instance_id}",
                                 hint="run 'repo2env build' so every published task's image exists") from None
            try:
                digest = _push(client, target, tag)
            finally:
                client.images.remove(f"{target}:{tag}", noprune=True)  # the local tag stays the task's own
            pushed[spec.image] = f"{target}@{digest}"
        updated.append(task.model_copy(update={"env_spec": spec.model_copy(update={"pushed_image": pushed[spec.image]})}))
    return updated


def _push(client, target: str, tag: str) -> str:
    """Push ``target:tag``; the digest the registry gave it."""
    digest = None
    try:
        for event in client.api.push(target, tag=tag, stream=True, decode=True):
            if event.get("error"):
                raise Repo2EnvError(f"pushing {target}:{tag} failed: {event['error']}",
                                    hint="check that the registry is reachable and that 'docker login' was done for it")
            digest = (event.get("aux") or {}).get("Digest") or digest
    except Repo2EnvError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's errors for an unreachable registry vary
        raise Repo2EnvError(f"pushing {target}:{tag} failed: {exc}",
                            hint="check that the registry is reachable (plain HTTP only on 127.0.0.1 unless dockerd "
                                 "lists it in insecure-registries)") from None
    if digest is None:
        raise Repo2EnvError(f"pushing {target}:{tag} gave no digest", hint="push again; check the registry's logs")
    return digest


def pull_pushed(client, task: Task) -> bool:
    """Pull the task's pushed image (``env_spec.pushed_image``) and tag it as the task's local image;
    whether it then runs here (the id the dataset recorded)."""
    spec = task.env_spec
    if spec is None or not spec.pushed_image or not spec.image:
        return False
    import docker.errors

    try:
        image = client.images.pull(spec.pushed_image)
    except docker.errors.APIError:
        return False
    repository, _, tag = spec.image.rpartition(":") if ":" in spec.image.rsplit("/", 1)[-1] else (spec.image, "", "latest")
    image.tag(repository, tag)
    return runnable_here(client, task)
