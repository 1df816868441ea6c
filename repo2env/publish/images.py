"""Images travel with a published dataset: saved as one tarball in the tree (``--save-images``), and
made runnable again on another machine by ``repo2env pull`` (load the tarball, or rebuild from a
clone when the dataset carries none).

One ``docker save`` of every task image shares the base and env layers between tasks, so a tarball
costs one copy of each env plus megabytes per task.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from repo2env.errors import DockerUnavailableError, InputError
from repo2env.models import Task

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
