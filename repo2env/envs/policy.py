"""Policy rollouts: a model behind an OpenAI-compatible Chat Completions API solves a task with the
agent's one tool set (:mod:`repo2env.envs.tools`, the tools RepoEnv gives TRL).

vLLM, TGI, llama.cpp's server and hosted APIs all speak ``POST {base_url}/chat/completions`` with
``tools``; :class:`PolicyClient` drives one episode per sandbox through :class:`AgentTools`, and
:meth:`PolicyClient.rollouts` grades K episodes with the hidden verifier. Where reference rollouts
prove that rewards *can* vary, policy rollouts show whether they *do* for a real model.

An episode ends when the model answers without a tool call (``"stop"``), after ``max_turns``
model calls (``"max_turns"``), or on an HTTP failure that retries did not cure (``"error: ..."``).
Whatever the agent changed by then is its answer: the rollout grades the sandbox's diff either way.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from repo2env.envs.tools import AgentTools, tool_schemas, visible_tests_command
from repo2env.errors import PatchError
from repo2env.instruction import agent_messages
from repo2env.jsonl import write_json
from repo2env.models import EpisodeTrace, RolloutResult, Task
from repo2env.runtime.sandbox import Runtime, Sandbox

if TYPE_CHECKING:
    from repo2env.verify.grader import Grader

#: Seconds a Retry-After header may make the client wait, at most.
_MAX_RETRY_WAIT_S = 30.0


@dataclass(frozen=True)
class Episode:
    """One policy episode in one sandbox."""

    patch: str
    """The sandbox's diff against the snapshot when the episode ended (empty: nothing changed)."""
    turns: int
    """Model calls that were answered."""
    tool_calls: int
    """Tool calls executed."""
    finished: str
    """``"stop"`` (the model ended it), ``"max_turns"``, or ``"error: <why>"`` (the API failed for good,
    or the agent's diff could not be read, in which case ``patch`` is empty)."""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """The conversation as sent to the model: system, user, assistant and tool messages."""


class _RequestFailed(Exception):
    """The Chat Completions request failed for good (after retries, when retrying made sense)."""


