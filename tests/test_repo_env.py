"""RepoEnv, TRL's environment_factory class, driven by scripted episodes on the validated demo:
gold / partial / empty action scripts give 1.0 / in between / 0.0, every reset starts its own row's
task in a fresh sandbox, and no sandbox outlives its environment."""

from __future__ import annotations

import inspect

import pytest

from repo2env.dataset_rows import dataset_row
from repo2env.envs import RepoEnv, RepoEnvConfig
from repo2env.envs.repo_env import _task_of


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
    assert env.bash("true").startswith("error: no task")
    env.reset(**task.model_dump())
    assert env.read_file("/etc/passwd").startswith("error")
    assert "error" in env.str_replace("README.md", "text that is not there", "x")
    __import__("time").sleep(3.5)
    assert "used up" in env.bash("true")
    env._close()


@pytest.mark.docker
def test_tool_calls_go_through_the_channel_one_command_each(demo_rows, tmp_path):
    """Each tool call is one command through the sandbox's persistent channel (issue 13.6): counted
    by the heartbeat file every command appends one byte to, before it runs."""
    from repo2env.runtime.backends.docker import HEARTBEAT_PATH
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
