"""A persistent command channel into a sandbox: one long-lived process, many commands, no engine exec
per command.

An engine exec (``docker exec``, ``podman exec``) costs tens to hundreds of milliseconds of engine
work before the command even starts; for an agent's tool calls that is most of the call. The
channel starts one small server inside the sandbox (the image's system ``python3 -I -S``, as the
sandbox's user, its stdin and stdout attached through one exec: the backend's
:class:`ChannelTransport`) and sends it one JSON line per command; the server runs the command
exactly as the exec path does (``/bin/sh -c``, its own process group, the heartbeat the keepalive
watches, TERM at the timeout and KILL two seconds later, the first ``cap`` bytes of combined output
kept) and answers with one JSON line.

Trust: the server runs as the agent's own user, so the agent can kill it, read its requests or write
answers into its pipe. That gives nothing the agent does not have already: commands still run as
that user inside the same container and its limits, the channel carries only the agent's own tool
calls (whose results it sees anyway), and neither the agent's diff nor anything of grading goes
through it (grading runs in a fresh sandbox through the engine). A dead or confused channel is
detected (end of file, data nobody asked for, a reply with another id, a malformed or oversized
reply); the sandbox then answers that one command as broken and goes back to the engine's exec.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from typing import Protocol

from repo2env.models import ExecResult

#: The last argument of the server's command line: how the sandbox's keepalive tells the idle server
#: (which is not activity) from a command (which is).
SERVER_MARKER = "repo2env-command-channel"
#: Seconds between TERM and KILL at a command's timeout (the exec path's ``timeout -k 2``).
KILL_AFTER_S = 2.0
#: Extra seconds the caller waits for an answer past a command's timeout and kill.
_ANSWER_GRACE_S = 8.0

# Runs inside the sandbox under the image's system python3 (3.9 and newer), isolated from the
# repository (-I -S): stdlib only. argv: marker, then how LC_CTYPE was before Python started (Python
# coerces a C locale into LC_CTYPE=C.UTF-8, which commands run through docker exec do not see).
SERVER_SOURCE = r'''
import base64, json, os, select, signal, subprocess, sys, threading, time
if sys.argv[3] == "set":
    os.environ["LC_CTYPE"] = sys.argv[2]
else:
    os.environ.pop("LC_CTYPE", None)
out = sys.stdout.buffer


def feed(pipe, data):
    try:
        pipe.write(data)
    except OSError:
        pass  # the command stopped reading: what it did not read is lost, as with any pipe
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def run(request):
    cap = int(request["cap"])
    data = request.get("stdin")
    began = time.monotonic()
    deadline = began + float(request["timeout"])
    try:
        process = subprocess.Popen(request["argv"], cwd=request.get("cwd") or None,
                                   env=dict(os.environ, **request.get("env", {})),
                                   stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        # Never started (no pid left, a bad folder): the caller runs it through docker exec instead.
        return {"spawn_error": str(exc)}
    if data is not None:
        threading.Thread(target=feed, args=(process.stdin, base64.b64decode(data)), daemon=True).start()
    fd = process.stdout.fileno()
    kept, size, truncated = [], 0, False
    term_at, killed = None, False

    def next_step(now):
        """Send TERM at the deadline and KILL after KILL_AFTER_S, like `timeout -k`; the time of the
        next step, or None once everything was sent."""
        nonlocal term_at, killed
        if term_at is None:
            if now < deadline:
                return deadline
            term_at = now
            kill_group(process.pid, signal.SIGTERM)
        if not killed:
            if now < term_at + KILL_AFTER_S:
                return term_at + KILL_AFTER_S
            killed = True
            kill_group(process.pid, signal.SIGKILL)
        return None

    while True:  # the output, until every holder of it closed it
        now = time.monotonic()
        step = next_step(now)
        if step is None and now >= term_at + KILL_AFTER_S + 1.0:
            # Something that left the group (setsid) still holds the output: end every process of
            # this user but this server (the exec path does the same past its grace period).
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            break
        until = step if step is not None else term_at + KILL_AFTER_S + 1.0
        ready, _, _ = select.select([fd], [], [], min(max(0.0, until - now), 0.5))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        if size < cap:
            kept.append(chunk[: cap - size])
            truncated = truncated or len(chunk) > cap - size
            size += len(kept[-1])
        else:
            truncated = True
    process.stdout.close()
    # The command itself, which may run on after closing its output. Popen.wait(timeout) polls with
    # sleeps from 1 ms up, and a command is often not reaped yet the moment its output ends: a
    # pidfd (Linux 5.3+) wakes this server the moment it exits instead.
    try:
        exited = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        exited = None
    while True:
        now = time.monotonic()
        step = next_step(now)
        wait_s = min(max(0.0, (step or now + 1.0) - now), 0.5)
        if exited is not None:
            select.select([exited], [], [], wait_s)
            code = process.poll()
            if code is not None:
                os.close(exited)
                break
            continue
        try:
            code = process.wait(timeout=max(0.01, wait_s))
            break
        except subprocess.TimeoutExpired:
            continue
    timed_out = term_at is not None
    if timed_out:
        code = 137 if killed and code == -signal.SIGKILL else 124  # what `timeout -k` exits with
    elif code < 0:
        code = 128 - code  # killed by a signal: the status a shell (and docker exec) reports
    return {"exit_code": code, "output": base64.b64encode(b"".join(kept)).decode(), "timed_out": timed_out,
            "truncated": truncated, "duration_s": time.monotonic() - began}


KILL_AFTER_S = float(sys.argv[4])
for line in sys.stdin.buffer:
    try:
        request = json.loads(line)
        reply = run(request)
        reply["id"] = request["id"]
    except Exception as exc:  # a request this server cannot read: say so, keep serving
        reply = {"id": None, "spawn_error": repr(exc)}
    out.write(json.dumps(reply).encode() + b"\n")
    out.flush()
'''


class ChannelClosed(Exception):
    """The channel cannot take this command (dead, or left with data nobody asked for); the command
    was not sent, so running it through ``docker exec`` instead is safe."""


class ChannelBroken(Exception):
    """The channel died or answered nonsense after this command was sent: it may have run, so it
    must not simply be run again."""


class ChannelTransport(Protocol):
    """The byte stream to a channel's server, as a backend attaches it (an engine exec with its
    stdin and stdout attached): the backend's part of a channel, so the channel knows no engine."""

    def send(self, data: bytes) -> None:
        """Write ``data`` to the server's stdin (an ``OSError`` when it cannot)."""
        ...

    def pending(self) -> bool:
        """Whether reading now would not block: the server wrote something, or its end closed."""
        ...

    def receive(self, size: int, timeout: float) -> bytes:
        """At most ``size`` bytes of the server's stdout within ``timeout`` seconds (``b""`` at its
        end; ``TimeoutError`` when nothing came)."""
        ...

    def close(self) -> None:
        """Close the stream (the server then exits on end of input). Idempotent."""
        ...


