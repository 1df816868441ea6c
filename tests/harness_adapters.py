"""Harness adapters for the tests, resolved by ``--agent harness_adapters:<Class>`` (tests/ is on the path)."""

from __future__ import annotations

import sys

from repo2env.harness.agents import HostHarness, Launch

#: A host-side harness of a few lines: one model call through $OPENAI_BASE_URL, its answer's tool
#: call printed; it exits 3 when the model gave none.
ONE_CALL = r"""
import json, os, sys, urllib.request
body = json.dumps({"model": "anything", "tools": [{"type": "function", "function": {"name": "bash"}}],
                   "messages": [{"role": "user", "content": open("instruction.md").read()}]}).encode()
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                                 {"Content-Type": "application/json"})
message = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
calls = message.get("tool_calls") or []
print("tool call:", calls[0]["function"]["name"] if calls else None)
sys.exit(0 if calls else 3)
"""


class OneCallHarness(HostHarness):
    """Asks the model once and says whether it answered with a tool call."""

    name = "one-call"

    def install(self, progress=None) -> None:
        pass  # the test's own interpreter runs it

    def command(self, launch: Launch) -> tuple[list[str], dict[str, str]]:
        (launch.work_dir / "instruction.md").write_text(launch.instruction)
        return [sys.executable, "-I", "-c", ONE_CALL], {"OPENAI_BASE_URL": launch.base_url}

    def ended(self, exit_code: int, launch: Launch, log: str) -> str:
        return "done" if exit_code == 0 and "tool call: bash" in log else f"no tool call (exit {exit_code})"


class NotAnAdapter:
    """A class that is no harness adapter."""
