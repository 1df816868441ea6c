"""One harness episode on one task: sandbox, proxy, harness, diff, grade, trace.

:func:`run_harness` starts the task's sandbox (no network), opens the episode at the capturing
proxy, starts the harness the way its adapter says (on the host behind the sandbox bridge, or in
the sandbox behind the relay to the proxy's socket), waits until it is done, stopped by its budget
or past its wall time, takes the sandbox's diff and grades it with the hidden verifier in a fresh
sandbox. The result is an :class:`~repo2env.models.EpisodeTrace`, written as ``trace.json`` next to
the grading's logs; the harness's own files (its config, log, trajectory) stay in
``<logs_dir>/<episode id>/``.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from repo2env.envs.tools import AgentTools, visible_tests_command
from repo2env.errors import PatchError
from repo2env.harness.agents.base import (
    Ended,
    HarnessAgent,
    HostHarness,
    Launch,
    Progress,
    SandboxHarness,
    run_in_sandbox,
)
from repo2env.harness.agents.sandboxed import place_relay, relay_url
from repo2env.harness.bridge import SandboxBridge
from repo2env.harness.episodes import conversation
from repo2env.harness.perturb import Perturber
from repo2env.harness.proxy import CapturingProxy
from repo2env.instruction import instruction_text
from repo2env.jsonl import write_json
from repo2env.models import EpisodeBudget, EpisodeTrace, PerturbationPlan, Task
from repo2env.runtime.backend import Backend
from repo2env.verify.grader import Grader


@dataclass(frozen=True)
class HarnessOptions:
    """How an episode runs (the same for every episode of a batch)."""

    budget: EpisodeBudget = field(default_factory=EpisodeBudget)
    perturbations: PerturbationPlan | None = None
    reward_mode: str = "graded"
    """graded, binary or f2p (see ``repo2env grade --mode``)."""


def run_harness(task: Task, agent: HarnessAgent, *, backend: Backend, proxy: CapturingProxy, grader: Grader,
                model: str, logs_dir: Path, options: HarnessOptions = HarnessOptions(),
                episode_id: str | None = None, progress: Progress | None = None) -> EpisodeTrace:
    """Run ``agent`` on ``task`` through ``proxy`` (whose upstream serves ``model``) and grade it."""
    episode_id = episode_id or uuid.uuid4().hex[:16]
    work_dir = Path(logs_dir) / episode_id
    work_dir.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    budget = options.budget
    plan = options.perturbations if options.perturbations and options.perturbations.active else None
    # Unix sockets need short paths (108 bytes): their folder is a fresh one under the temp folder.
    sockets = Path(tempfile.mkdtemp(prefix="r2e-"))
    sockets.chmod(0o755)
    # A host-side harness's tools go through the bridge, which records them and injects their faults;
    # a harness in the sandbox runs its own, and the proxy does both on their results.
    episode = proxy.open_episode(episode_id, budget=budget, model=model, perturbations=plan,
                                 tools_through_bridge=isinstance(agent, HostHarness))
    instruction = instruction_text(task)
    bridge: SandboxBridge | None = None
    patch = ""
    try:
        if isinstance(agent, HostHarness):
            agent.install(progress)
            limits = dataclasses.replace(backend.limits, persistent_channel=backend.capabilities.persistent_channel)
            with backend.start(task, limits=limits) as sandbox:
                tools = AgentTools(sandbox, test_command=visible_tests_command(task))
                bridge = SandboxBridge(tools, sockets / "bridge.sock", started=episode.started,
                                       perturber=Perturber(plan, episode_id) if plan else None)
                launch = Launch(task=task, instruction=instruction, model=model, base_url=proxy.episode_url(episode_id),
                                work_dir=work_dir, deadline_s=budget.max_wall_s, stop=episode.refused,
                                bridge_socket=bridge.path)
                ended = agent.run(launch)
                bridge.close()  # the harness is gone: nothing may run in the sandbox while its diff is taken
                patch, ended = _diff(sandbox, ended)
        elif isinstance(agent, SandboxHarness):
            image = agent.image(backend, task, progress)
            proxy.serve_unix(episode, sockets / "model.sock")
            # The harness's commands go through the engine, not a channel the harness's own kill would end.
            limits = dataclasses.replace(backend.limits, persistent_channel=False, model_socket_dir=str(sockets))
            with backend.start_image(image, limits=limits, labels={"repo2env.instance_id": task.instance_id}) as sandbox:
                place_relay(sandbox, instruction)
                launch = Launch(task=task, instruction=instruction, model=model, base_url=relay_url(),
                                work_dir=work_dir, deadline_s=budget.max_wall_s, stop=episode.refused)
                ended = run_in_sandbox(agent, sandbox, launch)
                patch, ended = _diff(sandbox, ended)
        else:
            raise TypeError(f"{type(agent).__name__} is neither a host nor a sandbox harness")
    finally:
        calls = proxy.close_episode(episode_id)
        if bridge is not None:
            bridge.close()
        shutil.rmtree(sockets, ignore_errors=True)
    wall_s = round(episode.elapsed(), 3)
    grade = grader.grade(task, patch, mode=options.reward_mode, run_name=f"harness-{episode_id}")
    messages, tools_offered = conversation(calls)
    finished = f"cut off: {episode.cut_off}" if episode.cut_off and ended.finished == "stopped" else ended.finished
    trace = EpisodeTrace(
        episode_id=episode_id, instance_id=task.instance_id, source="harness", agent=agent.describe(), model=model,
        tools=tools_offered, messages=messages, calls=calls, tool_runs=bridge.runs if bridge else episode.tool_runs(),
        budget=budget, cut_off=episode.cut_off, perturbations=plan, finished=finished, started_at=started_at,
        wall_s=wall_s, patch=patch, reward=grade.reward, grade=grade)
    write_json(trace_path(trace, work_dir), trace.model_dump(mode="json"))
    return trace


def trace_path(trace: EpisodeTrace, work_dir: Path) -> Path:
    """Where a trace is kept: next to its grading's logs (else in the episode's own folder)."""
    if trace.grade is not None and trace.grade.log_dir:
        return Path(trace.grade.log_dir) / "trace.json"
    return work_dir / "trace.json"


def _diff(sandbox, ended: Ended) -> tuple[str, Ended]:
    try:
        return sandbox.diff(), ended
    except PatchError as exc:
        # An agent that made its diff unreadable (larger than the output cap) scores on nothing.
        return "", Ended(f"error: {exc.message}", ended.log)


def wait_for_upstream(proxy: CapturingProxy, timeout_s: float = 0.0) -> list[str]:
    """The model names the upstream serves (``GET /models``), waiting up to ``timeout_s`` for it to answer."""
    import json

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            response = proxy.upstream.send("GET", "/models", None)
            body = response.read()
            if response.status == 200:
                return [entry.get("id") for entry in json.loads(body).get("data", []) if entry.get("id")]
            return []
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)
