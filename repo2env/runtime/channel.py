"""A persistent command channel into a sandbox: one long-lived process, many commands, no ``docker exec``
per command.

A ``docker exec`` costs tens of milliseconds of engine work before the command even starts. For an
agent's tool calls that is most of the call. The channel starts one small server inside the sandbox
(``python3``, as the sandbox's user, with stdin and stdout attached through one exec) and sends it
one JSON line per command; the server runs the command in its own process group with the same
timeout, kill and output-cap rules as an exec, and answers with one JSON line.

Trust: the server runs as the agent's own user, so the agent can kill or replace it. That changes
nothing the agent could not do already: the channel serves only the agent's own tool calls, whose
results the agent sees anyway; grading never goes through it (it runs in a fresh sandbox). A dead or
confused channel is detected (EOF, a reply with another id, a malformed reply) and the caller falls
back to ``docker exec``.
"""

from __future__ import annotations

import json
import secrets
import socket
import struct
import threading
import time

from repo2env.models import ExecResult

# Runs inside the sandbox under whatever python3 the image has (3.9 and newer): stdlib only.
SERVER_SOURCE = r'''
import json, os, signal, subprocess, sys, time
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    began = time.monotonic()
    command = request["command"]
    cap = int(request["cap"])
    try:
        process = subprocess.Popen(command, shell=isinstance(command, str), cwd=request.get("cwd") or None,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=dict(os.environ, **request.get("env", {})))
    except OSError as exc:
        reply = {"id": request["id"], "exit_code": 127, "output": str(exc), "timed_out": False, "truncated": False}
    else:
        timed_out = False
        try:
            data, _ = process.communicate(timeout=request["timeout"])
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            data, _ = process.communicate()
        else:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # what the command left running in its group
            except OSError:
                pass
        truncated = len(data) > cap
        if truncated:
            data = data[: cap // 2] + b"\n[... output truncated ...]\n" + data[-(cap // 2):]
        reply = {"id": request["id"], "exit_code": 124 if timed_out else process.returncode,
                 "output": data.decode("utf-8", "replace"), "timed_out": timed_out, "truncated": truncated}
    reply["duration_s"] = time.monotonic() - began
    out.write(json.dumps(reply).encode() + b"\n")
    out.flush()
'''


class ChannelClosed(Exception):
    """The channel is gone (the server exited or was killed); use ``docker exec`` instead."""


class CommandChannel:
    """One server process in a container and the socket to it. Thread-safe: one command at a time."""

    def __init__(self, client, container_id: str, *, user: str, workdir: str, environment: dict[str, str]) -> None:
        self._client = client
        self._lock = threading.Lock()
        exec_id = client.api.exec_create(container_id, ["python3", "-u", "-c", SERVER_SOURCE], stdin=True,
                                         stdout=True, stderr=False, user=user, workdir=workdir,
                                         environment=environment)["Id"]
        self._socket = client.api.exec_start(exec_id, socket=True)
        self._raw: socket.socket = getattr(self._socket, "_sock", self._socket)
        self._buffer = b""
        self._closed = False

    def run(self, command: str | list[str], *, timeout: float, workdir: str | None, output_cap: int,
            env: dict[str, str] | None = None) -> ExecResult:
        """Run ``command`` through the server; raises :class:`ChannelClosed` when it cannot answer."""
        request_id = secrets.token_hex(8)
        request = {"id": request_id, "command": command, "timeout": timeout, "cwd": workdir, "cap": output_cap,
                   "env": env or {}}
        began = time.monotonic()
        with self._lock:
            if self._closed:
                raise ChannelClosed("closed")
            try:
                self._raw.sendall(json.dumps(request).encode() + b"\n")
                reply = json.loads(self._read_line(deadline=began + timeout + 10.0))
            except (OSError, ValueError, ChannelClosed) as exc:
                self._close_locked()
                raise ChannelClosed(str(exc)) from None
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            self.close()
            raise ChannelClosed("the server answered another request")
        return ExecResult(exit_code=int(reply["exit_code"]), output=str(reply["output"]),
                          timed_out=bool(reply["timed_out"]), truncated=bool(reply["truncated"]),
                          duration_s=time.monotonic() - began)

    def _read_line(self, *, deadline: float) -> bytes:
        # The attached stream is multiplexed: frames of an 8-byte header (stream, size) and a payload.
        while b"\n" not in self._buffer:
            header = self._read_exact(8, deadline)
            size = struct.unpack(">I", header[4:])[0]
            payload = self._read_exact(size, deadline)
            if header[0] == 1:  # stdout; stderr frames are not requested
                self._buffer += payload
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _read_exact(self, size: int, deadline: float) -> bytes:
        chunks, missing = [], size
        while missing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelClosed("no answer in time")
            self._raw.settimeout(remaining)
            chunk = self._raw.recv(missing)
            if not chunk:
                raise ChannelClosed("the server exited")
            chunks.append(chunk)
            missing -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        """Close the socket (the server then exits on end of input)."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._socket.close()
            except OSError:
                pass
