"""Harnesses that run inside the task's sandbox: OpenCode (npm ``opencode-ai``) and any command.

Both start behind the loopback relay (:mod:`relay`): the harness calls
``http://127.0.0.1:4141/v1`` inside the sandbox, which reaches only its episode's proxy socket.

**OpenCode** is installed on the host with npm (``opencode-ai@<version>``: its package ships the
self-contained ``opencode`` binary per platform), and the binary is copied into an agent layer
built once per task image (``<namespace>/agent:opencode-<version>-<task>``). Each episode runs
``opencode run --auto <instruction>`` in /testbed with its configuration in
``OPENCODE_CONFIG_CONTENT``: one OpenAI-compatible provider (``@ai-sdk/openai-compatible``,
bundled in the binary) at the relay, for the main and the small model; the repository's own
``opencode.json`` is ignored (``OPENCODE_DISABLE_PROJECT_CONFIG``: a repository must not be able
to point the harness at another model), and nothing is fetched (models list, LSP servers,
plugins, updates). It ends when the session is idle; exit 0 is done.

**A command** (``--agent 'CMD'``) runs in /testbed as the agent user, on the task image itself,
with the endpoint in ``OPENAI_BASE_URL`` (and ``OPENAI_API_BASE``), the model in
``REPO2ENV_MODEL``, a placeholder ``OPENAI_API_KEY``, and the instruction in the file
``$REPO2ENV_INSTRUCTION_FILE``; it is done when it exits 0.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from repo2env import __version__
from repo2env.errors import BuildError, InputError
from repo2env.harness.agents.base import PLACEHOLDER_KEY, RELAY_PORT, Launch, Progress, SandboxHarness
from repo2env.models import Task
from repo2env.runtime.backend import Backend
from repo2env.runtime.images import KIND_LABEL, NAMESPACE_LABEL, image_namespace
from repo2env.runtime.sandbox import MODEL_SOCKET_MOUNT, Sandbox
from repo2env.settings import cache_dir

#: Where a sandboxed harness's files live in the sandbox (the agent user's, outside /testbed).
AGENT_DIR = "/tmp/repo2env-agent"
#: The task's instruction, as a file in the sandbox (what a command harness reads).
INSTRUCTION_FILE = f"{AGENT_DIR}/instruction.md"
#: The proxy's socket inside the sandbox.
MODEL_SOCKET = f"{MODEL_SOCKET_MOUNT}/model.sock"
#: The tested OpenCode release; ``REPO2ENV_OPENCODE_VERSION`` picks another.
OPENCODE_VERSION = "1.18.33"
#: Where the agent layer puts the OpenCode binary.
OPENCODE_BINARY = "/opt/repo2env-agent/opencode"

_install_lock = threading.Lock()


def relay_source() -> str:
    return Path(__file__).with_name("relay.py").read_text()


def place_relay(sandbox: Sandbox, instruction: str) -> None:
    """Put the relay and the instruction into the sandbox (as the agent user, outside /testbed)."""
    sandbox.exec(f"mkdir -p {AGENT_DIR}", timeout=30)
    sandbox.write_file(f"{AGENT_DIR}/relay.py", relay_source())
    sandbox.write_file(INSTRUCTION_FILE, instruction)


def behind_relay(command: str) -> str:
    """``command`` run once the relay listens, the relay stopped after it; its exit status kept."""
    ready = f"{AGENT_DIR}/relay.ready"
    return (f"/usr/bin/python3 -I -S {AGENT_DIR}/relay.py {RELAY_PORT} {MODEL_SOCKET} {ready} "
            f">{AGENT_DIR}/relay.log 2>&1 &\n"
            "relay=$!\n"
            f"tries=0; while [ ! -e {ready} ]; do tries=$((tries+1)); "
            f"if [ $tries -gt 400 ]; then echo 'repo2env: the model relay did not start'; cat {AGENT_DIR}/relay.log; exit 97; fi; "
            "sleep 0.05; done\n"
            f"{command}\n"
            "status=$?\n"
            "kill $relay 2>/dev/null\n"
            "exit $status\n")


def relay_url(episode_path: str = "") -> str:
    """The base URL a sandboxed harness calls (the relay's)."""
    return f"http://127.0.0.1:{RELAY_PORT}{episode_path}/v1"


class CommandAgent(SandboxHarness):
    """Any CLI, as a shell command run in the sandbox (module docstring)."""

    name = "command"

    def __init__(self, command: str) -> None:
        if not command.strip():
            raise InputError("the agent command is empty")
        self.shell_command = command

    def describe(self) -> str:
        return f"command: {self.shell_command}"

    def command(self, launch: Launch) -> tuple[str, dict[str, str]]:
        environment = {"OPENAI_BASE_URL": launch.base_url, "OPENAI_API_BASE": launch.base_url,
                       "OPENAI_API_KEY": PLACEHOLDER_KEY, "REPO2ENV_MODEL": launch.model,
                       "REPO2ENV_INSTRUCTION_FILE": INSTRUCTION_FILE}
        return behind_relay(self.shell_command), environment


class OpenCode(SandboxHarness):
    """OpenCode in an agent layer (module docstring)."""

    name = "opencode"

    def __init__(self, version: str | None = None) -> None:
        self.version = version or os.environ.get("REPO2ENV_OPENCODE_VERSION", "").strip() or OPENCODE_VERSION
        self.prefix = cache_dir() / "harness" / f"opencode-{self.version}"

    def describe(self) -> str:
        return f"opencode {self.version}"

    def binary(self, progress: Progress | None = None) -> Path:
        """The host's copy of the platform binary of ``opencode-ai@<version>`` (npm, once)."""
        with _install_lock:
            found = _platform_binary(self.prefix)
            if found is not None:
                return found
            npm = shutil.which("npm")
            if npm is None:
                raise InputError("OpenCode is installed with npm, which is not on this machine",
                                 hint="install Node.js and npm (Debian: apt-get install npm)")
            if progress:
                progress(f"installing opencode-ai {self.version} with npm into {self.prefix}")
            self.prefix.mkdir(parents=True, exist_ok=True)
            done = subprocess.run([npm, "install", "--prefix", str(self.prefix), "--no-audit", "--no-fund",
                                   "--ignore-scripts", f"opencode-ai@{self.version}"], capture_output=True, text=True)
            found = _platform_binary(self.prefix)
            if done.returncode != 0 or found is None:
                why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no binary for this platform"]
                raise InputError(f"installing opencode-ai {self.version} failed: {why[0]}",
                                 hint="check that the npm registry is reachable (npm's registry settings apply)")
            return found

    def image(self, backend: Backend, task: Task, progress: Progress | None = None) -> str:
        """``<namespace>/agent:opencode-<version>-<task>``: the task image plus the binary (built once)."""
        base = super().image(backend, task)
        if not base:
            raise InputError(f"{task.instance_id} is not built", hint="run 'repo2env build' first")
        base_image = backend.images.get(base)
        if base_image is None:
            raise InputError(f"image {base} does not exist on {backend.name}", hint="run 'repo2env build' first")
        binary = self.binary(progress)
        digest = hashlib.sha256(f"{base_image.id}:{self.version}".encode()).hexdigest()[:12]
        tag = f"{image_namespace()}/agent:opencode-{re.sub(r'[^a-z0-9_.-]', '-', task.instance_id.lower())[:80]}-{digest}"
        if backend.images.get(tag) is not None:
            return tag
        if progress:
            progress(f"building the OpenCode agent layer {tag}")
        with tempfile.TemporaryDirectory(prefix="repo2env-agent-") as context:
            folder = Path(context)
            if _same_device(binary, folder):
                os.link(binary, folder / "opencode")
            else:
                shutil.copy2(binary, folder / "opencode")
            # The binary keeps its mode (0755) through the build context; nothing runs in the build.
            (folder / "Dockerfile").write_text(f"FROM {base}\nCOPY opencode {OPENCODE_BINARY}\n")
            labels = {KIND_LABEL: "agent", NAMESPACE_LABEL: image_namespace(), "repo2env.agent": self.name,
                      "repo2env.agent_version": self.version, "repo2env.task_image": base,
                      "repo2env.instance_id": task.instance_id, "repo2env.version": __version__}
            outcome = backend.images.build(folder, tag, labels=labels, network=False)
        if outcome.error:
            raise BuildError(f"the OpenCode agent layer did not build: {outcome.error[-300:]}")
        return tag

    def command(self, launch: Launch) -> tuple[str, dict[str, str]]:
        provider = {"npm": "@ai-sdk/openai-compatible", "name": "repo2env proxy",
                    "options": {"baseURL": launch.base_url, "apiKey": PLACEHOLDER_KEY},
                    "models": {launch.model: {"name": launch.model, "tool_call": True}}}
        config = {"$schema": "https://opencode.ai/config.json", "provider": {"repo2env": provider},
                  "model": f"repo2env/{launch.model}", "small_model": f"repo2env/{launch.model}",
                  "autoupdate": False, "share": "disabled"}
        environment = {
            "OPENCODE_CONFIG_CONTENT": json.dumps(config), "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1", "NO_COLOR": "1", "TERM": "dumb",
        }
        run = f'cd /testbed && {OPENCODE_BINARY} run --auto "$(cat {INSTRUCTION_FILE})" </dev/null'
        return behind_relay(run), environment


def _platform_binary(prefix: Path) -> Path | None:
    """The opencode binary npm installed under ``prefix`` for this machine (x64 without AVX2: the
    baseline build), or None."""
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    if machine is None:
        return None
    names = [f"opencode-linux-{machine}"]
    if machine == "x64" and not _has_avx2():
        names.insert(0, "opencode-linux-x64-baseline")
    for name in names:
        candidate = prefix / "node_modules" / name / "bin" / "opencode"
        if candidate.is_file():
            return candidate
    return None


def _has_avx2() -> bool:
    try:
        return " avx2 " in f" {Path('/proc/cpuinfo').read_text()} ".replace("\n", " ")
    except OSError:
        return True


def _same_device(path: Path, folder: Path) -> bool:
    return path.stat().st_dev == folder.stat().st_dev
