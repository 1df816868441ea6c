"""RepoEnv, TRL's environment_factory class, driven by scripted episodes on the validated demo:
gold / partial / empty action scripts give 1.0 / in between / 0.0, every reset starts its own row's
task in a fresh sandbox, and no sandbox outlives its environment; the warm pool hands out sandboxes
whose command channel answers already, and keeps its housekeeping out of the way of tool calls."""

from __future__ import annotations

import inspect
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from repo2env.dataset_rows import dataset_row
from repo2env.envs import RepoEnv, RepoEnvConfig
from repo2env.envs.repo_env import _Deferred, _QuietGate, _SandboxPool, _task_of
from repo2env.envs.tools import Refusal


def test_config_from_environment(monkeypatch):
    monkeypatch.setenv("REPO2ENV_ENV_REWARD_MODE", "binary")
    monkeypatch.setenv("REPO2ENV_ENV_COMMAND_TIMEOUT_S", "5")
    config = RepoEnvConfig.from_environment()
    assert config.reward_mode == "binary" and config.command_timeout_s == 5.0
    assert config.command_channel
    monkeypatch.setenv("REPO2ENV_ENV_COMMAND_CHANNEL", "0")
    assert not RepoEnvConfig.from_environment().command_channel
    monkeypatch.setenv("REPO2ENV_ENV_COMMAND_CHANNEL", "maybe")
    with pytest.raises(Exception, match="COMMAND_CHANNEL='maybe' is not a valid bool"):
        RepoEnvConfig.from_environment()
    monkeypatch.delenv("REPO2ENV_ENV_COMMAND_CHANNEL")
    monkeypatch.setenv("REPO2ENV_ENV_REWARD_MODE", "lenient")
    with pytest.raises(Exception, match="reward mode"):
        RepoEnvConfig.from_environment()


def test_tools_are_what_trl_exposes():
    """Every public method but reset/get_reward becomes a TRL tool: each needs hints and Args."""
    public = {name for name, member in inspect.getmembers(RepoEnv, inspect.isfunction) if not name.startswith("_")}
    assert public == {"reset", "get_reward", "bash", "read_file", "write_file", "str_replace", "run_tests"}
    for name in public - {"reset", "get_reward"}:
        method = getattr(RepoEnv, name)
        signature = inspect.signature(method)
        assert all(parameter.annotation != inspect.Parameter.empty for parameter in signature.parameters.values()
                   if parameter.name != "self")
        assert "Args:" in method.__doc__ and "Returns:" in method.__doc__


def test_one_tool_set_for_trl_policy_rollouts_and_openenv():
    """What TRL renders of RepoEnv's tools is the policy rollouts' schema, word for word: the same
    names, descriptions, argument types and descriptions (issue 21.4); the OpenEnv server takes them."""
    from repo2env.envs.openenv_server import TOOLS
    from repo2env.envs.tools import TOOL_NAMES, same_tool, tool_schemas

    transformers_utils = pytest.importorskip("transformers.utils", reason="the train extra is not installed")
    bare = object.__new__(RepoEnv)  # bound methods, as TRL takes them; no engine needed
    trl_view = {name: transformers_utils.get_json_schema(getattr(bare, name))["function"] for name in TOOL_NAMES}
    for schema in tool_schemas():
        ours, theirs = schema["function"], trl_view[schema["function"]["name"]]
        assert ours["description"] == theirs["description"]
        assert {name: (prop["type"], prop["description"]) for name, prop in ours["parameters"]["properties"].items()} \
            == {name: (prop["type"], prop["description"]) for name, prop in theirs["parameters"]["properties"].items()}
        assert ours["parameters"]["required"] == theirs["parameters"].get("required", [])
    assert TOOLS == TOOL_NAMES
    with pytest.raises(TypeError, match="must be AgentTools.run_tests"):
        @same_tool("run_tests")
        def run_tests(self, path: str = "") -> str:  # the old argument name: refused at import
            return path


@pytest.fixture(scope="module")
def demo_rows(validated, demo_repo):
    from repo2env.jsonl import read_tasks

    folder, _ = validated
    tasks = {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")
             if task.validation and task.validation.verdict == "accepted"}
    partial_pull = next(pull for pull in demo_repo.pulls if pull.partial_fixes and pull.number in tasks)
    return tasks, partial_pull


