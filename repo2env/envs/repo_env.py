"""``RepoEnv``: one repo2env task as an environment for TRL's ``GRPOTrainer(environment_factory=...)``.

TRL's contract (1.16): ``RepoEnv()`` takes no arguments; ``reset(**row)`` receives the whole dataset
row and returns text appended to the prompt; every public method with type hints and a Google-style
docstring is a tool (so helpers are private); ``get_reward()`` is a reward. Instances are pooled and
reused through ``reset``, and ``close`` is never called, so the previous sandbox is torn down in
``reset``, in ``__del__`` and at interpreter exit (every backend removes open sandboxes then).

Settings come from :class:`RepoEnvConfig` (environment variables ``REPO2ENV_ENV_*``), and
``functools.partial(RepoEnv, config=...)`` overrides them for one trainer.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo2env import defaults
from repo2env.dataset_rows import task_from_row
from repo2env.envs.tools import AgentTools, refusal, same_tool, tool_schemas, visible_tests_command
from repo2env.errors import InputError
from repo2env.instruction import agent_messages, instruction_text
from repo2env.jsonl import write_json
from repo2env.models import TOOL_RUN_OUTPUT_CHARS, EpisodeTrace, GradeResult, Task, ToolRun
from repo2env.runtime.sandbox import Runtime, Sandbox
from repo2env.settings import cache_dir


@dataclass(frozen=True)
class RepoEnvConfig:
    """How every :class:`RepoEnv` of a process behaves (read from ``REPO2ENV_ENV_*`` variables)."""

    reward_mode: str = "graded"
    """graded (f2p rate x p2p rate), binary or f2p; see ``repo2env grade --mode``."""
    command_timeout_s: float = float(defaults.TOOL_COMMAND_TIMEOUT_S)
    """Wall-clock limit of one bash call."""
    test_timeout_s: float = float(defaults.TOOL_TEST_TIMEOUT_S)
    """Wall-clock limit of one run_tests call."""
    episode_timeout_s: float = 1800.0
    """After this long since reset, tools answer that time is up (the episode's budget)."""
    output_cap_chars: int = defaults.TOOL_OUTPUT_CAP_CHARS
    """Longest tool answer; longer ones are cut in the middle."""
    grade_timeout_s: float | None = None
    """Wall-clock limit of the hidden tests when grading (None: each task's own, which validation
    sets from its gold patch's gradings)."""
    warm_sandboxes: int = 1
    """Started sandboxes kept ready per image, so reset costs no container start."""
    grading_jobs: int = 2
    """Gradings at once when the trainer asks a group's rewards: the first ``get_reward`` of a group
    starts the grading of every other episode that has not been graded, and each call waits for
    its own (1: one after another, as the trainer asks)."""
    command_channel: bool = True
    """Tool calls go through a persistent command channel in the sandbox (a few ms each); off, each
    is one engine exec (tens of ms with Docker, hundreds with podman)."""
    backend: str = ""
    """The container backend of the sandboxes (docker, podman) [default: ``REPO2ENV_BACKEND``, else
    docker]: TRL's ``environment_factory`` takes no arguments, so the variable is how a trainer
    chooses it."""
    logs_dir: Path = field(default_factory=lambda: cache_dir() / "repo_env")
    """Where gradings keep their logs (never the folder the process started in)."""
    record_traces: bool = True
    """Write each graded episode's ``trace.json`` (its tool calls, their answers, the grade) next to
    its grading's logs, for ``repo2env export trajectories``."""

    @classmethod
    def from_environment(cls) -> RepoEnvConfig:
        """Defaults overridden by ``REPO2ENV_ENV_<FIELD>`` variables (e.g. REPO2ENV_ENV_REWARD_MODE=binary)."""
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            raw = os.environ.get(f"REPO2ENV_ENV_{name.upper()}")
            if raw is None:
                continue
            default = getattr(cls(), name)
            kind = float if default is None else type(default)  # an optional number
            try:
                if kind is bool:
                    values[name] = _flag(raw)
                else:
                    values[name] = Path(raw) if kind is Path or name == "logs_dir" else kind(raw)
            except ValueError:
                raise InputError(f"REPO2ENV_ENV_{name.upper()}={raw!r} is not a valid {kind.__name__}") from None
        config = cls(**values)
        if config.reward_mode not in ("graded", "binary", "f2p"):
            raise InputError(f"reward mode {config.reward_mode!r}: choose graded, binary or f2p")
        return config


#: Housekeeping of the pool (a spare's start, a finished episode's removal) waits until no tool call
#: has run for this long: on 2 cores, a container start or removal beside a tool call (a few hundred
#: ms of engine CPU) makes the call 2-3x slower.
HOUSEKEEPING_QUIET_S = 0.25
#: ... but never longer than this, so environments that call tools without a pause still get their
#: spares before their next reset (an episode's grading alone takes longer).
HOUSEKEEPING_LONGEST_WAIT_S = 2.0


class _QuietGate:
    """When the process's episodes leave the engine alone: no tool call running, none for ``quiet_s``
    (a reset counts as one, its first tool call follows). Housekeeping waits for it, or ``longest_s``."""

    def __init__(self, quiet_s: float = HOUSEKEEPING_QUIET_S, longest_s: float = HOUSEKEEPING_LONGEST_WAIT_S) -> None:
        self.quiet_s = quiet_s
        self.longest_s = longest_s
        self._changed = threading.Condition()
        self._calls = 0
        self._last = time.monotonic()

    @contextmanager
    def tool_call(self) -> Iterator[None]:
        with self._changed:
            self._calls += 1
        try:
            yield
        finally:
            with self._changed:
                self._calls -= 1
                self._last = time.monotonic()
                self._changed.notify_all()

    def touch(self) -> None:
        """Activity without a call (a reset): the quiet period starts again."""
        with self._changed:
            self._last = time.monotonic()

    def hurry(self, go: threading.Event) -> None:
        """Let the housekeeping waiting on ``go`` run now."""
        with self._changed:
            go.set()
            self._changed.notify_all()

    def wait(self, go: threading.Event, *, since: float) -> None:
        """Return once it is quiet, ``go`` is set, or ``longest_s`` passed since ``since`` (when the
        work was queued: work that waited its turn behind other work does not wait again)."""
        deadline = since + self.longest_s
        with self._changed:
            while not go.is_set():
                now = time.monotonic()
                if now >= deadline or (not self._calls and now - self._last >= self.quiet_s):
                    return
                until = deadline if self._calls else min(deadline, self._last + self.quiet_s)
                self._changed.wait(until - now)


class _Deferred:
    """One piece of housekeeping queued behind a :class:`_QuietGate`."""

    def __init__(self, executor: ThreadPoolExecutor, gate: _QuietGate, work: Callable[[], Any]) -> None:
        self.gate = gate
        self.go = threading.Event()
        queued = time.monotonic()

        def run() -> Any:
            gate.wait(self.go, since=queued)
            return work()

        self.future: Future = executor.submit(run)

    def hurry(self) -> None:
        self.gate.hurry(self.go)


class _SandboxPool:
    """Started sandboxes per image, shared by every RepoEnv of the process: ``take`` hands one out
    (a warm one when ready, its command channel open and answering) and queues its replacement;
    ``retire`` queues the removal of an episode's sandbox. Both wait for a quiet moment between
    tool calls (:class:`_QuietGate`), so they do not slow the calls of the episode that just began."""

    def __init__(self, runtime: Runtime, size: int, *, command_channel: bool = True,
                 gate: _QuietGate | None = None) -> None:
        self.runtime = runtime
        self.size = size
        self.limits = dataclasses.replace(runtime.limits, persistent_channel=command_channel)
        self.gate = gate or _QuietGate()
        self._ready: dict[str, list[_Deferred]] = {}
        self._retiring: list[_Deferred] = []
        self._lock = threading.Lock()
        self._starter = ThreadPoolExecutor(max_workers=2, thread_name_prefix="repo2env-warm")
        self._remover = ThreadPoolExecutor(max_workers=2, thread_name_prefix="repo2env-retire")

    def take(self, task: Task) -> Sandbox:
        self.gate.touch()
        image = task.env_spec.image if task.env_spec else None
        spare = None
        with self._lock:
            queue = self._ready.setdefault(image or "", [])
            if queue:
                spare = queue.pop(0)
            while image and len(queue) < self.size:
                queue.append(_Deferred(self._starter, self.gate,
                                       functools.partial(self.runtime.start, task, limits=self.limits)))
        # A spare still queued behind others' waits is started here instead (cancelled, it never runs).
        if spare is not None and not spare.future.cancel():
            spare.hurry()
            try:
                return spare.future.result()
            except Exception:  # a spare that failed to start: start one now, and say why if that fails too
                pass
        return self.runtime.start(task, limits=self.limits)

    def retire(self, sandbox: Sandbox) -> None:
        """Remove ``sandbox`` at the next quiet moment (within ``gate.longest_s``)."""
        self.gate.touch()  # an episode ends: a reset, and its first tool call, usually follow
        try:
            job = _Deferred(self._remover, self.gate, sandbox.close)
        except RuntimeError:  # interpreter shutdown: no new threads; the backend's exit hook removes it
            sandbox.close(wait=False)
            return
        with self._lock:
            self._retiring = [one for one in self._retiring if not one.future.done()] + [job]

    def release(self) -> None:
        """Remove every spare and every retired sandbox now, and wait for it."""
        with self._lock:
            spares = [spare for queue in self._ready.values() for spare in queue]
            self._ready.clear()
            retiring, self._retiring = self._retiring, []
        for job in spares + retiring:
            job.hurry()
        for spare in spares:
            if spare.future.cancel():
                continue
            try:
                spare.future.result().close()
            except Exception:  # a spare that never started has nothing to remove
                pass
        for job in retiring:
            try:
                job.future.result()
            except Exception:  # noqa: BLE001 - already removed, or the engine's exit hook will
                pass


class _GroupGrading:
    """Grades a group's episodes at once. TRL asks ``get_reward`` of each environment in turn after
    the whole group has generated; grading them one after another would make the trainer wait the
    sum of the gradings. The first call starts the grading of every live, ungraded episode of the
    process (``grading_jobs`` at a time); each environment then takes its own result, but only if
    its diff is still the one graded: an episode that changed its sandbox after the early grading
    (a trainer that asks rewards mid-episode) is graded again, so early grading never changes a reward."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.envs: weakref.WeakSet[RepoEnv] = weakref.WeakSet()
        self._pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="repo2env-grade") if jobs > 1 else None
        self._lock = threading.Lock()

    def start_others(self, asking: RepoEnv) -> None:
        if self._pool is None:
            return
        with self._lock:
            for env in list(self.envs):
                if env is not asking:
                    env._start_grading(self._pool)


_shared: dict[tuple[int, int], tuple[Any, Any, _SandboxPool, _GroupGrading]] = {}
_shared_lock = threading.Lock()


def _shared_machinery(config: RepoEnvConfig):
    """One backend, grader and pool per process and config (instances are many, engines are one).

    The one place RepoEnv opens a backend: everything else here uses the runtime protocol."""
    from repo2env.runtime.backends import open_backend
    from repo2env.verify.grader import Grader

    key = (os.getpid(), hash(config))
    with _shared_lock:
        if key not in _shared:
            runtime = open_backend(config.backend or None)
            grader = Grader(runtime, config.logs_dir, timeout_s=config.grade_timeout_s, keep_warm=True)
            _shared[key] = (runtime, grader, _SandboxPool(runtime, config.warm_sandboxes,
                                                                command_channel=config.command_channel),
                            _GroupGrading(config.grading_jobs))
        return _shared[key]


def release_shared_sandboxes() -> None:
    """Remove the warm sandboxes every RepoEnv of this process shares (the reset pool's and the
    grader's spares): call it when training ends, so no container outlives the run."""
    with _shared_lock:
        machinery = [value for key, value in _shared.items() if key[0] == os.getpid()]
    for _, grader, pool, _ in machinery:
        grader.close()
        pool.release()


class RepoEnv:
    """A coding task in a sandbox: the repository at /testbed, shell and file tools, and the
    fraction of the PR's hidden tests that pass as the reward."""

    def __init__(self, config: RepoEnvConfig | None = None) -> None:
        self._config = config or RepoEnvConfig.from_environment()
        self._runtime, self._grader, self._pool, self._group = _shared_machinery(self._config)
        self._task: Task | None = None
        self._sandbox: Sandbox | None = None
        self._tools: AgentTools | None = None
        self._started = 0.0
        self._reward: float | None = None
        self._early: Future | None = None  # an early grading of this episode: (diff, GradeResult)
        self.last_grade: GradeResult | None = None
        self.tool_calls: dict[str, int] = {}
        # Per-episode signs of reward hacking or a stuck policy, read by repo2env.train's metrics.
        self.repeated_calls = 0
        self.timeouts = 0
        self.last_diff = ""
        self._seen_calls: set[tuple] = set()
        self._runs: list[tuple[str, dict[str, Any], str, float, float]] = []
        self._prompt: list[dict[str, Any]] = []

    @property
    def task(self) -> Task | None:
        """The task of the current episode (a property: TRL turns only methods into tools)."""
        return self._task

    # --- episode ---------------------------------------------------------------------------------

    def reset(self, **row: Any) -> str | None:
        """Start the task of ``row`` (a published dataset row or a Task's fields) in a fresh sandbox
        and return its instruction, or None when the row's ``prompt`` already carries it (TRL appends
        what reset returns to the prompt, so a published row would otherwise show the issue twice)."""
        self._close()
        task = _task_of(row)
        self._task = task
        self._sandbox = self._pool.take(task)
        self._tools = AgentTools(self._sandbox, command_timeout_s=self._config.command_timeout_s,
                                 test_timeout_s=self._config.test_timeout_s,
                                 output_cap_chars=self._config.output_cap_chars,
                                 test_command=visible_tests_command(task))
        self._started = time.monotonic()
        self._reward, self.last_grade, self.tool_calls = None, None, {}
        self._early = None
        self._group.envs.add(self)
        self.repeated_calls, self.timeouts, self.last_diff, self._seen_calls = 0, 0, "", set()
        self._runs = []
        prompt = row.get("prompt")
        self._prompt = list(prompt) if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt) \
            else agent_messages(task)
        instruction = instruction_text(task)
        prompt = row.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict) and prompt[-1].get("content") == instruction:
            return None
        return instruction

    def get_reward(self) -> float:
        """Grade the sandbox's changes with the hidden tests in a fresh sandbox; 0.0 without an episode."""
        if self._reward is not None:
            return self._reward
        if self._task is None or self._sandbox is None:
            return 0.0
        self._group.start_others(self)
        diff = self.last_diff = self._sandbox.diff()
        early = self._early
        grade = None
        if early is not None:
            try:
                graded_diff, graded = early.result()
                grade = graded if graded_diff == diff else None
            except Exception:  # noqa: BLE001 - an early grading that failed: grade here, where errors show
                grade = None
        self.last_grade = grade or self._grader.grade(self._task, diff, mode=self._config.reward_mode)
        self._reward = self.last_grade.reward
        if self._config.record_traces and self.last_grade.log_dir:
            write_json(Path(self.last_grade.log_dir) / "trace.json", self._trace(diff).model_dump(mode="json"))
        return self._reward

    def _trace(self, diff: str) -> EpisodeTrace:
        """The graded episode as a trace: the prompt, each tool call as an assistant turn and its
        answer (the model's own words are TRL's: RepoEnv sees its tool calls only)."""
        messages = [dict(message) for message in self._prompt]
        runs = []
        for index, (name, arguments, answer, began, duration) in enumerate(self._runs):
            call_id = f"call_{index}"
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": answer})
            runs.append(ToolRun(index=index, at_s=round(began - self._started, 3), tool=name, arguments=arguments,
                                output=answer[:TOOL_RUN_OUTPUT_CHARS], duration_s=round(duration, 4)))
        task = self._task
        return EpisodeTrace(episode_id=uuid.uuid4().hex[:16], instance_id=task.instance_id if task else "",
                            source="repo_env", agent="repo_env", tools=tool_schemas(), messages=messages, tool_runs=runs,
                            finished="graded", wall_s=round(time.monotonic() - self._started, 3), patch=diff,
                            reward=self._reward, grade=self.last_grade)

    def _start_grading(self, pool: ThreadPoolExecutor) -> None:
        """Grade this episode in ``pool`` now (the group's first get_reward asked), unless it is
        graded, being graded, or has no episode."""
        if self._reward is not None or self._early is not None or self._task is None or self._sandbox is None:
            return
        task, sandbox, mode = self._task, self._sandbox, self._config.reward_mode

        def grade() -> tuple[str, GradeResult]:
            diff = sandbox.diff()
            return diff, self._grader.grade(task, diff, mode=mode)

        self._early = pool.submit(grade)

    # --- tools: AgentTools' own, docstrings included (what the model reads) -----------------------

    @same_tool("bash")
    def bash(self, command: str) -> str:
        return self._use("bash", lambda tools: tools.bash(command), command=command)

    @same_tool("read_file")
    def read_file(self, path: str, start_line: int = 1, end_line: int = 0) -> str:
        return self._use("read_file", lambda tools: tools.read_file(path, start_line, end_line),
                         path=path, start_line=start_line, end_line=end_line)

    @same_tool("write_file")
    def write_file(self, path: str, content: str) -> str:
        return self._use("write_file", lambda tools: tools.write_file(path, content), path=path, content=content)

    @same_tool("str_replace")
    def str_replace(self, path: str, old: str, new: str) -> str:
        return self._use("str_replace", lambda tools: tools.str_replace(path, old, new), path=path, old=old, new=new)

    @same_tool("run_tests")
    def run_tests(self, paths: str = "") -> str:
        return self._use("run_tests", lambda tools: tools.run_tests(paths), paths=paths)

    # --- internals --------------------------------------------------------------------------------

    def _use(self, name: str, call, **arguments: Any) -> str:
        self.tool_calls[name] = self.tool_calls.get(name, 0) + 1
        key = (name, *arguments.values())
        self.repeated_calls += key in self._seen_calls
        self._seen_calls.add(key)
        if self._tools is None:
            return refusal("no task is loaded (reset first)")
        if time.monotonic() - self._started > self._config.episode_timeout_s:
            self.timeouts += 1
            return refusal(f"the episode's {self._config.episode_timeout_s:.0f} s are used up; stop and answer")
        began = time.monotonic()
        with self._pool.gate.tool_call():
            answer = call(self._tools)
        self.timeouts += "[timed out after" in answer
        # Kept as a tuple (the trace is built once, when the episode is graded): nothing on the tool path.
        self._runs.append((name, arguments, answer, began, time.monotonic() - began))
        return answer

    def _close(self) -> None:
        sandbox, self._sandbox, self._tools = self._sandbox, None, None
        if sandbox is not None:
            self._pool.retire(sandbox)  # removed in the background; interpreter exit waits for it

    def __del__(self) -> None:
        try:
            self._close()
        except Exception:  # interpreter shutdown: the backend's exit hook removes what is left
            pass


def _flag(raw: str) -> bool:
    """A yes/no setting as environment variables write it (1/0, true/false, yes/no, on/off)."""
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def _task_of(row: dict[str, Any]) -> Task:
    """A published dataset row (JSON columns) or a Task's own fields, as a Task."""
    if isinstance(row.get("env_spec"), str):
        return task_from_row(row, where="dataset row")
    fields = {name: value for name, value in row.items() if name in Task.model_fields}
    return Task.from_row(fields, where="dataset row")
