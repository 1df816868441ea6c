"""The agent's tools on real sandboxes, and policy rollouts over real HTTP against a scripted
OpenAI-compatible server (tests/scripted_llm.py), graded by the hidden verifier."""

from __future__ import annotations

import inspect
import json
import socket
import typing
from pathlib import Path

import pytest
import requests
from scripted_llm import ScriptedCall, ScriptedLLM, gold_script, nothing_script, partial_script

from repo2env.envs.policy import PolicyClient
from repo2env.envs.tools import TOOL_NAMES, AgentTools, tool_schemas
from repo2env.models import EpisodeTrace
from repo2env.runtime.backends.docker import DockerBackend

docker = pytest.mark.docker
MODEL = "scripted-model"


@pytest.fixture(scope="module")
def partial_pull(demo_repo):
    """A demo PR with partial fixes (ground truth for partial credit)."""
    return next(pull for pull in demo_repo.pulls if pull.partial_fixes)


@pytest.fixture(scope="module")
def task(graded_demo, partial_pull):
    return graded_demo[partial_pull.number]


@pytest.fixture(scope="module")
def runtime(docker_client):
    return DockerBackend(docker_client)


@pytest.fixture
def sandbox(runtime, task):
    with runtime.start(task) as sandbox:
        yield sandbox


@pytest.fixture
def tools(sandbox):
    return AgentTools(sandbox)


def _scripts(task, pull) -> dict[str, list[ScriptedCall]]:
    return {"gold": gold_script(task), "partial": partial_script(pull.partial_fixes[0].patch),
            "nothing": nothing_script()}


# --- the tools ---------------------------------------------------------------------------------

@docker
def test_bash_runs_a_fresh_shell_in_the_repository_as_the_agent(tools):
    answer = tools.bash("pwd; id -un; echo oops >&2; exit 3").splitlines()
    assert answer[-1] == "[exit 3]"
    assert set(answer[:-1]) == {"/testbed", "agent", "oops"}
    assert tools.bash("cd src && export MARK=1").endswith("[exit 0]")
    assert tools.bash("pwd; echo ${MARK:-unset}") == "/testbed\nunset\n[exit 0]"


@docker
def test_bash_cuts_long_output_in_the_middle_and_kills_slow_commands(sandbox):
    tools = AgentTools(sandbox, command_timeout_s=1, output_cap_chars=1000)
    answer = tools.bash("seq 1 5000")
    assert answer.startswith("1\n2\n3\n") and answer.endswith("4999\n5000\n[exit 0]")
    assert "characters cut" in answer and len(answer) < 1100
    slow = tools.bash("sleep 10; echo never")
    assert "timed out after 1 s" in slow and "never" not in slow and slow.endswith("[exit 124]")


@docker
def test_read_file_numbers_lines_and_honours_the_range(tools, sandbox):
    source = sandbox.read_file("/testbed/src/textkit/slug.py").splitlines()
    assert tools.read_file("src/textkit/slug.py").splitlines() == [
        f"{number:6d}\t{line}" for number, line in enumerate(source, start=1)]
    assert tools.read_file("/testbed/src/textkit/slug.py", start_line=2, end_line=3) == (
        f"     2\t{source[1]}\n     3\t{source[2]}")
    assert tools.read_file("src/textkit/slug.py", start_line=len(source)) == f"{len(source):6d}\t{source[-1]}"
    assert "does not exist" in tools.read_file("src/textkit/nope.py")
    assert "is a directory" in tools.read_file("src")
    assert "past the end" in tools.read_file("src/textkit/slug.py", start_line=len(source) + 1)
    assert tools.read_file("README.md", start_line=0).startswith("error: ")
    cut = AgentTools(sandbox, output_cap_chars=200).read_file("src/textkit/slug.py")
    assert len(cut) < 300 and "read on with start_line=" in cut


