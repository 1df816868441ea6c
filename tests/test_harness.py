"""Real agent harnesses as policies (issue 23): the capturing proxy between a harness and a real
local model server (streaming and not, token ids, budgets, injected faults), the sandbox bridge
that serves the agent's one tool set, and whole episodes of real harnesses installed from the
registries (mini-swe-agent from PyPI on the host, OpenCode from npm in an agent layer, a plain
command in the sandbox) on the demo's tasks, graded by the hidden verifier."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
import requests
from scripted_llm import ScriptedCall, ScriptedLLM, gold_script, nothing_script, partial_script

from repo2env import defaults
from repo2env.harness.perturb import TIMEOUT_NOTE, Perturber
from repo2env.harness.proxy import CapturingProxy
from repo2env.models import EpisodeBudget, PerturbationPlan

docker = pytest.mark.docker


def _chat(url: str, **body):
    body.setdefault("model", "scripted")
    body.setdefault("messages", [{"role": "user", "content": "fix it"}])
    return requests.post(f"{url}/chat/completions", json=body, timeout=60)


# --- the proxy ---------------------------------------------------------------------------------

def test_the_proxy_forwards_and_records_each_call_as_the_harness_saw_it():
    scripts = {"look": [ScriptedCall("bash", {"command": "ls"})]}
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]
    with ScriptedLLM(scripts) as llm, CapturingProxy(llm.url) as proxy:
        episode = proxy.open_episode("one", model="scripted")
        url = proxy.episode_url("one")
        plain = _chat(url, model="whatever-the-harness-says", tools=tools)
        assert plain.status_code == 200
        call = plain.json()["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "bash" and "logprobs" not in plain.json()["choices"][0]
        streamed = requests.post(f"{url}/chat/completions", stream=True, timeout=60, json={
            "model": "x", "stream": True, "tools": tools, "messages": [
                {"role": "user", "content": "fix it"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": "README.md"}]})
        events = [line for line in streamed.iter_lines() if line]
        assert events[-1] == b"data: [DONE]"
        assert not any(b'"usage"' in event for event in events), "the usage chunk the proxy asked for stays with it"
        calls = proxy.close_episode("one")
    assert [call.status for call in calls] == [200, 200] and episode.cut_off is None
    first, second = calls
    assert first.request["model"] == "whatever-the-harness-says", "the request as the harness sent it"
    assert llm.bodies()[0]["model"] == "scripted", "the upstream got the episode's model name"
    assert llm.bodies()[0]["logprobs"] is True and llm.bodies()[0]["return_token_ids"] is True
    assert first.response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert second.stream and second.response["choices"][0]["message"]["content"] == "done"
    assert second.response["choices"][0]["finish_reason"] == "stop"
    assert all(call.upstream_s > 0 and call.proxy_s >= 0 for call in calls)


def test_the_budget_refuses_the_call_past_it_and_says_which_limit():
    with ScriptedLLM({"look": nothing_script()}) as llm, CapturingProxy(llm.url) as proxy:
        episode = proxy.open_episode("short", budget=EpisodeBudget(max_turns=2))
        url = proxy.episode_url("short")
        assert [_chat(url).status_code for _ in range(2)] == [200, 200]
        refused = _chat(url)
        assert refused.status_code == 400 and refused.json()["error"]["type"] == "budget_exhausted"
        assert "turns" in refused.json()["error"]["message"]
        assert episode.refused.is_set() and episode.cut_off == "turns"
        timed = proxy.open_episode("slow", budget=EpisodeBudget(max_wall_s=0.2))
        time.sleep(0.3)
        assert _chat(proxy.episode_url("slow")).status_code == 400 and timed.cut_off == "wall_time"
        calls = proxy.close_episode("short")
        assert _chat(url).status_code == 404, "a closed episode answers nothing"
    assert [call.refused for call in calls] == [None, None, "turns"]
    assert len(llm.bodies()) == 2, "refused calls never reach the upstream"


def test_endpoint_failures_are_injected_at_the_set_rate_reproducibly_and_recorded(monkeypatch):
    from repo2env.harness import proxy as proxy_module

    recorded = proxy_module.ProxyEpisode.record

    def late_answered_record(self, call, number):
        # An answered call is recorded after its answer went out, so the next request (an injected
        # failure, answered at once) is recorded first: the trace still keeps the requests' order.
        if call.status == 200:
            time.sleep(0.2)
        recorded(self, call, number)

    monkeypatch.setattr(proxy_module.ProxyEpisode, "record", late_answered_record)
    plan = PerturbationPlan(endpoint_failure=0.5, seed=7)
    draws = [Perturber(plan, "flaky").endpoint_failure(number) for number in range(200)]
    assert draws == [Perturber(plan, "flaky").endpoint_failure(number) for number in range(200)]
    assert 70 < sum(draws) < 130 and draws != [Perturber(plan, "other").endpoint_failure(n) for n in range(200)]
    with ScriptedLLM({"look": nothing_script()}) as llm, CapturingProxy(llm.url) as proxy:
        proxy.open_episode("flaky", perturbations=plan)
        statuses = [_chat(proxy.episode_url("flaky")).status_code for _ in range(12)]
        calls = proxy.close_episode("flaky")
    assert statuses == [503 if failed else 200 for failed in draws[:12]]
    assert [call.perturbation for call in calls] == ["endpoint_failure" if failed else None for failed in draws[:12]]
    assert [call.index for call in calls] == list(range(12))
    assert len(llm.bodies()) == statuses.count(200)


BASH_TOOL = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
#: What a harness's own tools printed, one per tool call.
TOOL_OUTPUTS = ("".join(f"file_{n}.py\n" for n in range(60)), "".join(f"line {n} of README\n" for n in range(80)))


def _tool_conversation(plan: PerturbationPlan | None, *, tools_through_bridge: bool = False):
    """A harness that runs its own tools, through the proxy, then sends its history once more without
    the first exchange (as a harness compacting its context does): (the upstream's bodies, the
    recorded calls, the recorded tool runs, the harness's own messages)."""
    scripts = {"two": [ScriptedCall("bash", {"command": "ls"}), ScriptedCall("bash", {"command": "cat README"})]}
    with ScriptedLLM(scripts) as llm, CapturingProxy(llm.url) as proxy:
        episode = proxy.open_episode("tools", perturbations=plan, tools_through_bridge=tools_through_bridge)
        messages = [{"role": "user", "content": "fix it"}]
        for output in (*TOOL_OUTPUTS, None):
            answer = _chat(proxy.episode_url("tools"), messages=messages, tools=BASH_TOOL)
            assert answer.status_code == 200, answer.text
            messages.append(answer.json()["choices"][0]["message"])
            if output is not None:
                messages.append({"role": "tool", "tool_call_id": messages[-1]["tool_calls"][0]["id"], "content": output})
        assert _chat(proxy.episode_url("tools"), messages=[messages[0], *messages[3:5]], tools=BASH_TOOL).ok
        calls = proxy.close_episode("tools")
        return llm.bodies(), calls, episode.tool_runs(), messages


def _tool_contents(body: dict) -> list:
    return [message["content"] for message in body["messages"] if message["role"] == "tool"]


def test_a_harness_running_its_own_tools_gets_the_tool_faults_in_what_the_model_sees():
    plan = PerturbationPlan(output_cut=1.0, seed=5)
    bodies, calls, runs, messages = _tool_conversation(plan)
    first, second = (Perturber(plan, "tools").cut(output, number) for number, output in enumerate(TOOL_OUTPUTS))
    assert first != TOOL_OUTPUTS[0] and TOOL_OUTPUTS[0].startswith(first) and TOOL_OUTPUTS[1].startswith(second)
    # Upstream: each result cut as it first came, and the same way again in later requests, wherever it stands.
    assert [_tool_contents(body) for body in bodies] == [[], [first], [first, second], [second]]
    assert _tool_contents({"messages": messages}) == list(TOOL_OUTPUTS), "the harness keeps the real output"
    assert [call.request["messages"] for call in calls] == [body["messages"] for body in bodies], \
        "the trace records what the model got"
    assert [(run.index, run.tool, run.arguments, run.perturbation, run.recorded_at, run.output) for run in runs] == [
        (0, "bash", {"command": "ls"}, "output_cut", "proxy", first),
        (1, "bash", {"command": "cat README"}, "output_cut", "proxy", second)]
    assert [run.tool_call_id for run in runs] == [message["tool_call_id"] for message in messages if message["role"] == "tool"]
    assert _tool_conversation(plan)[0] == bodies, "the same seed meets the same faults"
    assert _tool_conversation(plan.model_copy(update={"seed": 6}))[0] != bodies, "and another seed others"

    timeouts = PerturbationPlan(tool_timeout=1.0, seed=5)
    bodies, _, runs, _ = _tool_conversation(timeouts)
    note = TIMEOUT_NOTE.format(seconds=defaults.TOOL_COMMAND_TIMEOUT_S)
    assert [_tool_contents(body) for body in bodies] == [[], [note], [note, note], [note]]
    assert [(run.perturbation, run.exit_code, run.output) for run in runs] == [("tool_timeout", 124, note)] * 2


def test_tool_results_are_recorded_unperturbed_without_faults_and_left_to_the_bridge_when_it_runs_them():
    bodies, calls, runs, _ = _tool_conversation(None)
    assert _tool_contents(bodies[2]) == list(TOOL_OUTPUTS)
    assert [(run.tool, run.perturbation, run.exit_code, run.output) for run in runs] == \
        [("bash", None, None, output) for output in TOOL_OUTPUTS]
    # A host-side harness's tools go through the bridge, which injected the fault already: never twice.
    plan = PerturbationPlan(output_cut=1.0, tool_timeout=0.5, seed=5)
    bodies, calls, runs, _ = _tool_conversation(plan, tools_through_bridge=True)
    assert _tool_contents(bodies[2]) == list(TOOL_OUTPUTS) and runs == []
    assert _tool_contents(calls[2].request) == list(TOOL_OUTPUTS)


def test_tool_results_with_reused_ids_are_told_apart_and_content_parts_stay_parts():
    from repo2env.harness.tool_results import ToolResults

    plan = PerturbationPlan(output_cut=1.0, seed=2)
    results = ToolResults(Perturber(plan, "reused"))
    turn = [{"role": "user", "content": "fix it"},
            {"role": "assistant", "tool_calls": [{"id": "call_0", "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": [{"type": "text", "text": TOOL_OUTPUTS[0]}]}]
    again = [{"role": "assistant", "tool_calls": [{"id": "call_0", "function": {"name": "cat", "arguments": "nope"}}]},
             {"role": "tool", "tool_call_id": "call_0", "content": TOOL_OUTPUTS[1]}]
    first = results.as_sent(turn, 1.0)
    assert first[2]["content"] == [{"type": "text", "text": Perturber(plan, "reused").cut(TOOL_OUTPUTS[0], 0)}]
    assert turn[2]["content"][0]["text"] == TOOL_OUTPUTS[0], "the harness's messages are left as they are"
    both = results.as_sent(turn + again, 2.0)
    assert both[:3] == first and both[4]["content"] == Perturber(plan, "reused").cut(TOOL_OUTPUTS[1], 1)
    assert [(run.index, run.tool, run.arguments, run.at_s) for run in results.runs()] == [
        (0, "ls", {}, 1.0), (1, "cat", {"arguments": "nope"}, 2.0)]


def test_an_adapter_class_named_module_colon_class_is_resolved_and_run(tmp_path):
    from harness_adapters import OneCallHarness

    from repo2env.errors import InputError
    from repo2env.harness.agents import harness_agent
    from repo2env.harness.agents.base import Launch
    from repo2env.harness.agents.sandboxed import CommandAgent
    from repo2env.models import Task

    agent = harness_agent("harness_adapters:OneCallHarness")
    assert type(agent) is OneCallHarness and agent.describe() == "one-call"
    with pytest.raises(InputError, match="not a harness adapter class"):
        harness_agent("harness_adapters:NotAnAdapter")
    assert isinstance(harness_agent("no_such_module:Thing"), CommandAgent), "not importable: a command"
    task = Task(instance_id="acme__lib-1", repo="acme/lib", pull_number=1, base_commit="a" * 40, patch="",
                test_patch="", problem_statement="Fix the thing.", created_at="2024-01-01T00:00:00Z")
    scripts = {"look": [ScriptedCall("bash", {"command": "ls"})]}
    with ScriptedLLM(scripts) as llm, CapturingProxy(llm.url) as proxy:
        proxy.open_episode("adapter")
        agent.install()
        ended = agent.run(Launch(task=task, instruction="Fix the thing.", model="scripted",
                                 base_url=proxy.episode_url("adapter"), work_dir=tmp_path, deadline_s=60))
        calls = proxy.close_episode("adapter")
    assert ended.finished == "done", ended.log
    assert [call.status for call in calls] == [200] and calls[0].request["messages"][0]["content"] == "Fix the thing."
    assert llm.bodies()[0]["model"] == "anything", "the harness's own request reached the model"


def test_an_upstream_that_refuses_the_capture_fields_is_asked_again_without_them():
    class Strict(ScriptedLLM):
        def _answer(self, body):
            if "return_token_ids" in body or "logprobs" in body:
                return 400, {"error": {"message": "Unrecognized request argument supplied: return_token_ids"}}
            return super()._answer(body)

    with Strict({"look": nothing_script()}) as llm, CapturingProxy(llm.url) as proxy:
        proxy.open_episode("hosted")
        assert _chat(proxy.episode_url("hosted")).status_code == 200
        assert _chat(proxy.episode_url("hosted")).status_code == 200
        calls = proxy.close_episode("hosted")
    assert [call.status for call in calls] == [200, 200] and not proxy.capture_tokens
    assert [("return_token_ids" in body) for body in llm.bodies()] == [True, False, False], "asked once, then never"


def test_a_unix_socket_serves_its_own_episode_only(tmp_path):
    with ScriptedLLM({"look": nothing_script()}) as llm, CapturingProxy(llm.url) as proxy:
        mine = proxy.open_episode("mine")
        proxy.open_episode("other")
        path = proxy.serve_unix(mine, tmp_path / "model.sock")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "fix it"}], "tools": [{}]}).encode()
        for target in ("/v1/chat/completions", "/episodes/other/v1/chat/completions"):
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(path))
                client.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (target.encode(), len(body), body))
                answer = b"".join(iter(lambda: client.recv(65536), b""))
            assert answer.startswith(b"HTTP/1.1 200")
        assert len(proxy.close_episode("mine")) == 2 and proxy.close_episode("other") == []
        assert not path.exists()


