"""The sandbox bridge: the agent's one tool set, served to a harness that runs on the host.

A host-side harness (mini-swe-agent) runs its commands in the task's sandbox through this bridge
instead of a shell of its own: ``POST /tools/<name>`` with the tool's arguments as a JSON object
runs :class:`~repo2env.envs.tools.AgentTools`' tool (the same tools, limits and answers as policy
rollouts and RepoEnv) and answers ``{"output": ..., "exit_code": ...}``; ``GET /tools`` lists the
tools in OpenAI's function format, so any other host-side CLI can be given them too. The bridge
listens on a unix socket only the harness is told of (no port on the host), records every call
(:class:`~repo2env.models.ToolRun`), and applies the episode's tool faults: a call that "times
out" is not run and answers as a killed command does; a cut output loses its middle.
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from repo2env.envs.tools import TOOL_NAMES, AgentTools, Refusal, tool_schemas
from repo2env.harness.perturb import TIMEOUT_NOTE, Perturber
from repo2env.models import TOOL_RUN_OUTPUT_CHARS, ToolRun


class SandboxBridge:
    """Serves ``tools`` (one episode's sandbox) on the unix socket ``path`` until closed."""

    def __init__(self, tools: AgentTools, path: Path, *, perturber: Perturber | None = None,
                 started: float | None = None) -> None:
        self.tools = tools
        self.path = Path(path)
        self.perturber = perturber
        self.started = started if started is not None else time.monotonic()
        self.runs: list[ToolRun] = []
        # One tool call at a time, as a shell runs one command at a time: the trace's order is the sandbox's.
        self._lock = threading.Lock()
        self._closed = False
        if self.path.exists():
            self.path.unlink()
        self._server = _UnixServer(str(self.path), _handler(self))
        os.chmod(self.path, 0o600)
        self._thread = threading.Thread(target=self._server.serve_forever, name="repo2env-bridge", daemon=True)
        self._thread.start()

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run one tool call and record it; the answer the harness gets."""
        with self._lock:
            number = len(self.runs)
            began = time.monotonic()
            fault = self.perturber.tool_fault(number) if self.perturber and name in TOOL_NAMES else None
            exit_code: int | None
            if fault == "tool_timeout":
                output, exit_code = TIMEOUT_NOTE.format(seconds=self.tools.command_timeout_s), 124
            else:
                output = self.tools.call(name, arguments if isinstance(arguments, dict) else {"": arguments})
                exit_code = None if isinstance(output, Refusal) else self.tools.last_exit_code
                if fault == "output_cut":
                    output = self.perturber.cut(output, number)
            self.runs.append(ToolRun(index=number, at_s=round(began - self.started, 3), tool=name,
                                     arguments=arguments if isinstance(arguments, dict) else {},
                                     output=output[:TOOL_RUN_OUTPUT_CHARS], exit_code=exit_code,
                                     duration_s=round(time.monotonic() - began, 4), perturbation=fault))
        return {"output": output, "exit_code": exit_code, "refused": isinstance(output, Refusal)}

    def close(self) -> None:
        """Stop serving and remove the socket (again: nothing happens)."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> SandboxBridge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _handler(bridge: SandboxBridge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
            if self.path.rstrip("/") == "/tools":
                self._answer(200, tool_schemas())
            else:
                self._answer(404, {"error": f"nothing at {self.path}; GET /tools, POST /tools/<name>"})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.startswith("/tools/"):
                self._answer(404, {"error": f"nothing at {self.path}; POST /tools/<name>"})
                return
            try:
                arguments = json.loads(raw or b"{}")
            except ValueError:
                self._answer(400, {"error": "the body is not JSON"})
                return
            self._answer(200, bridge.call(self.path[len("/tools/"):].strip("/"), arguments))

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    return Handler


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
