"""``repo2env train``: GRPO with TRL on a published repo2env dataset, RepoEnv as the environment.

A thin wrapper over ``GRPOTrainer(environment_factory=RepoEnv)``: given a published dataset's
splits (loaded, its images made runnable, by :func:`repo2env.pipeline.compose.training_dataset`),
train on the ``train`` split and evaluate on the held-out ``test`` split (the
publish date split) every ``eval_steps`` steps (logged as ``eval_reward``, ``eval/reward`` in
TensorBoard or W&B). A zero-weight reward function logs per-episode signs of reward hacking: tool
calls by tool, repeated identical calls, gradings that found tampering, timeouts and the diff size.
Everything lands in the output folder: ``metrics.jsonl`` (the log history) and ``reward.png``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo2env import install_hint
from repo2env.envs.tools import TOOL_NAMES
from repo2env.errors import InputError, PatchError


def require_train_extra() -> None:
    """Fail with one line when the ``train`` extra (trl, transformers, torch) is not installed."""
    import importlib.util

    missing = [name for name in ("trl", "transformers", "torch", "tokenizers") if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(f"training needs {', '.join(missing)}", hint=install_hint("train"))


# --- per-episode signals ----------------------------------------------------------------------


def diff_size(diff: str) -> int:
    """Changed lines of a unified diff (added + removed, headers excluded)."""
    from repo2env.patches import parse

    try:
        files = parse(diff).files
    except PatchError:
        return 0  # git apply would refuse it: nothing of it changes the repository
    return sum(file.added + file.removed for file in files)


def is_tampered(grade) -> bool:
    """Whether the grader caught the agent's code lying to the tests (reason ``tampered``)."""
    return bool(grade is not None and grade.tampered)


def episode_signals(env) -> dict[str, float]:
    """What one finished episode of a RepoEnv shows, graded (once: the reward is cached)."""
    reward = env.get_reward()
    grade = env.last_grade
    signals: dict[str, float] = {f"tool_calls/{name}": float(env.tool_calls.get(name, 0)) for name in TOOL_NAMES}
    signals.update({
        "tool_calls/total": float(sum(env.tool_calls.values())),
        "repeated_calls": float(env.repeated_calls),
        "tampered": float(is_tampered(grade)),
        "timeouts": float(env.timeouts + bool(grade and grade.error and "timed out" in grade.error)),
        "diff_lines": float(diff_size(env.last_diff)),
        "reward": float(reward),
    })
    return signals


def episode_metrics(environments: Sequence[Any] | None = None, log_metric=None, log_extra=None, **columns: Any) -> list[float]:
    """A reward function of weight 0 that only logs: each episode's signals, averaged over the batch
    as ``episode/<name>`` metrics and per completion as extra columns of the completions table."""
    environments = list(environments or [])
    rows = [episode_signals(env) for env in environments]
    row_ids = columns.get("instance_id")
    if row_ids is not None and environments:
        # Pooled environments are reused across batches: an episode graded on another row's task
        # would train on a wrong reward silently, so it is counted (and must stay 0).
        tasks = [env._task.instance_id if env._task is not None else "" for env in environments]
        for row, task, instance_id in zip(rows, tasks, row_ids, strict=True):
            row["row_mismatch"] = float(task != instance_id)
        if log_extra is not None:
            log_extra("task", tasks)
    for name in (rows[0] if rows else {}):
        values = [row[name] for row in rows]
        if log_metric is not None:
            log_metric(f"episode/{name}", sum(values) / len(values))
        if log_extra is not None:
            log_extra(name, values)
    return [0.0] * len(environments)


# --- data --------------------------------------------------------------------------------------


# --- the run -------------------------------------------------------------------------------------

#: Columns TRL reads as model inputs (a vision model's images): a published row's ``image`` (the
#: Docker tag) would be taken for a picture, so it travels as ``docker_image``.
TRL_RESERVED_COLUMNS = ("image", "images")


