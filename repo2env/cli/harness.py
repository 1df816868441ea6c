"""``repo2env harness run``: a real agent harness on a task, through the capturing proxy, graded."""

from __future__ import annotations

import json
from pathlib import Path

import click

from repo2env import defaults
from repo2env.cli.root import SECONDS, Group, cli, console, from_option, open_selected_backend, stdout
from repo2env.errors import InputError


@cli.group(cls=Group)
def harness() -> None:
    """Real agent harnesses (mini-swe-agent, OpenCode, any CLI) as policies."""


def _perturbation_rates(spec: str | None) -> dict[str, float]:
    """``tool_timeout=0.1,output_cut=0.1,endpoint_failure=0.05`` as rates by name."""
    rates: dict[str, float] = {}
    for part in spec.split(",") if spec else []:
        name, _, value = part.partition("=")
        try:
            rates[name.strip()] = float(value)
        except ValueError:
            raise InputError(f"--perturb {part!r}: give NAME=RATE", hint="e.g. tool_timeout=0.1,endpoint_failure=0.05") from None
    return rates


@harness.command("run")
@click.option("--task", "instance_id", required=True, help="Task id (owner__name-PR).")
@click.option("--agent", required=True, metavar="mini-swe-agent|opencode|CMD",
              help="A harness adapter by name, a 'package.module:Class' adapter, or a shell command run in the sandbox.")
@click.option("--model-url", required=True, metavar="URL",
              help="The policy's OpenAI-compatible server (…/v1): vLLM, 'trl vllm-serve', a hosted API.")
@click.option("--model", help="The model name to ask the server for [default: the first it lists].")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Sent to the model server [default: $OPENAI_API_KEY].")
@from_option
@click.option("--episodes", "-k", type=click.IntRange(min=1), default=1, show_default=True, help="Episodes to run.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Sandboxes at once.")
@click.option("--max-turns", type=click.IntRange(min=1), default=defaults.EPISODE_MAX_TURNS, show_default=True,
              help="Model calls per episode.")
@click.option("--max-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="The episode's length in tokens (latest prompt + completion); 0: no limit.")
@click.option("--max-wall", type=SECONDS, default=defaults.EPISODE_MAX_WALL_S, show_default=True, help="Seconds per episode.")
@click.option("--perturb", metavar="NAME=RATE,...",
              help="Inject faults: tool_timeout, output_cut (host harnesses' commands), endpoint_failure (model calls).")
@click.option("--perturb-seed", type=int, default=0, show_default=True, help="Seed of the injected faults.")
@click.option("--mode", type=click.Choice(["graded", "binary", "f2p"]), default="graded", show_default=True,
              help="Reward: graded = f2p_rate x p2p_rate; binary = resolved; f2p = f2p_rate.")
@click.option("--json", "as_json", is_flag=True, help="Print each episode's result as JSON on stdout.")
def harness_run(instance_id: str, agent: str, model_url: str, model: str | None, api_key: str | None,
                from_dirs: tuple[Path, ...], episodes: int, jobs: int, max_turns: int, max_tokens: int, max_wall: float,
                perturb: str | None, perturb_seed: int, mode: str, as_json: bool) -> None:
    """Run a harness on a task: its commands run in the task's sandbox (no network), it reaches the
    model only through the capturing proxy (every call recorded with token ids and logprobs when
    the server gives them), and the hidden verifier grades the final diff. Each episode's trace.json
    lands next to its grading logs.

    \b
    Example: repo2env harness run --task repo2env-demo__textkit-2 --agent mini-swe-agent \\
               --model-url http://localhost:8000/v1
    """
    from repo2env.pipeline import compose

    try:
        options = compose.harness_options(max_turns=max_turns, max_tokens=max_tokens, max_wall_s=max_wall,
                                          perturbations=_perturbation_rates(perturb), seed=perturb_seed,
                                          reward_mode=mode)
    except InputError as exc:  # the budget's options are checked by click: what is left is --perturb
        raise InputError(f"--perturb {perturb!r}: {exc.message}", hint=exc.hint) from None
    results = compose.harness_episodes(instance_id, compose.task_folders(from_dirs), agent, model_url, model=model,
                                       api_key=api_key, episodes=episodes, jobs=jobs, options=options,
                                       backend=open_selected_backend(),
                                       progress=lambda message: console.print(f"[dim]{message}[/]"))
    for trace, path in results:
        grade = trace.grade
        answered = sum(call.status == 200 and call.refused is None for call in trace.calls)
        parts = f"f2p {grade.f2p_rate:.2f}, p2p {grade.p2p_rate:.2f}" if grade else "not graded"
        flags = " [red]tampered[/]" if grade and grade.tampered else ""
        console.print(f"{trace.instance_id} {trace.agent}: reward {trace.reward or 0:.3f} ({parts}){flags}; "
                      f"{trace.finished}; {answered} model calls, {len(trace.tool_runs)} sandbox tool calls, "
                      f"{trace.wall_s:.0f} s; trace: {path}", highlight=False)
        if as_json:
            summary = {"episode_id": trace.episode_id, "instance_id": trace.instance_id, "agent": trace.agent,
                       "model": trace.model, "reward": trace.reward, "finished": trace.finished,
                       "cut_off": trace.cut_off, "model_calls": answered, "tool_runs": len(trace.tool_runs),
                       "perturbations": trace.perturbation_count, "wall_s": trace.wall_s, "trace": str(path),
                       "grade": grade.model_dump(mode="json", exclude={"tests"}) if grade else None}
            stdout.print_json(json.dumps(summary))
