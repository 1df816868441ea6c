"""``repo2env mine``: merged PRs -> task candidates."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click
from rich.table import Table

from repo2env import defaults
from repo2env.cli.progress import progress
from repo2env.cli.root import cli, console, stdout


@cli.command()
@click.option("--repo", "repo_spec", required=True, metavar="OWNER/NAME|PATH|URL",
              help="GitHub repository (API), or a local clone / git URL (local history, offline).")
@click.option("--issues", "issues_path", type=click.Path(dir_okay=False, path_type=Path),
              help="issues.json in GitHub's REST shape, for local history (the demo ships one).")
@click.option("--name", "repo_name", metavar="OWNER/NAME",
              help="Name for a local clone's tasks [default: issues.json's repository, the origin URL, or local/<dir>].")
@click.option("--allow-no-issue", is_flag=True,
              help="Keep PRs without a linked issue: the PR's title and body are the task (none: empty_problem_statement).")
@click.option("--branch", metavar="NAME",
              help="Local history: the branch whose history is mined [default: HEAD, main or master]. PRs merged "
                   "only into another branch are not_merged with a hint to mine that branch.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder [default: generated/<owner>__<name>].")
@click.option("--token", envvar="GITHUB_TOKEN", help="GitHub token [env: GITHUB_TOKEN].")
@click.option("--api-url", default=None, help="GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).")
@click.option("--since", type=click.DateTime(), help="Only PRs merged on or after this date.")
@click.option("--until", type=click.DateTime(), help="Only PRs merged on or before this date.")
@click.option("--pr", "pull_numbers", type=int, multiple=True, help="Only this PR (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), help="Stop after this many new tasks.")
@click.option("--max-files", type=click.IntRange(min=1), default=defaults.MINE_MAX_FILES, show_default=True,
              help="Reject PRs changing more source+test files.")
@click.option("--max-lines", type=click.IntRange(min=1), default=defaults.MINE_MAX_CHANGED_LINES, show_default=True,
              help="Reject PRs whose fix (source part) changes more lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the funnel as JSON on stdout.")
def mine(repo_spec: str, repo_name: str | None, issues_path: Path | None, allow_no_issue: bool, branch: str | None,
         out_dir: Path | None, token: str | None, api_url: str | None, since, until, pull_numbers: tuple[int, ...],
         limit: int | None, max_files: int, max_lines: int, as_json: bool) -> None:
    """Mine merged PRs that fix an issue and change tests into task candidates.

    Writes OUT/tasks.jsonl (one task per line; re-runs skip ids already there) and OUT/funnel.json
    (how many PRs reached each step; every rejection with its reason; earlier runs and totals kept).
    """
    from repo2env.pipeline import compose

    source = compose.open_repository(repo_spec, issues_path=issues_path, name=repo_name, branch=branch, token=token,
                                     api_url=api_url, on_wait=lambda message: console.print(f"[yellow]{message}[/]"))
    local_zone = datetime.now().astimezone().tzinfo
    options = compose.MineOptions(
        allow_no_issue=allow_no_issue,
        since=since.replace(tzinfo=since.tzinfo or local_zone) if since else None,
        until=until.replace(tzinfo=until.tzinfo or local_zone) if until else None,
        pull_numbers=frozenset(pull_numbers), limit=limit, max_files=max_files, max_changed_lines=max_lines,
    )
    with progress(off_terminal=False) as bars:
        bar = bars.bar("mine", source.repo)
        result = compose.mine(source, out_dir, options,
                              progress=lambda scanned, kept: bar.set(f"{scanned} PRs scanned, {kept} kept"))
    if result.torn_bytes:
        click.echo(f"warning: cut a torn last line ({result.torn_bytes} bytes) off {result.tasks_path}: an earlier "
                   "run was stopped while writing it; the rows before it are kept", err=True)
    funnel = result.funnel
    if as_json:
        stdout.print_json(funnel.model_dump_json())
    table = Table(title=f"funnel: {source.repo}")
    table.add_column("step")
    table.add_column("PRs", justify="right")
    for step, count in funnel.counts.items():
        if not step.startswith("rejected:"):
            table.add_row(step, str(count))
    for reason, count in sorted(funnel.reasons().items()):
        table.add_row(f"[red]rejected: {reason}[/]", str(count))
    console.print(table)
    console.print(f"{len(result.new_tasks)} new tasks -> {result.tasks_path}; funnel -> {result.funnel_path}")
    if funnel.previous_runs:
        rejected = sum(count for step, count in funnel.totals.items() if step.startswith("rejected:"))
        console.print(f"over {funnel.totals.get('runs', 0)} runs: {funnel.totals.get('kept', 0)} tasks, "
                      f"{rejected} PRs rejected (funnel.json: totals, previous_runs)")

