"""The capturing proxy: an OpenAI-compatible endpoint between a harness and the policy's server.

A harness whose loop the trainer does not own (mini-swe-agent, OpenCode, any CLI) is pointed at
``{proxy}/episodes/{id}/v1``. The proxy forwards each ``POST .../chat/completions`` (tools and
all, streamed or not) to the upstream (vLLM, ``trl vllm-serve``, a hosted API) and records, per
episode, the request as the harness sent it and the answer as the harness received it, with the
prompt's and the completion's token ids and the completion's log-probabilities where the upstream
gives them. It asks for them itself (``logprobs``, vLLM's ``return_token_ids``) and takes them out
of the answer again, so the harness sees what it asked for; an upstream that refuses the extra
fields (a hosted API) is asked again without them, and from then on never with them.

The proxy enforces each episode's :class:`~repo2env.models.EpisodeBudget`: the call past a limit
is refused with an error (``budget_exhausted``) and never forwarded, and the episode records which
limit cut it off. With a :class:`~repo2env.models.PerturbationPlan`, a share of the calls is
answered by a transient failure (HTTP 503) the harness must retry.

A harness whose tool calls do not pass the sandbox bridge (one running its own tools in the
sandbox) has its tool results recorded here, from the ``tool`` messages of its requests, and the
episode's tool faults applied to them before they reach the model
(:mod:`~repo2env.harness.tool_results`); the recorded request is what the model got. A harness
whose tools go through the bridge (``tools_through_bridge``) has them recorded and perturbed
there, and its tool messages pass the proxy as they are.

Transports: TCP on the host's loopback (host-side harnesses), and one unix socket per episode
(:meth:`CapturingProxy.serve_unix`) that a sandbox mounts, through which a harness inside the
sandbox reaches only its own episode, the sandbox keeping no network.
"""

from __future__ import annotations

import bisect
import http.client
import json
import os
import socket
import socketserver
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from repo2env.errors import InputError
from repo2env.harness.perturb import Perturber
from repo2env.harness.tool_results import ToolResults
from repo2env.models import CutOff, EpisodeBudget, ModelCall, PerturbationPlan, ToolRun

#: Fields the proxy adds to a request so the upstream returns what training needs (vLLM's names).
CAPTURE_FIELDS = ("logprobs", "return_token_ids")
#: How long the proxy waits for the upstream's answer (a long generation, a slow hosted API).
UPSTREAM_TIMEOUT_S = 600.0
#: How long closing an episode waits for its requests in flight to be recorded.
CLOSE_SETTLE_S = 10.0


