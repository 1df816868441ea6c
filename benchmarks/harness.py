"""Harness rollouts: the capturing proxy's added latency, and harness episodes per minute.

1. **Proxy latency** (no Docker). A fast local OpenAI-compatible upstream (a canned answer, no
   Nagle delay) is called directly and through the proxy, the same keep-alive client and the same
   request (a conversation of ``REPO2ENV_BENCH_PROXY_KB`` KB, default 32) each time, non-streamed and
   streamed (20 events). Printed: the p50 of each, the p50 of the difference, and the proxy's own
   recorded share per call (``ModelCall.proxy_s``). Target: added latency p50 < 2 ms on loopback.
2. **Episodes per minute** (Docker). mini-swe-agent (the real CLI, installed from PyPI on first use)
   on the demo's accepted tasks, a scripted model (apply the gold patch, then submit) behind the
   proxy, with 1, 2 and 4 sandboxes at once (``REPO2ENV_BENCH_HARNESS_EPISODES`` episodes per
   sandbox, default 2); every episode graded by the hidden tests. Printed: episodes per minute,
   episode wall p50, gold rewards of 1.0. ``REPO2ENV_BENCH_SKIP_EPISODES=1`` runs part 1 only.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repo2env.harness.proxy import CapturingProxy  # noqa: E402
from repo2env.models import EpisodeBudget  # noqa: E402

try:  # the benchmark records of the documentation site, where they exist
    from results import Figure, record  # noqa: E402
except ImportError:  # pragma: no cover - printed figures only
    Figure = record = None

CALLS = 400
KB = int(os.environ.get("REPO2ENV_BENCH_PROXY_KB", "32"))
EPISODES_PER_SANDBOX = int(os.environ.get("REPO2ENV_BENCH_HARNESS_EPISODES", "2"))


class _CannedUpstream:
    """Answers every chat completion at once: a tool call (non-streamed) or 20 events (streamed)."""

    def __init__(self) -> None:
        answer = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                               "tool_calls": [{"id": "call_0", "type": "function",
                                               "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}}],
                  "usage": {"prompt_tokens": 900, "completion_tokens": 20}}
        body = json.dumps(answer).encode()
        events = b"".join(b"data: " + json.dumps({"id": "c", "choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}).encode()
                          + b"\n\n" for i in range(20)) + b"data: [DONE]\n\n"

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if request.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(events)))
                    self.end_headers()
                    self.wfile.write(events)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def _timed(session: requests.Session, url: str, body: dict) -> float:
    started = time.perf_counter()
    response = session.post(f"{url}/chat/completions", json=body, timeout=30)
    _ = response.content
    assert response.status_code == 200, response.text
    return time.perf_counter() - started


def proxy_latency() -> list:
    upstream = _CannedUpstream()
    filler = "x" * 1000
    messages = [{"role": "system", "content": "You are a coding agent."}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": filler} for i in range(KB)]
    figures = []
    with CapturingProxy(upstream.url) as proxy:
        proxy.open_episode("bench", budget=EpisodeBudget(max_turns=10 * CALLS))
        for stream in (False, True):
            body = {"model": "m", "messages": messages, "stream": stream}
            direct, proxied = [], []
            with requests.Session() as session:
                for _ in range(20):  # warm both paths' connections
                    _timed(session, upstream.url, body)
                    _timed(session, proxy.episode_url("bench"), body)
                for _ in range(CALLS):  # interleaved: both paths see the same machine load
                    direct.append(_timed(session, upstream.url, body))
                    proxied.append(_timed(session, proxy.episode_url("bench"), body))
            calls = proxy.episode("bench").snapshot()[-CALLS:]
            own = statistics.median(call.proxy_s for call in calls)
            added = statistics.median(p - d for p, d in zip(proxied, direct, strict=True))
            how = "streamed" if stream else "non-streamed"
            print(f"{how}, {KB} KB request: direct p50 {statistics.median(direct) * 1000:.2f} ms, through the proxy "
                  f"{statistics.median(proxied) * 1000:.2f} ms, added p50 {added * 1000:.2f} ms (target < 2 ms); "
                  f"the proxy's recorded share p50 {own * 1000:.2f} ms")
            if Figure is not None:
                figures += [Figure(f"proxy added latency p50, {how}, {KB} KB", round(added * 1000, 2), "ms", "< 2"),
                            Figure(f"proxy's recorded share p50, {how}", round(own * 1000, 2), "ms")]
    upstream.server.shutdown()
    return figures


def episodes_per_minute() -> list:
    from demo_tasks import built_demo_tasks

    from repo2env.harness.agents import harness_agent
    from repo2env.harness.run import run_harness
    from repo2env.jsonl import read_tasks
    from repo2env.pipeline.stages import validate_dir
    from repo2env.runtime.backends import open_backend
    from repo2env.validate.acceptance import load_acceptance_policy
    from repo2env.verify.grader import Grader

    runtime = open_backend()  # REPO2ENV_BACKEND, else docker
    figures = []
    agent = harness_agent("mini-swe-agent")
    agent.install(lambda message: print(message))
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-harness-") as scratch:
        root = Path(scratch)
        _, tasks_dir, _ = built_demo_tasks(root, runtime)
        policy = load_acceptance_policy("default").model_copy(update={"gold_runs": 1, "partial_limit": 0,
                                                                      "near_miss_limit": 0})
        validate_dir(tasks_dir, runtime, policy, jobs=2)
        tasks = [task for task in read_tasks(tasks_dir / "tasks.jsonl")
                 if task.validation and task.validation.verdict == "accepted"]
        upstream = _GoldUpstream(tasks)
        for sandboxes in (1, 2, 4):
            episodes = [tasks[i % len(tasks)] for i in range(sandboxes * EPISODES_PER_SANDBOX)]
            grader = Grader(runtime, root / f"grades-{sandboxes}", timeout_s=300, keep_warm=True)
            load = os.getloadavg()[0]
            with CapturingProxy(upstream.url) as proxy, ThreadPoolExecutor(sandboxes) as pool:
                started = time.monotonic()
                episode = functools.partial(run_harness, agent=agent, backend=runtime, proxy=proxy, grader=grader,
                                            model="gold", logs_dir=root / f"episodes-{sandboxes}")
                traces = list(pool.map(episode, episodes))
                wall = time.monotonic() - started
            grader.close()
            rate = len(traces) / wall * 60
            ok = sum(trace.reward == 1.0 for trace in traces)
            print(f"{sandboxes} sandbox(es): {len(traces)} mini-swe-agent episodes in {wall:.0f} s = {rate:.1f} episodes/min "
                  f"(episode wall p50 {statistics.median(t.wall_s for t in traces):.1f} s, gold reward 1.0 in {ok}/{len(traces)}); "
                  f"load {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
            sys.stdout.flush()
            if Figure is not None:
                figures.append(Figure(f"mini-swe-agent episodes per minute, {sandboxes} sandbox(es)", round(rate, 1), "/min"))
        upstream.server.shutdown()
    return figures


class _GoldUpstream:
    """A scripted model for mini-swe-agent: the task's gold patch applied with git, then submit."""

    def __init__(self, tasks) -> None:
        patches = {task.problem_statement.strip()[:200]: task.patch for task in tasks}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = next(m["content"] for m in request["messages"] if m["role"] == "user")
                patch = next((p for key, p in patches.items() if key in user), "")
                step = sum(m["role"] == "assistant" for m in request["messages"])
                command = (f"git apply <<'REPO2ENV_EOF'\n{patch}REPO2ENV_EOF" if step == 0
                           else "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
                answer = {"id": f"c{step}", "object": "chat.completion", "created": 0, "model": "gold",
                          "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                              "role": "assistant", "content": None, "tool_calls": [{
                                  "id": f"call_{step}", "type": "function",
                                  "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}}],
                          "usage": {"prompt_tokens": 0, "completion_tokens": 0}}
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def main() -> None:
    figures = proxy_latency()
    if os.environ.get("REPO2ENV_BENCH_SKIP_EPISODES") != "1":
        figures += episodes_per_minute()
    if record is not None and figures:
        record("harness", figures)


if __name__ == "__main__":
    main()
