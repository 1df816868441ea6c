"""The Docker implementation of :class:`~repo2env.runtime.sandbox.Runtime` and ``Sandbox``.

Every sandbox: no network, the unprivileged ``agent`` user, all capabilities dropped,
no-new-privileges, memory/CPU/pids limits, an init process that reaps zombies, commands killed
with their whole process group at their timeout, output capped. Containers are removed on
``close()``, on leaving a ``with`` block (exceptions and Ctrl-C included) and at interpreter exit.

What survives a ``kill -9`` of the owner is caught twice: every container is labelled with its
owner (:mod:`repo2env.runtime.ownership`, reaped on the next start, by ``doctor`` and by
``images gc``), and its keepalive (:data:`KEEPALIVE_SCRIPT`) ends the container after
``limits.idle_timeout_s`` without a command running. The same keepalive stops the container when
what it wrote grows past ``limits.disk_bytes`` (overlay2 on ext4 cannot cap a writable layer,
and ``docker cp`` cannot reach into a tmpfs), and ``RLIMIT_FSIZE`` caps every single file.
"""

from __future__ import annotations

import atexit
import io
import os
import secrets
import shlex
import tarfile
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import PurePosixPath

import docker
import docker.errors
import requests.exceptions

from repo2env.errors import DockerUnavailableError, InputError, PatchError, SandboxStoppedError, StoppingError
from repo2env.models import ExecResult, Task
from repo2env.runtime.bootstrap import AGENT_UID
from repo2env.runtime.channel import SERVER_MARKER, ChannelBroken, ChannelClosed, CommandChannel
from repo2env.runtime.ownership import SANDBOX_LABEL, owner_labels, reap_orphans_now_and_then
from repo2env.runtime.sandbox import SandboxLimits, agent_diff_command

#: Every exec appends a byte to this file; the keepalive reads activity from its size and mtime.
HEARTBEAT_PATH = "/tmp/.repo2env-alive"
#: Seconds between two looks of the keepalive at activity and disk use.
KEEPALIVE_PERIOD_S = 5
#: The keepalive's exit status (the container's) when it stopped the sandbox for its disk use.
DISK_CAP_EXIT = 3
#: Where the agent (and the tests) can write: what the disk cap measures.
WRITABLE_PLACES = ("/testbed", "/home", "/tmp", "/var/tmp")
# The container's main process, run by the image's system Python as root without capabilities (the
# agent cannot kill it). It never forks: a fork bomb that takes every pid must not end it (a shell's
# `sleep` would fail, and dash exits when it cannot fork). Every few seconds it looks for processes
# other than init, itself and a command channel's server waiting for work (a command, or anything
# one left running) and whether the heartbeat file each command appends to changed; while something
# runs it also adds up the blocks under WRITABLE_PLACES (what it may read: root without capabilities
# cannot enter another user's 0700 folder). It writes nothing: a file the agent made first cannot
# stop it.
KEEPALIVE_SCRIPT = f"""
import os, sys, time
idle_max, cap, beat, me = int(sys.argv[1]), int(sys.argv[2]), {HEARTBEAT_PATH!r}, str(os.getpid())
channel = {SERVER_MARKER.encode()!r}
def running():
    for name in os.listdir("/proc"):
        if not name.isdigit() or name in ("1", me):
            continue
        try:
            with open("/proc/" + name + "/cmdline", "rb") as handle:
                args = handle.read().split(b"\\0")
        except OSError:
            continue
        if channel not in args:  # the channel's server waiting for a command is not activity
            return True
    return False
def used():
    total, seen, stack = 0, set(), list({WRITABLE_PLACES!r})
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total
def last_beat():
    try:
        info = os.stat(beat)
        return info.st_size, info.st_mtime_ns
    except OSError:
        return None
os.umask(0)
try:  # for every user to append to (a first exec may have been quicker: then it is that user's)
    os.close(os.open(beat, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
except OSError:
    pass
limit, idle, seen_beat = used() + cap, 0, last_beat()
while idle < idle_max:
    time.sleep({KEEPALIVE_PERIOD_S})
    busy = running()
    beat_now = last_beat()
    busy, seen_beat = busy or beat_now != seen_beat, beat_now
    idle = 0 if busy else idle + {KEEPALIVE_PERIOD_S}
    if busy and used() > limit:
        sys.exit({DISK_CAP_EXIT})
"""