def server_argv() -> list[str]:
    """The command a backend starts (as the sandbox's user, stdin and stdout attached, stderr not)
    for the channel's server."""
    launcher = 'exec /usr/bin/python3 -I -S -u -c "$1" "$2" "${LC_CTYPE-}" "${LC_CTYPE+set}" "$3"'
    return ["/bin/sh", "-c", launcher, "sh", SERVER_SOURCE, SERVER_MARKER, str(KILL_AFTER_S)]


class CommandChannel:
    """One server process in a sandbox and the stream to it; one command at a time (callers that
    find it busy use an engine exec: see :meth:`try_lock`)."""

    def __init__(self, transport: ChannelTransport) -> None:
        self._transport = transport
        self._lock = threading.Lock()
        self._buffer = b""
        self.closed = False

    def try_lock(self) -> bool:
        """Take the channel for one command without waiting; False when another thread has it."""
        return self._lock.acquire(blocking=False)

    def unlock(self) -> None:
        self._lock.release()

    def run(self, argv: list[str], *, timeout: float, workdir: str | None, output_cap: int,
            env: dict[str, str] | None = None, stdin: bytes | None = None, errors: str = "replace") -> ExecResult:
        """Run ``argv`` through the server (the caller holds :meth:`try_lock`). Raises
        :class:`ChannelClosed` when the command was not sent, :class:`ChannelBroken` when it was
        but no sound answer came."""
        if self.closed:
            raise ChannelClosed("closed")
        if self._has_unasked_data():
            self.close()
            raise ChannelClosed("the server is gone or wrote what nobody asked for")
        request_id = secrets.token_hex(8)
        request = {"id": request_id, "argv": argv, "timeout": timeout, "cwd": workdir, "cap": output_cap,
                   "env": env or {}, "stdin": base64.b64encode(stdin).decode() if stdin is not None else None}
        began = time.monotonic()
        try:
            self._transport.send(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            self.close()
            raise ChannelClosed(f"cannot write to the server: {exc}") from None
        # Base64 output plus the JSON around it; anything longer is not this server's answer.
        longest = output_cap * 4 // 3 + 4096
        try:
            reply = json.loads(self._read_line(deadline=began + timeout + KILL_AFTER_S + _ANSWER_GRACE_S, longest=longest))
            if not isinstance(reply, dict) or reply.get("id") != request_id:
                raise ValueError("an answer to another request")
            if "spawn_error" in reply:
                raise _NotStarted(str(reply["spawn_error"]))
            output = base64.b64decode(reply["output"], validate=True).decode("utf-8", errors=errors)
            return ExecResult(exit_code=int(reply["exit_code"]), output=output, timed_out=bool(reply["timed_out"]),
                              truncated=bool(reply["truncated"]), duration_s=time.monotonic() - began)
        except _NotStarted as exc:
            raise ChannelClosed(f"the command did not start: {exc}") from None
        except (OSError, ValueError, KeyError, TypeError, ChannelBroken) as exc:
            self.close()
            raise ChannelBroken(str(exc) or type(exc).__name__) from None

    def _has_unasked_data(self) -> bool:
        """Whether the stream is readable between commands: end of file (the server died) or bytes
        nobody asked for (something wrote into the server's output)."""
        if self._buffer:
            return True
        try:
            return self._transport.pending()
        except (OSError, ValueError):
            return True

    def _read_line(self, *, deadline: float, longest: int) -> bytes:
        while b"\n" not in self._buffer:
            if len(self._buffer) > longest:
                raise ChannelBroken("an answer longer than any the server sends")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelBroken("no answer in time")
            try:
                chunk = self._transport.receive(1 << 20, remaining)
            except TimeoutError:
                raise ChannelBroken("no answer in time") from None
            if not chunk:
                raise ChannelBroken("the server exited")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        if self._buffer:
            raise ChannelBroken("more than one answer to one request")
        return line

    def close(self) -> None:
        """Close the stream (the server then exits on end of input). Idempotent."""
        if not self.closed:
            self.closed = True
            try:
                self._transport.close()
            except OSError:
                pass


class _NotStarted(Exception):
    """The server could not start the command (it never ran)."""
