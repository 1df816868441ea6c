"""repo2env's environments over OpenEnv's protocol (``openenv-core``'s server pieces).

:class:`RepoOpenEnv` is an OpenEnv ``Environment`` wrapping :class:`RepoEnv`: ``reset`` starts a
task of the dataset (by ``task_id``, by ``seed``, or the next one in turn), ``step`` runs one tool
named by a :class:`RepoAction` (``bash``, ``read_file``, ``write_file``, ``str_replace``,
``run_tests``) or ``submit``, which grades the sandbox's changes with the hidden tests and ends the
episode with the reward. Mistakes (an unknown task or tool, wrong arguments, a step after the end)
come back as observations with ``error`` set, never as a server failure.

OpenEnv's transports: the WebSocket ``/ws`` keeps one environment per connection (episodes live
there, and ``EnvClient`` speaks it); HTTP ``/reset``, ``/step`` and ``/state`` build a fresh
environment per request and close it after, so over HTTP a reset answers the instruction and its
sandbox is removed when the request ends.
"""

from __future__ import annotations

import inspect
import uuid
from functools import partial
from typing import Any

from repo2env.envs.catalog import TaskCatalog
from repo2env.envs.repo_env import RepoEnv, RepoEnvConfig
from repo2env.envs.tools import TOOL_NAMES, tool_signatures
from repo2env.errors import InputError, Repo2EnvError
from repo2env.instruction import instruction_text

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    from pydantic import Field
except ImportError as exc:  # the optional extra is missing: one line saying how to add it
    raise InputError(f"OpenEnv support is not installed ({exc.name} is missing)",
                     hint="pip install 'repo2env[openenv]'") from None

#: The tools a step may name, besides ``submit``: the agent's one tool set (RepoEnv's tool methods).
TOOLS = TOOL_NAMES
SUBMIT = "submit"


class RepoAction(Action):
    """One tool call: ``tool`` names it, ``arguments`` are its keyword arguments."""

    tool: str = Field(..., description=f"One of {', '.join(TOOLS)}, or '{SUBMIT}' to be graded and end the episode.")
    arguments: dict[str, Any] = Field(default_factory=dict, description=(
        f"The tool's keyword arguments: {tool_signatures()}; submit takes none."))


class RepoObservation(Observation):
    """What a reset or a step answers: the instruction or the tool's output, and whether it failed."""

    output: str = Field("", description="The task's instruction after reset, the tool's output after a step.")
    task_id: str | None = Field(None, description="The task of the episode.")
    tool: str | None = Field(None, description="The tool this observation answers (None after reset).")
    error: bool = Field(False, description="The request could not be carried out (output says why).")


class RepoState(State):
    """The episode: its id and step count (OpenEnv's), its task, and whether it was graded."""

    task_id: str | None = None
    submitted: bool = False
    reward: float | None = None