#: Tries to start one command when the container runtime cannot (see DockerSandbox._exec).
_START_ATTEMPTS = 4
_RUNC_START_FAILED = "OCI runtime exec failed"
#: Channels a sandbox opens at most: past that (its agent keeps killing them) commands use docker exec.
_CHANNEL_OPENS = 3
#: Extra seconds past a command's timeout before the caller stops waiting on the stream.
_STREAM_GRACE_S = 5.0

_open_sandboxes: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
_removal_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="repo2env-remove")
_pending_removals: list[Future] = []
# Stopping the process (a signal): once set, no sandbox starts; starts under way are counted so
# that stop_all_sandboxes() can wait for them and remove what they created.
_stopping = threading.Event()
_starts = threading.Condition()
_starts_under_way = 0


def stopping() -> bool:
    """True once :func:`stop_all_sandboxes` was called: nothing new may start."""
    return _stopping.is_set()


def stop_all_sandboxes(*, wait_s: float = 30.0) -> int:
    """Stop this process's Docker work for good: refuse new sandboxes (and image builds, see
    :mod:`repo2env.runtime.images`), wait up to ``wait_s`` for starts under way, then remove every
    open sandbox, whichever thread owns it. Returns how many were removed.

    Threads still running a command in a removed sandbox see it fail and end; an image build under
    way is not touched here (the engine abandons it when the process's connection closes)."""
    global _starts_under_way
    _stopping.set()
    deadline = time.monotonic() + wait_s
    with _starts:
        while _starts_under_way and time.monotonic() < deadline:
            _starts.wait(max(0.0, deadline - time.monotonic()))
    for future in list(_pending_removals):
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - a removal that failed or hangs is retried below if still open
            pass
    removed = 0
    for sandbox in list(_open_sandboxes):
        try:
            sandbox.close()
            removed += 1
        except Exception:  # noqa: BLE001 - best effort: the engine may already be gone
            pass
    return removed


def connect_docker(timeout: float = 10.0) -> docker.DockerClient:
    """A client for the local engine (``DOCKER_HOST`` honoured), or a DockerUnavailableError saying
    how to get one."""
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except ValueError as exc:
        # docker-py parses DOCKER_HOST with urllib: a malformed one surfaces as a bare ValueError.
        raise DockerUnavailableError(
            f"DOCKER_HOST={os.environ.get('DOCKER_HOST', '')!r} is not a usable engine address ({_short(exc)})",
            hint="unset it for the local engine, or give unix:///path/docker.sock, tcp://host:port or ssh://user@host",
        ) from None
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise DockerUnavailableError(
            f"no Docker engine answers ({_short(exc)})",
            hint="start one: 'make engine' installs docker.io and starts dockerd as root on Debian; "
            "elsewhere install Docker Engine, start it, and make sure 'docker info' works for your user",
        ) from None
    return client


