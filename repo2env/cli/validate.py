"""``repo2env validate``: reference rollouts and the acceptance policy."""

from __future__ import annotations

from pathlib import Path

import click

from repo2env import defaults
from repo2env.cli.progress import progress
from repo2env.cli.root import cli, console, from_option, open_selected_backend
from repo2env.errors import InputError


@cli.command()
@click.argument("roots", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@from_option
@click.option("--policy-file", default=defaults.ACCEPTANCE_POLICY, show_default=True,
              help="Acceptance policy: a name in validators/ (default, light, strict) or a YAML path.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=defaults.VALIDATE_JOBS, show_default=True,
              help="Tasks in parallel.")
@click.option("--task", "instance_ids", multiple=True, help="Only this task id (repeatable).")
@click.option("--force", is_flag=True, help="Validate again tasks that already have a record.")
@click.option("--policy", "policy_url", metavar="URL",
              help="OpenAI-compatible endpoint (…/v1) for policy rollouts: vLLM, TGI or a hosted API.")
@click.option("--model", help="Model name for --policy.")
@click.option("-k", "policy_k", type=click.IntRange(min=0), default=0, help="Policy rollouts per task (with --policy).")
@click.option("--whole-suite", is_flag=True, help="Derive PASS_TO_PASS from the whole test suite.")
@click.option("--grading-jobs", metavar="N|auto",
              help="Gradings of one task at once (and derivation's two states): a number, or auto (the idle "
                   "cores, 1-4) [default: the policy's grading_jobs, auto in the default policy].")
def validate(roots: tuple[Path, ...], from_dirs: tuple[Path, ...], policy_file: str, jobs: int,
             instance_ids: tuple[str, ...], force: bool, policy_url: str | None, model: str | None, policy_k: int,
             whole_suite: bool, grading_jobs: str | None) -> None:
    """Keep only environments whose rewards are right, stable and varied.

    Per task: derive FAIL_TO_PASS / PASS_TO_PASS (each test run several times, shuffled, flaky ones
    excluded), grade the gold patch, the empty patch, partial fixes (the gold patch minus each hunk
    among them), near misses and stubs (and K policy rollouts with --policy), measure the task's
    quality (names the tests need that the issue never gives go into the instruction's Interface
    section; test adequacy; specification signals; pass@k), and judge with the acceptance policy.
    Writes validation.jsonl, summary.md, validation.png and quality.png next to each tasks.jsonl.
    ROOTS are searched for tasks.jsonl
    (default: generated/). Re-runs resume. Ctrl-C or SIGTERM stops at once: queued tasks are
    cancelled, running sandboxes removed, finished records kept.
    """
    from repo2env.pipeline import compose

    policy = compose.acceptance_policy(policy_file, whole_suite=whole_suite, grading_jobs=grading_jobs)
    if bool(policy_url) != bool(model):
        raise InputError("--policy and --model go together")
    runner = compose.policy_rollouts(policy_url, model) if policy_url else None
    folders = compose.task_folders(from_dirs, roots)
    backend = open_selected_backend()
    for folder in folders:
        total = compose.task_count(folder)  # a tasks file that cannot be read fails before the bars
        with progress() as bars:
            bar = bars.bar("validate", str(folder), total=total)
            summary = compose.validate(
                folder, backend=backend, policy=policy, jobs=jobs, policy_runner=runner, policy_k=policy_k, force=force,
                instance_ids=frozenset(instance_ids),
                progress=lambda record, bar=bar: bar.advance(
                    f"{record.instance_id}: {record.verdict} {' '.join(record.reasons)}"),
            )
            bar.finish()
        console.print(f"{folder}: {summary.accepted}/{len(summary.records)} accepted this run "
                      f"({summary.skipped} already validated); summary: {folder / 'summary.md'}; "
                      f"figure: {folder / 'validation.png'}")
