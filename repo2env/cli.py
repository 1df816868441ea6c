"""The ``repo2env`` command line: parse, call the library, print. Nothing else lives here."""

from __future__ import annotations

import errno
import json
import math
import shlex
import signal
import sys
from datetime import datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from repo2env import __version__
from repo2env.errors import InputError, NotImplementedYetError, Repo2EnvError

console = Console(stderr=True, soft_wrap=True)
stdout = Console(soft_wrap=True)


class _Seconds(click.ParamType):
    """A duration in seconds: a finite number above zero (``inf``, ``nan``, 0 and negatives are refused)."""

    name = "seconds"

    def convert(self, value, param, ctx) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"{value!r} is not a duration: give a finite number of seconds above 0", param, ctx)
        return seconds


SECONDS = _Seconds()


class _Group(click.Group):
    """Lists commands in the pipeline's order, then in the order they were added."""

    order = ("mine", "build", "run", "grade", "validate", "publish", "pipeline", "demo", "doctor", "runtime", "images")

    def list_commands(self, ctx: click.Context) -> list[str]:
        ranked = {name: index for index, name in enumerate(self.order)}
        return sorted(self.commands, key=lambda name: (ranked.get(name, len(ranked)), list(self.commands).index(name)))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="repo2env")
def cli() -> None:
    """Turn a repository's merged pull requests into RL environments for coding agents.

    \b
    Pipeline:  mine -> build -> validate -> publish -> train
    Start with: repo2env doctor   (is Docker ready?)
                repo2env demo run (every built stage on the embedded demo repository)
    """


# --- demo --------------------------------------------------------------------------------------


@cli.group(cls=_Group)
def demo() -> None:
    """The embedded demo repository (a small library with a history of merged PRs)."""


@demo.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def demo_init(directory: Path) -> None:
    """Build the demo repository in DIRECTORY/repo, with DIRECTORY/issues.json beside it."""
    from repo2env.demo import build_demo

    built = build_demo(directory)
    merged = sum(1 for pull in built.pulls if pull.merge_style != "unmerged")
    console.print(f"[green]demo repository[/] {built.repo} at {built.path} ({merged} merged PRs)")
    console.print(f"issues and PRs in GitHub's JSON shape: {built.issues_path}")


@demo.command("run")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("generated/demo"),
              show_default=True, help="Where the demo repository and every stage's output go.")
def demo_run(out_dir: Path) -> None:
    """Run every pipeline stage that exists on the demo repository (what `make demo` does)."""
    from repo2env.pipeline.demo import run_demo

    report = run_demo(out_dir, progress=lambda message: console.print(f"[dim]{message}[/]"))
    table = Table(title=f"repo2env demo -> {out_dir}")
    for column in ("stage", "status", "result"):
        table.add_column(column)
    colours = {"done": "green", "not built yet": "yellow", "failed": "red"}
    for stage in report.stages:
        table.add_row(stage.name, f"[{colours.get(stage.status, 'white')}]{stage.status}[/]", stage.summary)
    console.print(table)
    if any(stage.status == "failed" for stage in report.stages):
        sys.exit(1)


# --- mine --------------------------------------------------------------------------------------


@cli.command()
@click.option("--repo", "repo_spec", required=True, metavar="OWNER/NAME|PATH|URL",
              help="GitHub repository (API), or a local clone / git URL (local history, offline).")
@click.option("--issues", "issues_path", type=click.Path(dir_okay=False, path_type=Path),
              help="issues.json in GitHub's REST shape, for local history (the demo ships one).")
@click.option("--name", "repo_name", metavar="OWNER/NAME",
              help="Name for a local clone's tasks [default: issues.json's repository, the origin URL, or local/<dir>].")
