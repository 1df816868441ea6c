"""``repo2env grade``: a patch or SWE-bench predictions graded by the hidden verifier."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from repo2env import defaults
from repo2env.cli.root import SECONDS, cli, console, from_option, stdout
from repo2env.errors import InputError


@cli.command()
@click.option("--task", "instance_id", help="Task id (owner__name-PR); with --patch.")
@click.option("--patch", "patch_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The agent's diff against the task's snapshot ('-' for stdin).")
@click.option("--predictions", type=click.Path(dir_okay=False, path_type=Path),
              help="SWE-bench predictions: JSONL of {instance_id, model_name_or_path, model_patch}, or "
                   "preds.json (an object keyed by instance id, as mini-swe-agent and swebench write it).")
@from_option
@click.option("--mode", type=click.Choice(["graded", "binary", "f2p"]), default="graded", show_default=True,
              help="graded = f2p_rate x p2p_rate; binary = resolved; f2p = f2p_rate.")
@click.option("--timeout", type=SECONDS, default=None,
              help="Seconds for the hidden tests [default: the task's own, set by validation from its gold patch's "
                   f"gradings; {defaults.GRADE_TIMEOUT_S} when it has none].")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every GradeResult as JSONL here [default: grades.jsonl in the task folder].")
@click.option("--json", "as_json", is_flag=True, help="Print the result(s) as JSON on stdout.")
def grade(instance_id: str | None, patch_path: Path | None, predictions: Path | None, from_dirs: tuple[Path, ...],
          mode: str, timeout: float | None, out_path: Path | None, as_json: bool) -> None:
    """Grade a patch (or SWE-bench predictions) with the hidden verifier: the PR's tests, run in a
    fresh sandbox the agent never saw, after dropping the patch's changes to tests and test config."""
    from repo2env.pipeline import compose

    if bool(predictions) == bool(instance_id or patch_path):
        raise InputError("give either --task with --patch, or --predictions")
    if instance_id and not patch_path:
        raise InputError("--task needs --patch FILE (use '-' for stdin)")
    if predictions:
        jobs = compose.predictions(predictions)
    else:
        if str(patch_path) != "-" and not patch_path.is_file():
            raise InputError(f"no patch file at {patch_path}")
        # A patch is bytes (a Latin-1 file, a binary hunk): carried as surrogate escapes, written back as read.
        raw = sys.stdin.buffer.read() if str(patch_path) == "-" else patch_path.read_bytes()
        jobs = [(instance_id, raw.decode("utf-8", errors="surrogateescape"))]
    folders = compose.task_folders(from_dirs)
    results = []
    for (job_id, _), result in zip(jobs, compose.grade(jobs, folders, mode=mode, timeout_s=timeout, out_path=out_path),
                                   strict=False):
        results.append(result)
        flag = "[green]resolved[/]" if result.resolved else ("[red]error[/]" if result.error else "")
        console.print(f"{job_id}: reward {result.reward:.3f} (f2p {result.f2p_rate:.2f}, p2p {result.p2p_rate:.2f}) "
                      f"{flag} {result.error or ''}", highlight=False)
        if result.filtered_paths:
            console.print(f"  dropped from the patch (tests / test config): {', '.join(result.filtered_paths)}",
                          highlight=False)
        console.print(f"  logs: {result.log_dir}", highlight=False)
    if as_json:
        payload = [result.model_dump(mode="json") for result in results]
        stdout.print_json(json.dumps(payload[0] if len(payload) == 1 and not predictions else payload))