def trl_ready(dataset):
    """The published rows as TRL takes them: reserved column names renamed (RepoEnv reads the image
    from ``env_spec``)."""
    if dataset is None:
        return None
    for name in TRL_RESERVED_COLUMNS:
        if name not in dataset.column_names:
            continue
        if f"docker_{name}" in dataset.column_names:
            # Rows carry the tag as ``docker_image`` already (the field SWE-bench-style harnesses read).
            dataset = dataset.remove_columns(name)
        else:
            dataset = dataset.rename_column(name, f"docker_{name}")
    return dataset



def grpo_trainer(model, tokenizer, args, train_dataset, eval_dataset=None, *, env_config=None, callbacks=()):
    """``GRPOTrainer`` with RepoEnv as the environment (its reward weight 1) and the zero-weight
    episode metrics. ``args``: a GRPOConfig; its ``reward_weights`` are set here."""
    from functools import partial

    from trl import GRPOTrainer

    from repo2env.envs import RepoEnv

    train_dataset, eval_dataset = trl_ready(train_dataset), trl_ready(eval_dataset)
    args.reward_weights = [0.0]  # episode_metrics; RepoEnv.get_reward is appended by TRL with weight 1
    if eval_dataset is None or len(eval_dataset) == 0:
        eval_dataset = None
        args.eval_strategy = "no"
    factory = partial(RepoEnv, config=env_config) if env_config is not None else RepoEnv
    return GRPOTrainer(model=model, processing_class=tokenizer, args=args, reward_funcs=[episode_metrics],
                       train_dataset=train_dataset, eval_dataset=eval_dataset, environment_factory=factory,
                       callbacks=list(callbacks))


@dataclass
class TrainResult:
    """What a finished run left in its output folder."""

    log_history: list[dict[str, Any]]
    metrics_path: Path
    figure: Path


def run_training(trainer, output_dir: Path) -> TrainResult:
    """Train, then remove every sandbox the run started (the pooled environments' and the warm
    spares'), and write ``metrics.jsonl`` and ``reward.png`` to ``output_dir``."""
    from repo2env.envs.repo_env import release_shared_sandboxes

    try:
        trainer.train()
    finally:
        # TRL keeps its environment instances pooled and never closes them: close their sandboxes
        # here (the instances keep their last grade and counters for inspection).
        for environments in getattr(trainer, "_environment_pool", {}).values():
            for env in environments:
                env._close()
        release_shared_sandboxes()
    figure = write_run_outputs(trainer.state.log_history, output_dir)
    return TrainResult(log_history=list(trainer.state.log_history), metrics_path=output_dir / "metrics.jsonl",
                       figure=figure)


def write_run_outputs(log_history: Sequence[dict[str, Any]], output_dir: Path) -> Path:
    """``metrics.jsonl`` (one logged dict a line) and ``reward.png`` (train and eval reward per step)
    in ``output_dir``; returns the figure's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    output_dir.mkdir(parents=True, exist_ok=True)
    with (output_dir / "metrics.jsonl").open("w") as handle:
        for entry in log_history:
            handle.write(json.dumps(entry, default=float) + "\n")
    train = [(entry["step"], entry["reward"]) for entry in log_history if "reward" in entry and "step" in entry]
    evals = [(entry["step"], entry["eval_reward"]) for entry in log_history if "eval_reward" in entry]
    figure, axes = plt.subplots(figsize=(6, 3.5))
    if train:
        axes.plot(*zip(*train, strict=True), marker="o", label="train reward (mean of the group)")
    if evals:
        axes.plot(*zip(*evals, strict=True), marker="s", label="eval reward (held-out split)")
    axes.set_xlabel("step")
    axes.set_ylabel("reward")
    axes.set_ylim(-0.05, 1.05)
    axes.legend(loc="best")
    axes.set_title("repo2env GRPO run")
    figure.tight_layout()
    path = output_dir / "reward.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
