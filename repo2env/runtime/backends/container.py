"""What every container backend's sandbox does the same way, over a few engine primitives.

Every sandbox: no network, the unprivileged ``agent`` user, all capabilities dropped,
no-new-privileges, memory/CPU/pids limits, an init process that reaps zombies, commands killed
with their whole process group at their timeout, output capped, the keepalive as its main process
(:mod:`~repo2env.runtime.backends.keepalive`), owner labels for the reaping of orphans. A backend
starts the container with those settings and implements the primitives of
:class:`ContainerSandbox` (run one argv, the container's state, copy a tar in and out, attach a
command channel, remove); the command semantics (timeouts, stdin, the channel and its fallback,
the stop reasons, the diff) are written once, here.
"""

from __future__ import annotations

import io
import secrets
import shlex
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import PurePosixPath

from repo2env.errors import BackendUnavailableError, InputError, PatchError, SandboxStoppedError
from repo2env.models import ExecResult, Task
from repo2env.runtime.backends import lifecycle
from repo2env.runtime.backends.keepalive import DISK_CAP_EXIT, channel_shell, timed_shell
from repo2env.runtime.bootstrap import AGENT_UID
from repo2env.runtime.channel import ChannelBroken, ChannelClosed, ChannelTransport, CommandChannel
from repo2env.runtime.sandbox import SandboxLimits, agent_diff_command

#: How long one command is tried again when the container runtime cannot start it (no pid left
#: while a killed fork bomb's processes end and are reaped, which a loaded machine can take seconds
#: to do): it never ran, so running it again a moment later is safe.
START_RETRY_S = 15.0
#: Channels a sandbox opens at most: past that (its agent keeps killing them) commands use the engine's exec.
CHANNEL_OPENS = 3
#: Extra seconds past a command's timeout before the caller stops waiting on its output.
STREAM_GRACE_S = 5.0
#: The label of a task image (and so of its sandboxes) naming the snapshot commit diffs are taken against.
SNAPSHOT_LABEL = "repo2env.snapshot"


@dataclass(frozen=True)
class Ran:
    """One engine exec as a backend saw it."""

    exit_code: int | None
    """None: still running when the caller stopped waiting (something left the process group)."""
    output: bytes
    truncated: bool
    not_started: bool = False
    """The runtime could not start the command at all (it never ran: safe to run again)."""


@dataclass(frozen=True)
class State:
    """A container's state as its engine records it."""

    running: bool
    exit_code: int | None = None
    oom_killed: bool = False


class EngineRefused(Exception):
    """The engine refused an exec (the container may have stopped under it)."""