def _containers(docker_client) -> set[str]:
    # The low-level listing: the high-level one inspects each container and races their removal.
    return {row["Id"] for row in docker_client.api.containers(all=True)}


def _gone(docker_client, container_id: str, timeout_s: float = 30.0) -> bool:
    """Whether the container is removed within ``timeout_s`` (removal runs in the background)."""
    import time

    deadline = time.monotonic() + timeout_s
    while container_id in _containers(docker_client):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _apply(env: RepoEnv, patch: str) -> str:
    env.write_file("fix.diff", patch)
    return env.bash("git apply fix.diff && rm fix.diff")


@pytest.mark.docker
def test_scripted_episodes_give_gold_partial_and_empty_rewards(demo_rows, docker_client, tmp_path):
    tasks, partial_pull = demo_rows
    task = tasks[partial_pull.number]
    row = dataset_row(task)  # a published row, JSON columns and all
    env = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "logs"))

    instruction = env.reset(**task.model_dump())
    assert task.problem_statement.strip()[:40] in instruction
    # A published row's prompt already holds the instruction, and TRL appends what reset returns.
    assert env.reset(**row) is None and row["prompt"][-1]["content"] == instruction
    assert "[exit 0]" in _apply(env, task.patch)
    assert env.get_reward() == 1.0 and env.last_grade.reward == 1.0
    first_sandbox = env._sandbox.id

    env.reset(**row)
    assert env._sandbox.id != first_sandbox, "every episode gets a fresh sandbox"
    assert env.bash("git status --short").strip() == "[exit 0]", "nothing of the last episode is left"
    assert "[exit 0]" in _apply(env, partial_pull.partial_fixes[0].patch)
    partial = env.get_reward()
    assert 0.0 < partial < 1.0
    assert env.last_diff.startswith("diff --git"), "the graded diff is kept for the diff-size metric"

    env.reset(**row)
    env.read_file("README.md")
    env.read_file("README.md")
    assert env.get_reward() == 0.0 and env.last_diff == ""
    assert env.tool_calls == {"read_file": 2} and env.repeated_calls == 1
    assert _gone(docker_client, first_sandbox), "reset tears down the previous sandbox"
    last = env._sandbox.id
    del env
    import gc

    gc.collect()
    assert _gone(docker_client, last)


@pytest.mark.docker
def test_each_reset_runs_its_own_rows_task(demo_rows, tmp_path):
    tasks, _ = demo_rows
    first, second = list(tasks.values())[:2]
    env = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "logs"))
    for task in (first, second, first):
        env.reset(**task.model_dump())
        assert _task_of(task.model_dump()).instance_id == env._task.instance_id == task.instance_id
        head = env.bash("git log -1 --format=%s").splitlines()[0]
        assert head, "the snapshot is a one-commit repository"
    env._close()


@pytest.mark.docker
def test_tool_errors_are_text_and_the_episode_budget_holds(demo_rows, tmp_path):
    tasks, _ = demo_rows
    task = next(iter(tasks.values()))
    env = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "logs", episode_timeout_s=3.0))
    refused = env.bash("true")
    assert refused.startswith("error: no task") and isinstance(refused, Refusal)
    env.reset(**task.model_dump())
    assert env.read_file("/etc/passwd").startswith("error") and isinstance(env.read_file("/etc/passwd"), Refusal)
    assert isinstance(env.str_replace("README.md", "text that is not there", "x"), Refusal)
    # A command that runs and fails is an answer, not a refusal: even if it prints "error: ".
    ran = env.bash("echo 'error: from the command'; false")
    assert ran.startswith("error: from the command") and "[exit 1]" in ran and not isinstance(ran, Refusal)
    __import__("time").sleep(3.5)
    assert "used up" in env.bash("true") and isinstance(env.bash("true"), Refusal)
    env._close()


