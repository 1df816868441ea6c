"""``repo2env train --demo`` / ``make train-demo``: the whole loop on this machine in a few minutes.

The embedded demo repository is mined, built and validated, published to a folder with a date
split (the newest task held out), a tiny policy is built here and taught to call RepoEnv's
``str_replace`` tool (the first hunk of each training task's fix and of its known partial fixes,
so a group of rollouts can score apart), then GRPO runs with RepoEnv, evaluating on the held-out
split, and ``reward.png`` is written next to the run. The policy is taught answers, not trained to
solve issues: the point is every stage running for real, with real rewards from the hidden tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from repo2env.errors import InputError
from repo2env.pipeline import compose
from repo2env.runtime.backend import Backend


@dataclass
class DemoTrainResult:
    """Where the demo run put things, and what it measured."""

    dataset: Path
    model: Path
    run: Path
    figure: Path
    splits: dict[str, int]
    teach_loss: tuple[float, float]
    rewards: list[float]
    eval_rewards: list[float]


def run_train_demo(out_dir: Path, *, backend: Backend, steps: int = 4, eval_steps: int = 2, teach_steps: int = 200,
                   progress: Callable[[str], None] = lambda message: None) -> DemoTrainResult:
    """Run the demo loop under ``out_dir`` (source/, tasks/, dataset/, model/, run/), its images and
    sandboxes (RepoEnv's too) on ``backend``."""
    from trl import GRPOConfig

    from repo2env.demo import DEMO_PULLS
    from repo2env.envs import RepoEnvConfig
    from repo2env.train.run import grpo_trainer, run_training
    from repo2env.train.tiny import (
        build_model,
        build_tokenizer,
        chat_corpus,
        hunk_replacements,
        repo_env_tools,
        teach,
        tool_call_turn,
    )

    out_dir = out_dir.absolute()
    tasks_dir = out_dir / "tasks"
    progress("building, mining, building images and validating the demo repository")
    demo = compose.demo_repository(out_dir / "source")
    compose.mine(compose.open_repository(str(demo.repo_path), issues_path=demo.issues_path), tasks_dir)
    built = compose.build(tasks_dir, backend=backend)
    if built.ok == 0:
        raise InputError("no demo task built", hint="run 'repo2env doctor' and 'make base-image'")
    # Fewer reference reruns than the default policy: the loop, not the verdicts, is what this demo shows.
    policy = compose.acceptance_policy().model_copy(update={"gold_runs": 1, "partial_limit": 2, "near_miss_limit": 2})
    compose.validate(tasks_dir, policy=policy, jobs=2, backend=backend)

    accepted = sorted(compose.publishable([tasks_dir]), key=lambda task: task.created_at)
    if len(accepted) < 2:
        raise InputError("the demo needs two accepted tasks to hold one out")
    cutoff = datetime.fromisoformat(accepted[-1].created_at.replace("Z", "+00:00")).astimezone(UTC).date()
    progress(f"publishing {len(accepted)} tasks to a folder, tasks from {cutoff} on held out")
    dataset_dir = out_dir / "dataset"
    published = compose.publish([tasks_dir], str(dataset_dir), compose.PublishOptions(name="repo2env-demo", split_by_date=cutoff),
                                backend=backend, overwrite=True)
    prepared = compose.training_dataset(str(dataset_dir), out_dir / "work", backend=backend)
    train_rows, test_rows = prepared.splits["train"], prepared.splits.get("test")

    progress("building the tiny policy and teaching it to call str_replace")
    truth = {pull.number: pull for pull in DEMO_PULLS}
    tools = repo_env_tools()
    examples = []
    for row in train_rows:
        pull = truth[row["pull_number"]]
        for patch in (row["patch"], *(fix.patch for fix in pull.partial_fixes)):
            replacements = hunk_replacements(patch)
            if replacements and pull.partial_fixes:  # tasks with partial fixes: answers that score apart
                path, old, new = replacements[0]
                examples.append((row["prompt"], [tool_call_turn("str_replace", {"path": path, "old": old, "new": new})]))
    prompts = [row["prompt"] for row in train_rows] + ([row["prompt"] for row in test_rows] if test_rows else [])
    tokenizer = build_tokenizer(chat_corpus(prompts + [prompt + answer for prompt, answer in examples], tools))
    model = build_model(tokenizer)
    losses = teach(model, tokenizer, examples, tools, steps=teach_steps)
    model_dir = out_dir / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)

    progress(f"GRPO with RepoEnv: {steps} steps, evaluation on the held-out split every {eval_steps}")
    taught = train_rows.filter(lambda row: bool(truth[row["pull_number"]].partial_fixes))
    run_dir = out_dir / "run"
    args = GRPOConfig(output_dir=str(run_dir), max_steps=steps, per_device_train_batch_size=4, num_generations=4,
                      per_device_eval_batch_size=4, max_completion_length=128, max_tool_calling_iterations=1,
                      temperature=0.7, learning_rate=1e-4, use_cpu=True, report_to=[], logging_steps=1,
                      save_strategy="no", eval_strategy="steps", eval_steps=eval_steps, seed=0)
    trainer = grpo_trainer(model, tokenizer, args, taught, test_rows,
                           env_config=RepoEnvConfig(logs_dir=out_dir / "logs", backend=backend.name))
    result = run_training(trainer, run_dir)
    return DemoTrainResult(
        dataset=dataset_dir, model=model_dir, run=run_dir, figure=result.figure, splits=dict(published.splits),
        teach_loss=(losses[0], losses[-1]),
        rewards=[entry["reward"] for entry in result.log_history if "reward" in entry],
        eval_rewards=[entry["eval_reward"] for entry in result.log_history if "eval_reward" in entry])