@dataclass
class ProxyEpisode:
    """One episode's record and budget at the proxy (thread-safe: a harness may call concurrently)."""

    id: str
    budget: EpisodeBudget
    model: str | None = None
    """The upstream's model name sent in every request (None: the harness's own)."""
    perturber: Perturber | None = None
    tool_results: ToolResults | None = None
    """The harness's tool results as the proxy records and perturbs them; None when its tools go
    through the sandbox bridge, which does both."""
    calls: list[ModelCall] = field(default_factory=list)
    cut_off: CutOff | None = None
    started: float = field(default_factory=time.monotonic)
    refused: threading.Event = field(default_factory=threading.Event)
    """Set when the budget refused a call: the harness went past it and should be stopped."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _answered: int = field(default=0, init=False)
    _tokens: int = field(default=0, init=False)
    _requests: int = field(default=0, init=False)
    _in_flight: int = field(default=0, init=False)
    _numbers: list[int] = field(default_factory=list, init=False)
    """The request number of each of :attr:`calls`, in the same order."""

    def __post_init__(self) -> None:
        self._settled = threading.Condition(self._lock)

    def admit(self) -> tuple[int, CutOff | None]:
        """The request's number in the episode, and the limit that refuses it (None: forward it).
        Every admitted request is in flight until :meth:`finished`."""
        with self._lock:
            number = self._requests
            self._requests += 1
            self._in_flight += 1
            limit: CutOff | None = None
            if self._answered >= self.budget.max_turns:
                limit = "turns"
            elif self.budget.max_tokens and self._tokens >= self.budget.max_tokens:
                limit = "tokens"
            elif time.monotonic() - self.started >= self.budget.max_wall_s:
                limit = "wall_time"
            if limit is not None and self.cut_off is None:
                self.cut_off = limit
        if limit is not None:
            self.refused.set()
        return number, limit

    def record(self, call: ModelCall, number: int) -> None:
        """Record request ``number``'s call. Calls stand in the order their requests came: a harness
        has its answer before the proxy records it, so a quick next request (an injected failure) may
        be recorded before the one it followed."""
        with self._lock:
            if call.status == 200 and call.refused is None:
                self._answered += 1
                length = (len(call.prompt_token_ids or ()) + len(call.completion_token_ids or ())) or \
                    (call.prompt_tokens + call.completion_tokens)
                self._tokens = max(self._tokens, length)
            at = bisect.bisect(self._numbers, number)
            self._numbers.insert(at, number)
            self.calls.insert(at, call)
            self.calls[at:] = [later.model_copy(update={"index": index})
                               for index, later in enumerate(self.calls[at:], start=at)]

    def finished(self) -> None:
        """An admitted request is answered and recorded (or failed)."""
        with self._settled:
            self._in_flight -= 1
            self._settled.notify_all()

    def snapshot(self, *, settle_s: float = 0.0) -> list[ModelCall]:
        """The calls so far, in the order their requests came; with ``settle_s``, after waiting up to that
        long for the requests in flight to be recorded (the harness has its answer before the
        proxy records it: a trace read right after the last answer would miss that call)."""
        with self._settled:
            if settle_s:
                self._settled.wait_for(lambda: self._in_flight == 0, timeout=settle_s)
            return list(self.calls)

    def tool_runs(self) -> list[ToolRun]:
        """The tool results the proxy recorded (none when the bridge runs the tools)."""
        return self.tool_results.runs() if self.tool_results else []

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class _Upstream:
    """Keep-alive connections to the upstream, one per proxy thread."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"model URL {base_url!r} is not an http(s) URL",
                             hint="give the server's OpenAI-compatible base, e.g. http://localhost:8000/v1")
        self.scheme, self.host = parts.scheme, parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()

    def _connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None or fresh:
            if connection is not None:
                connection.close()
            if self.scheme == "https":
                connection = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s,
                                                         context=ssl.create_default_context())
            else:
                connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            self._local.connection = connection
        return connection

    def send(self, method: str, path: str, body: bytes | None) -> http.client.HTTPResponse:
        """The upstream's response to ``method path`` (its body unread); a kept-alive connection the
        upstream closed meanwhile is opened again once."""
        for attempt in (0, 1):
            connection = self._connection(fresh=attempt == 1)
            try:
                connection.request(method, self.prefix + path, body=body, headers=self.headers)
                return connection.getresponse()
            except (http.client.HTTPException, BrokenPipeError, ConnectionResetError) as exc:
                if attempt == 1:
                    self.discard()
                    raise OSError(f"{type(exc).__name__}: {exc}") from None
            except OSError:
                self.discard()
                raise
        raise AssertionError("unreachable")

    def discard(self) -> None:
        """Drop this thread's connection (after an answer that was not read to its end)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


class CapturingProxy:
    """The proxy (module docstring); a context manager. ``upstream`` ends before
    ``/chat/completions`` (``http://gpu-box:8000/v1``); ``api_key`` is sent to it (default
    ``$OPENAI_API_KEY``; the harness's own key is never forwarded)."""

    def __init__(self, upstream: str, *, api_key: str | None = None, host: str = "127.0.0.1", port: int = 0,
                 capture_tokens: bool = True, timeout_s: float = UPSTREAM_TIMEOUT_S) -> None:
        self.upstream = _Upstream(upstream, api_key if api_key is not None else os.environ.get("OPENAI_API_KEY"),
                                  timeout_s)
        self.capture_tokens = capture_tokens
        self._episodes: dict[str, ProxyEpisode] = {}
        self._unix: dict[str, tuple[socketserver.BaseServer, threading.Thread, Path]] = {}
        self._lock = threading.Lock()
        self._server = _TCPServer((host, port), _handler_for(self, None))
        self._thread = threading.Thread(target=self._server.serve_forever, name="repo2env-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, where the proxy listens on the host."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def episode_url(self, episode_id: str) -> str:
        """The OpenAI-compatible base URL (``.../v1``) a host-side harness of ``episode_id`` uses."""
        return f"{self.url}/episodes/{episode_id}/v1"

    def open_episode(self, episode_id: str | None = None, *, budget: EpisodeBudget | None = None,
                     model: str | None = None, perturbations: PerturbationPlan | None = None,
                     tools_through_bridge: bool = False) -> ProxyEpisode:
        """Start recording an episode (a fresh id when none is given). ``tools_through_bridge``: the
        harness's tool calls go through the sandbox bridge, which records them and injects their
        faults; otherwise the proxy records the tool results it is sent and injects the tool faults
        into what the model sees (module docstring)."""
        episode_id = episode_id or uuid.uuid4().hex[:16]
        perturber = Perturber(perturbations, episode_id) if perturbations and perturbations.active else None
        episode = ProxyEpisode(id=episode_id, budget=budget or EpisodeBudget(), model=model, perturber=perturber,
                               tool_results=None if tools_through_bridge else ToolResults(perturber))
        with self._lock:
            if episode_id in self._episodes:
                raise InputError(f"episode {episode_id} is already open on this proxy")
            self._episodes[episode_id] = episode
        return episode

    def serve_unix(self, episode: ProxyEpisode, path: Path) -> Path:
        """Serve ``episode`` alone on a unix socket at ``path`` (made connectable by any user: the
        sandbox's agent user connects through the mounted folder). Removed by :meth:`close_episode`."""
        path = Path(path)
        if path.exists():
            path.unlink()
        server = _UnixServer(str(path), _handler_for(self, episode))
        os.chmod(path, 0o666)
        thread = threading.Thread(target=server.serve_forever, name=f"repo2env-proxy-{episode.id}", daemon=True)
        thread.start()
        with self._lock:
            self._unix[episode.id] = (server, thread, path)
        return path

    def close_episode(self, episode_id: str) -> list[ModelCall]:
        """Stop serving ``episode_id`` (later calls get 404) and return its calls."""
        with self._lock:
            episode = self._episodes.pop(episode_id, None)
            unix = self._unix.pop(episode_id, None)
        if unix is not None:
            server, thread, path = unix
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            path.unlink(missing_ok=True)
        return episode.snapshot(settle_s=CLOSE_SETTLE_S) if episode else []

    def episode(self, episode_id: str) -> ProxyEpisode | None:
        with self._lock:
            return self._episodes.get(episode_id)

    def close(self) -> None:
        """Stop every listener."""
        for episode_id in list(self._episodes):
            self.close_episode(episode_id)
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> CapturingProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- one call -------------------------------------------------------------------------------

    def handle_completion(self, episode: ProxyEpisode, raw: bytes, reply: _Reply) -> None:
        """Answer one chat-completion request of ``episode`` through ``reply`` and record it."""
        entered = time.perf_counter()
        at_s = episode.elapsed()
        try:
            request = json.loads(raw)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError:
            reply.json(400, _error("the body is not a JSON object", "invalid_request_error"))
            return
        if episode.tool_results is not None and "messages" in request:
            # Every request's results, a refused or failed one's too: the harness ran those tools.
            request = {**request, "messages": episode.tool_results.as_sent(request["messages"], at_s)}
        number, limit = episode.admit()
        try:
            self._answer(episode, request, number, limit, entered, at_s, reply)
        finally:
            episode.finished()

    def _answer(self, episode: ProxyEpisode, request: dict[str, Any], number: int, limit: CutOff | None,
                entered: float, at_s: float, reply: _Reply) -> None:
        stream = bool(request.get("stream"))
        if limit is not None:
            reply.json(400, _error(_budget_message(limit, episode.budget), "budget_exhausted"))
            episode.record(ModelCall(index=0, at_s=at_s, request=request, stream=stream, status=400,
                                     error=f"budget: {limit}", refused=limit), number)
            return
        if episode.perturber is not None and episode.perturber.endpoint_failure(number):
            reply.json(503, _error("repo2env perturbation: the model endpoint is temporarily unavailable; retry",
                                   "server_error"), headers={"Retry-After": "0"})
            episode.record(ModelCall(index=0, at_s=at_s, request=request, stream=stream, status=503,
                                     error="injected transient failure", perturbation="endpoint_failure"), number)
            return
        call = self._forward(episode, request, stream, reply)
        total = time.perf_counter() - entered
        episode.record(call.model_copy(update={"at_s": at_s, "proxy_s": round(max(total - call.upstream_s, 0.0), 6)}),
                       number)

    def _forward(self, episode: ProxyEpisode, request: dict[str, Any], stream: bool, reply: _Reply) -> ModelCall:
        sent = dict(request)
        if episode.model:
            sent["model"] = episode.model
        added: set[str] = set()
        if self.capture_tokens:
            for name in CAPTURE_FIELDS:
                if not request.get(name):
                    sent[name] = True
                    added.add(name)
        if stream and not (request.get("stream_options") or {}).get("include_usage"):
            sent["stream_options"] = {**(request.get("stream_options") or {}), "include_usage": True}
            added.add("usage")
        waited = time.perf_counter()
        try:
            response = self.upstream.send("POST", "/chat/completions", json.dumps(sent).encode())
            if response.status in (400, 422) and added & set(CAPTURE_FIELDS):
                # An upstream that does not know vLLM's fields (a hosted API): the same call without them.
                response.read()
                for name in CAPTURE_FIELDS:
                    sent.pop(name, None)
                added -= set(CAPTURE_FIELDS)
                retried = self.upstream.send("POST", "/chat/completions", json.dumps(sent).encode())
                if retried.status == 200:
                    self.capture_tokens = False
                response = retried
        except OSError as exc:
            upstream_s = time.perf_counter() - waited
            message = f"the model server at {self.upstream.base_url} cannot be reached ({exc})"
            reply.json(502, _error(message, "upstream_unreachable"))
            return ModelCall(index=0, request=request, stream=stream, status=502, error=message,
                             upstream_s=round(upstream_s, 6))
        if response.status != 200:
            body = response.read()
            upstream_s = time.perf_counter() - waited
            reply.raw(response.status, body, response.getheader("Content-Type") or "application/json")
            return ModelCall(index=0, request=request, stream=stream, status=response.status,
                             error=body.decode("utf-8", "replace")[:500], upstream_s=round(upstream_s, 6))
        if stream and "text/event-stream" in (response.getheader("Content-Type") or ""):
            return self._relay_stream(request, response, added, reply, waited)
        body = response.read()
        upstream_s = time.perf_counter() - waited
        try:
            completion = json.loads(body)
        except ValueError:
            reply.raw(200, body, response.getheader("Content-Type") or "application/json")
            return ModelCall(index=0, request=request, stream=stream, error="the upstream's answer is not JSON",
                             upstream_s=round(upstream_s, 6))
        received = _without(completion, added)
        reply.json(200, received)
        return ModelCall(index=0, request=request, response=received, stream=False, upstream_s=round(upstream_s, 6),
                         **_captured(completion))

    def _relay_stream(self, request: dict[str, Any], response: http.client.HTTPResponse, added: set[str],
                      reply: _Reply, waited: float) -> ModelCall:
        """Pass the upstream's server-sent events on as they come, and assemble them into one completion."""
        assembly = _StreamAssembly()
        reply.start_stream()
        blocked = time.perf_counter() - waited
        complete = False
        try:
            while True:
                before = time.perf_counter()
                line = response.readline()
                blocked += time.perf_counter() - before
                if not line:
                    break
                text = line.strip()
                if not text.startswith(b"data:"):
                    continue
                data = text[5:].strip()
                if data == b"[DONE]":
                    reply.event(b"[DONE]")
                    complete = True
                    continue
                try:
                    chunk = json.loads(data)
                except ValueError:
                    reply.event(data)
                    continue
                assembly.add(chunk)
                if "usage" in added and not chunk.get("choices") and chunk.get("usage"):
                    continue  # the usage chunk the proxy asked for: the harness did not
                reply.event(json.dumps(_without(chunk, added)).encode() if added else data)
        except (OSError, http.client.HTTPException) as exc:
            self.upstream.discard()
            assembly.error = f"the stream broke off: {exc}"
        finally:
            response.close()  # read to its end: the kept-alive connection is ready for the next call
        reply.end_stream()
        completion = assembly.completion()
        return ModelCall(index=0, request=request, response=_without(completion, added), stream=True,
                         error=assembly.error or (None if complete else "the stream ended without [DONE]"),
                         upstream_s=round(blocked, 6), **_captured(completion))


def _budget_message(limit: CutOff, budget: EpisodeBudget) -> str:
    what = {"turns": f"{budget.max_turns} model calls", "tokens": f"{budget.max_tokens} tokens",
            "wall_time": f"{budget.max_wall_s:g} s"}[limit]
    return f"repo2env: the episode's budget is used up ({limit}: {what}); stop"


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": kind}}


def _without(completion: dict[str, Any], added: set[str]) -> dict[str, Any]:
    """``completion`` without what the proxy asked for and the harness did not."""
    if not added & {"logprobs", "return_token_ids"}:
        return completion
    trimmed = {key: value for key, value in completion.items() if key != "prompt_token_ids" or "return_token_ids" not in added}
    choices = []
    for choice in completion.get("choices") or []:
        if isinstance(choice, dict):
            choice = {key: value for key, value in choice.items()
                      if not (key == "logprobs" and "logprobs" in added)
                      and not (key in ("token_ids", "prompt_token_ids") and "return_token_ids" in added)}
        choices.append(choice)
    if "choices" in completion:
        trimmed["choices"] = choices
    return trimmed


def _captured(completion: dict[str, Any]) -> dict[str, Any]:
    """Token ids, log-probabilities and usage of a completion, as ModelCall fields."""
    choice = (completion.get("choices") or [{}])[0] or {}
    prompt_ids = completion.get("prompt_token_ids") or choice.get("prompt_token_ids")
    completion_ids = choice.get("token_ids")
    content = ((choice.get("logprobs") or {}).get("content")) or []
    logprobs = [float(entry["logprob"]) for entry in content if isinstance(entry, dict) and "logprob" in entry] or None
    if completion_ids is None and content and all(str(entry.get("token", "")).startswith("token_id:") for entry in content):
        completion_ids = [int(str(entry["token"]).split(":", 1)[1]) for entry in content]  # return_tokens_as_token_ids
    usage = completion.get("usage") or {}
    return {"prompt_token_ids": list(prompt_ids) if prompt_ids is not None else None,
            "completion_token_ids": list(completion_ids) if completion_ids is not None else None,
            "completion_logprobs": logprobs,
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0)}


class _StreamAssembly:
    """Chat-completion chunks folded into the one completion they spell."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.logprobs: list[dict[str, Any]] = []
        self.token_ids: list[int] = []
        self.has_token_ids = False
        self.prompt_token_ids: list[int] | None = None
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        if not self.head:
            self.head = {key: chunk.get(key) for key in ("id", "created", "model") if key in chunk}
        if chunk.get("prompt_token_ids") is not None:
            self.prompt_token_ids = list(chunk["prompt_token_ids"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(delta["content"])
            if delta.get("reasoning_content"):
                self.reasoning.append(delta["reasoning_content"])
            for call in delta.get("tool_calls") or []:
                slot = self.tool_calls.setdefault(int(call.get("index", 0)), {
                    "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            if choice.get("prompt_token_ids") is not None:
                self.prompt_token_ids = list(choice["prompt_token_ids"])
            if choice.get("token_ids") is not None:
                self.has_token_ids = True
                self.token_ids.extend(choice["token_ids"])
            self.logprobs.extend(((choice.get("logprobs") or {}).get("content")) or [])

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[index] for index in sorted(self.tool_calls)]
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        if self.logprobs:
            choice["logprobs"] = {"content": self.logprobs}
        if self.has_token_ids:
            choice["token_ids"] = self.token_ids
        completion: dict[str, Any] = {**self.head, "object": "chat.completion", "choices": [choice]}
        if self.prompt_token_ids is not None:
            completion["prompt_token_ids"] = self.prompt_token_ids
        if self.usage:
            completion["usage"] = self.usage
        return completion


class _Reply:
    """Writes one HTTP answer on a handler's connection: JSON, raw bytes, or a chunked event stream."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self.handler = handler

    def json(self, status: int, payload: Any, *, headers: dict[str, str] | None = None) -> None:
        self.raw(status, json.dumps(payload).encode(), "application/json", headers=headers)

    def raw(self, status: int, body: bytes, content_type: str, *, headers: dict[str, str] | None = None) -> None:
        handler = self.handler
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    def start_stream(self) -> None:
        handler = self.handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.flush()

    def event(self, data: bytes) -> None:
        payload = b"data: " + data + b"\n\n"
        try:
            self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.handler.wfile.flush()
        except OSError:
            pass  # the harness hung up: the stream is still read to its end and recorded

    def end_stream(self) -> None:
        try:
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()
        except OSError:
            pass


def _handler_for(proxy: CapturingProxy, bound: ProxyEpisode | None) -> type[BaseHTTPRequestHandler]:
    """The request handler of one listener: the TCP one finds the episode in the path, a unix
    socket's serves its ``bound`` episode whatever the path says."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "repo2env-proxy"
        # Answers are small and latency is the point: no Nagle delay (TCP only; a unix socket has none).
        disable_nagle_algorithm = bound is None

        def _episode(self) -> tuple[ProxyEpisode | None, str]:
            path = self.path.split("?", 1)[0]
            parts = path.split("/", 3)
            named = len(parts) == 4 and parts[1] == "episodes"
            if bound is not None:  # whatever id the path names: this socket is this episode's alone
                return bound, "/" + parts[3] if named else path
            if not named:
                return None, path
            return proxy.episode(parts[2]), "/" + parts[3]

        def _body(self) -> bytes:
            length = self.headers.get("Content-Length")
            if length and length.isdigit():
                return self.rfile.read(int(length))
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return b""

        def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
            raw = self._body()
            episode, rest = self._episode()
            reply = _Reply(self)
            if episode is None:
                reply.json(404, _error(f"no open episode at {self.path}", "not_found"))
            elif rest.rstrip("/") in ("/v1/chat/completions", "/chat/completions"):
                proxy.handle_completion(episode, raw, reply)
            else:
                reply.json(404, _error(f"the proxy answers chat completions only, not {rest}", "not_found"))

        def do_GET(self) -> None:  # noqa: N802
            episode, rest = self._episode()
            reply = _Reply(self)
            if episode is None or rest.rstrip("/") not in ("/v1/models", "/models"):
                reply.json(404, _error(f"nothing at {self.path}", "not_found"))
                return
            models = [{"id": episode.model, "object": "model", "owned_by": "repo2env"}] if episode.model else []
            if not models:
                try:
                    response = proxy.upstream.send("GET", "/models", None)
                    reply.raw(response.status, response.read(), response.getheader("Content-Type") or "application/json")
                    return
                except OSError as exc:
                    reply.json(502, _error(f"the model server cannot be reached ({exc})", "upstream_unreachable"))
                    return
            reply.json(200, {"object": "list", "data": models})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    return Handler


class _TCPServer(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        super().server_bind()


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