def test_closing_an_episode_right_after_its_last_answer_keeps_that_call(monkeypatch):
    """The harness has its answer before the proxy records the call: a trace taken at once (the
    trainer closes the episode when the harness exits) must still hold the last call, streamed or
    not. The recording is slowed here so that it always comes after the answer."""
    from repo2env.harness import proxy as proxy_module

    recorded = proxy_module.ProxyEpisode.record

    def late_record(self, call, number):
        time.sleep(0.3)
        recorded(self, call, number)

    monkeypatch.setattr(proxy_module.ProxyEpisode, "record", late_record)
    with ScriptedLLM({"look": nothing_script()}) as llm, CapturingProxy(llm.url) as proxy:
        proxy.open_episode("plain")
        assert _chat(proxy.episode_url("plain")).status_code == 200
        assert [call.status for call in proxy.close_episode("plain")] == [200]
        proxy.open_episode("streamed")
        answer = requests.post(f"{proxy.episode_url('streamed')}/chat/completions", stream=True, timeout=60,
                               json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]})
        assert [line for line in answer.iter_lines() if line][-1] == b"data: [DONE]"
        calls = proxy.close_episode("streamed")
        assert [(call.status, call.stream) for call in calls] == [(200, True)]


def test_the_proxy_adds_little_to_a_call():
    """Not a timing test (benchmarks/harness.py measures it): the proxy's own share is recorded
    per call, and on loopback it is a small fraction of a round trip."""
    with ScriptedLLM({"look": nothing_script()}) as llm, CapturingProxy(llm.url) as proxy:
        proxy.open_episode("fast")
        with requests.Session() as session:
            for _ in range(20):
                session.post(f"{proxy.episode_url('fast')}/chat/completions", timeout=60,
                             json={"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]})
        calls = proxy.close_episode("fast")
    # The median, not every call: on a starved machine (the suite beside other work) one call's
    # share can be a scheduler's pause; a proxy that does real work per call moves the median.
    assert len(calls) == 20 and all(call.proxy_s > 0 for call in calls)
    assert sorted(call.proxy_s for call in calls)[10] < 0.5


# --- whole episodes on the demo's tasks ---------------------------------------------------------

SUBMIT = ScriptedCall("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})


@pytest.fixture(scope="module")
def partial_pull(demo_repo):
    return next(pull for pull in demo_repo.pulls if pull.partial_fixes)


@pytest.fixture(scope="module")
def task(graded_demo, partial_pull):
    return graded_demo[partial_pull.number]


@pytest.fixture(scope="module")
def backend(docker_client):
    from repo2env.runtime.backends.docker import DockerBackend

    return DockerBackend(docker_client)


def _run(task, agent, llm, backend, grader, tmp_path, **options):
    from repo2env.harness.run import HarnessOptions, run_harness

    with CapturingProxy(llm.url) as proxy:
        return run_harness(task, agent, backend=backend, proxy=proxy, grader=grader, model="scripted",
                           logs_dir=tmp_path / "episodes", options=HarnessOptions(**options))


def _containers(backend) -> set[str]:
    from repo2env.runtime.backends.lifecycle import wait_for_removals
    from repo2env.runtime.ownership import OWNER_PID_LABEL

    # A grading removes its sandbox in the background (the reward does not wait for it): what was
    # handed to the background is waited for; a sandbox never closed is still counted.
    wait_for_removals(time.monotonic() + 60)
    # This process's (not a concurrent run's), of any image: the demo's task images are the run's
    # namespace's under xdist, an agent layer this worker's.
    return {row["Id"] for row in backend.client.api.containers(all=True, filters={"label": f"{OWNER_PID_LABEL}={os.getpid()}"})}


@docker
@pytest.mark.slow
def test_mini_swe_agent_from_pypi_solves_a_task_through_the_bridge_and_is_graded(task, partial_pull, backend, grader,
                                                                                 tmp_path):
    from repo2env.harness.agents import harness_agent

    agent = harness_agent("mini-swe-agent")
    scripts = {"gold": [*gold_script(task), SUBMIT], "partial": [*partial_script(partial_pull.partial_fixes[0].patch), SUBMIT]}
    before = _containers(backend)
    traces = {}
    for name in ("gold", "partial"):
        with ScriptedLLM(scripts, schedule=[name]) as llm:
            traces[name] = _run(task, agent, llm, backend, grader, tmp_path / name)
    gold, partial = traces["gold"], traces["partial"]
    assert gold.finished == "done" and gold.reward == 1.0 and gold.grade.resolved and not gold.grade.tampered
    assert 0 < partial.reward < 1 and partial.grade.f2p_rate < 1
    assert gold.agent == "mini-swe-agent 2.4.6" and gold.source == "harness"
    assert [call.status for call in gold.calls] == [200, 200] and gold.cut_off is None
    assert [run.tool for run in gold.tool_runs] == ["bash", "bash"] and gold.tool_runs[0].exit_code == 0
    assert "git apply" in gold.tool_runs[0].arguments["command"]
    roles = [message["role"] for message in gold.messages]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant" and "tool" in roles
    assert task.problem_statement.strip()[:40] in gold.messages[1]["content"]
    assert gold.tools and gold.tools[0]["function"]["name"] == "bash"
    assert gold.patch.startswith("diff --git") and gold.wall_s > 0
    trace_file = Path(gold.grade.log_dir) / "trace.json"
    assert json.loads(trace_file.read_text())["episode_id"] == gold.episode_id
    assert _containers(backend) - before == set(), "no sandbox outlives an episode"


def _opencode_script(calls: list[ScriptedCall]) -> list[ScriptedCall]:
    """The calls as OpenCode's own bash tool takes them (it asks for a description too)."""
    return [ScriptedCall("bash", {**call.arguments, "description": "apply the change"}) for call in calls]


@docker
@pytest.mark.slow
def test_opencode_from_npm_runs_in_an_agent_layer_without_network_and_is_graded(task, partial_pull, backend, grader,
                                                                                tmp_path):
    from repo2env.harness.agents import harness_agent

    agent = harness_agent("opencode")
    scripts = {"gold": _opencode_script(gold_script(task))}
    before = _containers(backend)
    with ScriptedLLM(scripts, schedule=["gold"]) as llm:
        trace = _run(task, agent, llm, backend, grader, tmp_path)
        bodies = llm.bodies()
    log = (tmp_path / "episodes" / trace.episode_id / "harness.log").read_text()
    assert trace.finished == "done", log[-2000:]
    assert trace.reward == 1.0 and trace.grade.resolved and not trace.grade.tampered
    assert trace.agent == "opencode 1.18.33"
    main = [body for body in bodies if body.get("tools")]
    assert main and all(body.get("stream") for body in main), "OpenCode streams its calls"
    assert any(tool["function"]["name"] == "bash" for tool in main[0]["tools"])
    assert trace.calls and all(call.stream for call in trace.calls if call.request.get("tools"))
    assert trace.messages[-1]["role"] == "assistant" and trace.tools
    assert _containers(backend) - before == set()
    from repo2env.runtime.images import NAMESPACE_LABEL, ImageStore, image_namespace

    # This namespace's: under xdist the task image is the run's, which other workers' layers name too.
    layer = next(image for image in backend.images.list(labels=["repo2env.kind=agent"])
                 if image.labels.get("repo2env.task_image") == task.env_spec.image
                 and image.labels.get(NAMESPACE_LABEL) == image_namespace())
    store = ImageStore(backend)
    assert layer.tags[0] not in store.gc(keep_tags={task.env_spec.image}, dry_run=True), "kept with its task image"
    assert layer.tags[0] in store.gc(keep_tags=set(), dry_run=True), "and collected without it"


#: A harness of a few lines, run in the sandbox as a plain command: it asks the model through
#: $OPENAI_BASE_URL, runs the bash calls it gets (printing what they printed), and tries to reach the
#: host (it must fail).
TINY_HARNESS = r"""cat > /tmp/tiny_harness.py <<'HARNESS'
import json, os, socket, subprocess, urllib.request
try:
    socket.create_connection(("172.17.0.1", 2375), timeout=3)
    print("NETWORK REACHED")
except OSError as exc:
    print("no network:", type(exc).__name__)
base, model = os.environ["OPENAI_BASE_URL"], os.environ["REPO2ENV_MODEL"]
messages = [{"role": "user", "content": open(os.environ["REPO2ENV_INSTRUCTION_FILE"]).read()}]
tools = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
for _ in range(10):
    body = json.dumps({"model": model, "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(base + "/chat/completions", body, {"Content-Type": "application/json"})
    message = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
    messages.append(message)
    if not message.get("tool_calls"):
        break
    for call in message["tool_calls"]:
        done = subprocess.run(json.loads(call["function"]["arguments"])["command"], shell=True,
                              capture_output=True, text=True)
        print("tool output:", json.dumps(done.stdout + done.stderr))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": done.stdout + done.stderr})
HARNESS
python3 /tmp/tiny_harness.py"""


@docker
@pytest.mark.slow
def test_any_command_is_a_harness_in_the_sandbox_reaching_only_its_episode(task, partial_pull, backend, grader,
                                                                           tmp_path):
    from repo2env.harness.agents import harness_agent
    from repo2env.harness.agents.sandboxed import CommandAgent

    agent = harness_agent(TINY_HARNESS)
    assert isinstance(agent, CommandAgent)
    with ScriptedLLM({"partial": partial_script(partial_pull.partial_fixes[0].patch)}) as llm:
        trace = _run(task, agent, llm, backend, grader, tmp_path)
    log = (tmp_path / "episodes" / trace.episode_id / "harness.log").read_text()
    assert "no network: " in log and "NETWORK REACHED" not in log
    assert trace.finished == "done", log
    assert [call.status for call in trace.calls] == [200, 200]
    assert [(run.tool, run.recorded_at, run.perturbation) for run in trace.tool_runs] == [("bash", "proxy", None)]
    assert 0 < trace.reward < 1 and trace.grade.reward == pytest.approx(
        len(partial_pull.partial_fixes[0].passes) / len(task.FAIL_TO_PASS))


@docker
@pytest.mark.slow
def test_a_harness_past_its_budget_is_cut_off_and_its_diff_still_graded(task, backend, grader, tmp_path):
    from repo2env.harness.agents import harness_agent

    endless = [*gold_script(task), *(ScriptedCall("bash", {"command": f"echo step {n}"}) for n in range(20))]
    with ScriptedLLM({"endless": endless}) as llm:
        trace = _run(task, harness_agent("mini-swe-agent"), llm, backend, grader, tmp_path,
                     budget=EpisodeBudget(max_turns=3))
    assert trace.cut_off == "turns" and trace.finished == "cut off: turns"
    answered = [call for call in trace.calls if call.status == 200]
    assert len(answered) == 3 and trace.calls[3].refused == "turns"
    assert trace.reward == 1.0, "what the agent did before the cut counts"


@docker
@pytest.mark.slow
def test_injected_faults_reach_the_harness_and_never_the_hidden_tests(task, backend, grader, tmp_path):
    from repo2env.harness.agents import harness_agent

    # A seed under which the first model request fails and its retry does not; every command's
    # output is cut (the gold patch still applies: a cut output changes what the agent reads only).
    seed = next(seed for seed in range(1000)
                if Perturber(PerturbationPlan(endpoint_failure=0.3, seed=seed), "faults").endpoint_failure(0)
                and not any(Perturber(PerturbationPlan(endpoint_failure=0.3, seed=seed), "faults").endpoint_failure(n)
                            for n in (1, 2)))
    plan = PerturbationPlan(endpoint_failure=0.3, output_cut=1.0, seed=seed)
    with ScriptedLLM({"gold": [*gold_script(task), SUBMIT]}) as llm:
        from repo2env.harness.run import HarnessOptions, run_harness

        with CapturingProxy(llm.url) as proxy:
            cut = run_harness(task, harness_agent("mini-swe-agent"), backend=backend, proxy=proxy, grader=grader,
                              model="scripted", logs_dir=tmp_path, episode_id="faults",
                              options=HarnessOptions(perturbations=plan))
    statuses = [call.status for call in cut.calls]
    assert statuses[:3] == [503, 200, 200], "mini-swe-agent retried the failed call"
    assert [call.perturbation == "endpoint_failure" for call in cut.calls] == [status == 503 for status in statuses]
    assert cut.perturbations == plan
    assert all(run.perturbation == "output_cut" for run in cut.tool_runs)
    # The submit command's output was cut too, so mini-swe-agent did not see it and went on.
    assert cut.reward == 1.0 and cut.perturbation_count == statuses.count(503) + len(cut.tool_runs)
    timeouts = PerturbationPlan(tool_timeout=1.0, seed=1)
    with ScriptedLLM({"gold": [*gold_script(task), SUBMIT, SUBMIT]}) as llm:
        stuck = _run(task, harness_agent("mini-swe-agent"), llm, backend, grader, tmp_path / "stuck",
                     perturbations=timeouts, budget=EpisodeBudget(max_turns=3))
    assert all(run.perturbation == "tool_timeout" and run.exit_code == 124 for run in stuck.tool_runs)
    assert "[timed out after" in stuck.tool_runs[0].output
    assert stuck.patch == "" and stuck.reward == 0.0, "a command that timed out changed nothing"


@docker
@pytest.mark.slow
def test_tool_faults_reach_the_model_of_a_harness_in_the_sandbox_and_never_the_hidden_tests(task, partial_pull, backend,
                                                                                            grader, tmp_path):
    from repo2env.harness.agents import harness_agent
    from repo2env.harness.run import HarnessOptions, run_harness

    # A seed under which the first command "times out" and the second's output is cut.
    plan = next(plan for plan in (PerturbationPlan(tool_timeout=0.5, output_cut=1.0, seed=seed) for seed in range(100))
                if [Perturber(plan, "sandboxed").tool_fault(n) for n in (0, 1)] == ["tool_timeout", "output_cut"])
    show = ScriptedCall("bash", {"command": "git diff; for n in $(seq 40); do echo padding line $n; done"})
    with ScriptedLLM({"partial": [*partial_script(partial_pull.partial_fixes[0].patch), show]}) as llm:
        with CapturingProxy(llm.url) as proxy:
            trace = run_harness(task, harness_agent(TINY_HARNESS), backend=backend, proxy=proxy, grader=grader,
                                model="scripted", logs_dir=tmp_path, episode_id="sandboxed",
                                options=HarnessOptions(perturbations=plan))
        bodies = llm.bodies()
    log = (tmp_path / "sandboxed" / "harness.log").read_text()
    assert trace.finished == "done", log
    assert [(run.tool, run.recorded_at, run.perturbation) for run in trace.tool_runs] == [
        ("bash", "proxy", "tool_timeout"), ("bash", "proxy", "output_cut")]
    assert "git apply" in trace.tool_runs[0].arguments["command"] and trace.tool_runs[0].exit_code == 124
    # The harness's own process saw the real outputs; the model, the faulty ones, in every later request.
    real = [json.loads(line.removeprefix("tool output: ")) for line in log.splitlines() if line.startswith("tool output: ")]
    assert len(real) == 2 and "padding line 40" in real[1] and "diff --git" in real[1]
    faulty = [Perturber(plan, "sandboxed").cut(real[1], 1)]
    assert [_tool_contents(body) for body in bodies] == [[], [trace.tool_runs[0].output],
                                                         [trace.tool_runs[0].output, *faulty]]
    assert "[timed out after" in trace.tool_runs[0].output and trace.tool_runs[1].output == faulty[0] != real[1]
    assert [call.request["messages"] for call in trace.calls] == [body["messages"] for body in bodies]
    assert trace.perturbation_count == 2 and trace.perturbations == plan
    # In the sandbox the "timed out" command did run: the partial fix is there, and graded as without faults.
    assert 0 < trace.reward < 1 and trace.grade.reward == pytest.approx(
        len(partial_pull.partial_fixes[0].passes) / len(task.FAIL_TO_PASS))


def test_the_cli_reads_fault_rates_and_refuses_bad_ones():
    from click.testing import CliRunner

    from repo2env.cli import cli
    from repo2env.cli.harness import _perturbation_rates
    from repo2env.pipeline import compose

    rates = _perturbation_rates("tool_timeout=0.1, endpoint_failure=0.05")
    plan = compose.harness_options(perturbations=rates, seed=3).perturbations
    assert (plan.tool_timeout, plan.endpoint_failure, plan.output_cut, plan.seed) == (0.1, 0.05, 0.0, 3)
    assert compose.harness_options(perturbations=_perturbation_rates(None)).perturbations is None
    for bad in ("tool_timeout=2", "typo=0.1", "tool_timeout"):
        result = CliRunner().invoke(cli, ["harness", "run", "--task", "a__b-1", "--agent", "opencode",
                                          "--model-url", "http://127.0.0.1:9/v1", "--perturb", bad])
        assert result.exit_code != 0 and "--perturb" in str(result.exception or result.output)


def test_an_unknown_task_or_a_bad_fault_rate_is_a_one_line_error(tmp_path):
    import subprocess
    import sys

    for extra, fragment in (([], "no tasks.jsonl in"), (["--perturb", "tool_timeout=7"], "--perturb")):
        result = subprocess.run([sys.executable, "-m", "repo2env", "harness", "run", "--task", "nobody__nothing-1",
                                 "--agent", "mini-swe-agent", "--model-url", "http://127.0.0.1:9/v1",
                                 "--from", str(tmp_path), *extra], capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert result.stderr.startswith("error: ") and fragment in result.stderr, result.stderr


@docker
@pytest.mark.slow
def test_harness_run_on_the_command_line_prints_the_grade_and_the_trace(validated, tmp_path):
    from click.testing import CliRunner

    from repo2env.cli import cli
    from repo2env.jsonl import read_tasks
    from repo2env.models import EpisodeTrace

    folder, _ = validated
    task = next(task for task in read_tasks(folder / "tasks.jsonl") if task.validation.verdict == "accepted")
    with ScriptedLLM({"gold": gold_script(task)}) as llm:
        result = CliRunner().invoke(cli, ["harness", "run", "--task", task.instance_id, "--from", str(folder),
                                          "--agent", TINY_HARNESS, "--model-url", llm.url, "--model", "scripted-model",
                                          "--json",
                                          "--perturb", "endpoint_failure=0", "--max-turns", "5"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert (summary["reward"], summary["model"], summary["finished"]) == (1.0, "scripted-model", "done")
    trace = EpisodeTrace.model_validate_json(Path(summary["trace"]).read_text())
    assert trace.instance_id == task.instance_id and trace.grade.resolved
    assert Path(summary["trace"]).is_relative_to(folder / "logs" / "harness")
