"""A Docker container behind the sandbox protocol: the engine primitives of
:class:`~repo2env.runtime.backends.container.ContainerSandbox` over the Docker SDK.

Docker's exec API has no stdin for a command that is not attached, so stdin is staged in a file;
the command channel's stream is the attached socket of one exec, multiplexed (8-byte frame headers).
"""

from __future__ import annotations

import io
import select
import socket
import struct

import docker
import docker.errors
import requests.exceptions

from repo2env.errors import BackendUnavailableError
from repo2env.runtime.backends.container import ContainerSandbox, EngineRefused, Ran, State, drain
from repo2env.runtime.channel import server_argv
from repo2env.runtime.sandbox import SandboxLimits

#: How the engine answers an exec that runc could not start (no pid left while a killed fork bomb
#: is being reaped).
_RUNC_START_FAILED = "OCI runtime exec failed"


class DockerSandbox(ContainerSandbox):
    """One running Docker container; see :mod:`repo2env.runtime.backends.container` for its guarantees."""

    exec_name = "docker exec"

    def __init__(self, client: docker.DockerClient, container, limits: SandboxLimits) -> None:
        self.client = client
        self.container = container
        super().__init__(container.id, limits, dict(container.labels or {}))

    def _run(self, argv: list[str], *, user: str, workdir: str | None, env: dict[str, str] | None,
             stdin: bytes | None, deadline: float, idle_s: float | None = None) -> Ran:
        assert stdin is None, "Docker's exec takes no stdin: ContainerSandbox stages it"
        try:
            exec_id = self.client.api.exec_create(self.container.id, argv, user=user, workdir=workdir,
                                                  environment=env, stdout=True, stderr=True)["Id"]
            stream = self.client.api.exec_start(exec_id, stream=True, demux=False)
        except docker.errors.APIError as exc:
            raise EngineRefused(str(exc)) from None
        output, truncated, _ = drain(stream, cap=self.limits.output_cap_bytes, deadline=deadline, idle_s=idle_s)
        try:
            exit_code = self.client.api.exec_inspect(exec_id).get("ExitCode")
        except docker.errors.APIError as exc:
            raise EngineRefused(str(exc)) from None
        not_started = exit_code == 126 and output.startswith(_RUNC_START_FAILED.encode())
        return Ran(exit_code=exit_code, output=output, truncated=truncated, not_started=not_started)

    def _state(self) -> State | None:
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return None
        state = self.container.attrs.get("State", {})
        return State(running=bool(state.get("Running")), exit_code=state.get("ExitCode"),
                     oom_killed=bool(state.get("OOMKilled")))

    def _last_words(self) -> str:
        try:
            return self.container.logs(tail=1).decode("utf-8", errors="replace")
        except docker.errors.DockerException:
            return ""

    def _archive_of(self, path: str) -> bytes:
        try:
            bits, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(path) from None
        return b"".join(bits)

    def _unpack(self, folder: str, archive: bytes) -> None:
        try:
            placed = self.container.put_archive(folder, archive)
        except docker.errors.NotFound:
            raise FileNotFoundError(folder) from None
        if not placed:
            raise FileNotFoundError(folder)

    def _attach_channel(self) -> _AttachedExec:
        try:
            exec_id = self.client.api.exec_create(self.container.id, server_argv(), stdin=True, stdout=True,
                                                  stderr=False, user=self.limits.user)["Id"]
            return _AttachedExec(self.client.api.exec_start(exec_id, socket=True))
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise BackendUnavailableError(f"cannot attach a command channel: {exc}") from None

    def _destroy(self) -> None:
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409 or "in progress" not in str(exc):
                raise  # 409 "removal already in progress": another call's removal ends it


class _AttachedExec:
    """The attached socket of one Docker exec as a :class:`~repo2env.runtime.channel.ChannelTransport`:
    frames of an 8-byte header (stream, size) then a payload; only stdout frames are kept."""

    def __init__(self, attached) -> None:
        self._socket = attached
        self._raw: socket.socket = getattr(attached, "_sock", attached)
        self._frame_left = 0
        self._frame_kind = 0

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def pending(self) -> bool:
        readable, _, _ = select.select([self._raw], [], [], 0)
        return bool(readable)

    def receive(self, size: int, timeout: float) -> bytes:
        while True:
            if not self._frame_left:
                header = self._read_exact(8, timeout)
                if not header:
                    return b""
                self._frame_kind, self._frame_left = header[0], struct.unpack(">I", header[4:])[0]
                continue
            payload = self._read_some(min(self._frame_left, size), timeout)
            if not payload:
                return b""
            self._frame_left -= len(payload)
            if self._frame_kind == 1:  # stdout; stderr is not attached
                return payload

    def _read_some(self, size: int, timeout: float) -> bytes:
        self._raw.settimeout(max(timeout, 0.001))
        return self._raw.recv(size)

    def _read_exact(self, size: int, timeout: float) -> bytes:
        chunks = io.BytesIO()
        while chunks.tell() < size:
            chunk = self._read_some(size - chunks.tell(), timeout)
            if not chunk:
                return b""
            chunks.write(chunk)
        return chunks.getvalue()

    def close(self) -> None:
        self._socket.close()
