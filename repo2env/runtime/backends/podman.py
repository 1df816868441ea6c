"""The podman backend: the local podman store and containers through the ``podman`` command line
(its own CLI, not the Docker SDK against podman's compatibility socket), rootful or rootless.

The same sandbox as Docker's (see :mod:`repo2env.runtime.backends.container`): no network, the
``agent`` user, every capability dropped, no-new-privileges, memory/CPU/pids limits, an init
(catatonit, else tini) as pid 1, the keepalive as the main process, owner labels. Two settings the
hosts here need (see :class:`~repo2env.runtime.backend.BackendSettings`): the OCI runtime is
``runc`` (Debian's crun fails on a cgroup v1 / hybrid host), and ``nofile``/``nproc`` ulimits are
given explicitly (podman's defaults are the host's hard limits, which the runtime may not set:
``error setting rlimit ... operation not permitted``). Images built by Docker move here with
:func:`repo2env.runtime.transfer.transfer_images` (``docker save | podman load``) and keep their id.

:mod:`~repo2env.runtime.backends.podman_sandbox` runs commands in a container,
:mod:`~repo2env.runtime.backends.podman_images` builds and moves images.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence

from repo2env.errors import BackendUnavailableError, InputError
from repo2env.models import Task
from repo2env.runtime.backend import BackendSettings, Capabilities, Preflight, SandboxRecord
from repo2env.runtime.backends import lifecycle
from repo2env.runtime.backends.container import task_image
from repo2env.runtime.backends.keepalive import keepalive_command
from repo2env.runtime.backends.podman_cli import PodmanCLI, PodmanFailed, conmon_cwd, last_error
from repo2env.runtime.backends.podman_images import PodmanImages
from repo2env.runtime.backends.podman_sandbox import PodmanSandbox
from repo2env.runtime.ownership import SANDBOX_LABEL, owner_labels, reap_orphans_now_and_then
from repo2env.runtime.sandbox import MODEL_SOCKET_MOUNT, SandboxLimits

#: Init binaries podman can run as a container's pid 1 (its own default first).
_INITS = ("/usr/libexec/podman/catatonit", "/usr/bin/catatonit", "/usr/bin/tini-static", "/usr/bin/docker-init")


class PodmanBackend:
    """Images and sandboxes on the local podman."""

    name = "podman"
    capabilities = Capabilities(persistent_channel=True, push=True, storage_limits=True)

    def __init__(self, settings: BackendSettings | None = None, *, limits: SandboxLimits | None = None) -> None:
        settings = settings or BackendSettings.from_environment()
        self.settings = settings
        self.cli = PodmanCLI(settings.podman_command)
        self.limits = limits or settings.limits
        self.images = PodmanImages(self.cli, oci_runtime=settings.podman_oci_runtime, ulimits=settings.podman_ulimits)
        self._init_path = _init_binary()
        self._info = _engine_info(self.cli, settings)

    @classmethod
    def open(cls, settings: BackendSettings) -> PodmanBackend:
        """The local podman, answering (a BackendUnavailableError saying what to install otherwise)."""
        return cls(settings)

    @classmethod
    def preflight(cls, settings: BackendSettings) -> Preflight:
        """Whether podman, its OCI runtime and an init binary are here and the store answers."""
        try:
            backend = cls(settings)
        except BackendUnavailableError as exc:
            return Preflight(cls.name, False, exc.message, fix=exc.hint or "")
        return Preflight(cls.name, True, backend.describe())

    def describe(self) -> str:
        host = self._info.get("host") or {}
        return (f"podman {(self._info.get('version') or {}).get('Version', '?')} (runtime "
                f"{self.settings.podman_oci_runtime}, cgroup {host.get('cgroupVersion', '?')}, "
                f"{'rootless' if (host.get('security') or {}).get('rootless') else 'as root'})")

    def start(self, task: Task, *, limits: SandboxLimits | None = None) -> PodmanSandbox:
        """A sandbox of ``task``'s built environment (``repo2env build`` first)."""
        return self.start_image(task_image(task), limits=limits, labels={"repo2env.instance_id": task.instance_id})

    def start_image(self, image: str, *, limits: SandboxLimits | None = None,
                    labels: dict[str, str] | None = None, workdir: str = "/testbed") -> PodmanSandbox:
        """Start a locked-down container from ``image``, ready for its first command."""
        with lifecycle.starting():
            return self._start(image, limits or self.limits, labels, workdir)

    def _start(self, image: str, limits: SandboxLimits, labels: dict[str, str] | None, workdir: str) -> PodmanSandbox:
        reap_orphans_now_and_then(self)
        name = f"repo2env-{secrets.token_hex(6)}"
        every_label = {SANDBOX_LABEL: "1", **owner_labels(), **(labels or {})}
        args = ["run", "--detach", "--pull", "never", "--name", name, "--runtime", self.settings.podman_oci_runtime,
                "--init", *(["--init-path", self._init_path] if self._init_path else []),
                # The keepalive runs as root (without capabilities) so the agent cannot kill it;
                # every exec runs as limits.user.
                "--user", "root", "--workdir", workdir,
                "--network", "bridge" if limits.network else "none",
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--memory", limits.memory, "--memory-swap", limits.memory, "--cpus", f"{limits.cpus:g}",
                "--pids-limit", str(limits.pids),
                "--ulimit", f"fsize={limits.disk_bytes}:{limits.disk_bytes}",
                *[f"--ulimit={limit}" for limit in self.settings.podman_ulimits],
                "--env", "HOME=/home/agent", "--env", "PYTHONDONTWRITEBYTECODE=1"]
        if limits.model_socket_dir:
            args += ["--volume", f"{limits.model_socket_dir}:{MODEL_SOCKET_MOUNT}:ro"]
        for key, value in every_label.items():
            args += ["--label", f"{key}={value}"]
        try:
            container_id = self.cli.run([*args, image, *keepalive_command(limits.idle_timeout_s, limits.disk_bytes)],
                                        timeout=300, cwd=conmon_cwd()).decode().strip().splitlines()[-1]
        except PodmanFailed as exc:
            self.remove_sandbox(name)
            if "image not known" in exc.stderr or "no such image" in exc.stderr.lower():
                raise InputError(f"image {image} does not exist on podman",
                                 hint="run 'repo2env --backend podman runtime bootstrap' (or build with --backend podman)") from None
            raise BackendUnavailableError(f"podman could not start a sandbox from {image}: {last_error(exc.stderr)}") from None
        except BaseException:
            self.remove_sandbox(name)
            raise
        sandbox = PodmanSandbox(self.cli, container_id, limits)
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
        args = ["ps", "--all", "--format", "json", "--filter", f"label={SANDBOX_LABEL}"]
        for label in labels:
            args += ["--filter", f"label={label}"]
        try:
            rows = self.cli.json(args, timeout=60) or []
        except (PodmanFailed, BackendUnavailableError):
            return []
        return [SandboxRecord(id=row["Id"], name=(row.get("Names") or [row["Id"][:12]])[0], labels=row.get("Labels") or {})
                for row in rows]

    def remove_sandbox(self, sandbox_id: str) -> None:
        try:
            self.cli.run(["rm", "--force", "--time", "0", sandbox_id], timeout=120)
        except (PodmanFailed, BackendUnavailableError):
            pass  # never created, already gone, or its removal is under way


def _init_binary() -> str | None:
    """The init podman runs as pid 1: its own catatonit when installed (None: podman's default),
    else tini; a BackendUnavailableError when there is none."""
    if os.path.exists(_INITS[0]):
        return None
    for path in _INITS[1:]:
        if os.access(path, os.X_OK):
            return path
    raise BackendUnavailableError("podman has no init binary for its containers (catatonit or tini)",
                                  hint="apt-get install catatonit")


def _engine_info(cli: PodmanCLI, settings: BackendSettings) -> dict:
    """``podman info`` (the store and the runtime answering), or a BackendUnavailableError."""
    if shutil.which(settings.podman_oci_runtime) is None and not os.path.exists(settings.podman_oci_runtime):
        raise BackendUnavailableError(f"podman's OCI runtime {settings.podman_oci_runtime!r} is not installed",
                                      hint="apt-get install runc (or set REPO2ENV_PODMAN_RUNTIME)")
    try:
        return cli.json(["info", "--format", "json"], timeout=min(settings.connect_timeout_s * 3, 60))
    except PodmanFailed as exc:
        raise BackendUnavailableError(f"podman does not answer: {last_error(exc.stderr)}",
                                      hint="run 'podman info' to see why") from None
