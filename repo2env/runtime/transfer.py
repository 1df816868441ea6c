"""Images moved from one backend to another of the same machine (``docker save | podman load``):
a base or env image is built once, and a task built on one backend runs on the other with the same
image id (the id is the image's content, which saving and loading keep)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from repo2env.errors import InputError
from repo2env.runtime.backend import Backend


def transfer_images(source: Backend, target: Backend, refs: Sequence[str]) -> list[str]:
    """Copy the images ``refs`` of ``source`` to ``target`` (one archive: shared layers travel
    once); the tags ``target`` now has. An InputError names a ref ``source`` does not have."""
    refs = list(dict.fromkeys(refs))
    missing = [ref for ref in refs if source.images.get(ref) is None]
    if missing:
        raise InputError(f"no image {', '.join(missing)} on the {source.name} backend")
    if not refs:
        return []
    with tempfile.TemporaryDirectory(prefix="repo2env-transfer-", dir=_roomy_tmp()) as scratch:
        archive = Path(scratch) / "images.tar"
        source.images.save(refs, archive)
        return target.images.load(archive)


def _roomy_tmp() -> str | None:
    """/var/tmp (on disk) rather than a /tmp that may be a small tmpfs, when it exists."""
    return "/var/tmp" if Path("/var/tmp").is_dir() else None