class RepoOpenEnv(Environment[RepoAction, RepoObservation, RepoState]):
    """A repo2env task as an OpenEnv environment (one sandbox per episode, graded on submit)."""

    # Every instance has its own sandbox; the Docker runtime and grader they share are thread-safe.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, catalog: TaskCatalog, config: RepoEnvConfig | None = None) -> None:
        super().__init__()
        self._catalog = catalog
        self._env = RepoEnv(config)
        self._state = RepoState(episode_id=None)

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              **kwargs: Any) -> RepoObservation:
        """Start an episode on ``task_id`` (else the task ``seed`` picks, else the next one in turn)."""
        self._env._close()
        self._state = RepoState(episode_id=episode_id or str(uuid.uuid4()), task_id=task_id)
        try:
            row = self._catalog.row(task_id) if task_id else self._catalog.pick(seed)
            self._state.task_id = row["instance_id"]
            # RepoEnv answers None when the row's prompt carries the instruction (TRL appends it);
            # an OpenEnv client has no prompt, so the observation always holds it.
            instruction = self._env.reset(**row) or instruction_text(self._env.task)
        except Repo2EnvError as exc:  # an unknown task, an image that is not here: the client's to fix
            self._state.submitted = True
            return RepoObservation(output=f"error: {exc}", task_id=self._state.task_id, error=True, done=True)
        return RepoObservation(output=instruction, task_id=self._state.task_id)

    def step(self, action: RepoAction, timeout_s: float | None = None, **kwargs: Any) -> RepoObservation:
        """Run the action's tool (RepoEnv's own time limits apply), or grade on ``submit``."""
        self._state.step_count += 1
        if self._state.task_id is None or self._state.submitted:
            why = "the episode has ended" if self._state.submitted else "no episode has started"
            return self._answer(action, f"error: {why}; reset to start one", error=True, done=self._state.submitted)
        if action.tool == SUBMIT:
            return self._submit(action)
        if action.tool not in TOOLS:
            return self._answer(action, f"error: unknown tool {action.tool!r}; choose one of "
                                        f"{', '.join(TOOLS)} or {SUBMIT}", error=True)
        method = getattr(self._env, action.tool)
        try:
            inspect.signature(method).bind(**action.arguments)
        except TypeError as exc:
            return self._answer(action, f"error: {action.tool}: {exc}", error=True)
        return self._answer(action, method(**action.arguments))

    @property
    def state(self) -> RepoState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="repo2env", version=_version(),
            description=f"{len(self._catalog)} coding tasks mined from merged pull requests: the repository at "
                        "/testbed, shell and file tools, the PR's hidden tests as the reward (on submit).")

    def close(self) -> None:
        self._env._close()

    # --- internals --------------------------------------------------------------------------------

    def _submit(self, action: RepoAction) -> RepoObservation:
        reward = self._env.get_reward()
        grade = self._env.last_grade
        self._state.submitted, self._state.reward = True, reward
        self._env._close()  # the episode is over: its sandbox goes now, not at the next reset
        summary = f"reward {reward:g}"
        if grade is not None:
            summary += f" (fail-to-pass {grade.f2p_rate:.0%}, pass-to-pass {grade.p2p_rate:.0%}" + (
                f", {grade.error}" if grade.error else "") + ")"
        return self._answer(action, summary, done=True, reward=reward)

    def _answer(self, action: RepoAction, output: str, *, error: bool = False, done: bool = False,
                reward: float | None = None) -> RepoObservation:
        return RepoObservation(output=output, task_id=self._state.task_id, tool=action.tool, error=error,
                               done=done, reward=reward)


class RepoEnvClient(EnvClient[RepoAction, RepoObservation, RepoState]):
    """OpenEnv's WebSocket client, typed for this server: ``RepoEnvClient(base_url=URL).sync()``."""

    def _step_payload(self, action: RepoAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[RepoObservation]:
        observation = RepoObservation(**payload.get("observation", {}), done=payload.get("done", False),
                                      reward=payload.get("reward"))
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> RepoState:
        return RepoState(**payload)


def create_openenv_app(catalog: TaskCatalog, *, config: RepoEnvConfig | None = None, max_sessions: int = 8):
    """The FastAPI app serving ``catalog`` over OpenEnv's HTTP and WebSocket protocol."""
    # Read REPO2ENV_ENV_* once, here: a bad value is a one-line error at start, not at the first reset.
    config = config or RepoEnvConfig.from_environment()
    app = create_app(partial(RepoOpenEnv, catalog=catalog, config=config), RepoAction, RepoObservation,
                     env_name="repo2env", max_concurrent_envs=max_sessions)
    app.add_middleware(_QuietWebSocketClose)
    return app


class _QuietWebSocketClose:
    """openenv-core 0.3's /ws handler closes the socket again after the client closed it (its session
    already torn down); Starlette then raises WebSocketDisconnect, which uvicorn would log as an
    application error on every normal disconnect. That one exception, on a WebSocket, is not an error."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def serve(catalog: TaskCatalog, *, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 8,
          config: RepoEnvConfig | None = None) -> None:
    """Serve ``catalog`` until interrupted (uvicorn); open sandboxes are removed at exit."""
    import uvicorn

    uvicorn.run(create_openenv_app(catalog, config=config, max_sessions=max_sessions), host=host, port=port,
                log_level="warning")


def _version() -> str:
    from repo2env import __version__

    return __version__
