"""A podman container behind the sandbox protocol: the engine primitives of
:class:`~repo2env.runtime.backends.container.ContainerSandbox` over ``podman exec``, ``podman cp``
and ``podman container inspect``.

``podman exec -i`` attaches a command's stdin itself, and the command channel's stream is the
stdin/stdout pipes of one ``podman exec -i`` (no framing). Files go in with ``podman cp
--archive=false``, which keeps the owners the tar's members carry.
"""

from __future__ import annotations

import io
import os
import select
import subprocess
import tarfile
import threading
import time

from repo2env.errors import BackendUnavailableError
from repo2env.runtime.backends.container import ContainerSandbox, EngineRefused, Ran, State, drain
from repo2env.runtime.backends.podman_cli import PodmanCLI, PodmanFailed, last_error, not_found
from repo2env.runtime.channel import server_argv
from repo2env.runtime.sandbox import SandboxLimits

#: What podman says when the OCI runtime could not start an exec'd process (no pid left while a
#: killed fork bomb is being reaped): the command never ran.
_NOT_STARTED = ("resource temporarily unavailable", "exec failed", "oci runtime", "cannot allocate memory")


class PodmanSandbox(ContainerSandbox):
    """One running podman container; see :mod:`repo2env.runtime.backends.container` for its guarantees."""

    native_stdin = True
    exec_name = "podman exec"

    def __init__(self, cli: PodmanCLI, container_id: str, limits: SandboxLimits) -> None:
        self.cli = cli
        super().__init__(container_id, limits)

    def _run(self, argv: list[str], *, user: str, workdir: str | None, env: dict[str, str] | None,
             stdin: bytes | None, deadline: float, idle_s: float | None = None) -> Ran:
        args = ["exec", *(["--interactive"] if stdin is not None else []), "--user", user]
        if workdir:
            args += ["--workdir", workdir]
        for name, value in (env or {}).items():
            args += ["--env", f"{name}={value}"]
        process = self.cli.popen([*args, self.id, *argv], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if stdin is not None:
            threading.Thread(target=_feed, args=(process, stdin), daemon=True).start()
        errors: list[bytes] = []
        reader = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
        reader.start()
        output, truncated, ended = drain(iter(lambda: process.stdout.read1(65536), b""),
                                         cap=self.limits.output_cap_bytes, deadline=deadline, idle_s=idle_s)
        if not ended:
            # Something left the command's process group and holds its output: the caller kills the
            # agent's processes; the podman client then ends, and is reaped in the background.
            threading.Thread(target=_reap, args=(process,), daemon=True).start()
            return Ran(exit_code=None, output=output, truncated=truncated)
        try:
            exit_code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            threading.Thread(target=_reap, args=(process,), daemon=True).start()
            return Ran(exit_code=None, output=output, truncated=truncated)
        reader.join(timeout=5)
        said = b"".join(errors).decode("utf-8", errors="replace")
        # The command's stderr joins its stdout in the shell (`exec 2>&1`): an "Error:" line on
        # podman's own stderr is podman's (or the runtime's) failure, whatever its exit status.
        if any(line.startswith("Error:") for line in said.splitlines()):
            if any(words in said.lower() for words in _NOT_STARTED) and "container state improper" not in said:
                return Ran(exit_code=126, output=said.encode(), truncated=False, not_started=True)
            raise EngineRefused(last_error(said))
        return Ran(exit_code=exit_code, output=output, truncated=truncated)

    def _inspect(self) -> dict | None:
        """``podman container inspect``; None when the container no longer exists."""
        try:
            found = self.cli.json(["container", "inspect", "--format", "json", self.id], timeout=60)
        except PodmanFailed as exc:
            if not_found(exc.stderr):
                return None
            raise BackendUnavailableError(f"podman cannot inspect sandbox {self.id[:12]}: {last_error(exc.stderr)}") from None
        return found[0] if found else None

    def _state(self) -> State | None:
        found = self._inspect()
        if found is None:
            return None
        state = found.get("State") or {}
        return State(running=bool(state.get("Running")), exit_code=state.get("ExitCode"),
                     oom_killed=bool(state.get("OOMKilled")))

    def _read_labels(self) -> dict[str, str]:
        found = self._inspect()
        # Gone: no labels, and the command that wanted them is told the sandbox stopped.
        return dict(((found or {}).get("Config") or {}).get("Labels") or {})

    def _last_words(self) -> str:
        try:
            said = self.cli.run(["logs", "--tail", "1", self.id], timeout=30)
        except Exception:  # noqa: BLE001 - only for a message: none is fine
            return ""
        return said.decode("utf-8", errors="replace")

    def _archive_of(self, path: str) -> bytes:
        try:
            return self.cli.run(["cp", f"{self.id}:{path}", "-"], timeout=300)
        except PodmanFailed as exc:
            if not_found(exc.stderr):
                raise FileNotFoundError(path) from None
            raise EngineRefused(last_error(exc.stderr)) from None

    def _unpack(self, folder: str, archive: bytes) -> None:
        try:
            self.cli.run(["cp", "--archive=false", "-", f"{self.id}:{folder}"], input=_without_padding(archive),
                         timeout=300)
        except PodmanFailed as exc:
            if not_found(exc.stderr) or "must be a directory" in exc.stderr:
                raise FileNotFoundError(folder) from None
            raise EngineRefused(last_error(exc.stderr)) from None

    def _attach_channel(self) -> _Pipes:
        process = self.cli.popen(["exec", "--interactive", "--user", self.limits.user, self.id, *server_argv()],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return _Pipes(process)

    def _destroy(self) -> None:
        try:
            self.cli.run(["rm", "--force", "--time", "0", self.id], timeout=120)
        except PodmanFailed:
            pass  # gone already, or being removed by another process


class _Pipes:
    """The stdin and stdout of one ``podman exec -i`` as a :class:`~repo2env.runtime.channel.ChannelTransport`."""

    def __init__(self, process: subprocess.Popen) -> None:
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._in = process.stdin
        self._out = process.stdout.fileno()

    def send(self, data: bytes) -> None:
        self._in.write(data)
        self._in.flush()

    def pending(self) -> bool:
        readable, _, _ = select.select([self._out], [], [], 0)
        return bool(readable)

    def receive(self, size: int, timeout: float) -> bytes:
        readable, _, _ = select.select([self._out], [], [], max(timeout, 0.0))
        if not readable:
            raise TimeoutError("no answer in time")
        return os.read(self._out, size)

    def close(self) -> None:
        try:
            self._in.close()
        except OSError:
            pass
        threading.Thread(target=_reap, args=(self._process,), daemon=True).start()


def _without_padding(archive: bytes) -> bytes:
    """The tar up to its end-of-archive blocks. podman 4.3's ``cp -`` stops reading at that end, and
    fails (``io: read/write on closed pipe``) when the zero padding a tar writer adds after it spans
    another of its 32 KiB reads."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.getmembers()
            end = tar.offset + 2 * tarfile.BLOCKSIZE
    except tarfile.TarError:
        return archive  # not a tar: podman says so
    return archive[:end] if not archive[end:].strip(b"\0") else archive


def _feed(process: subprocess.Popen, data: bytes) -> None:
    try:
        process.stdin.write(data)
    except OSError:
        pass  # the command stopped reading: what it did not read is lost, as with any pipe
    finally:
        try:
            process.stdin.close()
        except OSError:
            pass


def _reap(process: subprocess.Popen) -> None:
    """Wait for a podman client the caller no longer reads (killed after a minute)."""
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
