"""mini-swe-agent's environment for repo2env: every command runs in the task's sandbox, through the
sandbox bridge (the agent's one tool set, ``bash``), never on the host.

This file runs inside mini-swe-agent's own virtual environment, named by ``--environment-class
repo2env_mini_environment.SandboxBridgeEnvironment`` (the adapter copies it there under that
name); it uses the standard library and mini-swe-agent only, and repo2env never imports it.
It keeps mini-swe-agent's contract: ``execute`` returns ``output`` and ``returncode``, and a
command whose output starts with ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` ends the run.
"""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class SandboxBridgeEnvironment:
    """Runs mini-swe-agent's bash actions with the bridge's ``bash`` tool (in /testbed, as the
    sandbox's agent user, under the tool set's limits). Keys of mini-swe-agent's ``environment``
    config other than ``socket`` and ``timeout`` (``env``, ``cwd``) are kept for its templates only:
    the sandbox's environment is the task's."""

    def __init__(self, *, socket: str, timeout: float = 900.0, **config: Any) -> None:
        self.socket = socket
        self.timeout = timeout
        self.config_values = {"socket": socket, "timeout": timeout, **config}

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        connection = _UnixConnection(self.socket, self.timeout)
        try:
            connection.request("POST", path, body=json.dumps(payload), headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return json.loads(response.read())
        finally:
            connection.close()

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run ``action["command"]`` in the sandbox (``cwd`` and ``timeout`` are the tool set's:
        /testbed and its command limit)."""
        command = action.get("command", "") if isinstance(action, dict) else str(action)
        try:
            answer = self._post("/tools/bash", {"command": command})
            exit_code = answer.get("exit_code")
            output = {"output": answer.get("output", ""), "returncode": -1 if exit_code is None else exit_code,
                      "exception_info": ""}
        except (OSError, ValueError, http.client.HTTPException) as exc:
            output = {"output": "", "returncode": -1, "exception_info": f"the sandbox bridge failed: {exc}"}
        self._check_finished(output)
        return output

    def _check_finished(self, output: dict[str, Any]) -> None:
        lines = output.get("output", "").lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
            from minisweagent.exceptions import Submitted

            submission = "".join(lines[1:])
            raise Submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission}})

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config_values, "system": "Linux", "release": "", "version": "", "machine": "x86_64",
                "cwd": "/testbed", **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment": {key: value for key, value in self.config_values.items()
                                                    if key != "socket"},
                                    "environment_type": f"{type(self).__module__}.{type(self).__name__}"}}}
