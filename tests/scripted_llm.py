"""A real local HTTP server speaking OpenAI's Chat Completions API, playing fixed tool-call scripts.

Each conversation follows one script: the i-th answer is the script's i-th tool call, and once the
script is spent the answer is a plain "done" (finish_reason ``stop``). The script is chosen when a
conversation starts (a request holding only system and user messages): ``schedule[seed %
len(schedule)]`` when the request carries a ``seed``, else the schedule's next entry, else a
``random.Random(seed)`` choice. Later requests find their conversation by the first user message
and the seed, and their step by the number of assistant messages they carry, so a retried request
gets the same answer.

Requests are checked a little, as a strict server would (``model``, ``messages``, every tool call
answered by a ``tool`` message carrying its ``tool_call_id``), and a 400 says what is wrong. A
request that offers no tools (a harness's side call, such as OpenCode naming its session) gets a
plain text answer and plays no script. ``"stream": true`` gets the same answer as server-sent
events (a role-and-content or tool-call delta, the finish, the usage when asked, ``[DONE]``).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from repo2env.models import Task

_PATCH_DELIMITER = "REPO2ENV_SCRIPTED_PATCH_END"


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call a script makes."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (answered or not)."""

    path: str
    headers: dict[str, str]
    body: Any
    status: int


def patch_script(patch: str) -> list[ScriptedCall]:
    """Apply ``patch`` the way an agent could: write it with a heredoc, then ``git apply`` it."""
    if _PATCH_DELIMITER in patch:
        raise ValueError("the patch contains the heredoc delimiter")
    text = patch if patch.endswith("\n") else patch + "\n"
    command = f"cat > /tmp/fix.diff <<'{_PATCH_DELIMITER}'\n{text}{_PATCH_DELIMITER}\ngit apply /tmp/fix.diff"
    return [ScriptedCall("bash", {"command": command})]


def gold_script(task: Task) -> list[ScriptedCall]:
    """Apply the task's gold patch."""
    return patch_script(task.patch)


def partial_script(partial_patch: str) -> list[ScriptedCall]:
    """Apply a patch that fixes part of the bug."""
    return patch_script(partial_patch)


def nothing_script(path: str = "README.md") -> list[ScriptedCall]:
    """Look at one file, change nothing."""
    return [ScriptedCall("read_file", {"path": path})]


class ScriptedLLM:
    """The server; use it as a context manager. ``failures``: HTTP statuses answered (in order) to
    the first requests, before any script is played, to exercise clients' retries."""

    def __init__(self, scripts: dict[str, list[ScriptedCall]], schedule: list[str] | None = None, seed: int = 0,
                 *, failures: list[int] | None = None) -> None:
        unknown = set(schedule or []) - set(scripts)
        if unknown:
            raise ValueError(f"the schedule names unknown scripts: {sorted(unknown)}")
        self.scripts = scripts
        self.schedule = list(schedule) if schedule else None
        self.requests: list[RecordedRequest] = []
        self.conversations: dict[str, str] = {}
        self._failures = list(failures or [])
        self._random = random.Random(seed)
        self._next_in_schedule = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLM:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="scripted-llm")
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat completion requests received, in order."""
        with self._lock:
            return [request.body for request in self.requests if isinstance(request.body, dict)]

    def _answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """(status, JSON answer) for one request body."""
        with self._lock:
            if self._failures:
                status = self._failures.pop(0)
                return status, _error(f"injected failure {status}", "server_error")
            problem = _invalid(body)
            if problem:
                return 400, _error(problem, "invalid_request_error")
            messages = body["messages"]
            first_user = next(message.get("content") or "" for message in messages if message.get("role") == "user")
            system = next((message.get("content") for message in messages if message.get("role") == "system"), None)
            seed = body.get("seed")
            key = hashlib.sha256(json.dumps([first_user, system, seed]).encode()).hexdigest()[:16]
            step = sum(1 for message in messages if message.get("role") == "assistant")
            if not body.get("tools"):
                return 200, _completion(body, key, step, {"role": "assistant", "content": "a side answer"}, "stop")
            if step == 0:
                self.conversations[key] = self._pick(seed)
            elif key not in self.conversations:
                return 400, _error("a conversation this server never started", "invalid_request_error")
            script = self.scripts[self.conversations[key]]
        if step < len(script):
            call = script[step]
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{key[:8]}_{step}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }]}
            finish_reason = "tool_calls"
        else:
            message, finish_reason = {"role": "assistant", "content": "done"}, "stop"
        return 200, _completion(body, key, step, message, finish_reason)

    def _pick(self, seed: Any) -> str:
        if self.schedule and isinstance(seed, int):
            return self.schedule[seed % len(self.schedule)]
        if self.schedule:
            name = self.schedule[self._next_in_schedule % len(self.schedule)]
            self._next_in_schedule += 1
            return name
        chooser = random.Random(seed) if isinstance(seed, int) else self._random
        return chooser.choice(sorted(self.scripts))

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", errors="replace")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    status, answer = 404, _error(f"no route {self.path}", "not_found")
                elif not isinstance(body, dict):
                    status, answer = 400, _error("the body is not a JSON object", "invalid_request_error")
                else:
                    status, answer = server._answer(body)
                with server._lock:
                    server.requests.append(RecordedRequest(self.path, dict(self.headers), body, status))
                if status == 200 and isinstance(body, dict) and body.get("stream"):
                    self._stream(answer, include_usage=bool((body.get("stream_options") or {}).get("include_usage")))
                    return
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, answer: dict[str, Any], *, include_usage: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
                choice = answer["choices"][0]
                delta: dict[str, Any] = {"role": "assistant", "content": choice["message"].get("content")}
                if choice["message"].get("tool_calls"):
                    delta["tool_calls"] = [{"index": index, **call}
                                           for index, call in enumerate(choice["message"]["tool_calls"])]
                head = {key: answer[key] for key in ("id", "created", "model")}
                events = [{**head, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                          {**head, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}]
                if include_usage:
                    events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": answer["usage"]})
                for event in events:
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                pass  # the request log is self.requests; stderr stays quiet

        return Handler


def _invalid(body: dict[str, Any]) -> str | None:
    """What makes a chat completion request invalid, or None."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return "messages must be a non-empty list of objects"
    if not any(message.get("role") == "user" for message in messages):
        return "messages need a user message"
    expected: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            if not expected:
                return f"messages[{index}]: a tool message that answers no tool call"
            if message.get("tool_call_id") != expected[0]:
                return f"messages[{index}]: tool_call_id {message.get('tool_call_id')!r} should be {expected[0]!r}"
            expected.pop(0)
            continue
        if expected:
            return f"messages[{index}]: tool calls {expected} were not answered"
        if role == "assistant":
            expected = [call.get("id") for call in message.get("tool_calls") or []]
        elif role not in ("system", "user"):
            return f"messages[{index}]: unknown role {role!r}"
    if expected:
        return f"tool calls {expected} were not answered"
    return None


def _completion(body: dict[str, Any], key: str, step: int, message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{key}-{step}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
