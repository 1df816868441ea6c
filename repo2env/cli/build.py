"""``repo2env build``: a runtime image per task."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from repo2env import defaults
from repo2env.cli.progress import progress
from repo2env.cli.root import cli, console, from_option, open_selected_backend


@cli.command()
@from_option
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=defaults.BUILD_JOBS, show_default=True,
              help="Builds in parallel.")
@click.option("--task", "instance_ids", multiple=True, help="Only this task id (repeatable).")
@click.option("--overrides", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML of per-repo environment overrides ({repos: {owner/name: {python: '3.9', ...}}}).")
@click.option("--no-collect-check", is_flag=True, help="Skip the check that the PR's tests load in each built image (pytest's "
              "collection; a JavaScript runner's run of the PR's test files).")
def build(from_dirs: tuple[Path, ...], jobs: int, instance_ids: tuple[str, ...], overrides: Path | None,
          no_collect_check: bool) -> None:
    """Build a runtime image per task: env image (dependencies, shared) + task image (the snapshot).

    Each task is built by its language's profile (Python: pip/uv, editable install; JavaScript:
    node_modules from npm, yarn or pnpm on a Node base image). Marks each task env_ok or env_failed
    (with the reason and the build log) in its tasks.jsonl; one failure never stops the batch, and
    re-runs reuse every cached image. An install whose project code does not import from /testbed
    (e.g. a released package installed over the editable checkout) fails, and the images of failed
    attempts are removed. Ctrl-C or SIGTERM
    stops at once: queued tasks are cancelled, running containers removed, finished tasks kept.
    """
    from repo2env.pipeline import compose

    options = compose.BuildOptions(jobs=jobs, overrides=compose.load_overrides(overrides) if overrides else {},
                                   instance_ids=frozenset(instance_ids), collect_check=not no_collect_check)
    backend = open_selected_backend()
    failed_total = 0
    for folder in compose.task_folders(from_dirs):
        total = compose.task_count(folder, options.instance_ids)  # a tasks file that cannot be read fails first
        with progress() as bars:
            bar = bars.bar("build", folder.name, total=total)
            summary = compose.build(folder, backend=backend, options=options,
                                    progress=lambda task, spec, bar=bar: bar.advance(f"{task.instance_id}: {spec.status}"))
        failed_total += summary.failed
        console.print(f"{folder}: [green]{summary.ok} env_ok[/] ({summary.reused} reused), "
                      f"[red]{summary.failed} env_failed[/]; {len(summary.env_images)} env images for {summary.ok} tasks")
        for instance_id, reason in sorted(summary.failures.items()):
            console.print(f"  [red]{instance_id}[/]: {reason}", highlight=False)
    sys.exit(1 if failed_total else 0)