class PolicyClient:
    """A policy served over the OpenAI-compatible Chat Completions API with tool calling (vLLM needs
    ``--enable-auto-tool-choice`` and the model's ``--tool-call-parser`` for ``tool_choice="auto"``)."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 max_turns: int = 30, temperature: float = 1.0, retries: int = 3, backoff_s: float = 1.0) -> None:
        """``base_url`` ends before ``/chat/completions`` (e.g. ``http://localhost:8000/v1``);
        ``api_key`` defaults to ``$OPENAI_API_KEY`` (none is sent when both are unset). Answers of
        429 and 5xx, and refused connections, are retried ``retries`` times, waiting ``backoff_s``
        doubled each time (or the server's Retry-After)."""
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout_s = timeout_s
        self.max_turns = max_turns
        self.temperature = temperature
        self.retries = retries
        self.backoff_s = backoff_s

    def run_episode(self, task: Task, sandbox: Sandbox, *, seed: int | None = None) -> Episode:
        """Let the model work on ``task`` in ``sandbox`` until it stops, runs out of turns or the API
        fails; ``seed`` goes into every request. The sandbox stays open (the caller owns it).

        Failures of the sandbox itself (the engine gone) raise; they are not the policy's doing.
        """
        tools = AgentTools(sandbox, test_command=visible_tests_command(task))
        messages: list[dict[str, Any]] = list(agent_messages(task))
        turns = calls = 0
        finished = "max_turns"
        with requests.Session() as session:
            while turns < self.max_turns:
                try:
                    message = self._complete(session, messages, seed)
                except _RequestFailed as exc:
                    finished = f"error: {exc}"
                    break
                turns += 1
                tool_calls = _tool_calls_of(message, turn=turns)
                assistant: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
                if tool_calls:
                    assistant["tool_calls"] = tool_calls
                messages.append(assistant)
                if not tool_calls:
                    finished = "stop"
                    break
                for call in tool_calls:
                    result = _run_tool_call(tools, call["function"])
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
                    calls += 1
        try:
            patch = sandbox.diff()
        except PatchError as exc:
            # An agent that made its diff unreadable (larger than the output cap) scores on nothing.
            patch = ""
            finished = f"error: {exc.message}"
        return Episode(patch=patch, turns=turns, tool_calls=calls, finished=finished, transcript=messages)

    def rollouts(self, task: Task, runtime: Runtime, grader: Grader, k: int, seed: int = 0) -> list[RolloutResult]:
        """Run ``k`` episodes of ``task``, each in a fresh sandbox removed afterwards, with seeds
        ``seed``, ``seed + 1`` ...; grade each final diff. Results are named ``policy-0`` ...

        Each episode is kept as ``trace.json`` (an :class:`~repo2env.models.EpisodeTrace`: the
        conversation, how it ended, the grade) next to its grading logs.
        """
        results: list[RolloutResult] = []
        for index in range(k):
            started = time.monotonic()
            with runtime.start(task) as sandbox:
                episode = self.run_episode(task, sandbox, seed=seed + index)
            wall_s = time.monotonic() - started
            grade = grader.grade(task, episode.patch)
            if grade.log_dir:
                trace = EpisodeTrace(episode_id=f"policy-{index}-{uuid.uuid4().hex[:8]}", instance_id=task.instance_id,
                                     source="policy", agent="policy", model=self.model, seed=seed + index,
                                     tools=tool_schemas(), messages=episode.transcript, finished=episode.finished,
                                     wall_s=round(wall_s, 3), patch=episode.patch, reward=grade.reward, grade=grade)
                write_json(Path(grade.log_dir) / "trace.json", trace.model_dump(mode="json"))
            results.append(RolloutResult(kind="policy", name=f"policy-{index}", reward=grade.reward,
                                         resolved=grade.resolved, grade=grade))
        return results

    def _complete(self, session: requests.Session, messages: list[dict[str, Any]], seed: int | None) -> dict[str, Any]:
        """The assistant message of one Chat Completions call, retried on 429/5xx and refused
        connections; raises _RequestFailed with the reason otherwise."""
        url = f"{self.base_url}/chat/completions"
        body: dict[str, Any] = {"model": self.model, "messages": messages, "tools": tool_schemas(),
                                "tool_choice": "auto", "temperature": self.temperature}
        if seed is not None:
            body["seed"] = seed
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        for attempt in range(self.retries + 1):
            wait = self.backoff_s * 2**attempt
            try:
                response = session.post(url, json=body, headers=headers, timeout=self.timeout_s)
            except requests.ReadTimeout:
                # A model that took timeout_s to answer would likely take it again: do not retry.
                raise _RequestFailed(f"no answer from {url} within {self.timeout_s:.0f} s") from None
            except requests.ConnectionError as exc:
                failure, retryable = f"cannot reach {url} ({_first_line(exc)})", True
            except requests.RequestException as exc:
                raise _RequestFailed(f"request to {url} failed ({_first_line(exc)})") from None
            else:
                if response.status_code == 200:
                    return _assistant_message(response)
                failure = f"HTTP {response.status_code} from {url}: {response.text.strip()[:300]}"
                retryable = response.status_code == 429 or response.status_code >= 500
                wait = _retry_after(response) or wait
            if not retryable or attempt == self.retries:
                raise _RequestFailed(failure)
            time.sleep(wait)
        raise AssertionError("unreachable: the last attempt raises or returns")


def _assistant_message(response: requests.Response) -> dict[str, Any]:
    try:
        answer = response.json()
        message = answer["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _RequestFailed(f"the answer is not a chat completion: {response.text.strip()[:300]}") from None
    if not isinstance(message, dict):
        raise _RequestFailed("the answer's message is not an object")
    return message


def _tool_calls_of(message: dict[str, Any], *, turn: int) -> list[dict[str, Any]]:
    """The message's tool calls in the canonical shape (string arguments, an id on each), so they
    can be sent back verbatim and answered by ``tool_call_id``."""
    calls = []
    for position, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            call = {}
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        arguments = function.get("arguments", "{}")
        # Some servers send the arguments as an object instead of a JSON string.
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append({
            "id": str(call.get("id") or f"call_{turn}_{position}"),
            "type": "function",
            "function": {"name": str(function.get("name", "")), "arguments": arguments},
        })
    return calls


def _run_tool_call(tools: AgentTools, function: dict[str, str]) -> str:
    """The tool's answer, or an error text for the model when its arguments are not a JSON object."""
    try:
        arguments = json.loads(function["arguments"] or "{}")
    except json.JSONDecodeError as exc:
        return f"error: the arguments of {function['name']} are not valid JSON ({exc.msg} at column {exc.colno})"
    return tools.call(function["name"], arguments)


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_WAIT_S)
    except ValueError:
        return None  # absent, or an HTTP date: fall back to the exponential backoff


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