@pytest.mark.docker
def test_tool_calls_go_through_the_channel_one_command_each(demo_rows, tmp_path):
    """Each tool call is one command through the sandbox's persistent channel (issue 13.6): counted
    by the heartbeat file every command appends one byte to, before it runs."""
    from repo2env.runtime.backends.keepalive import HEARTBEAT_PATH
    from repo2env.runtime.channel import SERVER_MARKER

    tasks, _ = demo_rows
    task = next(iter(tasks.values()))
    env = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "logs"))
    env.reset(**task.model_dump())
    assert SERVER_MARKER in env.bash("tr '\\0' ' ' < /proc/$PPID/cmdline")

    def commands_of(call) -> int:
        before = int(env.bash(f"stat -c %s {HEARTBEAT_PATH}").split()[0])
        call()
        after = int(env.bash(f"stat -c %s {HEARTBEAT_PATH}").split()[0])
        return after - before - 1  # the second stat's own beat

    assert commands_of(lambda: env.write_file("notes/new.txt", "one\ntwo\n")) == 1
    assert commands_of(lambda: env.read_file("notes/new.txt")) == 1
    assert commands_of(lambda: env.str_replace("notes/new.txt", "two", "three")) == 2  # read, then write
    assert env.read_file("notes/new.txt") == "     1\tone\n     2\tthree"
    assert commands_of(lambda: env.bash("true")) == 1
    env._close()


@pytest.mark.docker
def test_a_groups_rewards_are_graded_at_once_and_a_later_change_is_graded_again(demo_rows, tmp_path):
    """13.1: the group's first get_reward starts the other episodes' gradings (TRL asks one after
    another once the group has generated), and an early grading counts only while the episode's
    diff is the one graded: a change made after it (a trainer asking rewards mid-episode, or a
    policy racing the grader) is graded again, so early grading never changes a reward."""
    tasks, partial_pull = demo_rows
    task = tasks[partial_pull.number]
    config = RepoEnvConfig(logs_dir=tmp_path / "logs", grading_jobs=2)
    gold, empty, late = RepoEnv(config), RepoEnv(config), RepoEnv(config)
    for env in (gold, empty, late):
        env.reset(**task.model_dump())
    assert "[exit 0]" in _apply(gold, task.patch)

    assert gold.get_reward() == 1.0
    assert empty._early is not None and late._early is not None, "the others' gradings started"
    assert late._early.result(timeout=600)[1].reward == 0.0, "graded early as it stood: no change"
    assert "[exit 0]" in _apply(late, task.patch)  # changed after its early grading
    assert empty.get_reward() == 0.0
    assert late.get_reward() == 1.0, "the change after the early grading was graded"
    for env in (gold, empty, late):
        env._close()

    alone = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "alone", grading_jobs=1))
    other = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "alone", grading_jobs=1))
    alone.reset(**task.model_dump())
    other.reset(**task.model_dump())
    assert alone.get_reward() == 0.0 and other._early is None, "grading_jobs=1 grades only when asked"
    alone._close()
    other._close()


def test_housekeeping_waits_for_a_pause_between_tool_calls_or_its_longest_wait():
    """13.6: a spare's start or a removal beside a tool call slows the call 2-3x on 2 cores, so the
    pool's housekeeping waits until no tool call ran for quiet_s; calls without a pause hold it back
    at most longest_s, and a reset that needs the spare now hurries it."""
    executor = ThreadPoolExecutor(max_workers=2)
    gate = _QuietGate(quiet_s=0.3, longest_s=5.0)
    with gate.tool_call():
        job = _Deferred(executor, gate, time.monotonic)
        time.sleep(0.5)
        assert not job.future.done(), "a running tool call holds housekeeping back"
        ended = time.monotonic()  # read before the gate's own 'call ended' moment, never after it
    assert 0.3 <= job.future.result(timeout=5) - ended < 2.0, "it runs once the calls paused for quiet_s"

    patient = _QuietGate(quiet_s=5.0, longest_s=10.0)
    patient.touch()  # a reset: its first tool call follows
    job = _Deferred(executor, patient, time.monotonic)
    time.sleep(0.1)
    assert not job.future.done()
    began = time.monotonic()
    job.hurry()
    assert job.future.result(timeout=5) - began < 2.0, "hurried, it runs at once (not after quiet_s)"

    busy = _QuietGate(quiet_s=0.3, longest_s=2.0)
    one_worker = ThreadPoolExecutor(max_workers=1)
    began = time.monotonic()
    job, queued_behind = _Deferred(one_worker, busy, time.monotonic), _Deferred(one_worker, busy, time.monotonic)
    while not queued_behind.future.done() and time.monotonic() - began < 10:
        with busy.tool_call():
            time.sleep(0.05)
    assert 2.0 <= job.future.result() - began < 4.0, "calls without a pause hold it back longest_s at most"
    assert queued_behind.future.result() - job.future.result() < 1.0, "counted from when it was queued"
    executor.shutdown()
    one_worker.shutdown()


