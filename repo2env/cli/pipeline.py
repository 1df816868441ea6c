"""``repo2env pipeline``: many repositories from a batch spec, resumable."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from repo2env.cli.progress import Bar, Bars, progress
from repo2env.cli.root import Group, cli, console, explicit_backend, stdout


@cli.group(cls=Group)
def pipeline() -> None:
    """Many repositories through mine -> build -> validate -> publish, from a spec; resumable."""


class _PipelineProgress:
    """A pipeline run's events as one bar per stage (done/planned, the last result) and a line per failure."""

    def __init__(self, bars: Bars) -> None:
        self._bars = bars
        self._stage_bars: dict[str, Bar] = {}
        self._planned: dict[str, int] = {}

    def _bar(self, stage: str) -> Bar:
        if stage not in self._stage_bars:
            self._stage_bars[stage] = self._bars.bar(stage, "", total=0)
        return self._stage_bars[stage]

    def planned(self, stage: str, total: int) -> None:
        self._planned[stage] = self._planned.get(stage, 0) + total
        self._bar(stage).set_total(self._planned[stage])

    def started(self, stage: str, key: str) -> None:
        self._bar(stage).set(f"{key}: running")

    def skipped(self, stage: str, key: str) -> None:
        self._bar(stage).advance()

    def finished(self, stage: str, key: str, output, seconds: float) -> None:
        from repo2env.pipeline.batch import outcome_of

        self._bar(stage).advance(f"{key}: {outcome_of(output) or 'done'} ({seconds:.0f} s)")

    def failed(self, stage: str, key: str, error: BaseException, seconds: float) -> None:
        self._bar(stage).advance(f"{key}: failed")
        self._bars.print(f"[red]failed[/] {stage} {key}: {type(error).__name__}: {error}")


@pipeline.command("run")
@click.argument("spec_name", metavar="SPEC")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Stage calls at once [default: the spec's executor.jobs].")
@click.option("--executor", "executor_name", type=click.Choice(["local", "ray"]),
              help="Where stage calls run [default: the spec's executor.name].")
@click.option("--address", help="Ray: auto or HOST:PORT [default: the spec's executor.address].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder [default: the spec's output, else generated/pipelines/NAME].")
@click.option("--only", "only", multiple=True, metavar="REPO", help="Only this repository of the spec (repeatable).")
@click.option("--retry-failed", is_flag=True, help="Run again the (task, stage) pairs that failed in earlier runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the funnel as JSON on stdout.")
def pipeline_run(spec_name: str, jobs: int | None, executor_name: str | None, address: str | None,
                 out_dir: Path | None, only: tuple[str, ...], retry_failed: bool, as_json: bool) -> None:
    """Run the batch spec SPEC (a YAML path, or a shipped name: demo, example-real).

    Every (task, stage) is recorded in OUT/state.sqlite as it finishes; a re-run (after Ctrl-C,
    kill -9 or a reboot) does only what is not done. A failure of one task never stops the others:
    its error is in the state store and in its log folder (OUT/<owner>__<name>/logs/<task>/).
    Writes OUT/funnel.json and OUT/funnel.md (per repository and stage). Exits 1 while any
    (task, stage) is failed.
    """
    from repo2env.pipeline import batch

    spec, executor = batch.open_run(spec_name, out_dir=out_dir, only=only, executor_name=executor_name, jobs=jobs,
                                    address=address)
    with progress() as bars:
        result = batch.run_pipeline(spec, executor=executor, only=only, retry_failed=retry_failed,
                                    events=_PipelineProgress(bars), backend=explicit_backend())
    executor.shutdown()
    if as_json:
        stdout.print_json(json.dumps(result.funnel))
    _print_status(batch.batch_status(result.out_dir))
    console.print(f"funnel: {result.out_dir / 'funnel.md'} (and funnel.json); state: {result.out_dir / 'state.sqlite'}",
                  highlight=False)
    sys.exit(1 if result.left_failed else 0)


@pipeline.command("status")
@click.argument("target", metavar="SPEC|DIR")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def pipeline_status(target: str, as_json: bool) -> None:
    """Counts per repository and stage of a pipeline's output folder (or of a spec's)."""
    from repo2env.pipeline.batch import batch_status

    status = batch_status(target)
    if as_json:
        stdout.print_json(json.dumps(status.funnel))
        return
    _print_status(status)


def _print_status(status) -> None:
    """A pipeline's counts as a table: a row per repository, a column per stage."""
    funnel, runs = status.funnel, status.runs
    table = Table(title=f"pipeline {status.folder} ({runs} run{'s' if runs != 1 else ''})")
    for column in ("repository", "PRs", "tasks", "mine", "build", "validate"):
        table.add_column(column)

    def cell(counts: dict[str, int]) -> str:
        colours = {"failed": "red", "running": "yellow", "env_failed": "red", "rejected": "yellow"}
        return ", ".join(f"[{colours.get(key, 'green')}]{key}[/] {value}" for key, value in sorted(counts.items())) or "-"

    for label, entry in funnel["repos"].items():
        stages = entry["stages"]
        table.add_row(entry.get("repo") or label, str(entry.get("prs", {}).get("scanned", 0)), str(entry.get("tasks", 0)),
                      cell(stages.get("mine", {})), cell(stages.get("build", {})), cell(stages.get("validate", {})))
    stdout.print(table)
    if funnel.get("publish"):
        stdout.print(f"publish: {cell(funnel['publish'])}")