@docker
def test_write_then_replace_edits_files_as_the_agent(tools, sandbox):
    assert tools.write_file("notes/todo.txt", "alpha beta\nbeta\n") == "wrote 16 characters (2 lines) to notes/todo.txt"
    assert sandbox.read_file("/testbed/notes/todo.txt") == "alpha beta\nbeta\n"
    assert sandbox.exec("stat -c %U /testbed/notes/todo.txt").output.strip() == "agent"
    assert "occurs 2 times" in tools.str_replace("notes/todo.txt", "beta", "gamma")
    assert "not found" in tools.str_replace("notes/todo.txt", "delta", "gamma")
    assert tools.str_replace("notes/todo.txt", "old", "") .startswith("error: ")
    assert tools.str_replace("notes/todo.txt", "beta\nbeta", "gamma\ndelta") == (
        "replaced 1 occurrence in notes/todo.txt (now lines 1-2)")
    assert sandbox.read_file("/testbed/notes/todo.txt") == "alpha gamma\ndelta\n"
    source = sandbox.read_file("/testbed/src/textkit/slug.py")
    first_line = source.splitlines()[0]
    assert tools.str_replace("src/textkit/slug.py", first_line, first_line + "  # edited").startswith("replaced")
    diff = sandbox.diff()
    assert "+alpha gamma" in diff and f"+{first_line}  # edited" in diff
    assert ".repo2env-tool" not in sandbox.exec("ls -A /tmp").output  # no staging file left behind


@docker
def test_file_tools_refuse_paths_outside_the_repository(tools, sandbox):
    sandbox.exec("ln -s /etc /testbed/etc_link && echo secret > /tmp/outside.txt", workdir="/testbed")
    answers = [
        tools.read_file("../etc/passwd"),
        tools.read_file("/etc/passwd"),
        tools.read_file("etc_link/passwd"),  # a link out of /testbed is followed, then refused
        tools.read_file("src/../../tmp/outside.txt"),
        tools.write_file("../tmp/planted.txt", "x"),
        tools.write_file("etc_link/planted.txt", "x"),
        tools.str_replace("/tmp/outside.txt", "secret", "changed"),
        tools.run_tests("../"),
    ]
    for answer in answers:
        assert answer.startswith("error: ") and "outside /testbed" in answer, answer
    assert sandbox.exec("cat /tmp/outside.txt; ls /tmp/planted.txt").output.startswith("secret\n")
    assert tools.read_file("../testbed/README.md").startswith("     1\t")  # inside after all


@docker
def test_file_tools_resolve_links_as_realpath_does(tools, sandbox):
    """The path check resolves existing folders with the shell's own ``cd -P`` (no program started)
    and falls back to ``realpath -m``: either way a path is refused exactly when realpath puts it
    outside /testbed (links to files and folders, relative links, missing and locked folders)."""
    sandbox.exec("mkdir -p real/sub locked/inner /tmp/away && echo inside > real/sub/f && echo away > /tmp/away/f"
                 " && ln -s /tmp/away away_dir && ln -s /tmp/away/f away_file && ln -s real/sub sub_link"
                 " && ln -s sub/f real/f_link && ln -s ../../tmp/away real/up && ln -s /nowhere dangling"
                 " && chmod 000 locked", workdir="/testbed")
    paths = ["real/sub/f", "real/f_link", "sub_link/f", "away_file", "away_dir/f", "real/up/f", "dangling",
             "missing/folder/f", "locked/inner/f", "sub_link/new.txt", "away_dir/new.txt"]
    for path in paths:
        resolved = sandbox.exec(f"realpath -m -- /testbed/{path}").output.strip()
        outside = not (resolved == "/testbed" or resolved.startswith("/testbed/"))
        for answer in (tools.read_file(path), tools.write_file(path, "written\n")):
            assert ("outside /testbed" in answer) == outside, (path, resolved, answer)
    assert sandbox.exec("cat /tmp/away/f").output == "away\n", "nothing written through a link out"
    assert sandbox.exec("cat real/sub/f real/sub/new.txt", workdir="/testbed").output == "written\nwritten\n"


@docker
def test_run_tests_runs_the_visible_tests_only(tools, task):
    everything = tools.run_tests()
    assert everything.endswith("[exit 0]") and " passed" in everything
    # The PR's new tests are hidden: the snapshot does not have them.
    assert tools.run_tests(task.FAIL_TO_PASS[0]).endswith("[exit 4]")
    tools.write_file("tests/test_scratch.py", "def test_fails():\n    assert 1 == 2\n\n\ndef test_passes():\n    pass\n")
    stopped = tools.run_tests("tests/test_scratch.py")
    assert "1 failed" in stopped and "passed" not in stopped and stopped.endswith("[exit 1]")  # -x stops
    assert "1 passed" in tools.run_tests("tests/test_scratch.py::test_passes")


