"""Training with TRL on the CPU, end to end: a tiny Qwen2 model and tokenizer built here, GRPO with
RepoEnv on validated demo tasks (real containers, the hidden verifier grading every rollout), and
the tool path for real: a model taught to call ``bash`` makes TRL execute RepoEnv's tool, and the
group's rewards differ."""

from __future__ import annotations

import os

import pytest

trl = pytest.importorskip("trl", reason="the train extra is not installed") if not os.environ.get("CI") else __import__("trl")

from repo2env.dataset_rows import dataset_row  # noqa: E402
from repo2env.envs import RepoEnvConfig  # noqa: E402
from repo2env.train.run import diff_size, episode_signals, grpo_trainer, run_training  # noqa: E402
from repo2env.train.tiny import (  # noqa: E402
    build_model,
    build_tokenizer,
    chat_corpus,
    hunk_replacements,
    repo_env_tools,
    teach,
    tool_call_turn,
)


def test_diff_size_counts_changed_lines_only():
    diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n-old\n+new\n+more\n same\n"
    assert diff_size(diff) == 3 and diff_size("") == 0


@pytest.fixture(scope="module")
def slug_rows(validated, demo_repo):
    """Published rows of two accepted demo tasks; the first has two partial fixes."""
    from datasets import Dataset

    from repo2env.jsonl import read_tasks

    folder, _ = validated
    tasks = {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")
             if task.validation and task.validation.verdict == "accepted"}
    partial_pull = next(pull for pull in demo_repo.pulls if len(pull.partial_fixes) >= 2 and pull.number in tasks)
    other = next(number for number in tasks if number != partial_pull.number)
    rows = [dataset_row(tasks[partial_pull.number]), dataset_row(tasks[other])]
    return Dataset.from_list(rows), partial_pull


def _containers(docker_client) -> set[str]:
    """The containers this process started (the engine is shared with other tests, checkouts and CI jobs)."""
    from repo2env.runtime.ownership import OWNER_PID_LABEL

    return {row["Id"] for row in docker_client.api.containers(all=True, filters={"label": f"{OWNER_PID_LABEL}={os.getpid()}"})}


def _config(output_dir, **overrides):
    from trl import GRPOConfig

    values = dict(output_dir=str(output_dir), max_steps=2, per_device_train_batch_size=4, num_generations=2,
                  max_completion_length=64, max_tool_calling_iterations=1, use_cpu=True, report_to=[],
                  logging_steps=1, save_strategy="no", seed=0, learning_rate=1e-4)
    values.update(overrides)
    return GRPOConfig(**values)


def _apply_command(patch: str) -> str:
    return f"git apply <<'EOF'\n{patch}EOF"


@pytest.mark.docker
@pytest.mark.slow
def test_grpo_run_resets_each_rollout_with_its_own_row_and_grades_it(slug_rows, docker_client, tmp_path):
    dataset, _ = slug_rows
    tools = repo_env_tools()
    tokenizer = build_tokenizer(chat_corpus([row["prompt"] for row in dataset], tools))
    model = build_model(tokenizer)
    before = _containers(docker_client)
    trainer = grpo_trainer(model, tokenizer, _config(tmp_path / "run"), dataset,
                           env_config=RepoEnvConfig(logs_dir=tmp_path / "logs", warm_sandboxes=0))
    result = run_training(trainer, tmp_path / "run")
    history = result.log_history
    assert result.figure.is_file() and result.metrics_path.is_file()
    steps = [entry for entry in history if "rewards/RepoEnv/mean" in entry]
    assert len(steps) == 2, "get_reward is logged as the RepoEnv reward at every step"
    assert all(entry["episode/row_mismatch"] == 0.0 for entry in steps), "each rollout reset with its own row"
    environments = trainer.environments
    assert len(environments) == 4 and all(env.last_grade is not None for env in environments), \
        "every rollout of the last batch was graded by the hidden verifier"
    ids = [env._task.instance_id for env in environments]
    assert sorted(set(ids)) == sorted(dataset["instance_id"]) and all(ids.count(i) == 2 for i in set(ids))
    assert [episode_signals(env)["reward"] for env in environments] == [env.get_reward() for env in environments]
    assert _containers(docker_client) - before == set(), "no sandbox outlives the run"


@pytest.mark.docker
@pytest.mark.slow
def test_a_model_taught_to_call_a_tool_gets_it_executed_and_different_rewards(slug_rows, tmp_path):
    """Taught two edits for one issue (the demo PR's two partial fixes as str_replace calls), the
    sampled group calls RepoEnv's tool through TRL and the hidden tests score the episodes apart."""
    dataset, pull = slug_rows
    prompt = dataset[0]["prompt"]
    # The two answers are equally likely where they part (the old text): a low temperature keeps
    # that choice and only removes the noise a barely taught model adds inside each answer.
    tools = repo_env_tools()
    answers = []
    for fix in pull.partial_fixes[:2]:
        path, old, new = hunk_replacements(fix.patch)[0]
        answers.append([tool_call_turn("str_replace", {"path": path, "old": old, "new": new})])
    tokenizer = build_tokenizer(chat_corpus([prompt + answer for answer in answers], tools))
    model = build_model(tokenizer)
    losses = teach(model, tokenizer, [(prompt, answer) for answer in answers], tools, steps=150)
    assert losses[-1] < losses[0] / 10
    trainer = grpo_trainer(model, tokenizer, _config(tmp_path / "run", max_steps=1, num_generations=4,
                                                     max_completion_length=128, temperature=0.7),
                           dataset.select([0]), env_config=RepoEnvConfig(logs_dir=tmp_path / "logs"))
    run_training(trainer, tmp_path / "run")
    entry = next(entry for entry in trainer.state.log_history if "rewards/RepoEnv/mean" in entry)
    environments = trainer.environments
    assert any(env.tool_calls.get("str_replace", 0) for env in environments), "TRL executed RepoEnv's tool"
    assert entry["episode/tool_calls/str_replace"] > 0 and entry["tools/call_frequency"] > 0
    rewards = [env.get_reward() for env in environments]
    assert len(set(rewards)) > 1 and entry["rewards/RepoEnv/std"] > 0, f"the group's rewards differ: {rewards}"
    assert all(env.last_diff for env in environments if env.get_reward() > 0)


def test_trl_ready_rows_keep_one_docker_image_column():
    """Published rows carry the tag as ``image`` (ours) and ``docker_image`` (what SWE-bench-style
    harnesses read); TRL takes ``image`` for a picture, so only ``docker_image`` reaches it."""
    from datasets import Dataset

    from repo2env.train.run import trl_ready

    both = trl_ready(Dataset.from_list([{"prompt": "p", "image": "t:1", "docker_image": "t:1"}]))
    assert both.column_names == ["prompt", "docker_image"] and both[0]["docker_image"] == "t:1"
    older = trl_ready(Dataset.from_list([{"prompt": "p", "image": "t:1"}]))
    assert older.column_names == ["prompt", "docker_image"]
