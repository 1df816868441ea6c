"""``repo2env train``: GRPO with TRL on a published dataset."""

from __future__ import annotations

from pathlib import Path

import click

from repo2env import defaults
from repo2env.cli.root import cli, clone_mapping, console, open_selected_backend
from repo2env.errors import InputError


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--dataset", "source", metavar="DIR|hf://ORG/NAME", help="A dataset 'repo2env publish' wrote.")
@click.option("--model", "model_path", metavar="PATH|ID", help="A causal LM with a tool-calling chat template.")
@click.option("--output", "output_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The run's folder: checkpoints, metrics.jsonl, reward.png.")
@click.option("--eval-steps", type=int, default=10, show_default=True,
              help="Evaluate on the held-out 'test' split every N steps (logged as eval_reward).")
@click.option("--clone", "clones", multiple=True, metavar="OWNER/NAME=PATH",
              help="A local clone, to rebuild images the dataset does not carry; repeatable.")
@click.option("--demo", is_flag=True, help="The whole loop on the embedded demo with a tiny local model "
              "(what 'make train-demo' does); --output defaults to generated/train-demo.")
@click.option("--harness", "harness_spec", metavar="AGENT",
              help="Train on a harness's episodes (mini-swe-agent, opencode, a command) instead of RepoEnv's tools: "
              "TRL's rollout_func through the capturing proxy; needs --model-url.")
@click.option("--model-url", metavar="URL", help="With --harness: the OpenAI-compatible server of the policy being "
              "trained (trl vllm-serve, with --use_vllm --vllm_mode server so TRL keeps its weights current).")
@click.option("--harness-jobs", type=click.IntRange(min=1), default=defaults.HARNESS_TRAIN_JOBS, show_default=True,
              help="With --harness: episodes (sandboxes) at once.")
@click.pass_context
def train(ctx: click.Context, source: str | None, model_path: str | None, output_dir: Path | None, eval_steps: int,
          clones: tuple[str, ...], demo: bool, harness_spec: str | None, model_url: str | None, harness_jobs: int) -> None:
    """GRPO with TRL on a published dataset, RepoEnv as the environment.

    Loads the dataset, makes every task's image exist here, trains on 'train' and evaluates on
    'test'. Any other option is a GRPOConfig field, e.g. --max_steps 100 --num_generations 8
    --learning_rate 1e-6 --report_to wandb. Per episode it logs tool calls by tool, repeated
    calls, tampering, timeouts and the diff size (episode/* metrics). Needs the train extra.
    With --harness AGENT --model-url URL the episodes are a real harness's (docs/harness.md).
    """
    from repo2env.train.run import require_train_extra

    require_train_extra()
    if demo:
        from repo2env.pipeline.train_demo import run_train_demo

        result = run_train_demo(output_dir or defaults.TRAIN_DEMO_OUTPUT, backend=open_selected_backend(),
                                progress=lambda message: console.print(f"[dim]{message}[/]"))
        console.print(f"dataset {result.dataset} ({', '.join(f'{k} {v}' for k, v in result.splits.items())}); "
                      f"tiny model {result.model} (teaching loss {result.teach_loss[0]:.2f} -> {result.teach_loss[1]:.3f})",
                      highlight=False)
        console.print(f"reward per step: {', '.join(f'{r:.2f}' for r in result.rewards)}; eval reward: "
                      f"{', '.join(f'{r:.2f}' for r in result.eval_rewards) or 'none'}", highlight=False)
        console.print(f"figure: {result.figure}; metrics: {result.run / 'metrics.jsonl'}", highlight=False)
        return
    if not (source and model_path and output_dir):
        raise InputError("train needs --dataset, --model and --output (or --demo)")
    if bool(harness_spec) != bool(model_url):
        raise InputError("--harness and --model-url go together")
    from transformers import HfArgumentParser
    from trl import GRPOConfig

    from repo2env.pipeline import compose

    (args,) = HfArgumentParser(GRPOConfig).parse_args_into_dataclasses(
        ["--output_dir", str(output_dir), "--logging_steps", "1", "--eval_strategy", "steps", "--eval_steps", str(eval_steps), *ctx.args])
    with console.status("loading the dataset and its images"):
        backend = open_selected_backend()
        training = compose.training_dataset(source, output_dir / "work", backend=backend, clones=clone_mapping(clones))
    if harness_spec:
        result, final = compose.train_on_harness(training, model_path, args, output_dir, agent=harness_spec,
                                                 model_url=model_url, jobs=harness_jobs, backend=backend)
    else:
        result, final = compose.train(training, model_path, args, output_dir)
    console.print(f"{len(result.log_history)} log entries -> {result.metrics_path}; figure: {result.figure}; "
                  f"model: {final}", highlight=False)