class DockerRuntime:
    """Starts :class:`DockerSandbox` es on one engine."""

    def __init__(self, client: docker.DockerClient | None = None, limits: SandboxLimits | None = None) -> None:
        self.client = client or connect_docker()
        self.limits = limits or SandboxLimits()

    def start(self, task: Task, *, limits: SandboxLimits | None = None) -> DockerSandbox:
        """A sandbox of ``task``'s built environment (``repo2env build`` first)."""
        spec = task.env_spec
        if spec is None or spec.status != "env_ok" or not spec.image:
            state = "not built" if spec is None or spec.status == "pending" else f"failed to build ({spec.error})"
            raise InputError(f"task {task.instance_id} is {state}", hint="run 'repo2env build' for it first")
        return self.start_image(spec.image, limits=limits, labels={"repo2env.instance_id": task.instance_id})

    def start_image(self, image: str, *, limits: SandboxLimits | None = None,
                    labels: dict[str, str] | None = None, workdir: str = "/testbed") -> DockerSandbox:
        """Start a locked-down container from ``image``, ready for its first command."""
        global _starts_under_way
        limits = limits or self.limits
        with _starts:
            if _stopping.is_set():
                raise StoppingError("stopping: no new sandbox starts")
            _starts_under_way += 1
        try:
            return self._start(image, limits, labels, workdir)
        finally:
            with _starts:
                _starts_under_way -= 1
                _starts.notify_all()

    def _start(self, image: str, limits: SandboxLimits, labels: dict[str, str] | None, workdir: str) -> DockerSandbox:
        # Containers left by a killed repo2env go before new ones come (one filtered list call).
        reap_orphans_now_and_then(self.client)
        # A known name lets an interrupted start (Ctrl-C between the engine creating the container
        # and this call returning) find and remove what it created.
        name = f"repo2env-{secrets.token_hex(6)}"
        try:
            container = self.client.containers.run(
                image,
                name=name,
                command=["/usr/bin/python3", "-I", "-S", "-c", KEEPALIVE_SCRIPT,
                         str(int(limits.idle_timeout_s)), str(int(limits.disk_bytes))],
                detach=True,
                init=True,
                # The keepalive runs as root (without capabilities) so the agent cannot kill it;
                # every exec runs as limits.user.
                user="root",
                working_dir=workdir,
                network_mode="bridge" if limits.network else "none",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit=limits.memory,
                memswap_limit=limits.memory,
                nano_cpus=int(limits.cpus * 1e9),
                pids_limit=limits.pids,
                ulimits=[docker.types.Ulimit(name="fsize", soft=limits.disk_bytes, hard=limits.disk_bytes)],
                labels={SANDBOX_LABEL: "1", **owner_labels(), **(labels or {})},
                environment={"HOME": "/home/agent", "PYTHONDONTWRITEBYTECODE": "1"},
            )
        except docker.errors.ImageNotFound:
            raise InputError(
                f"image {image} does not exist", hint="run 'repo2env runtime bootstrap' (or 'repo2env build')"
            ) from None
        except docker.errors.APIError as exc:
            self._remove_by_name(name)
            raise DockerUnavailableError(f"Docker could not start a sandbox from {image}: {_short(exc)}") from None
        except BaseException:
            self._remove_by_name(name)
            raise
        sandbox = DockerSandbox(self.client, container, limits)
        if limits.persistent_channel:
            # Opened and answering here (the server's Python takes a moment to start), so that a
            # pool's spare serves its first command as fast as its next ones.
            try:
                sandbox.exec("true", timeout=60)
            except BaseException:
                sandbox.close()
                raise
        return sandbox

    def _remove_by_name(self, name: str) -> None:
        try:
            self.client.api.remove_container(name, force=True)
        except docker.errors.DockerException:
            pass  # never created, or already gone


