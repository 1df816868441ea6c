"""Harness adapters, looked up by name (``--agent``): ``mini-swe-agent``, ``opencode``, a custom
adapter class as ``package.module:Class``, or else a shell command run in the sandbox.

A new harness is one new adapter (:mod:`repo2env.harness.agents.base`) and one line here.
"""

from __future__ import annotations

import importlib
import re

from repo2env.errors import InputError
from repo2env.harness.agents.base import HarnessAgent, HostHarness, Launch, SandboxHarness

__all__ = ["AGENTS", "HarnessAgent", "HostHarness", "Launch", "SandboxHarness", "harness_agent"]

#: Adapter name -> "module:class".
AGENTS: dict[str, str] = {
    "mini-swe-agent": "repo2env.harness.agents.mini_swe_agent:MiniSweAgent",
    "opencode": "repo2env.harness.agents.sandboxed:OpenCode",
}

_CLASS_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def harness_agent(spec: str) -> HarnessAgent:
    """The adapter ``spec`` names: a registered name, an importable ``module:Class`` (a
    :class:`HarnessAgent` subclass taking no arguments), or otherwise a command for the sandbox."""
    spec = spec.strip()
    where = AGENTS.get(spec)
    if where is None and _CLASS_PATH.fullmatch(spec):
        try:
            importlib.import_module(spec.split(":", 1)[0])
            where = spec
        except ImportError:
            where = None  # not a module here: a command that happens to look like one
    if where is None:
        from repo2env.harness.agents.sandboxed import CommandAgent

        return CommandAgent(spec)
    module, _, attribute = where.partition(":")
    adapter = getattr(importlib.import_module(module), attribute, None)
    if not (isinstance(adapter, type) and issubclass(adapter, HarnessAgent)):
        raise InputError(f"{spec} is not a harness adapter class", hint="subclass repo2env.harness.agents.HostHarness or SandboxHarness")
    return adapter()
