"""Images travel with a published dataset: pushed to a registry (``--push-images REGISTRY``, the rows
record REGISTRY/NAME@sha256:DIGEST), saved as one tarball in the tree (``--save-images``), and made
runnable again on another machine by ``repo2env pull`` (load the tarball, pull the pushed reference,
or rebuild from a clone when the dataset carries neither).

One save of every task image (``docker save``, ``podman save``) shares the base and env layers
between tasks, so a tarball costs one copy of each env plus megabytes per task. Every engine call
goes through the backend's :class:`~repo2env.runtime.backend.Images`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from repo2env.errors import BackendUnavailableError, InputError, Repo2EnvError
from repo2env.models import Task
from repo2env.runtime.backend import Backend

# A registry and an optional path in it: host[:port][/path], no scheme, no tag.
_REGISTRY = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*")

IMAGES_TARBALL = "images/images.tar"


def image_saver(backend: Backend) -> Callable[[Sequence[Task], Path], int]:
    """A publish tree writer (see :data:`repo2env.publish.dataset.TreeWriter`) that writes
    ``root/images/images.tar`` holding every task's image of ``backend``: one archive of several
    images dedups their layers."""

    def save_images(tasks: Sequence[Task], root: Path) -> int:
        tags = sorted({task.env_spec.image for task in tasks if task.env_spec and task.env_spec.image})
        if not tags:
            return 0
        missing = [tag for tag in tags if backend.images.get(tag) is None]
        if missing:
            raise InputError(f"--save-images: no image {missing[0]} on the {backend.name} backend",
                             hint="run 'repo2env build' so every published task's image exists")
        backend.images.save(tags, root / IMAGES_TARBALL)
        return len(tags)

    return save_images


def load_images(backend: Backend, tarball: Path) -> list[str]:
    """Load a saved tarball into ``backend``; returns the tags it brought."""
    if not tarball.is_file():
        raise InputError(f"no image tarball at {tarball}")
    return backend.images.load(tarball)


def runnable_here(backend: Backend, task: Task) -> bool:
    """Whether the task's image exists on ``backend`` with the id the dataset recorded."""
    spec = task.env_spec
    if spec is None or not spec.image:
        return False
    image = backend.images.get(spec.image)
    return image is not None and (not spec.image_digest or image.id == spec.image_digest)


def push_images(tasks: Sequence[Task], registry: str, *, backend: Backend) -> list[Task]:
    """Push every task's image to ``registry`` (``host[:port][/path]``) as ``REGISTRY/<name>:<tag>``
    of its local tag, and return the tasks with ``env_spec.pushed_image`` set to the pushed
    reference with the registry's digest (``REGISTRY/<name>@sha256:...``), which pins the content."""
    registry = registry.strip().rstrip("/")
    if not _REGISTRY.fullmatch(registry):
        raise InputError(f"--push-images {registry!r}: not a registry address",
                         hint="give host[:port][/path] without a scheme, e.g. ghcr.io/org or 127.0.0.1:5000/envs")
    if not backend.capabilities.push:
        raise InputError(f"the {backend.name} backend cannot push images", hint="publish with --backend docker")
    pushed: dict[str, str] = {}
    updated = []
    for task in tasks:
        spec = task.env_spec
        if spec is None or not spec.image:
            updated.append(task)
            continue
        if spec.image not in pushed:
            repository, _, tag = spec.image.rpartition(":") if ":" in spec.image.rsplit("/", 1)[-1] else (spec.image, "", "latest")
            target = f"{registry}/{repository.rsplit('/', 1)[-1]}:{tag}"
            if backend.images.get(spec.image) is None:
                raise InputError(f"no image {spec.image} here for {task.instance_id}",
                                 hint="run 'repo2env build' so every published task's image exists")
            backend.images.tag(spec.image, target)
            try:
                digest = backend.images.push(target)
            finally:
                backend.images.remove(target)  # the local tag stays the task's own
            pushed[spec.image] = f"{target.rpartition(':')[0]}@{digest}"
        updated.append(task.model_copy(update={"env_spec": spec.model_copy(update={"pushed_image": pushed[spec.image]})}))
    return updated


def pull_pushed(backend: Backend, task: Task) -> bool:
    """Pull the task's pushed image (``env_spec.pushed_image``) and tag it as the task's local image;
    whether it then runs here (the id the dataset recorded)."""
    spec = task.env_spec
    if spec is None or not spec.pushed_image or not spec.image:
        return False
    try:
        image = backend.images.pull(spec.pushed_image)
    except BackendUnavailableError:
        raise
    except Repo2EnvError:
        return False
    backend.images.tag(image.id, spec.image)
    return runnable_here(backend, task)