class DockerSandbox:
    """One running container; see the module docstring for its guarantees."""

    def __init__(self, client: docker.DockerClient, container, limits: SandboxLimits) -> None:
        self.client = client
        self.container = container
        self.limits = limits
        self._closed = False
        self._channel: CommandChannel | None = None
        self._channel_opens = 0
        self._channel_guard = threading.Lock()
        _open_sandboxes.add(self)

    @property
    def id(self) -> str:
        """The container id."""
        return self.container.id

    def exec(self, command: str | list[str], *, timeout: float | None = None, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str | None = None, stdin: bytes | None = None) -> ExecResult:
        """Run ``command`` under ``timeout`` (default: the limits'); kill its process group at the
        deadline; capture at most ``output_cap_bytes`` of combined stdout/stderr."""
        return self._exec(command, timeout=timeout, workdir=workdir, env=env, user=user, stdin=stdin, errors="replace")

    def _exec(self, command: str | list[str], *, timeout: float | None, workdir: str | None = None,
              env: dict[str, str] | None = None, user: str | None = None, stdin: bytes | None = None,
              errors: str, through_channel: bool = True) -> ExecResult:
        """:meth:`exec`, its output decoded from UTF-8 with ``errors`` (``"surrogateescape"`` keeps
        every byte, for a diff); ``through_channel=False`` keeps the command off the channel."""
        if self._closed:
            raise InputError("this sandbox is closed")
        if through_channel and (user or self.limits.user) == self.limits.user:
            answered = self._exec_through_channel(command, timeout=timeout, workdir=workdir, env=env, stdin=stdin,
                                                  errors=errors)
            if answered is not None:
                return answered
        if stdin is not None:
            # An engine exec without an attached stdin cannot be given one: the bytes go into a file
            # of the command's user first, which the command's shell opens as its input and removes.
            staging = f"/tmp/.repo2env-stdin-{secrets.token_hex(8)}"
            owner = AGENT_UID if (user or self.limits.user) == "agent" else 0
            self.put_archive("/tmp", _one_file_archive(PurePosixPath(staging).name, stdin, owner, 0o600))
            shell_command = command if isinstance(command, str) else shlex.join(command)
            command = f"exec 0<{staging}; rm -f -- {staging}\n{shell_command}"
        for attempt in range(_START_ATTEMPTS):
            result = self._exec_once(command, timeout=timeout, workdir=workdir, env=env, user=user, errors=errors)
            # runc could not start the command (no pid left while a killed fork bomb is being
            # reaped): it never ran, so running it again a moment later is safe.
            if not (result.exit_code == 126 and result.output.startswith(_RUNC_START_FAILED)):
                break
            time.sleep(0.5 * (attempt + 1))
        return result

    def _open_channel(self) -> CommandChannel | None:
        """The sandbox's command channel, opened if need be; None when this sandbox has none, or it
        broke too often (every command then goes through docker exec)."""
        with self._channel_guard:
            if self._channel is not None and not self._channel.closed:
                return self._channel
            if self._closed or not self.limits.persistent_channel or self._channel_opens >= _CHANNEL_OPENS:
                return None
            self._channel_opens += 1
            try:
                self._channel = CommandChannel(self.client, self.container.id, user=self.limits.user)
            except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
                self._channel = None  # docker exec serves instead
            return self._channel

    def _exec_through_channel(self, command: str | list[str], *, timeout: float | None, workdir: str | None,
                              env: dict[str, str] | None, stdin: bytes | None, errors: str) -> ExecResult | None:
        """``command`` run through the channel, or None when the channel cannot take it (none, busy
        with another thread's command, dead before it was sent): then docker exec runs it."""
        channel = self._open_channel()
        if channel is None or not channel.try_lock():
            return None
        timeout = self.limits.exec_timeout_s if timeout is None else timeout
        shell_command = command if isinstance(command, str) else shlex.join(command)
        # The same shell, heartbeat and process group as the exec path below.
        argv = ["/bin/sh", "-c", f"echo 2>/dev/null >>{HEARTBEAT_PATH}; {shell_command}"]
        started = time.monotonic()
        try:
            return channel.run(argv, timeout=timeout, workdir=workdir, output_cap=self.limits.output_cap_bytes,
                               env=env, stdin=stdin, errors=errors)
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
                              f"({exc}); the next commands go through a new one or docker exec]\n",
                              timed_out=timed_out, truncated=False, duration_s=duration)
        finally:
            channel.unlock()

    def _exec_once(self, command: str | list[str], *, timeout: float | None, workdir: str | None,
                   env: dict[str, str] | None, user: str | None, errors: str) -> ExecResult:
        if self._closed:
            raise InputError("this sandbox is closed")
        timeout = self.limits.exec_timeout_s if timeout is None else timeout
        shell_command = command if isinstance(command, str) else shlex.join(command)
        # `timeout` runs the command in its own process group and signals the whole group, so
        # children (a fork bomb's too) die with it; -k escalates to SIGKILL for ones that trap TERM.
        # The heartbeat tells the keepalive a command ran (a short one between two of its looks).
        # stderr joins stdout in one pipe, so the output keeps the order it was written in (the
        # engine reads two pipes concurrently and may interleave them out of order).
        argv = ["timeout", "-k", "2", f"{timeout:.3f}", "/bin/sh", "-c",
                f"exec 2>&1; echo 2>/dev/null >>{HEARTBEAT_PATH}; {shell_command}"]
        started = time.monotonic()
        try:
            exec_id = self.client.api.exec_create(
                self.container.id, argv, user=user or self.limits.user, workdir=workdir, environment=env,
                stdout=True, stderr=True,
            )["Id"]
            stream = self.client.api.exec_start(exec_id, stream=True, demux=False)
        except docker.errors.APIError:
            if not self._running():  # stopped by its keepalive, or removed
                raise self._stopped_error() from None
            raise
        captured, truncated = self._drain(stream, deadline=started + timeout + _STREAM_GRACE_S)
        exit_code = self.client.api.exec_inspect(exec_id).get("ExitCode")
        duration = time.monotonic() - started
        timed_out = exit_code in (124, 137) and duration >= timeout * 0.99
        output = captured.decode("utf-8", errors=errors)
        # A stopping container SIGKILLs what runs in it: only then is its state worth a look.
        if exit_code in (None, 137) and not timed_out and self._stopping():
            # The keepalive stopped the sandbox under this command: say why where the caller looks.
            output += f"\n[repo2env: {self._stopped_error().message}]\n"
            exit_code = 137 if exit_code is None else exit_code
        elif exit_code is None:
            # Still running past the grace period: something left timeout's process group (setsid).
            # The keepalive runs as root, so killing every process of the agent user spares it.
            self._kill_agent_processes()
            exit_code, timed_out = 137, True
        return ExecResult(
            exit_code=exit_code,
            output=output,
            timed_out=timed_out,
            truncated=truncated,
            duration_s=duration,
        )

    def _stopping(self) -> bool:
        """Whether the container stopped (or is stopping) under a command that was killed."""
        # The command's stream ends as the container's processes die, a moment before the
        # engine records the container as exited.
        for _ in range(5):
            if not self._running():
                return True
            time.sleep(0.1)
        return False

    @property
    def alive(self) -> bool:
        """Whether the container still runs (not stopped by its idle lifetime or disk cap, not removed)."""
        return not self._closed and self._running()

    def _running(self) -> bool:
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return False
        return bool(self.container.attrs.get("State", {}).get("Running"))

    def _stopped_error(self) -> SandboxStoppedError:
        """Why this sandbox's container stopped, as an error to raise or to report."""
        try:
            self.container.reload()
            state = self.container.attrs.get("State", {})
        except docker.errors.NotFound:
            return SandboxStoppedError("this sandbox's container was removed (by 'repo2env images gc', doctor "
                                       "or another process)", hint="start a new sandbox")
        if state.get("ExitCode") == DISK_CAP_EXIT:
            return SandboxStoppedError(f"this sandbox stopped: it wrote more than its disk cap "
                                       f"({self.limits.disk_bytes / 2**20:.0f} MB)", hint="start a new sandbox")
        if state.get("ExitCode") == 0 and not state.get("OOMKilled"):
            return SandboxStoppedError(f"this sandbox stopped after {self.limits.idle_timeout_s:.0f} s without a command",
                                       hint="start a new sandbox, or raise SandboxLimits.idle_timeout_s")
        try:  # the keepalive's last words, when it had any
            last_words = _short(self.container.logs(tail=1).decode("utf-8", errors="replace"))
        except docker.errors.DockerException:
            last_words = ""
        return SandboxStoppedError(f"this sandbox's container stopped (exit {state.get('ExitCode')}"
                                   f"{', out of memory' if state.get('OOMKilled') else ''}"
                                   f"{': ' + last_words if last_words else ''})", hint="start a new sandbox")

    def diff(self) -> str:
        """The agent's change against the snapshot, as a git patch (new and deleted files included).

        Computed with git inside the sandbox, against the snapshot commit recorded on the image,
        so commits or a moved HEAD do not hide changes. Settings that make git run programs are
        switched off: an agent can at worst spoil its own diff. Never through the command channel:
        what is graded comes from the engine, not from a process the agent can replace."""
        snapshot = self.container.labels.get("repo2env.snapshot") or "HEAD"
        # Bytes as git wrote them (a Latin-1 file stays Latin-1), carried as surrogate escapes.
        result = self._exec(agent_diff_command(snapshot), workdir="/testbed", timeout=120, errors="surrogateescape",
                            through_channel=False)
        if result.exit_code != 0 or result.truncated:
            reason = "the diff is larger than the output cap" if result.truncated else result.output.strip()[-300:]
            raise PatchError(f"cannot compute the sandbox's diff: {reason}")
        return result.output

    def _kill_agent_processes(self) -> None:
        exec_id = self.client.api.exec_create(self.container.id, ["kill", "-9", "-1"], user=self.limits.user)["Id"]
        self.client.api.exec_start(exec_id)

    def _drain(self, stream, *, deadline: float) -> tuple[bytes, bool]:
        cap = self.limits.output_cap_bytes
        chunks: list[bytes] = []
        size = 0
        truncated = False
        finished = threading.Event()

        def reader() -> None:
            nonlocal size, truncated
            for chunk in stream:
                if size < cap:
                    kept = chunk[: cap - size]
                    chunks.append(kept)
                    size += len(kept)
                    truncated = truncated or len(kept) < len(chunk)
                else:
                    truncated = True
            finished.set()

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        finished.wait(max(0.0, deadline - time.monotonic()))
        return b"".join(chunks), truncated

    def read_file(self, path: str) -> str:
        """The text of ``path`` (UTF-8, undecodable bytes replaced)."""
        if self._closed:
            raise InputError("this sandbox is closed")
        try:
            bits, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(path) from None
        archive = io.BytesIO(b"".join(bits))
        with tarfile.open(fileobj=archive) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise IsADirectoryError(path)
            extracted = tar.extractfile(member)
            assert extracted is not None
            return extracted.read().decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> None:
        """Create or replace ``path``, owned by the agent user (parent directories must exist)."""
        target = PurePosixPath(path)
        self.put_archive(str(target.parent), _one_file_archive(target.name, content.encode("utf-8"), AGENT_UID, 0o644))

    def put_archive(self, folder: str, archive: bytes) -> None:
        """Unpack the tar ``archive`` into ``folder`` (owners and modes as its members say)."""
        if self._closed:
            raise InputError("this sandbox is closed")
        try:
            placed = self.container.put_archive(folder, archive)
        except docker.errors.NotFound:
            if not self._running():
                raise self._stopped_error() from None
            raise FileNotFoundError(folder) from None
        if not placed:
            raise FileNotFoundError(folder)

    def close(self, *, wait: bool = True) -> None:
        """Remove the container (killing everything in it). Safe to call twice.

        ``wait=False`` hands the removal to a background thread (a grader need not wait for it);
        interpreter exit still waits for every pending removal."""
        if self._closed:
            return
        self._closed = True
        with self._channel_guard:
            if self._channel is not None:
                self._channel.close()
        if wait:
            self._remove()
        else:
            _pending_removals[:] = [future for future in _pending_removals if not future.done()]
            _pending_removals.append(_removal_pool.submit(self._remove))

    def _remove(self) -> None:
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        _open_sandboxes.discard(self)

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A sandbox dropped without close() (e.g. by a pooled TRL environment) still goes away.
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to report to
            pass


@atexit.register
def _close_leftover_sandboxes() -> None:
    for future in _pending_removals:
        future.result()
    for sandbox in list(_open_sandboxes):
        try:
            sandbox.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _one_file_archive(name: str, payload: bytes, owner: int, mode: int) -> bytes:
    """A tar of one regular file ``name`` holding ``payload``, owned by uid/gid ``owner``."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo(name=name)
        info.size, info.mode, info.uid, info.gid, info.mtime = len(payload), mode, owner, owner, int(time.time())
        tar.addfile(info, io.BytesIO(payload))
    return archive.getvalue()


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
