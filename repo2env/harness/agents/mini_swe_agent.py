"""mini-swe-agent (PyPI ``mini-swe-agent``), run on the host by its own ``mini`` command.

Installed once into a virtual environment of its own under the cache folder (its dependencies,
litellm among them, never meet repo2env's). Each episode runs the real CLI with its stock
``mini.yaml`` and three changes, all through its documented options: the model is
``openai/<name>`` at the proxy's URL (litellm's OpenAI-compatible route, cost tracking off since
a local model has no price), the agent is the non-interactive ``default`` one, and the
environment is :mod:`repo2env_mini_environment` (``mini_environment.py``), which runs every command
in the task's sandbox through the sandbox bridge. The run ends when the agent submits
(``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``); its trajectory is kept in the episode's folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from repo2env.errors import InputError
from repo2env.harness.agents.base import PLACEHOLDER_KEY, HostHarness, Launch, Progress
from repo2env.settings import cache_dir

#: The release tested here; ``REPO2ENV_MINI_SWE_AGENT_VERSION`` picks another.
VERSION = "2.4.6"
#: The module name the environment class has in mini-swe-agent's process.
ENVIRONMENT_MODULE = "repo2env_mini_environment"

_install_lock = threading.Lock()


class MiniSweAgent(HostHarness):
    """The adapter (module docstring)."""

    name = "mini-swe-agent"

    def __init__(self, version: str | None = None, venv: Path | None = None) -> None:
        self.version = version or os.environ.get("REPO2ENV_MINI_SWE_AGENT_VERSION", "").strip() or VERSION
        self.venv = venv or cache_dir() / "harness" / f"mini-swe-agent-{self.version}"

    def describe(self) -> str:
        return f"mini-swe-agent {self.version}"

    @property
    def executable(self) -> Path:
        return self.venv / "bin" / "mini"

    def install(self, progress: Progress | None = None) -> None:
        """A virtual environment with ``mini-swe-agent==<version>`` (made once; kept in the cache)."""
        with _install_lock:
            marker = self.venv / ".repo2env-installed"
            if marker.is_file() and self.executable.is_file():
                return
            if progress:
                progress(f"installing mini-swe-agent {self.version} into {self.venv}")
            shutil.rmtree(self.venv, ignore_errors=True)
            self.venv.parent.mkdir(parents=True, exist_ok=True)
            steps = ([sys.executable, "-m", "venv", str(self.venv)],
                     [str(self.venv / "bin" / "python"), "-m", "pip", "install", "-q", f"mini-swe-agent=={self.version}"])
            for step in steps:
                done = subprocess.run(step, capture_output=True, text=True)
                if done.returncode != 0:
                    shutil.rmtree(self.venv, ignore_errors=True)
                    raise InputError(f"installing mini-swe-agent {self.version} failed: "
                                     f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or ['?']}",
                                     hint="check that PyPI is reachable (pip's index settings apply)")
            marker.write_text(self.version)

    def command(self, launch: Launch) -> tuple[list[str], dict[str, str]]:
        if launch.bridge_socket is None:
            raise InputError("mini-swe-agent runs its commands through the sandbox bridge: none was given")
        modules = launch.work_dir / "python"
        modules.mkdir(exist_ok=True)
        shutil.copyfile(Path(__file__).with_name("mini_environment.py"), modules / f"{ENVIRONMENT_MODULE}.py")
        overrides = {
            "agent": {"agent_class": "default", "step_limit": 0, "cost_limit": 0},
            "model": {"model_name": f"openai/{launch.model}", "cost_tracking": "ignore_errors",
                      "model_kwargs": {"api_base": launch.base_url, "api_key": PLACEHOLDER_KEY, "drop_params": True}},
            "environment": {"environment_class": f"{ENVIRONMENT_MODULE}.SandboxBridgeEnvironment",
                            "socket": str(launch.bridge_socket), "timeout": 900},
        }
        config_path = launch.work_dir / "repo2env.yaml"
        config_path.write_text(yaml.safe_dump(overrides, sort_keys=False))
        argv = [str(self.executable), "-c", "mini.yaml", "-c", str(config_path), "-t", launch.instruction,
                "--yolo", "--exit-immediately", "-o", str(launch.work_dir / "trajectory.json")]
        environment = {
            "PYTHONPATH": str(modules),
            # Its global config (and the .env it would create) lives in the episode's folder, not ~/.config.
            "MSWEA_GLOBAL_CONFIG_DIR": str(launch.work_dir / "mini-config"), "MSWEA_CONFIGURED": "true",
            "MSWEA_SILENT_STARTUP": "1", "MSWEA_COST_TRACKING": "ignore_errors",
            # litellm reads its model price list from its own package, not from GitHub.
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": PLACEHOLDER_KEY,
            "NO_COLOR": "1", "TERM": "dumb",
        }
        return argv, environment

    def ended(self, exit_code: int, launch: Launch, log: str) -> str:
        """``done`` when the agent submitted; otherwise its exit status as its trajectory names it."""
        try:
            info = json.loads((launch.work_dir / "trajectory.json").read_text()).get("info", {})
        except (OSError, ValueError):
            info = {}
        status = info.get("exit_status") or ""
        if status == "Submitted":
            return "done"
        if status:
            return f"exit {exit_code}: {status}"
        return "done" if exit_code == 0 else f"exit {exit_code}"