@docker
def test_call_dispatches_and_explains_bad_calls(tools):
    assert tools.call("bash", {"command": "echo hi"}) == "hi\n[exit 0]"
    # Models often send integers as strings.
    assert tools.call("read_file", {"path": "README.md", "start_line": "1", "end_line": 1.0}).startswith("     1\t")
    assert "unknown tool 'rm_rf'" in tools.call("rm_rf", {})
    assert "needs the argument command" in tools.call("bash", {})
    assert "has no argument cwd" in tools.call("bash", {"command": "true", "cwd": "/"})
    assert "must be of JSON type integer" in tools.call("read_file", {"path": "README.md", "start_line": "one"})
    assert "must be of JSON type string" in tools.call("bash", {"command": ["ls"]})
    assert "JSON object" in tools.call("bash", ["ls"])  # type: ignore[arg-type]


def test_schemas_describe_the_five_tools_from_their_signatures():
    schemas = tool_schemas()
    assert json.loads(json.dumps(schemas)) == schemas
    assert [schema["function"]["name"] for schema in schemas] == list(TOOL_NAMES)
    json_types = {str: "string", int: "integer"}
    for schema in schemas:
        assert schema["type"] == "function"
        function = schema["function"]
        assert function["description"] and "Args:" not in function["description"]
        parameters = function["parameters"]
        assert parameters["type"] == "object" and parameters["additionalProperties"] is False
        method = getattr(AgentTools, function["name"])
        signature = inspect.signature(method)
        hints = typing.get_type_hints(method)
        names = [name for name in signature.parameters if name != "self"]
        assert list(parameters["properties"]) == names
        assert parameters["required"] == [
            name for name in names if signature.parameters[name].default is inspect.Parameter.empty]
        for name, prop in parameters["properties"].items():
            assert prop["type"] == json_types[hints[name]]
            assert prop["description"] and "\n" not in prop["description"]
            assert prop.get("default", inspect.Parameter.empty) == signature.parameters[name].default
    assert tool_schemas()[0]["function"]["parameters"]["required"] == ["command"]
    schemas[0]["function"]["name"] = "changed"
    assert tool_schemas()[0]["function"]["name"] == "bash"  # callers get copies


# --- the scripted server -------------------------------------------------------------------------

def test_scripted_server_answers_like_openai_and_rejects_malformed_requests():
    user = {"role": "user", "content": "fix it"}
    with ScriptedLLM({"nothing": nothing_script()}) as llm:
        url = llm.url + "/chat/completions"
        assert requests.post(url, json={"messages": [user]}, timeout=10).status_code == 400
        assert requests.post(url, json={"model": MODEL, "messages": []}, timeout=10).status_code == 400
        first = requests.post(url, json={"model": MODEL, "messages": [user]}, timeout=10)
        assert first.status_code == 200
        answer = first.json()
        assert answer["object"] == "chat.completion" and answer["model"] == MODEL
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        call = choice["message"]["tool_calls"][0]
        assert call["type"] == "function" and json.loads(call["function"]["arguments"]) == {"path": "README.md"}
        assistant = choice["message"]
        unanswered = requests.post(url, json={"model": MODEL, "messages": [user, assistant]}, timeout=10)
        assert unanswered.status_code == 400 and "not answered" in unanswered.json()["error"]["message"]
        wrong_id = {"role": "tool", "tool_call_id": "call_other", "content": "text"}
        wrong = requests.post(url, json={"model": MODEL, "messages": [user, assistant, wrong_id]}, timeout=10)
        assert wrong.status_code == 400 and "tool_call_id" in wrong.json()["error"]["message"]
        answered = {"role": "tool", "tool_call_id": call["id"], "content": "text"}
        last = requests.post(url, json={"model": MODEL, "messages": [user, assistant, answered]}, timeout=10).json()
        assert last["choices"][0]["finish_reason"] == "stop" and last["choices"][0]["message"]["content"] == "done"
        assert [request.status for request in llm.requests] == [400, 400, 200, 400, 400, 200]


# --- policy episodes and rollouts ----------------------------------------------------------------

@docker
@pytest.mark.parametrize("script", ["gold", "partial", "nothing"])
def test_an_episode_over_http_is_graded_on_what_the_agent_changed(script, task, partial_pull, runtime, grader):
    with ScriptedLLM(_scripts(task, partial_pull), schedule=[script]) as llm:
        client = PolicyClient(llm.url, MODEL, api_key="sk-test")
        with runtime.start(task) as sandbox:
            episode = client.run_episode(task, sandbox, seed=7)
        headers = [request.headers for request in llm.requests]
    assert (episode.finished, episode.turns, episode.tool_calls) == ("stop", 2, 1)
    assert [message["role"] for message in episode.transcript] == ["system", "user", "assistant", "tool", "assistant"]
    assert task.problem_statement.strip() in episode.transcript[1]["content"]
    assert episode.transcript[3]["tool_call_id"] == episode.transcript[2]["tool_calls"][0]["id"]
    assert all(header["Authorization"] == "Bearer sk-test" for header in headers)
    grade = grader.grade(task, episode.patch)
    if script == "gold":
        assert (grade.reward, grade.resolved) == (1.0, True)
    elif script == "partial":
        passes = partial_pull.partial_fixes[0].passes
        assert 0 < grade.reward < 1
        assert grade.reward == pytest.approx(len(passes) / len(task.FAIL_TO_PASS))
    else:
        assert episode.patch == "" and grade.reward == 0.0


