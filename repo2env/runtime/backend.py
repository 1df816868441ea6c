"""What a container backend is: one object that owns the images AND the sandboxes of one engine.

A backend (:mod:`repo2env.runtime.backends` maps a name to one, ``open_backend``) is a
:class:`~repo2env.runtime.sandbox.Runtime` (it starts sandboxes) with an :class:`Images` store
(build from a Dockerfile and a context folder, find, list by label, tag, remove, push, pull,
save, load, import a root filesystem), a listing of its sandboxes (for the reaping of orphans),
the :class:`Capabilities` it has, and a ``preflight`` that says in one line whether this machine
can run it. Every stage gets its backend from its caller; nothing outside
:mod:`repo2env.runtime.backends` talks to an engine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from repo2env.runtime.sandbox import Runtime, SandboxLimits

#: How old an untagged image must be for :meth:`Images.prune_dangling` to remove it (the engines'
#: ``until`` filter): a build under way on the same engine holds fresh untagged layers.
DANGLING_AGE = "30m"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond the sandbox contract every backend passes."""

    persistent_channel: bool
    """``SandboxLimits.persistent_channel`` is served by one long-lived process in the sandbox (else
    every command is one engine call, and the limit is ignored)."""
    push: bool
    """Images push to and pull from a registry (``publish --push-images``, ``pull``)."""
    storage_limits: bool
    """``SandboxLimits.disk_bytes`` is enforced (the keepalive's disk watch and ``RLIMIT_FSIZE``)."""


@dataclass(frozen=True)
class Preflight:
    """One line of ``repo2env doctor`` for a backend: can this machine run it, and if not, what to do."""

    backend: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class ImageInfo:
    """An image as a backend reports it; tags are written the same on every backend (no
    ``localhost/`` or ``docker.io/`` prefix a backend adds)."""

    id: str
    """``sha256:<hex>``: the image's content id (the same for one image moved between backends)."""
    tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    size_bytes: int = 0
    created: str = ""

    @property
    def short_id(self) -> str:
        """The first 12 hex digits of the id."""
        return self.id.removeprefix("sha256:")[:12]


@dataclass(frozen=True)
class BuildOutcome:
    """What an image build printed, and why it failed (None: it built)."""

    log: list[str]
    error: str | None = None


@dataclass(frozen=True)
class SandboxRecord:
    """A sandbox the engine knows of (running or not), as the reaping of orphans sees it."""

    id: str
    name: str
    labels: Mapping[str, str]


@runtime_checkable
class Images(Protocol):
    """The images of one backend. Every method raises
    :class:`~repo2env.errors.BackendUnavailableError` when the engine cannot be reached."""

    def get(self, ref: str) -> ImageInfo | None:
        """The image ``ref`` (a tag or an id), or None when it does not exist."""
        ...

    def list(self, *, labels: Sequence[str] = (), repository: str | None = None) -> list[ImageInfo]:
        """Every image carrying all ``labels`` (``"key"`` or ``"key=value"``), and, given a
        ``repository``, tagged in it."""
        ...

    def build(self, context: Path, tag: str, *, labels: Mapping[str, str] | None = None,
              build_args: Mapping[str, str] | None = None, network: bool = True) -> BuildOutcome:
        """Build ``context/Dockerfile`` as ``tag`` (its RUN steps with network unless not
        ``network``); the log, and the error when the build failed."""
        ...

    def remove(self, ref: str, *, force: bool = False) -> bool:
        """Remove ``ref`` (a tag: that name; the image when it was its last) unless an image built
        on it or a container still uses it (``force`` removes it all the same); True when gone."""
        ...

    def prune_dangling(self) -> None:
        """Remove the untagged leftovers of earlier builds, older than :data:`DANGLING_AGE` (a
        build under way holds fresh ones)."""
        ...

    def tag(self, ref: str, new_ref: str) -> None:
        """Give the image ``ref`` the name ``new_ref`` too."""
        ...

    def push(self, ref: str) -> str:
        """Push ``ref`` to the registry its name starts with; the digest the registry gave it
        (``sha256:...``). A :class:`~repo2env.errors.Repo2EnvError` when the push fails."""
        ...

    def pull(self, ref: str) -> ImageInfo:
        """Pull ``ref`` from its registry; a :class:`~repo2env.errors.Repo2EnvError` saying why when
        no registry serves it."""
        ...

    def save(self, refs: Sequence[str], path: Path) -> None:
        """Write ``refs`` as one docker-archive tarball at ``path`` (layers shared by several images
        stored once), which ``load`` of any backend reads."""
        ...

    def load(self, path: Path) -> list[str]:
        """Load a docker-archive tarball; the tags it brought."""
        ...

    def import_rootfs(self, tarball: Path, ref: str) -> None:
        """Make the tar of a root filesystem the one-layer image ``ref`` (bootstrap, no registry)."""
        ...


@runtime_checkable
class Backend(Runtime, Protocol):
    """A container engine as repo2env uses it: images and sandboxes (see the module docstring)."""

    name: str
    capabilities: Capabilities
    images: Images

    def describe(self) -> str:
        """The engine and its version, for ``doctor`` and logs."""
        ...

    def sandboxes(self, *, labels: Sequence[str] = ()) -> list[SandboxRecord]:
        """The sandboxes on this engine (every owner's, running or stopped) carrying all ``labels``."""
        ...

    def remove_sandbox(self, sandbox_id: str) -> None:
        """Remove one sandbox by id (gone already: nothing happens)."""
        ...


@dataclass(frozen=True)
class BackendSettings:
    """How backends are opened (read from the environment by :meth:`from_environment`)."""

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    """The limits of sandboxes started without their own."""
    connect_timeout_s: float = 10.0
    """How long to wait for an engine to answer when opening it."""
    request_timeout_s: float = 120.0
    """How long one engine request may take once the engine answered: a loaded engine (builds
    beside it) can take far longer than the connect timeout to remove an image or start a container."""
    podman_command: str = "podman"
    """The podman binary (``REPO2ENV_PODMAN``)."""
    podman_oci_runtime: str = "runc"
    """The OCI runtime podman runs containers with (``REPO2ENV_PODMAN_RUNTIME``); Debian's crun
    fails on a cgroup v1 / hybrid host, runc works there."""
    podman_ulimits: tuple[str, ...] = ("nofile=1024:1024", "nproc=4096:4096")
    """Explicit limits for podman's containers: its defaults (the host's hard limits) are refused
    where the engine may not raise them (``error setting rlimit ... operation not permitted``)."""

    @classmethod
    def from_environment(cls, *, limits: SandboxLimits | None = None) -> BackendSettings:
        """The defaults, with ``REPO2ENV_PODMAN`` and ``REPO2ENV_PODMAN_RUNTIME`` honoured."""
        return cls(limits=limits or SandboxLimits(),
                   podman_command=os.environ.get("REPO2ENV_PODMAN", "").strip() or "podman",
                   podman_oci_runtime=os.environ.get("REPO2ENV_PODMAN_RUNTIME", "").strip() or "runc")