@click.option("--allow-no-issue", is_flag=True, help="Keep PRs without a linked issue (the PR text is the task).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder [default: generated/<owner>__<name>].")
@click.option("--token", envvar="GITHUB_TOKEN", help="GitHub token [env: GITHUB_TOKEN].")
@click.option("--api-url", default=None, help="GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).")
@click.option("--since", type=click.DateTime(), help="Only PRs merged on or after this date.")
@click.option("--until", type=click.DateTime(), help="Only PRs merged on or before this date.")
@click.option("--pr", "pull_numbers", type=int, multiple=True, help="Only this PR (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), help="Stop after this many new tasks.")
@click.option("--max-files", type=click.IntRange(min=1), default=50, show_default=True,
              help="Reject PRs changing more source+test files.")
@click.option("--max-lines", type=click.IntRange(min=1), default=3000, show_default=True,
              help="Reject PRs whose fix (source part) changes more lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the funnel as JSON on stdout.")
def mine(repo_spec: str, repo_name: str | None, issues_path: Path | None, allow_no_issue: bool, out_dir: Path | None, token: str | None,
         api_url: str | None, since, until, pull_numbers: tuple[int, ...], limit: int | None, max_files: int,
         max_lines: int, as_json: bool) -> None:
    """Mine merged PRs that fix an issue and change tests into task candidates.

    Writes OUT/tasks.jsonl (one task per line; re-runs skip ids already there) and OUT/funnel.json
    (how many PRs reached each step; every rejection with its reason).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from repo2env.mine.miner import MineOptions, default_out_dir
    from repo2env.mine.miner import mine as run_mine
    from repo2env.mine.open import open_source

    source = open_source(repo_spec, issues_path=issues_path, token=token, api_url=api_url, name=repo_name,
                         on_wait=lambda message: console.print(f"[yellow]{message}[/]"))
    out_dir = out_dir or default_out_dir(Path("generated"), source.repo)
    local_zone = datetime.now().astimezone().tzinfo
    options = MineOptions(
        allow_no_issue=allow_no_issue,
        since=since.replace(tzinfo=since.tzinfo or local_zone) if since else None,
        until=until.replace(tzinfo=until.tzinfo or local_zone) if until else None,
        pull_numbers=frozenset(pull_numbers), limit=limit, max_files=max_files, max_changed_lines=max_lines,
    )
    with Progress(TextColumn("[bold]mine[/] {task.description}"), BarColumn(bar_width=None),
                  TextColumn("{task.fields[scanned]} PRs scanned, {task.fields[kept]} kept"), TimeElapsedColumn(),
                  console=console, disable=not console.is_terminal) as bar:
        task_id = bar.add_task(source.repo, total=None, scanned=0, kept=0)
        result = run_mine(source, out_dir, options,
                          progress=lambda scanned, kept: bar.update(task_id, scanned=scanned, kept=kept))
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


# --- machine -----------------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(as_json: bool) -> None:
    """Check the Docker engine, the base images and what builds will be given (CA bundle, index);
    remove sandboxes whose repo2env process died without removing them."""
    from repo2env.runtime.doctor import diagnose

    report = diagnose()
    if as_json:
        stdout.print_json(json.dumps(report.as_dict()))
    else:
        table = Table(title="repo2env doctor")
        for column in ("check", "", "detail", "to fix"):
            table.add_column(column)
        for check in report.checks:
            table.add_row(check.name, "[green]ok[/]" if check.ok else "[red]no[/]", check.detail, "" if check.ok else check.fix)
        stdout.print(table)
        stdout.print("[green]ready[/]" if report.ready else "[red]not ready[/]: see 'to fix'")
    sys.exit(0 if report.ready else 1)


@cli.group(cls=_Group)
def runtime() -> None:
    """The container runtime: base images."""


@runtime.command("bootstrap")
@click.option("--python", "python_versions", multiple=True, default=("3.11",), show_default=True,
              help="Python X.Y of the base image (repeatable: 3.9, 3.11, 3.13).")
@click.option("--force", is_flag=True, help="Rebuild even if the image exists.")
@click.option("--no-pull", is_flag=True, help="Do not try a registry; build from Debian packages.")
@click.option("--mirror", default=None, help="Debian mirror for debootstrap (default: deb.debian.org).")
def runtime_bootstrap(python_versions: tuple[str, ...], force: bool, no_pull: bool, mirror: str | None) -> None:
    """Build the base image locally (debootstrap + docker import) when no registry serves python:X.Y-slim."""
    from repo2env.runtime.bootstrap import DEFAULT_MIRROR, ensure_base_image
    from repo2env.runtime.docker_backend import connect_docker

    client = connect_docker()
    for python_version in python_versions:
        image = ensure_base_image(
            client, python_version, mirror=mirror or DEFAULT_MIRROR, try_pull=not no_pull, force=force,
            progress=lambda message: console.print(f"[dim]{message}[/]"),
        )
        console.print(f"[green]{image.tag}[/] ready ({image.origin}, {image.image_id[7:19]})")


# --- stages not built yet ----------------------------------------------------------------------


def _not_built(stage: str, issue: str) -> None:
    raise NotImplementedYetError(f"'repo2env {stage}' is not implemented yet ({issue})")


def _tasks_dirs(from_dirs: tuple[Path, ...]) -> list[Path]:
    from repo2env.runtime.build import tasks_dirs

    return tasks_dirs(Path("generated"), list(from_dirs))


_from_option = click.option("--from", "from_dirs", type=click.Path(file_okay=False, path_type=Path), multiple=True,
                            help="Task folder(s) with a tasks.jsonl [default: every one under generated/].")


@cli.command()
@_from_option
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=2, show_default=True, help="Builds in parallel.")
@click.option("--task", "instance_ids", multiple=True, help="Only this task id (repeatable).")
@click.option("--overrides", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML of per-repo environment overrides ({repos: {owner/name: {python: '3.9', ...}}}).")
@click.option("--no-collect-check", is_flag=True, help="Skip the pytest collection check of each built image.")
def build(from_dirs: tuple[Path, ...], jobs: int, instance_ids: tuple[str, ...], overrides: Path | None,
          no_collect_check: bool) -> None:
    """Build a runtime image per task: env image (dependencies, shared) + task image (the snapshot).

    Marks each task env_ok or env_failed (with the reason and the build log) in its tasks.jsonl;
    one failure never stops the batch, and re-runs reuse every cached image.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from repo2env.jsonl import read_task_ids
    from repo2env.runtime.build import BuildOptions, build_tasks_dir
    from repo2env.runtime.docker_backend import DockerRuntime
    from repo2env.runtime.overrides import load_overrides

    options = BuildOptions(jobs=jobs, overrides=load_overrides(overrides) if overrides else {},
                           instance_ids=frozenset(instance_ids), collect_check=not no_collect_check)
    runtime = DockerRuntime()
    failed_total = 0
    for folder in _tasks_dirs(from_dirs):
        total = len(read_task_ids(folder / "tasks.jsonl") & set(instance_ids)) if instance_ids else \
            len(read_task_ids(folder / "tasks.jsonl"))
        with Progress(TextColumn("[bold]build[/] {task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(),
                      TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=console) as bar:
            bar_id = bar.add_task(folder.name, total=total, last="")
            summary = build_tasks_dir(folder, runtime=runtime, options=options,
                                      progress=lambda task, spec, bar_id=bar_id: bar.update(
                                          bar_id, advance=1, last=f"{task.instance_id}: {spec.status}"))
        failed_total += summary.failed
        console.print(f"{folder}: [green]{summary.ok} env_ok[/] ({summary.reused} reused), "
                      f"[red]{summary.failed} env_failed[/]; {len(summary.env_images)} env images for {summary.ok} tasks")
        for instance_id, reason in sorted(summary.failures.items()):
            console.print(f"  [red]{instance_id}[/]: {reason}", highlight=False)
    sys.exit(1 if failed_total else 0)


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--task", "instance_id", required=True, help="Task id (owner__name-PR).")
@_from_option
@click.option("--timeout", type=SECONDS, default=600, show_default=True, help="Seconds before the command is killed.")
@click.argument("command", nargs=-1, required=True)
def run(instance_id: str, from_dirs: tuple[Path, ...], timeout: float, command: tuple[str, ...]) -> None:
    """Run COMMAND in the task's sandbox as the agent would; print its output and the resulting diff.

    Example: repo2env run --task repo2env-demo__textkit-2 -- python -m pytest -q
    """
    from repo2env.jsonl import find_task
    from repo2env.runtime.docker_backend import DockerRuntime

    task, _ = find_task([folder / "tasks.jsonl" for folder in _tasks_dirs(from_dirs)], instance_id)
    with DockerRuntime().start(task) as sandbox:
        result = sandbox.exec(" ".join(command) if len(command) == 1 else shlex.join(command), timeout=timeout)
        stdout.out(result.output, end="", highlight=False)
        patch = sandbox.diff()
    console.print(f"[dim]exit {result.exit_code}{' (timed out)' if result.timed_out else ''}"
                  f"{' (output truncated)' if result.truncated else ''} in {result.duration_s:.2f} s[/]")
    console.rule("diff against the snapshot")
    # The diff's bytes that are not UTF-8 (surrogate escapes) are shown as U+FFFD, not a crash.
    shown = patch.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    stdout.out(shown or "(no change)\n", end="", highlight=False)
    sys.exit(result.exit_code)


@cli.group(cls=_Group)
def images() -> None:
    """repo2env's Docker images: list them, remove the unused ones."""


@images.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def images_ls(as_json: bool) -> None:
    """List base, env and task images with their sizes."""
    from repo2env.runtime.docker_backend import connect_docker
    from repo2env.runtime.images import ImageStore

    rows = ImageStore(connect_docker()).list()
    if as_json:
        stdout.print_json(json.dumps(rows))
        return
    table = Table(title="repo2env images")
    for column in ("kind", "tag", "task", "MB"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["kind"] or "", ", ".join(row["tags"]) or row["id"], row["instance_id"], str(row["size_mb"]))
    stdout.print(table)


@images.command("gc")
@_from_option
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--all", "remove_all", is_flag=True, help="Remove every env and task image, used or not.")
def images_gc(from_dirs: tuple[Path, ...], dry_run: bool, remove_all: bool) -> None:
    """Remove task images no tasks.jsonl refers to, env images no kept task uses, and build leftovers;
    first, sandboxes whose repo2env process died (kill -9) without removing them."""
    from repo2env.jsonl import iter_tasks
    from repo2env.runtime.docker_backend import connect_docker
    from repo2env.runtime.images import ImageStore

    keep: set[str] = set()
    if not remove_all:
        try:
            folders = _tasks_dirs(from_dirs)
        except Repo2EnvError:
            folders = []
        for folder in folders:
            keep |= {task.env_spec.image for task in iter_tasks(folder / "tasks.jsonl")
                     if task.env_spec and task.env_spec.image}
    from repo2env.runtime.ownership import reap_orphans

    client = connect_docker()
    verb = "would remove" if dry_run else "removed"
    for name in reap_orphans(client, dry_run=dry_run):
        console.print(f"{verb} container {name} (its repo2env process is gone)")
    removed = ImageStore(client).gc(keep_tags=keep, dry_run=dry_run)
    for name in removed:
        console.print(f"{verb} {name}")
    console.print(f"{verb} {len(removed)} images; kept {len(keep)} task images in use")


@cli.command()
@click.option("--task", "instance_id", help="Task id (owner__name-PR); with --patch.")
@click.option("--patch", "patch_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The agent's diff against the task's snapshot ('-' for stdin).")
@click.option("--predictions", type=click.Path(dir_okay=False, path_type=Path),
              help="SWE-bench predictions (JSONL of instance_id, model_name_or_path, model_patch).")
@_from_option
@click.option("--mode", type=click.Choice(["graded", "binary", "f2p"]), default="graded", show_default=True,
              help="graded = f2p_rate x p2p_rate; binary = resolved; f2p = f2p_rate.")
@click.option("--timeout", type=SECONDS, default=900, show_default=True, help="Seconds for the hidden tests.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every GradeResult as JSONL here [default: grades.jsonl in the task folder].")
@click.option("--json", "as_json", is_flag=True, help="Print the result(s) as JSON on stdout.")
def grade(instance_id: str | None, patch_path: Path | None, predictions: Path | None, from_dirs: tuple[Path, ...],
          mode: str, timeout: float, out_path: Path | None, as_json: bool) -> None:
    """Grade a patch (or SWE-bench predictions) with the hidden verifier: the PR's tests, run in a
    fresh sandbox the agent never saw, after dropping the patch's changes to tests and test config."""
    from repo2env.jsonl import append_jsonl, find_task
    from repo2env.runtime.docker_backend import DockerRuntime
    from repo2env.verify.grader import Grader, load_predictions

    if bool(predictions) == bool(instance_id or patch_path):
        raise InputError("give either --task with --patch, or --predictions")
    if instance_id and not patch_path:
        raise InputError("--task needs --patch FILE (use '-' for stdin)")
    if predictions:
        jobs = [(row["instance_id"], row.get("model_patch") or "") for row in load_predictions(predictions)]
    else:
        if str(patch_path) != "-" and not patch_path.is_file():
            raise InputError(f"no patch file at {patch_path}")
        # A patch is bytes (a Latin-1 file, a binary hunk): carried as surrogate escapes, written back as read.
        raw = sys.stdin.buffer.read() if str(patch_path) == "-" else patch_path.read_bytes()
        jobs = [(instance_id, raw.decode("utf-8", errors="surrogateescape"))]
    tasks_files = [folder / "tasks.jsonl" for folder in _tasks_dirs(from_dirs)]
    if out_path:
        # A folder that cannot take the results fails now, not after the gradings it would lose.
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.open("a").close()
    runtime = DockerRuntime()
    results = []
    for job_id, patch in jobs:
        task, tasks_path = find_task(tasks_files, job_id)
        grader = Grader(runtime, tasks_path.parent / "logs" / "grades", timeout_s=timeout)
        result = grader.grade(task, patch, mode=mode)
        results.append(result)
        append_jsonl(out_path or tasks_path.parent / "grades.jsonl", [result])
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


@cli.command()
@click.argument("roots", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@_from_option
@click.option("--policy-file", default="default", show_default=True,
              help="Acceptance policy: a name in validators/ (default, strict) or a YAML path.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Tasks in parallel.")
@click.option("--task", "instance_ids", multiple=True, help="Only this task id (repeatable).")
@click.option("--force", is_flag=True, help="Validate again tasks that already have a record.")
@click.option("--policy", "policy_url", metavar="URL",
              help="OpenAI-compatible endpoint (…/v1) for policy rollouts: vLLM, TGI or a hosted API.")
@click.option("--model", help="Model name for --policy.")
@click.option("-k", "policy_k", type=click.IntRange(min=0), default=0, help="Policy rollouts per task (with --policy).")
@click.option("--whole-suite", is_flag=True, help="Derive PASS_TO_PASS from the whole test suite.")
def validate(roots: tuple[Path, ...], from_dirs: tuple[Path, ...], policy_file: str, jobs: int,
             instance_ids: tuple[str, ...], force: bool, policy_url: str | None, model: str | None, policy_k: int,
             whole_suite: bool) -> None:
    """Keep only environments whose rewards are right, stable and varied.

    Per task: derive FAIL_TO_PASS / PASS_TO_PASS (each test run several times, shuffled, flaky ones
    excluded), grade the gold patch, the empty patch, partial fixes, near misses and stubs (and K policy
    rollouts with --policy), and judge with the acceptance policy. Writes validation.jsonl,
    summary.md and validation.png next to each tasks.jsonl. ROOTS are searched for tasks.jsonl
    (default: generated/). Re-runs resume.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from repo2env.jsonl import read_task_ids
    from repo2env.runtime.build import tasks_dirs
    from repo2env.runtime.docker_backend import DockerRuntime
    from repo2env.validate.acceptance import load_acceptance_policy
    from repo2env.validate.run import validate_dir

    policy = load_acceptance_policy(policy_file)
    if whole_suite:
        policy = policy.model_copy(update={"whole_suite_p2p": True})
    if bool(policy_url) != bool(model):
        raise InputError("--policy and --model go together")
    runner = None
    if policy_url:
        from repo2env.validate.policy import PolicyClient

        client = PolicyClient(policy_url, model)
        runner = client.rollouts
    folders = list(from_dirs)
    for root in roots:
        folders += tasks_dirs(root, [])
    folders = folders or tasks_dirs(Path("generated"), [])
    runtime = DockerRuntime()
    for folder in dict.fromkeys(folders):
        total = len(read_task_ids(folder / "tasks.jsonl"))
        with Progress(TextColumn("[bold]validate[/] {task.description}"), BarColumn(bar_width=None),
                      MofNCompleteColumn(), TextColumn("{task.fields[last]}"), TimeElapsedColumn(),
                      console=console) as bar:
            bar_id = bar.add_task(str(folder), total=total, last="")
            summary = validate_dir(
                folder, runtime, policy, jobs=jobs, policy_runner=runner, policy_k=policy_k, force=force,
                instance_ids=frozenset(instance_ids),
                progress=lambda record, bar_id=bar_id: bar.update(
                    bar_id, advance=1, last=f"{record.instance_id}: {record.verdict} {' '.join(record.reasons)}"),
            )
            bar.update(bar_id, completed=total)
        console.print(f"{folder}: {summary.accepted}/{len(summary.records)} accepted this run "
                      f"({summary.skipped} already validated); summary: {folder / 'summary.md'}; "
                      f"figure: {folder / 'validation.png'}")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def publish() -> None:
    """Publish environments as a dataset (not implemented yet)."""
    _not_built("publish", "planned: publishing")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def pipeline() -> None:
    """Run a declarative batch spec over many repositories (not implemented yet)."""
    _not_built("pipeline", "planned: batch pipelines")


def main() -> None:
    """Console entry point: user errors become one line on stderr and a non-zero exit."""
    # SIGTERM (a killed job, a CI timeout) unwinds like Ctrl-C, so every sandbox is removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        exit_code = cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        console.print("interrupted")
        sys.exit(130)
    except click.UsageError as exc:
        # One line, like every other user error; the command's help is one flag away.
        click.echo(f"error: {exc.format_message()}", err=True)
        if exc.ctx is not None:
            click.echo(f"hint: see '{exc.ctx.command_path} --help'", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except Repo2EnvError as exc:
        # Plain echo, not rich: an error must stay one line whatever the terminal's width.
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _USER_OS_ERRORS:
            raise
        # A read-only or full output folder, a path that is a file: the user's to fix, not a bug.
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"error: {where}{exc.strerror or exc}", err=True)
        click.echo("hint: check that the folder exists, is writable and has free space", err=True)
        sys.exit(1)
    sys.exit(exit_code if isinstance(exit_code, int) else 0)


#: OS errors that a user's folder or disk causes (and fixes).
_USER_OS_ERRORS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG,
                             errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG})
