"""What an agent harness adapter is: how a harness is installed, started on a task, and how it says
it is done. One adapter per harness; a new harness is one new file (see ``docs/harness.md``).

Two kinds, by where the harness's process runs:

- **host** (:class:`HostHarness`, mini-swe-agent): the harness runs on the host, in its own virtual
  environment, and runs its commands in the task's sandbox through the sandbox bridge (the agent's
  one tool set on a unix socket); it reaches the model at the proxy's loopback address.
- **sandbox** (:class:`SandboxHarness`, OpenCode, a plain command): the harness runs inside the
  task's sandbox, installed in an agent layer on top of the task image; the sandbox keeps no
  network, and the model is reached through the proxy's unix socket mounted into it, behind a
  loopback relay (``http://127.0.0.1:4141/...`` inside the sandbox).

Either way the adapter returns how the harness ended (``finished``: ``"done"``, ``"exit N"``), and
the caller grades the sandbox's diff.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from repo2env.models import ExecResult, Task
from repo2env.runtime.backend import Backend
from repo2env.runtime.sandbox import Sandbox

#: Inside a sandbox: the port of the loopback relay to the proxy's socket.
RELAY_PORT = 4141
#: The placeholder API key harnesses send (the proxy never forwards it).
PLACEHOLDER_KEY = "repo2env"
#: Seconds a harness is given to stop on its own once the budget refused a call, before it is killed.
STOP_GRACE_S = 3.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Launch:
    """What a harness is started with for one episode."""

    task: Task
    instruction: str
    """The task as the harness is told it (the issue, framed as every policy is told it)."""
    model: str
    """The model name the harness puts in its requests (the proxy sends the upstream's)."""
    base_url: str
    """The OpenAI-compatible base (``.../v1``) the harness calls: on the host, the proxy's loopback
    URL; inside a sandbox, the relay's."""
    work_dir: Path
    """A host folder of the episode's own (configs, the harness's log and trajectory)."""
    deadline_s: float
    """Seconds the harness may run (the budget's wall time)."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when the budget refused a model call: stop the harness (after :data:`STOP_GRACE_S`)."""
    bridge_socket: Path | None = None
    """For host harnesses: the sandbox bridge's unix socket."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Extra variables for the harness's process."""


@dataclass(frozen=True)
class Ended:
    """How a harness's run ended."""

    finished: str
    """``"done"`` (it signalled completion), ``"exit N"``, ``"stopped"`` (killed after the budget
    refused it), ``"timed out"`` (past its deadline), or ``"error: ..."``."""
    log: str = ""
    """The tail of what it printed."""


class HarnessAgent(ABC):
    """An adapter: one harness, installed and started the way it expects."""

    #: The name ``--agent`` takes and traces record.
    name: ClassVar[str]
    where: ClassVar[Literal["host", "sandbox"]]

    def describe(self) -> str:
        """The harness and its version, for logs and traces."""
        return self.name


class HostHarness(HarnessAgent):
    """A harness that runs on the host and drives the sandbox through the bridge."""

    where = "host"

    @abstractmethod
    def install(self, progress: Progress | None = None) -> None:
        """Make the harness runnable here (once per machine; cached)."""

    @abstractmethod
    def command(self, launch: Launch) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that start the harness on ``launch``'s episode."""

    def ended(self, exit_code: int, launch: Launch, log: str) -> str:
        """How an exit status reads (``done`` for 0 unless the harness says more)."""
        return "done" if exit_code == 0 else f"exit {exit_code}"

    def run(self, launch: Launch) -> Ended:
        """Start the harness, wait for it (or stop it), and say how it ended."""
        argv, environment = self.command(launch)
        log_path = launch.work_dir / "harness.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(argv, env={**os.environ, **environment, **launch.environment}, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=launch.work_dir,
                                       start_new_session=True)
            status = _wait(process, launch)
        text = log_path.read_text(errors="replace")[-4000:]
        if status is None:
            return Ended("stopped" if launch.stop.is_set() else "timed out", text)
        return Ended(self.ended(status, launch, text), text)


class SandboxHarness(HarnessAgent):
    """A harness that runs inside the task's sandbox."""

    where = "sandbox"

    def image(self, backend: Backend, task: Task, progress: Progress | None = None) -> str:
        """The image its sandbox starts from: the task image, or an agent layer on it (built once)."""
        return task.env_spec.image if task.env_spec and task.env_spec.image else ""

    @abstractmethod
    def command(self, launch: Launch) -> tuple[str, dict[str, str]]:
        """The shell command (run in /testbed as the agent user) and its environment."""

    def ended(self, exit_code: int, launch: Launch, log: str) -> str:
        return "done" if exit_code == 0 else f"exit {exit_code}"


def _wait(process: subprocess.Popen, launch: Launch) -> int | None:
    """The process's exit status; None when it had to be killed (stopped or past its deadline)."""
    deadline = time.monotonic() + launch.deadline_s
    stop_at: float | None = None
    while True:
        try:
            return process.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if launch.stop.is_set() and stop_at is None:
            stop_at = now + STOP_GRACE_S
        if now >= deadline or (stop_at is not None and now >= stop_at):
            _kill_group(process)
            return None


def _kill_group(process: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_in_sandbox(harness: SandboxHarness, sandbox: Sandbox, launch: Launch) -> Ended:
    """Run ``harness``'s command in ``sandbox`` (as the agent user, in /testbed) until it ends, its
    deadline passes or the budget's refusal stops it (every process of the agent user is then killed)."""
    command, environment = harness.command(launch)
    result: ExecResult | None = None
    failure: Exception | None = None

    def work() -> None:
        nonlocal result, failure
        try:
            result = sandbox.exec(command, timeout=launch.deadline_s, env={**environment, **launch.environment})
        except Exception as exc:  # noqa: BLE001 - reported as the harness's end; the caller's diff raises
            failure = exc

    thread = threading.Thread(target=work, name=f"repo2env-harness-{harness.name}", daemon=True)
    thread.start()
    stopped = False
    while thread.is_alive():
        thread.join(timeout=0.2)
        if launch.stop.is_set() and thread.is_alive():
            thread.join(timeout=STOP_GRACE_S)
            if thread.is_alive():
                # As the agent user: every process it owns (the harness and what it started) goes;
                # the sandbox's keepalive runs as root and stays.
                sandbox.exec("kill -9 -1", timeout=30)
                stopped = True
                thread.join(timeout=60)
            break
    if failure is not None:
        return Ended(f"error: {failure}")
    if result is None:
        return Ended("error: the harness's command did not return")
    (launch.work_dir / "harness.log").write_text(result.output)
    log = result.output[-4000:]
    if stopped:
        return Ended("stopped", log)
    if result.timed_out:
        return Ended("timed out", log)
    return Ended(harness.ended(result.exit_code, launch, log), log)