class ContainerSandbox:
    """A running container behind the :class:`~repo2env.runtime.sandbox.Sandbox` protocol; a
    backend subclasses it with the engine primitives (the methods that raise NotImplementedError)."""

    #: Whether the engine's exec takes a command's stdin itself (else it is staged in a file).
    native_stdin = False
    #: What the engine's exec is called in messages.
    exec_name = "the engine's exec"

    def __init__(self, sandbox_id: str, limits: SandboxLimits, labels: dict[str, str] | None = None) -> None:
        self._id = sandbox_id
        self.limits = limits
        self._labels = labels
        self._closed = False
        self._channel: CommandChannel | None = None
        self._channel_opens = 0
        self._channel_guard = threading.Lock()
        self._diff_guard = threading.Lock()
        lifecycle.register(self)

    # --- engine primitives (one backend each) -------------------------------------------------

    def _run(self, argv: list[str], *, user: str, workdir: str | None, env: dict[str, str] | None,
             stdin: bytes | None, deadline: float, idle_s: float | None = None) -> Ran:
        """Run ``argv`` through the engine's exec, its output capped at ``limits.output_cap_bytes``,
        waiting until ``deadline`` at most (and, with ``idle_s``, no longer than that without output
        once it began: :func:`drain`); EngineRefused when the engine would not run it."""
        raise NotImplementedError

    def _state(self) -> State | None:
        """The container's state; None when it no longer exists."""
        raise NotImplementedError

    def _read_labels(self) -> dict[str, str]:
        """The container's labels (its image's included), when they were not given at the start."""
        raise NotImplementedError

    def _last_words(self) -> str:
        """The last line the container's main process wrote (empty when none can be read)."""
        raise NotImplementedError

    def _archive_of(self, path: str) -> bytes:
        """A tar of ``path`` in the container; FileNotFoundError when it does not exist."""
        raise NotImplementedError

    def _unpack(self, folder: str, archive: bytes) -> None:
        """Unpack ``archive`` into ``folder`` keeping its members' owners; FileNotFoundError when
        ``folder`` does not exist."""
        raise NotImplementedError

    def _attach_channel(self) -> ChannelTransport:
        """A stream to :func:`~repo2env.runtime.channel.server_argv` started as ``limits.user``;
        OSError or BackendUnavailableError when it cannot be."""
        raise NotImplementedError

    def _destroy(self) -> None:
        """Remove the container, killing everything in it (gone already: nothing happens)."""
        raise NotImplementedError

    # --- the protocol -------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The container id."""
        return self._id

    @property
    def labels(self) -> dict[str, str]:
        """The container's labels, its image's included (the snapshot commit, the owner ...)."""
        if self._labels is None:
            self._labels = self._read_labels()
        return self._labels

    @property
    def alive(self) -> bool:
        """Whether the container still runs (not stopped by its idle lifetime or disk cap, not removed)."""
        return not self._closed and self._running()

    def exec(self, command: str | list[str], *, timeout: float | None = None, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str | None = None, stdin: bytes | None = None,
             idle_timeout: float | None = None) -> ExecResult:
        """Run ``command`` under ``timeout`` (default: the limits'); kill its process group at the
        deadline; capture at most ``output_cap_bytes`` of combined stdout/stderr. ``idle_timeout``:
        once output began, none for that long stops it too (``stalled``), by the engine's exec."""
        return self._exec(command, timeout=timeout, workdir=workdir, env=env, user=user, stdin=stdin, errors="replace",
                          idle_timeout=idle_timeout)

    def read_file(self, path: str) -> str:
        """The text of ``path`` (UTF-8, undecodable bytes replaced)."""
        if self._closed:
            raise InputError("this sandbox is closed")
        try:
            archive = self._archive_of(path)
        except EngineRefused as exc:
            if not self._running():
                raise self._stopped_error() from None
            raise BackendUnavailableError(f"the engine would not copy {path} out of sandbox {self.id[:12]}: {exc}") from None
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise IsADirectoryError(path)
            extracted = tar.extractfile(member)
            assert extracted is not None
            return extracted.read().decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> None:
        """Create or replace ``path``, owned by the agent user (parent directories must exist)."""
        target = PurePosixPath(path)
        self.put_archive(str(target.parent), one_file_archive(target.name, content.encode("utf-8"), AGENT_UID, 0o644))

    def put_archive(self, folder: str, archive: bytes) -> None:
        """Unpack the tar ``archive`` into ``folder`` (owners and modes as its members say)."""
        if self._closed:
            raise InputError("this sandbox is closed")
        try:
            self._unpack(folder, archive)
        except FileNotFoundError:
            if not self._running():
                raise self._stopped_error() from None
            raise
        except EngineRefused as exc:
            if not self._running():
                raise self._stopped_error() from None
            raise BackendUnavailableError(f"the engine would not copy files into sandbox {self.id[:12]}: {exc}") from None

    def diff(self) -> str:
        """The agent's change against the snapshot, as a git patch (new and deleted files included).

        Computed with git inside the sandbox, against the snapshot commit recorded on the image,
        so commits or a moved HEAD do not hide changes. Settings that make git run programs are
        switched off: an agent can at worst spoil its own diff. Never through the command channel:
        what is graded comes from the engine, not from a process the agent can replace.

        One diff at a time per sandbox: ``git add`` holds the index's lock, so a second diff beside
        it (a group's early grading and the trainer's own get_reward) would fail on ``index.lock``."""
        snapshot = self.labels.get(SNAPSHOT_LABEL) or "HEAD"
        # Bytes as git wrote them (a Latin-1 file stays Latin-1), carried as surrogate escapes.
        with self._diff_guard:
            result = self._exec(agent_diff_command(snapshot), workdir="/testbed", timeout=120,
                                errors="surrogateescape", through_channel=False)
        if result.exit_code != 0 or result.truncated:
            reason = "the diff is larger than the output cap" if result.truncated else result.output.strip()[-300:]
            raise PatchError(f"cannot compute the sandbox's diff: {reason}")
        return result.output

    def close(self, *, wait: bool = True) -> None:
        """Remove the container (killing everything in it). Safe to call twice.

        ``wait=False`` hands the removal to a background thread (a grader need not wait for it);
        interpreter exit still waits for every pending removal."""
        if self._closed:
            return
        self._closed = True
        self._close_channel()
        if wait:
            self._remove()
        else:
            lifecycle.remove_later(self._remove)

    def remove_now(self) -> None:
        """Remove the container here and now, even when a removal was already handed to the
        background (a stop does, for those still open before the process exits)."""
        self._closed = True
        self._close_channel()
        self._remove()

    def _close_channel(self) -> None:
        with self._channel_guard:
            if self._channel is not None:
                self._channel.close()

    def __enter__(self) -> ContainerSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A sandbox dropped without close() (e.g. by a pooled TRL environment) still goes away.
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to report to
            pass

    # --- how commands run ---------------------------------------------------------------------

    def _exec(self, command: str | list[str], *, timeout: float | None, workdir: str | None = None,
              env: dict[str, str] | None = None, user: str | None = None, stdin: bytes | None = None,
              errors: str, through_channel: bool = True, idle_timeout: float | None = None) -> ExecResult:
        """:meth:`exec`, its output decoded from UTF-8 with ``errors`` (``"surrogateescape"`` keeps
        every byte, for a diff); ``through_channel=False`` keeps the command off the channel (so does
        an ``idle_timeout``: only the engine's exec watches the output as it comes)."""
        if self._closed:
            raise InputError("this sandbox is closed")
        if through_channel and idle_timeout is None and (user or self.limits.user) == self.limits.user:
            answered = self._exec_through_channel(command, timeout=timeout, workdir=workdir, env=env, stdin=stdin,
                                                  errors=errors)
            if answered is not None:
                return answered
        if stdin is not None and not self.native_stdin:
            # An engine exec without an attached stdin cannot be given one: the bytes go into a file
            # of the command's user first, which the command's shell opens as its input and removes.
            staging = f"/tmp/.repo2env-stdin-{secrets.token_hex(8)}"
            owner = AGENT_UID if (user or self.limits.user) == "agent" else 0
            self.put_archive("/tmp", one_file_archive(PurePosixPath(staging).name, stdin, owner, 0o600))
            shell_command = command if isinstance(command, str) else shlex.join(command)
            command, stdin = f"exec 0<{staging}; rm -f -- {staging}\n{shell_command}", None
        give_up = time.monotonic() + START_RETRY_S
        attempt = 0
        while True:
            result = self._exec_once(command, timeout=timeout, workdir=workdir, env=env, user=user, stdin=stdin,
                                     errors=errors, idle_timeout=idle_timeout)
            if not isinstance(result, Ran):
                return result
            attempt += 1
            pause = min(0.5 * attempt, 2.0)
            if time.monotonic() + pause > give_up:
                break
            time.sleep(pause)
        return ExecResult(exit_code=126, output=result.output.decode("utf-8", errors=errors), timed_out=False,
                          truncated=result.truncated, duration_s=0.0)

    def _exec_once(self, command: str | list[str], *, timeout: float | None, workdir: str | None,
                   env: dict[str, str] | None, user: str | None, stdin: bytes | None, errors: str,
                   idle_timeout: float | None = None) -> ExecResult | Ran:
        """The command's result, or the engine's :class:`Ran` when the runtime could not start it."""
        if self._closed:
            raise InputError("this sandbox is closed")
        timeout = self.limits.exec_timeout_s if timeout is None else timeout
        shell_command = command if isinstance(command, str) else shlex.join(command)
        started = time.monotonic()
        try:
            ran = self._run(timed_shell(shell_command, timeout), user=user or self.limits.user, workdir=workdir,
                            env=env, stdin=stdin, deadline=started + timeout + STREAM_GRACE_S, idle_s=idle_timeout)
        except EngineRefused as exc:
            if not self._running():  # stopped by its keepalive, or removed
                raise self._stopped_error() from None
            raise BackendUnavailableError(f"the engine would not run a command in sandbox {self.id[:12]}: {exc}") from None
        if ran.not_started:
            return ran
        exit_code = ran.exit_code
        duration = time.monotonic() - started
        timed_out = exit_code in (124, 137) and duration >= timeout * 0.99
        output = ran.output.decode("utf-8", errors=errors)
        # A stopping container SIGKILLs what runs in it: only then is its state worth a look.
        if exit_code in (None, 137) and not timed_out and self._stopping():
            # The keepalive stopped the sandbox under this command: say why where the caller looks.
            output += f"\n[repo2env: {self._stopped_error().message}]\n"
            exit_code = 137 if exit_code is None else exit_code
        elif exit_code is None and idle_timeout is not None and duration < timeout:
            # No output for idle_timeout once it began: the command hangs. What the agent user runs
            # is stopped (the keepalive and root's commands are spared; a root command reading the
            # agent's output then sees it end).
            self._kill_agent_processes()
            return ExecResult(exit_code=137, output=output, truncated=ran.truncated, duration_s=duration, stalled=True)
        elif exit_code is None:
            # Still running past the grace period: something left timeout's process group (setsid).
            # The keepalive runs as root, so killing every process of the agent user spares it.
            self._kill_agent_processes()
            exit_code, timed_out = 137, True
        return ExecResult(exit_code=exit_code, output=output, timed_out=timed_out, truncated=ran.truncated,
                          duration_s=duration)

    def _kill_agent_processes(self) -> None:
        try:
            self._run(["kill", "-9", "-1"], user=self.limits.user, workdir=None, env=None, stdin=None,
                      deadline=time.monotonic() + 30)
        except EngineRefused:
            pass  # the container is gone: so are its processes

    def _open_channel(self) -> CommandChannel | None:
        """The sandbox's command channel, opened if need be; None when this sandbox has none, or it
        broke too often (every command then goes through the engine's exec)."""
        with self._channel_guard:
            if self._channel is not None and not self._channel.closed:
                return self._channel
            if self._closed or not self.limits.persistent_channel or self._channel_opens >= CHANNEL_OPENS:
                return None
            # A channel broke: into a stopped container a new one would only break again (an engine
            # may start the exec and fail it later), and the command must get the stop's error.
            if self._channel_opens and not self._running():
                return None
            self._channel_opens += 1
            try:
                self._channel = CommandChannel(self._attach_channel())
            except (BackendUnavailableError, OSError):
                self._channel = None  # the engine's exec serves instead
            return self._channel

    def _exec_through_channel(self, command: str | list[str], *, timeout: float | None, workdir: str | None,
                              env: dict[str, str] | None, stdin: bytes | None, errors: str) -> ExecResult | None:
        """``command`` run through the channel, or None when the channel cannot take it (none, busy
        with another thread's command, dead before it was sent): then the engine's exec runs it."""
        channel = self._open_channel()
        if channel is None or not channel.try_lock():
            return None
        timeout = self.limits.exec_timeout_s if timeout is None else timeout
        shell_command = command if isinstance(command, str) else shlex.join(command)
        started = time.monotonic()
        try:
            return channel.run(channel_shell(shell_command), timeout=timeout, workdir=workdir,
                               output_cap=self.limits.output_cap_bytes, env=env, stdin=stdin, errors=errors)
        except ChannelClosed:
            return None
        except ChannelBroken as exc:
            # The command was sent and may have run: it is not run again. Answered like the exec
            # path answers a command the sandbox's stop or its own timeout cut short.
            duration = time.monotonic() - started
            if self._stopping():
                return ExecResult(exit_code=137, output=f"[repo2env: {self._stopped_error().message}]\n",
                                  timed_out=False, truncated=False, duration_s=duration)
            timed_out = duration >= timeout
            if timed_out:
                self._kill_agent_processes()
            return ExecResult(exit_code=137, output=f"[repo2env: the command channel broke during this command "
                              f"({exc}); the next commands go through a new one or {self.exec_name}]\n",
                              timed_out=timed_out, truncated=False, duration_s=duration)
        finally:
            channel.unlock()

    # --- why a sandbox stopped ----------------------------------------------------------------

    def _running(self) -> bool:
        state = self._state()
        return state is not None and state.running

    def _stopping(self) -> bool:
        """Whether the container stopped (or is stopping) under a command that was killed."""
        # The command's output ends as the container's processes die, a moment before the
        # engine records the container as exited.
        for _ in range(5):
            if not self._running():
                return True
            time.sleep(0.1)
        return False

    def _stopped_error(self) -> SandboxStoppedError:
        """Why this sandbox's container stopped, as an error to raise or to report."""
        state = self._state()
        if state is None:
            return SandboxStoppedError("this sandbox's container was removed (by 'repo2env images gc', doctor "
                                       "or another process)", hint="start a new sandbox")
        if state.exit_code == DISK_CAP_EXIT:
            return SandboxStoppedError(f"this sandbox stopped: it wrote more than its disk cap "
                                       f"({self.limits.disk_bytes / 2**20:.0f} MB)", hint="start a new sandbox")
        if state.exit_code == 0 and not state.oom_killed:
            return SandboxStoppedError(f"this sandbox stopped after {self.limits.idle_timeout_s:.0f} s without a command",
                                       hint="start a new sandbox, or raise SandboxLimits.idle_timeout_s")
        last_words = short(self._last_words())
        return SandboxStoppedError(f"this sandbox's container stopped (exit {state.exit_code}"
                                   f"{', out of memory' if state.oom_killed else ''}"
                                   f"{': ' + last_words if last_words else ''})", hint="start a new sandbox")

    def _remove(self) -> None:
        self._destroy()
        lifecycle.forget(self)


