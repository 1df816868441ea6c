"""A small OpenAI-compatible chat-completions server over a transformers causal LM, written for the
tests: the tiny local model (repo2env.train.tiny) answers a real harness, on the CPU.

It speaks vLLM's dialect of the API where training needs it: with ``return_token_ids`` the answer
carries ``prompt_token_ids`` and the choice's ``token_ids``; with ``logprobs`` each completion
token's log-probability (after temperature, as ``trl vllm-serve`` returns processed logprobs).
The prompt is the tokenizer's chat template over the request's messages and tools; a completion
holding ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks (the Qwen2.5 format) is
answered as tool calls. ``"stream": true`` answers the same completion as server-sent events.

The server can share the trainer's model object (``model=trainer.model``): generation then uses the
weights GRPO is updating, as a vLLM server synced by TRL does.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class TinyModelServer:
    """The server; a context manager. ``max_new_tokens`` caps each answer (a request's
    ``max_tokens`` may lower it); ``temperature`` is used when a request sets none (as a vLLM
    server's generation config does)."""

    def __init__(self, model, tokenizer, *, model_name: str = "tiny", max_new_tokens: int = 256,
                 temperature: float = 1.0, seed: int = 0) -> None:
        self.model = model
        self.temperature = temperature
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.requests: list[dict[str, Any]] = []
        self._generate_lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="tiny-model-server")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> TinyModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion (non-streamed shape) for a request body."""
        import torch

        messages = [_plain(message) for message in body["messages"]]
        prompt_ids = self.tokenizer.apply_chat_template(messages, tools=body.get("tools") or None,
                                                        add_generation_prompt=True, tokenize=True,
                                                        return_dict=True)["input_ids"]
        temperature = float(body.get("temperature") or self.temperature)
        limit = min(int(body.get("max_tokens") or body.get("max_completion_tokens") or self.max_new_tokens),
                    self.max_new_tokens)
        seed = body.get("seed")
        with self._generate_lock, torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            generator = torch.Generator().manual_seed(int(seed) if isinstance(seed, int) else self.seed + len(self.requests))
            ids = torch.tensor([prompt_ids])
            new: list[int] = []
            logprobs: list[float] = []
            past = None
            for _ in range(limit):
                output = self.model(input_ids=ids if past is None else ids[:, -1:], past_key_values=past, use_cache=True)
                past = output.past_key_values
                scores = torch.log_softmax(output.logits[0, -1].float() / temperature, dim=-1)
                token = int(torch.multinomial(scores.exp(), 1, generator=generator))
                new.append(token)
                logprobs.append(float(scores[token]))
                ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
                if token == self.tokenizer.eos_token_id:
                    break
            if was_training:
                self.model.train()
        finish = "stop" if new and new[-1] == self.tokenizer.eos_token_id else "length"
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        calls = []
        for index, block in enumerate(_TOOL_CALL.findall(text)):
            try:
                parsed = json.loads(block)
                calls.append({"id": f"call_{uuid.uuid4().hex[:8]}_{index}", "type": "function", "function": {
                    "name": str(parsed["name"]), "arguments": json.dumps(parsed.get("arguments", {}))}})
            except (ValueError, KeyError, TypeError):
                continue  # a malformed block stays text, as vLLM's tool parsers leave it
        if calls:
            message = {"role": "assistant", "content": _TOOL_CALL.sub("", text).strip() or None, "tool_calls": calls}
            finish = "tool_calls"
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": self.tokenizer.decode([token]), "logprob": logprob}
                                              for token, logprob in zip(new, logprobs, strict=True)]}
        completion: dict[str, Any] = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                                      "created": int(time.time()), "model": self.model_name, "choices": [choice],
                                      "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(new),
                                                "total_tokens": len(prompt_ids) + len(new)}}
        if body.get("return_token_ids"):
            completion["prompt_token_ids"] = list(prompt_ids)
            choice["token_ids"] = new
        return completion

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def _send(self, status: int, payload: Any) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.model_name, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                server.requests.append(body)
                completion = server.complete(body)
                if not body.get("stream"):
                    self._send(200, completion)
                    return
                self._stream(completion, include_usage=bool((body.get("stream_options") or {}).get("include_usage")))

            def _stream(self, completion: dict[str, Any], *, include_usage: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                choice = completion["choices"][0]
                head = {key: completion[key] for key in ("id", "created", "model")}
                delta: dict[str, Any] = {"role": "assistant", "content": choice["message"].get("content")}
                if choice["message"].get("tool_calls"):
                    delta["tool_calls"] = [{"index": index, **call}
                                           for index, call in enumerate(choice["message"]["tool_calls"])]
                first: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
                if "token_ids" in choice:
                    first["token_ids"] = choice["token_ids"]
                if "logprobs" in choice:
                    first["logprobs"] = choice["logprobs"]
                events = [{**head, "object": "chat.completion.chunk", "choices": [first],
                           **({"prompt_token_ids": completion["prompt_token_ids"]} if "prompt_token_ids" in completion else {})},
                          {**head, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}]
                if include_usage:
                    events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]})
                for event in [*map(json.dumps, events), "[DONE]"]:
                    data = f"data: {event}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                pass

        return Handler


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A request message as the chat template takes it: text content, tool-call arguments as objects."""
    plain = dict(message)
    content = plain.get("content")
    if isinstance(content, list):
        plain["content"] = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    calls = []
    for call in plain.get("tool_calls") or []:
        function = dict(call.get("function") or {})
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                function["arguments"] = json.loads(arguments)
            except ValueError:
                function["arguments"] = {}
        calls.append({**call, "function": function})
    if calls:
        plain["tool_calls"] = calls
    return plain