@pytest.mark.alone  # its timing does not hold beside two other workers (seen in a parallel run)
@pytest.mark.docker
def test_the_pool_hands_out_answering_sandboxes_and_housekeeps_between_tool_calls(built_demo, docker_runtime,
                                                                                   docker_client):
    """13.6: the pool's sandbox serves its first command through the channel its start opened (no
    channel opened on first use); the replacement's start and the last episode's removal wait
    while tool calls follow each other closely, and happen in the pause after them."""
    from repo2env.runtime.channel import SERVER_MARKER

    _, tasks = built_demo
    task = next(iter(tasks.values()))
    pool = _SandboxPool(docker_runtime, 1, gate=_QuietGate(quiet_s=1.0, longest_s=60.0))

    def call(sandbox, command: str) -> str:
        with pool.gate.tool_call():
            return sandbox.exec(command).output

    def opened(sandbox) -> tuple[bool, int]:
        return sandbox._channel is not None and not sandbox._channel.closed, sandbox._channel_opens

    try:
        first = pool.take(task)  # nothing warm yet: started at once, its replacement queued
        assert opened(first) == (True, 1), "the start opened the channel and proved it"
        assert SERVER_MARKER in call(first, "tr '\\0' ' ' < /proc/$PPID/cmdline") and opened(first) == (True, 1)
        spare = pool._ready[task.env_spec.image][0]
        began = time.monotonic()
        while time.monotonic() - began < 2.0:  # a container starts in well under 2 s
            call(first, "true")
            time.sleep(0.2)
        assert not spare.future.done(), "the replacement waits while tool calls follow each other"
        warm = spare.future.result(timeout=60)
        assert time.monotonic() - began >= 2.0 + 1.0, "it started in the pause"
        assert opened(warm) == (True, 1), "the spare's channel is open before its first command"

        pool.retire(first)
        assert pool.take(task) is warm and opened(warm) == (True, 1)
        next_spare = pool._ready[task.env_spec.image][0]
        for _ in range(8):
            assert call(warm, "echo hi") == "hi\n"
            time.sleep(0.2)
        assert first.id in {row["Id"] for row in docker_client.api.containers()}, "removal waits for a pause"
        assert opened(warm) == (True, 1), "its commands used the channel its start opened"
        time.sleep(2.0)
        assert first.id not in {row["Id"] for row in docker_client.api.containers(all=True)}, "removed in the pause"
        pool.retire(warm)
    finally:
        pool.release()  # the new spare, and the retired sandbox without waiting for a pause
    remaining = {row["Id"] for row in docker_client.api.containers(all=True)}
    assert warm.id not in remaining and not pool._ready
    assert next_spare.future.cancelled() or next_spare.future.result().id not in remaining


@pytest.mark.docker
def test_run_tests_on_a_javascript_task_runs_its_own_runner(built_js_demo, js_demo_repo, tmp_path):
    """The agent's run_tests on a JavaScript task (fmtkit: mocha) runs the visible tests with the
    task's runner, from its profile, not pytest: the PR's new tests fail before the fix and pass after."""
    from repo2env.patches import parse

    _, tasks = built_js_demo
    pull = next(pull for pull in js_demo_repo.pulls if pull.fail_to_pass and not pull.flaky and pull.number in tasks)
    task = tasks[pull.number]
    assert task.language == "javascript" and task.env_spec.test_runner == "mocha"
    test_file = next(path for path in parse(task.test_patch).paths if path.endswith(".js"))
    env = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "logs"))
    try:
        env.reset(**task.model_dump())
        assert "[exit 0]" in _apply(env, task.test_patch)
        before = env.run_tests(test_file)
        assert "failing" in before and "[exit 0]" not in before, before
        assert "[exit 0]" in _apply(env, task.patch)
        after = env.run_tests(test_file)
        assert "passing" in after and "failing" not in after and after.endswith("[exit 0]"), after
        assert "pytest" not in before + after
        # No target: the runner's own default (the project's mocha configuration) runs the suite.
        assert env.run_tests().endswith("[exit 0]")
    finally:
        env._close()  # the sandbox goes with the test, not whenever the collector runs
