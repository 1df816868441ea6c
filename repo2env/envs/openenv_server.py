"""repo2env's environments over OpenEnv's protocol (``openenv-core``'s server pieces), tools as MCP tools.

:class:`RepoOpenEnv` is an OpenEnv ``MCPEnvironment`` wrapping :class:`RepoEnv`: ``reset`` starts a
task of the dataset (by ``task_id``, by ``seed``, or the next one in turn) and answers its
instruction; a step is an MCP tool call (OpenEnv's ``CallToolAction``) of ``bash``, ``read_file``,
``write_file``, ``str_replace``, ``run_tests`` (RepoEnv's tools, their docstrings the tools'
descriptions) or ``submit``, which grades the sandbox's changes with the hidden tests and ends the
episode with the reward; ``ListToolsAction`` lists them. So OpenEnv's MCP clients work unchanged:
``MCPToolClient`` over the WebSocket (``list_tools``, ``call_tool``, with rewards), and MCP's
JSON-RPC at ``/mcp`` (``tools/list``, ``tools/call``).

Mistakes never fail the server. A call the tool refused (a path outside /testbed, an ambiguous
replacement; :class:`~repo2env.envs.tools.Refusal`) is a tool error, as MCP reports them: the
observation's ``result`` has ``is_error`` true and the reason as its text. A call that could not be
made (an unknown tool, wrong arguments, no episode or one that has ended) sets the observation's
``error`` (OpenEnv's ``ToolError``). A reset that fails (an unknown task, an image not here) answers
an observation with ``error`` true and ``done``.

OpenEnv's transports: the WebSocket ``/ws`` keeps one environment per connection (episodes live
there); HTTP ``/reset``, ``/step`` and ``/state`` build a fresh environment per request and close
it after, so over HTTP a reset answers the instruction and its sandbox is removed when the request
ends. ``/mcp`` without an OpenEnv session serves ``tools/list``; its tool calls need an episode.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import uuid
from functools import partial
from typing import Any

from repo2env import defaults, install_hint
from repo2env.envs.catalog import TaskCatalog
from repo2env.envs.repo_env import RepoEnv, RepoEnvConfig
from repo2env.envs.tools import TOOL_NAMES, Refusal
from repo2env.errors import InputError, Repo2EnvError
from repo2env.instruction import instruction_text

try:
    from fastmcp import FastMCP
    from fastmcp.client.client import CallToolResult
    from fastmcp.exceptions import ToolError as McpToolError
    from mcp.types import TextContent
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import (
        CallToolAction,
        CallToolObservation,
        ToolError,
        ToolErrorType,
    )
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    from pydantic import Field
except ImportError as exc:  # the optional extra is missing: one line saying how to add it
    raise InputError(f"OpenEnv support is not installed ({exc.name} is missing)",
                     hint=install_hint("openenv")) from None

#: The tools a step may call besides ``submit``: the agent's one tool set (RepoEnv's tool methods).
TOOLS = TOOL_NAMES
SUBMIT = "submit"
#: How long a tool call may take over MCP beyond RepoEnv's own limits (OpenEnv's default is 30 s).
TOOL_CALL_MARGIN_S = 60.0


class RepoObservation(Observation):
    """What a reset answers: the task's instruction, or why the episode could not start. Its
    ``metadata`` (the task id, the instruction) is for in-process callers: OpenEnv sends no
    observation's metadata over HTTP or the WebSocket, so ``MCPToolClient`` (which reads nothing
    else) gets none of it; a client reads ``output``."""

    output: str = Field("", description="The task's instruction, or 'error: ...' when the reset failed.")
    task_id: str | None = Field(None, description="The task of the episode.")
    error: bool = Field(False, description="The reset could not be carried out (output says why).")


class RepoState(State):
    """The episode: its id and step count (OpenEnv's), its task, and whether it was graded."""

    task_id: str | None = None
    submitted: bool = False
    reward: float | None = None


class RepoOpenEnv(MCPEnvironment):
    """A repo2env task as an OpenEnv environment: one sandbox per episode, tools over MCP, graded on submit."""

    # Every instance has its own sandbox; the Docker runtime and grader they share are thread-safe.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, catalog: TaskCatalog, config: RepoEnvConfig | None = None) -> None:
        self._catalog = catalog
        self._env = RepoEnv(config)
        config = config or RepoEnvConfig.from_environment()
        # A grading without its own timeout takes the task's (at most the default policy's).
        grade_timeout_s = config.grade_timeout_s or defaults.GRADE_TIMEOUT_S
        self._tool_timeout_s = max(config.command_timeout_s, config.test_timeout_s, grade_timeout_s) + TOOL_CALL_MARGIN_S
        self._state = RepoState(episode_id=None)
        server = FastMCP("repo2env")
        for name in TOOLS:
            server.tool(name=name)(self._mcp_tool(name))
        server.tool(name=SUBMIT)(self._mcp_submit)
        super().__init__(server)

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
            return RepoObservation(output=f"error: {exc}", task_id=self._state.task_id, error=True, done=True,
                                   metadata={"task_id": self._state.task_id, "error": str(exc)})
        return RepoObservation(output=instruction, task_id=self._state.task_id,
                               metadata={"task_id": self._state.task_id, "instruction": instruction})

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """A tool call (RepoEnv's own time limits apply), ``submit`` (graded), or the tool list."""
        if isinstance(action, CallToolAction):
            return self._call(action)
        return super().step(action, timeout_s=timeout_s or self._tool_timeout_s, **kwargs)

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, CallToolAction):  # a tool runs for seconds or minutes: off the event loop
            return await asyncio.get_running_loop().run_in_executor(None, self._call, action)
        return await super().step_async(action, timeout_s=timeout_s or self._tool_timeout_s, **kwargs)

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        # create_app routes only MCP actions here (call_tool, list_tools); anything else is a mistake.
        return RepoObservation(output=f"error: {type(action).__name__} is not an action of this environment; "
                                      "send call_tool or list_tools", task_id=self._state.task_id, error=True)

    @property
    def state(self) -> RepoState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="repo2env", version=_version(),
            description=f"{len(self._catalog)} coding tasks mined from merged pull requests: the repository at "
                        "/testbed, shell and file tools over MCP, the PR's hidden tests as the reward (on submit).")

    def close(self) -> None:
        self._env._close()
        super().close()

    # --- internals --------------------------------------------------------------------------------

    def _call(self, action: CallToolAction) -> CallToolObservation:
        name = action.tool_name
        self._state.step_count += 1
        if name not in (*TOOLS, SUBMIT):
            return _failed(name, ToolErrorType.TOOL_NOT_FOUND,
                           f"unknown tool {name!r}; choose one of {', '.join(TOOLS)} or {SUBMIT}")
        problem = self._episode_problem()
        if problem:
            return _failed(name, ToolErrorType.EXECUTION_ERROR, problem, done=self._state.submitted)
        method = self._submit if name == SUBMIT else getattr(self._env, name)
        try:
            inspect.signature(method).bind(**action.arguments)
        except TypeError as exc:
            return _failed(name, ToolErrorType.INVALID_ARGS, f"{name}: {exc}")
        if name == SUBMIT:
            grade = self._submit()
            return CallToolObservation(tool_name=name, result=_result(grade["summary"], data=grade), done=True,
                                       reward=grade["reward"])
        answer = method(**action.arguments)
        return CallToolObservation(tool_name=name, result=_result(answer, is_error=isinstance(answer, Refusal)))

    def _episode_problem(self) -> str | None:
        if self._state.submitted:
            return "the episode has ended; reset to start one"
        if self._state.task_id is None:
            return "no episode has started; reset to start one"
        return None

    def _mcp_tool(self, name: str):
        """RepoEnv's tool ``name`` as a function for the MCP server (its signature and docstring),
        for calls that come over MCP's JSON-RPC (``/mcp``): a refusal or a call outside an episode
        is an MCP tool error."""
        method = getattr(self._env, name)

        @functools.wraps(method)
        def tool(**arguments: Any) -> str:
            problem = self._episode_problem()
            if problem:
                raise McpToolError(f"error: {problem}")
            self._state.step_count += 1
            answer = method(**arguments)
            if isinstance(answer, Refusal):
                raise McpToolError(str(answer))
            return str(answer)

        return tool

    def _mcp_submit(self) -> dict[str, Any]:
        """Submit the repository as it is: grade its changes with the task's hidden tests and end the
        episode. No other tool can be called after it.

        Returns:
            The reward (0 to 1), the fractions of fail-to-pass and pass-to-pass tests that pass, and a summary.
        """
        problem = self._episode_problem()
        if problem:
            raise McpToolError(f"error: {problem}")
        self._state.step_count += 1
        return self._submit()

    def _submit(self) -> dict[str, Any]:
        reward = self._env.get_reward()
        grade = self._env.last_grade
        self._state.submitted, self._state.reward = True, reward
        self._env._close()  # the episode is over: its sandbox goes now, not at the next reset
        summary = f"reward {reward:g}"
        if grade is not None:
            summary += f" (fail-to-pass {grade.f2p_rate:.0%}, pass-to-pass {grade.p2p_rate:.0%}" + (
                f", {grade.error}" if grade.error else "") + ")"
        return {"reward": reward, "f2p_rate": grade.f2p_rate if grade else 0.0,
                "p2p_rate": grade.p2p_rate if grade else 0.0, "resolved": bool(grade and grade.resolved),
                "error": grade.error if grade else None, "summary": summary}


def _result(text: str, *, is_error: bool = False, data: Any = None) -> CallToolResult:
    """A tool's answer as MCP's result (what OpenEnv's MCP environments return)."""
    return CallToolResult(content=[TextContent(type="text", text=str(text))], structured_content=None, meta=None,
                          data=str(text) if data is None else data, is_error=is_error)


def _failed(name: str, kind: ToolErrorType, message: str, *, done: bool = False) -> CallToolObservation:
    return CallToolObservation(tool_name=name, error=ToolError(error_type=kind, message=f"error: {message}"),
                               done=done)


def create_openenv_app(catalog: TaskCatalog, *, config: RepoEnvConfig | None = None, max_sessions: int = 8):
    """The FastAPI app serving ``catalog`` over OpenEnv's HTTP, WebSocket and MCP protocol."""
    # Read REPO2ENV_ENV_* once, here: a bad value is a one-line error at start, not at the first reset.
    config = config or RepoEnvConfig.from_environment()
    app = create_app(partial(RepoOpenEnv, catalog=catalog, config=config), CallToolAction, CallToolObservation,
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