def one_file_archive(name: str, payload: bytes, owner: int, mode: int) -> bytes:
    """A tar of one regular file ``name`` holding ``payload``, owned by uid/gid ``owner``."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo(name=name)
        info.size, info.mode, info.uid, info.gid, info.mtime = len(payload), mode, owner, owner, int(time.time())
        tar.addfile(info, io.BytesIO(payload))
    return archive.getvalue()


def drain(chunks, *, cap: int, deadline: float, idle_s: float | None = None) -> tuple[bytes, bool, bool]:
    """Read the iterable of byte ``chunks`` on a thread until it ends or ``deadline``: (the first
    ``cap`` bytes, whether more came, whether it ended). With ``idle_s``, stop waiting too once
    output has begun and then none came for ``idle_s`` seconds (a command that hangs)."""
    kept: list[bytes] = []
    size = 0
    truncated = False
    finished = threading.Event()
    last_chunk: list[float] = []  # when the latest chunk came (none yet: the idle clock has not started)

    def reader() -> None:
        nonlocal size, truncated
        try:
            for chunk in chunks:
                if chunk:
                    last_chunk[:] = [time.monotonic()]
                if size < cap:
                    piece = chunk[: cap - size]
                    kept.append(piece)
                    size += len(piece)
                    truncated = truncated or len(piece) < len(chunk)
                else:
                    truncated = True
        except Exception:  # noqa: BLE001 - a stream cut by the container's removal ends the output
            pass
        finished.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    if idle_s is None:
        finished.wait(max(0.0, deadline - time.monotonic()))
    while idle_s is not None and not finished.wait(max(0.0, min(deadline, time.monotonic() + DRAIN_POLL_S)
                                                       - time.monotonic())):
        now = time.monotonic()
        if now >= deadline or (last_chunk and now - last_chunk[0] >= idle_s):
            break
    return b"".join(kept), truncated, finished.is_set()


#: How often a drain with an idle limit looks whether output still comes.
DRAIN_POLL_S = 0.25


def short(text: str | BaseException) -> str:
    """The first line of ``text`` (an exception's message), at most 200 characters."""
    text = str(text).strip()
    return text.splitlines()[0][:200] if text else ""


def task_image(task: Task) -> str:
    """The built image of ``task``; an InputError saying what to run when it has none."""
    spec = task.env_spec
    if spec is None or spec.status != "env_ok" or not spec.image:
        state = "not built" if spec is None or spec.status == "pending" else f"failed to build ({spec.error})"
        raise InputError(f"task {task.instance_id} is {state}", hint="run 'repo2env build' for it first")
    return spec.image


#: The registry some engines write a name without one under (podman stores ``repo2env/base`` as
#: ``localhost/repo2env/base``, and its archives carry that name).
LOCAL_REGISTRY = "localhost/"


def plain_name(name: str) -> str:
    """An image name as every backend writes it: without the :data:`LOCAL_REGISTRY` prefix."""
    return name.removeprefix(LOCAL_REGISTRY)
