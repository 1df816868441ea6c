"""The sandbox protocol every backend implements, and the limits every sandbox runs under.

The verifier, test derivation, validation, the agent's tools, RepoEnv and the build's image checks
talk to these protocols only; the backend (:mod:`repo2env.runtime.backends`: docker, podman) is
opened where the program is put together (the CLI, a pipeline's workers, RepoEnv's shared
machinery, the benchmarks) and handed to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from repo2env.models import ExecResult, Task

#: git with every setting that makes it run other programs switched off (hooks, fsmonitor, external
#: diff, pager): run on a repository the agent controls, it can at worst spoil the agent's own diff.
SAFE_GIT = "git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c diff.external= -c core.pager=cat -c color.ui=false"


def agent_diff_command(snapshot: str) -> str:
    """The shell command (run in /testbed as the agent's user) that prints the agent's change as a
    git patch against the ``snapshot`` commit (a commit id, or an expression such as ``HEAD``):
    new and deleted files included, binary hunks in git's binary format. What every grading takes
    as the agent's work: a backend's :meth:`Sandbox.diff`, and a Harbor task's collection step."""
    return (f"{SAFE_GIT} add --all . && {SAFE_GIT} diff --cached --binary --no-ext-diff --no-textconv "
            f"--no-renames {snapshot}")


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
    persistent_channel: bool = False
    """Run the sandbox user's commands through one long-lived process inside the sandbox instead of
    one engine call each (a few ms instead of tens; same user, limits, caps and timeouts). For the
    agent's tool calls only: never for grading, whose commands an agent's code must not answer."""
    model_socket_dir: str = ""
    """A host folder mounted read-only at :data:`MODEL_SOCKET_MOUNT`, holding the unix socket through
    which a harness inside the sandbox reaches its episode's capturing proxy, and nothing else: no
    network is opened. Empty: nothing is mounted (every sandbox but a harness's own)."""


#: Where a sandbox started with ``model_socket_dir`` finds that folder.
MODEL_SOCKET_MOUNT = "/run/repo2env"


@runtime_checkable
class Sandbox(Protocol):
    """A running, isolated copy of a task's world (the repository at /testbed).

    What every stage needs of a sandbox, and all it may use: the grader, test derivation, validation's
    rollouts, the agent's tools, RepoEnv and the build's checks are typed against this protocol, and
    ``tests/test_runtime_contract.py`` is what a backend must pass to stand behind it.
    """

    @property
    def id(self) -> str:
        """A name for this sandbox, unique on its backend (for logs and clean-up)."""
        ...

    @property
    def limits(self) -> SandboxLimits:
        """The limits this sandbox runs under."""
        ...

    @property
    def alive(self) -> bool:
        """Whether commands can still run (not closed, not stopped by its idle lifetime or disk cap)."""
        ...

    def exec(self, command: str | list[str], *, timeout: float | None = None, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str | None = None, stdin: bytes | None = None,
             idle_timeout: float | None = None) -> ExecResult:
        """Run ``command`` (a shell string, or an argv list) as ``user`` (default: the limits' user)
        in ``workdir`` (default: /testbed) with ``env`` added to the sandbox's environment and
        ``stdin`` as its standard input (default: none). At ``timeout`` (default: the limits') the
        command's whole process group is killed (exit 124 or 137, ``timed_out``); with
        ``idle_timeout``, once its output began and then none came for that long, every process of
        the agent user is killed and the result is ``stalled`` (exit 137); combined
        stdout/stderr is kept up to ``limits.output_cap_bytes`` (``truncated`` past it) and decoded
        as UTF-8 with undecodable bytes replaced. Never raises for a failing command; raises a
        :class:`~repo2env.errors.Repo2EnvError` when the sandbox cannot run it (closed: an
        ``InputError``; stopped or removed: a ``SandboxStoppedError``)."""
        ...

    def read_file(self, path: str) -> str:
        """The text of ``path`` inside the sandbox (UTF-8, undecodable bytes replaced); raises
        ``FileNotFoundError`` when it does not exist."""
        ...

    def write_file(self, path: str, content: str) -> None:
        """Create or replace ``path`` inside the sandbox, owned by the sandbox user (its folder
        must exist: ``FileNotFoundError`` otherwise)."""
        ...

    def put_archive(self, folder: str, archive: bytes) -> None:
        """Unpack the tar ``archive`` into ``folder`` inside the sandbox, keeping the owners, modes
        and types its members carry (how the grader places root-owned inputs beside agent-owned
        ones); raises ``FileNotFoundError`` when ``folder`` does not exist."""
        ...

    def diff(self) -> str:
        """The change made in the sandbox against its snapshot, as a git patch (new, deleted and
        binary files included; bytes that are not UTF-8 kept as surrogate escapes)."""
        ...

    def close(self, *, wait: bool = True) -> None:
        """Destroy the sandbox and everything in it; ``wait=False`` may finish that in the
        background (the process still waits for it at exit). Idempotent."""
        ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc_info: object) -> None: ...


@runtime_checkable
class Runtime(Protocol):
    """Starts sandboxes from a task's built image (or any image of the backend)."""

    @property
    def limits(self) -> SandboxLimits:
        """The limits of sandboxes started without their own."""
        ...

    def start(self, task: Task, *, limits: SandboxLimits | None = None) -> Sandbox:
        """A sandbox of ``task``'s built environment; an :class:`~repo2env.errors.InputError` when the
        task is not built."""
        ...

    def start_image(self, image: str, *, limits: SandboxLimits | None = None,
                    labels: dict[str, str] | None = None) -> Sandbox:
        """Start a sandbox from ``image`` and return it ready for its first command."""
        ...