@docker
def test_rollouts_on_a_seeded_schedule_give_three_distinct_rewards(task, partial_pull, runtime, grader):
    with ScriptedLLM(_scripts(task, partial_pull), schedule=["gold", "partial", "nothing", "gold"]) as llm:
        results = PolicyClient(llm.url, MODEL).rollouts(task, runtime, grader, k=4)
        bodies = llm.bodies()
    assert [(result.kind, result.name) for result in results] == [("policy", f"policy-{i}") for i in range(4)]
    rewards = [result.reward for result in results]
    assert rewards[0] == rewards[3] == 1.0 and 0 < rewards[1] < 1 and rewards[2] == 0.0
    assert len(set(rewards)) == 3
    assert [result.resolved for result in results] == [True, False, False, True]
    assert all(result.grade is not None and result.grade.reward == result.reward for result in results)
    assert len(bodies) == 8  # two model calls per episode
    assert all(body["model"] == MODEL and body["tools"] == tool_schemas() and body["tool_choice"] == "auto"
               for body in bodies)
    assert [body["seed"] for body in bodies] == [0, 0, 1, 1, 2, 2, 3, 3]
    trace = EpisodeTrace.model_validate_json((Path(results[1].grade.log_dir) / "trace.json").read_text())
    assert (trace.finished, trace.seed, trace.source, trace.reward) == ("stop", 1, "policy", rewards[1])
    assert [message["role"] for message in trace.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert trace.tools == tool_schemas()


@docker
def test_max_turns_bounds_an_episode(task, runtime, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    endless = [ScriptedCall("bash", {"command": f"echo step {step}"}) for step in range(10)]
    with ScriptedLLM({"endless": endless}) as llm:
        client = PolicyClient(llm.url, MODEL, max_turns=3)
        with runtime.start(task) as sandbox:
            episode = client.run_episode(task, sandbox, seed=0)
        requests_seen = list(llm.requests)
    assert (episode.finished, episode.turns, episode.tool_calls) == ("max_turns", 3, 3)
    assert len(requests_seen) == 3
    assert episode.transcript[-1] == {"role": "tool", "tool_call_id": episode.transcript[-2]["tool_calls"][0]["id"],
                                      "content": "step 2\n[exit 0]"}
    assert all("Authorization" not in request.headers for request in requests_seen)


@docker
def test_server_errors_are_retried_and_client_errors_are_not(task, sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with ScriptedLLM({"nothing": nothing_script()}, failures=[500, 429]) as llm:
        episode = PolicyClient(llm.url, MODEL, backoff_s=0.01).run_episode(task, sandbox)
        recorded = list(llm.requests)
    assert episode.finished == "stop" and episode.turns == 2
    assert [request.status for request in recorded] == [500, 429, 200, 200]
    assert recorded[0].body == recorded[2].body  # the same request, sent again
    assert recorded[0].headers["Authorization"] == "Bearer sk-from-env"
    with ScriptedLLM({"nothing": nothing_script()}, failures=[400]) as llm:
        refused = PolicyClient(llm.url, MODEL, backoff_s=0.01).run_episode(task, sandbox)
        assert len(llm.requests) == 1
    assert refused.finished.startswith("error: HTTP 400") and "injected failure" in refused.finished
    assert refused.turns == 0


@docker
def test_an_unreachable_server_ends_the_episode_with_an_error_and_reward_zero(task, runtime, grader):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    client = PolicyClient(f"http://127.0.0.1:{port}/v1", MODEL, retries=1, backoff_s=0.01)
    with runtime.start(task) as sandbox:
        episode = client.run_episode(task, sandbox, seed=0)
    assert episode.finished.startswith("error: cannot reach") and episode.turns == 0 and episode.patch == ""
    [result] = client.rollouts(task, runtime, grader, k=1)
    assert (result.reward, result.resolved) == (0.0, False)
    record = EpisodeTrace.model_validate_json((Path(result.grade.log_dir) / "trace.json").read_text())
    assert record.finished.startswith("error") and record.reward == 0.0
