"""The sandbox protocol every backend implements, and the limits every sandbox runs under.

The verifier, validation and the TRL environment talk to these protocols only; the Docker
backend (:mod:`repo2env.runtime.docker_backend`) is the first implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from repo2env.models import ExecResult


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandbox. Defaults suit a test suite on a 2-core machine."""

    memory: str = "2g"
    cpus: float = 1.0
    pids: int = 512
    exec_timeout_s: float = 600.0
    output_cap_bytes: int = 1_000_000
    user: str = "agent"
    network: bool = False
    idle_timeout_s: float = 1800.0
    """The sandbox stops itself after this long with no command running (its owner may be gone)."""
    disk_bytes: int = 2 * 2**30
    """What the sandbox may add under /testbed, /home, /tmp and /var/tmp (and the largest file it
    may write anywhere); past it the sandbox stops itself."""


class Sandbox(Protocol):
    """A running, isolated copy of a task's world."""

    def exec(self, command: str | list[str], *, timeout: float | None = None, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        """Run ``command`` (a shell string, or an argv list); never raises for a failing command."""
        ...

    def read_file(self, path: str) -> str:
        """The text of ``path`` inside the sandbox."""
        ...

    def write_file(self, path: str, content: str) -> None:
        """Create or replace ``path`` inside the sandbox, owned by the sandbox user."""
        ...

    def diff(self) -> str:
        """The change made in the sandbox against its snapshot, as a git patch."""
        ...

    def close(self) -> None:
        """Destroy the sandbox and everything in it. Idempotent."""
        ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc_info: object) -> None: ...


class Runtime(Protocol):
    """Starts sandboxes from images."""

    def start_image(self, image: str, *, limits: SandboxLimits | None = None,
                    labels: dict[str, str] | None = None) -> Sandbox:
        """Start a sandbox from ``image`` and return it ready for its first command."""
        ...
