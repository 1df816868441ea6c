"""``repo2env pipeline run SPEC``: many repositories through mine -> build -> validate -> publish.

Three passes of the one stage runner: mine every repository (an item per repository), then build
and validate every task (an item per task, each entering validation as soon as its build is
done), then publish the batch once. The state store says which (item, stage) is done; a re-run
does only the rest (``retry_failed``: the failed ones too). A stage call that raises fails only its
item: the error goes to the state store and to the task's log folder, and every other item goes on.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from repo2env.errors import InputError
from repo2env.jsonl import read_tasks, update_tasks, upsert_jsonl, write_json
from repo2env.mine.miner import default_out_dir
from repo2env.models import Task
from repo2env.pipeline import compose
from repo2env.pipeline.executors import Executor, make_executor
from repo2env.pipeline.executors import Resources as ExecutorResources
from repo2env.pipeline.runner import NoEvents, RunStats, Stage, StageEvents, run_stages
from repo2env.pipeline.spec import DEMO_SOURCE, Filters, PipelineSpec, RepoEntry, load_pipeline_spec
from repo2env.pipeline.stages import (
    BuildOutput,
    ValidateJob,
    ValidateOutput,
    available_bases,
    build_job,
    build_work,
    safe_name,
    validate_work,
    worker_backend,
    write_validation_reports,
)
from repo2env.pipeline.state import BATCH_ITEM, STATE_FILE, StateStore
from repo2env.runtime.build import BuildOptions, read_source_clone

FUNNEL_JSON, FUNNEL_MD = "funnel.json", "funnel.md"


# --- the repository-level and batch-level stages -----------------------------------------------------


@dataclass(frozen=True)
class MineJob:
    """What mining one repository of the batch needs."""

    entry: RepoEntry
    filters: Filters
    out_root: Path


@dataclass(frozen=True)
class MineOutput:
    """Where a repository's tasks went."""

    repo: str
    folder: Path
    new_tasks: int
    scanned: int


def mine_work(job: MineJob) -> MineOutput:
    """The mine stage: the repository's merged PRs -> ``OUT/<owner>__<name>/tasks.jsonl``."""
    entry, filters = job.entry, job.entry.filters or job.filters
    spec, issues = entry.repo, Path(entry.issues) if entry.issues else None
    if entry.repo == DEMO_SOURCE:
        demo = compose.demo_repository(job.out_root / "sources" / "demo")
        spec, issues = str(demo.repo_path), demo.issues_path
    source = compose.open_repository(spec, issues_path=issues, name=entry.name, branch=entry.branch,
                                     token=os.environ.get("GITHUB_TOKEN"))
    day = lambda text: datetime.fromisoformat(text).replace(tzinfo=UTC) if text else None  # noqa: E731
    until = day(filters.until)
    options = compose.MineOptions(allow_no_issue=filters.allow_no_issue, since=day(filters.since),
                                  until=until.replace(hour=23, minute=59, second=59) if until else None,
                                  pull_numbers=frozenset(entry.pulls), limit=filters.limit,
                                  max_files=filters.max_files, max_changed_lines=filters.max_lines)
    folder = default_out_dir(job.out_root, source.repo)
    result = compose.mine(source, folder, options)
    return MineOutput(repo=source.repo, folder=folder, new_tasks=len(result.new_tasks),
                      scanned=result.funnel.counts.get("scanned", 0))


@dataclass(frozen=True)
class PublishJob:
    """What publishing the batch needs."""

    folders: tuple[Path, ...]
    to: str
    name: str
    include_rejected: bool
    backend: str = ""  #: the backend whose images the Harbor folders' snapshot labels are read from


def publish_target(to: str, out_dir: Path) -> str:
    """A spec's publish target: hf://org/name as is, a relative folder inside the output folder."""
    if to.startswith("hf://") or Path(to).expanduser().is_absolute():
        return str(Path(to).expanduser()) if not to.startswith("hf://") else to
    return str(out_dir / to)


def publish_work(job: PublishJob) -> int:
    """The publish stage: every built and accepted task of the batch -> the dataset ``repo2env
    publish`` writes (folder or Hub, Harbor task folders included); its rows (0, and nothing
    written, when no task is built and accepted)."""
    # A batch where nothing was accepted publishes nothing: an outcome of the batch, not a failure.
    if not compose.publishable(job.folders, include_rejected=job.include_rejected):
        return 0
    options = compose.PublishOptions(name=job.name, include_rejected=job.include_rejected)
    return compose.publish(job.folders, job.to, options, backend=compose.backend_if_any(job.backend),
                           overwrite=True).rows


# --- the run ------------------------------------------------------------------------------------------


@dataclass
class PipelineResult:
    """What a run did."""

    out_dir: Path
    funnel: dict[str, Any] = field(default_factory=dict)
    stats: list[RunStats] = field(default_factory=list)
    failed: int = 0  #: stage calls that failed in this run

    @property
    def work_s(self) -> float:
        return sum(stats.work_s for stats in self.stats)

    @property
    def bookkeeping_s(self) -> float:
        return sum(stats.bookkeeping_s for stats in self.stats)

    @property
    def left_failed(self) -> bool:
        """Whether any (item, stage) is failed: in this run, or left failed by an earlier one (until
        a run with ``retry_failed`` does it again)."""
        return bool(self.failed or any(counts.get("failed") for entry in self.funnel.get("repos", {}).values()
                                       for counts in entry["stages"].values())
                    or self.funnel.get("publish", {}).get("failed"))


class PipelineEvents(StageEvents, Protocol):
    """What a pipeline run reports (the runner's events, plus how many items each stage will see)."""

    def planned(self, stage: str, total: int) -> None: ...


class _Recorder:
    """The runner's events -> the state store (one transaction each) and the caller's events."""

    def __init__(self, state: StateStore, events: PipelineEvents, repo_of: dict[str, str], logs_of: dict[str, Path]):
        self.state, self.events, self.repo_of, self.logs_of = state, events, repo_of, logs_of
        self.finished_calls = 0
        self.failed_calls = 0

    def started(self, stage: str, key: str) -> None:
        self.state.start(key, stage, self.repo_of.get(key, key))
        self.events.started(stage, key)

    def skipped(self, stage: str, key: str) -> None:
        self.events.skipped(stage, key)

    def finished(self, stage: str, key: str, output: Any, seconds: float) -> None:
        self.state.finish(key, stage, outcome_of(output), seconds)
        self.finished_calls += 1
        self.events.finished(stage, key, output, seconds)

    def failed(self, stage: str, key: str, error: BaseException, seconds: float) -> None:
        text = "".join(traceback.format_exception(error))
        logs = self.logs_of.get(key)
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            (logs / f"{stage}.error.log").write_text(text)
        self.state.fail(key, stage, self.repo_of.get(key, key), f"{type(error).__name__}: {error}", seconds)
        self.failed_calls += 1
        self.events.failed(stage, key, error, seconds)


def outcome_of(output: Any) -> str | None:
    if isinstance(output, BuildOutput):
        return output.env_spec.status
    if isinstance(output, ValidateOutput):
        return output.record.verdict
    if isinstance(output, MineOutput):
        return "mined"
    if isinstance(output, int):
        return "published" if output else "nothing_accepted"
    return None


def open_run(spec_name: str | Path, *, out_dir: Path | None = None, only: Iterable[str] = (),
             executor_name: str | None = None, jobs: int | None = None,
             address: str | None = None) -> tuple[PipelineSpec, Executor]:
    """The spec ``spec_name`` (a YAML path or a shipped name) with the caller's changes, and the
    executor to run it on (the spec's, unless ``executor_name`` / ``jobs`` / ``address`` say
    otherwise; Ray with no address anywhere starts a head for this run). ``only`` must name
    repositories of the spec."""
    spec = load_pipeline_spec(spec_name)
    if out_dir is not None:
        spec = spec.model_copy(update={"output": str(out_dir)})
    unknown = sorted(set(only) - {entry.label for entry in spec.repos} - {entry.repo for entry in spec.repos})
    if unknown:
        raise InputError(f"--only {', '.join(unknown)}: not a repository of the spec",
                         hint=f"the spec lists: {', '.join(entry.label for entry in spec.repos)}")
    kind = executor_name or spec.executor.name
    if kind == "ray":
        return spec, make_executor("ray", address=address or spec.executor.address)
    return spec, make_executor(kind, jobs=jobs or spec.executor.jobs)


def _to_do(state: StateStore, item: str, stage: str, retry_failed: bool) -> bool:
    status = state.status(item, stage)
    return status is None or status == "running" or (status == "failed" and retry_failed)


def run_pipeline(spec: PipelineSpec, *, executor: Executor, only: Iterable[str] = (), retry_failed: bool = False,
                 events: PipelineEvents | None = None, backend: str | None = None) -> PipelineResult:
    """Run ``spec`` (resuming what an earlier run into the same output folder left) on ``backend``
    (default: the spec's ``backend``, else ``REPO2ENV_BACKEND``, else docker); every worker, local
    or on a Ray cluster, opens that same backend."""
    from repo2env.runtime.backends import backend_name

    backend = backend_name(backend or spec.backend)
    events = events or _NoPipelineEvents()
    out_dir = spec.output_dir()
    result = PipelineResult(out_dir=out_dir)
    wanted = set(only)
    entries = [entry for entry in spec.repos if not wanted or entry.label in wanted or entry.repo in wanted]
    policy = spec.acceptance_policy() if "validate" in spec.stages else None
    memory_mb = spec.executor.resources.memory_mb
    resources = ExecutorResources(cpus=spec.executor.resources.cpus,
                                  memory_bytes=memory_mb * 2**20 if memory_mb else None)
    if {"build", "validate"} & set(spec.stages):
        from repo2env.runtime.ownership import reap_orphans

        # Sandboxes of a run that was killed (kill -9 leaves them running): gone before this run starts.
        reap_orphans(worker_backend(backend))
    with StateStore(out_dir) as state:
        state.begin_run()
        repo_of: dict[str, str] = {entry.label: entry.label for entry in entries}
        logs_of: dict[str, Path] = {}
        recorder = _Recorder(state, events, repo_of, logs_of)
        try:
            # 1. mine: one item per repository.
            if "mine" in spec.stages:
                def record_mine(entry: RepoEntry, job: MineJob, output: MineOutput) -> RepoEntry:
                    state.set_repo(entry.label, output.repo, output.folder)
                    return entry

                mine_stage = Stage("mine", mine_work, record=record_mine, resources=resources,
                                   prepare=lambda entry: MineJob(entry, spec.filters, out_dir)
                                   if _to_do(state, entry.label, "mine", retry_failed) else None)
                events.planned("mine", len(entries))
                result.stats.append(run_stages(entries, [mine_stage], executor=executor, key=lambda entry: entry.label,
                                               events=recorder, stop_on_error=False))

            # 2. build and validate: one item per task; a task is validated once its build is done.
            known = state.repos()
            folders = {known[entry.label][0]: (entry, known[entry.label][1]) for entry in entries if entry.label in known}
            tasks: list[Task] = []
            for entry, folder in folders.values():
                for task in read_tasks(folder / "tasks.jsonl"):
                    tasks.append(task)
                    repo_of[task.instance_id] = entry.label
                    logs_of[task.instance_id] = folder / "logs" / safe_name(task.instance_id)
            task_stages = _task_stages(spec, state, folders, logs_of, policy, resources, retry_failed, backend)
            for stage in task_stages:
                events.planned(stage.name, len(tasks))
            if task_stages and tasks:
                result.stats.append(run_stages(tasks, task_stages, executor=executor,
                                               key=lambda task: task.instance_id, events=recorder, stop_on_error=False))
            if policy is not None:
                for repo, (_, folder) in folders.items():
                    write_validation_reports(folder, policy, total_tasks=sum(task.repo == repo for task in tasks))

            # 3. publish: once for the batch, when something changed since it was last done.
            if "publish" in spec.stages and spec.publish is not None:
                all_folders = tuple(folder for _, folder in state.repos().values() if (folder / "tasks.jsonl").is_file())
                status = state.status(BATCH_ITEM, "publish")
                # Done again only when a stage finished since (its dataset would be stale); a failed
                # publish is tried again then too, or with retry_failed.
                fresh = recorder.finished_calls > 0
                due = bool(all_folders) and (fresh or status is None or status == "running"
                                             or (status == "failed" and retry_failed))
                publish_job = PublishJob(folders=all_folders, to=publish_target(spec.publish.to, out_dir),
                                         name=spec.publish.name or spec.name,
                                         include_rejected=spec.publish.include_rejected, backend=backend)
                publish_stage = Stage("publish", publish_work, record=lambda item, job, rows: item, resources=resources,
                                      prepare=lambda item: publish_job if due else None)
                events.planned("publish", 1)
                result.stats.append(run_stages([BATCH_ITEM], [publish_stage], executor=executor, key=lambda item: item,
                                               events=recorder, stop_on_error=False))
        except BaseException:
            state.end_run("interrupted")
            raise
        result.failed = recorder.failed_calls
        result.funnel = write_funnel(out_dir, state)
        state.end_run("failed" if result.failed else "done")
    return result


def _task_stages(spec: PipelineSpec, state: StateStore, folders: dict[str, tuple[RepoEntry, Path]],
                 logs_of: dict[str, Path], policy, resources: ExecutorResources, retry_failed: bool,
                 backend: str) -> list[Stage]:
    stages: list[Stage] = []
    if "build" in spec.stages:
        clones: dict[str, Path] = {}
        bases = available_bases(worker_backend(backend))

        def prepare_build(task: Task):
            if not _to_do(state, task.instance_id, "build", retry_failed):
                return None
            entry, folder = folders[task.repo]
            if task.repo not in clones:
                clones[task.repo] = read_source_clone(folder)
            options = BuildOptions(overrides={task.repo: entry.env} if entry.env else {})
            return build_job(task, clones[task.repo], logs_of[task.instance_id] / "build", options, bases, backend)

        def record_build(task: Task, job, output: BuildOutput) -> Task:
            built = task.model_copy(update={"env_spec": output.env_spec})
            update_tasks(folders[task.repo][1] / "tasks.jsonl", [built])
            return built

        stages.append(Stage("build", build_work, prepare=prepare_build, record=record_build, resources=resources))
    if "validate" in spec.stages:
        def prepare_validate(task: Task):
            built = state.status(task.instance_id, "build") == "done" or ("build" not in spec.stages and task.env_spec)
            if not built or not _to_do(state, task.instance_id, "validate", retry_failed):
                return None
            return ValidateJob(task, policy, logs_of[task.instance_id] / "validate", backend=backend)

        def record_validate(task: Task, job, output: ValidateOutput) -> Task:
            folder = folders[task.repo][1]
            # The task's row, then its record, each replaced in place: a stage done again after a
            # kill between the two (or between them and the state store) duplicates nothing.
            update_tasks(folder / "tasks.jsonl", [output.task])
            upsert_jsonl(folder / "validation.jsonl", [output.record])
            return output.task

        stages.append(Stage("validate", validate_work, prepare=prepare_validate, record=record_validate,
                            resources=resources))
    return stages


class _NoPipelineEvents(NoEvents):
    def planned(self, stage: str, total: int) -> None:
        pass


# --- the funnel ---------------------------------------------------------------------------------------


def funnel_of(state: StateStore) -> dict[str, Any]:
    """Per repository and stage, how many items reached each status or outcome (from the state
    store), with the mining funnel's PR counts; the batch's publish row apart."""
    counts = state.counts()
    repos = state.repos()
    funnel: dict[str, Any] = {"repos": {}, "publish": counts.get(BATCH_ITEM, {}).get("publish", {})}
    for label in sorted(set(counts) | set(repos)):
        if label == BATCH_ITEM:
            continue
        entry: dict[str, Any] = {"repo": repos[label][0] if label in repos else None}
        if label in repos:
            entry["tasks"] = _task_count(repos[label][1] / "tasks.jsonl")
            entry["prs"] = _mined_prs(repos[label][1] / "funnel.json")
        entry["stages"] = counts.get(label, {})
        funnel["repos"][label] = entry
    return funnel


@dataclass(frozen=True)
class BatchStatus:
    """A pipeline output folder's counts (:func:`funnel_of`) and how many runs it has seen."""

    folder: Path
    funnel: dict[str, Any]
    runs: int


def batch_status(target: str | Path) -> BatchStatus:
    """The status of a pipeline output folder, or of a spec's (by path or shipped name)."""
    folder = Path(target)
    if not (folder.is_dir() and (folder / STATE_FILE).is_file()):
        folder = load_pipeline_spec(target).output_dir()
    if not (folder / STATE_FILE).is_file():
        raise InputError(f"no pipeline state in {folder}", hint="run 'repo2env pipeline run SPEC' first")
    with StateStore(folder) as state:
        return BatchStatus(folder, funnel_of(state), state.runs())


def _task_count(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip()) if path.is_file() else 0


def _mined_prs(path: Path) -> dict[str, int]:
    import json

    if not path.is_file():
        return {}
    document = json.loads(path.read_text(encoding="utf-8"))
    # The latest run's counts (PRs scanned ...), with the totals over every run (tasks kept, rejections).
    counts = (document.get("counts") or {}) | (document.get("totals") or {})
    return {step: count for step, count in counts.items() if count}


def write_funnel(out_dir: Path, state: StateStore) -> dict[str, Any]:
    """``funnel.json`` and ``funnel.md`` of the output folder; returns the funnel."""
    funnel = funnel_of(state)
    write_json(out_dir / FUNNEL_JSON, funnel)
    (out_dir / FUNNEL_MD).write_text(funnel_markdown(funnel), encoding="utf-8")
    return funnel


def funnel_markdown(funnel: dict[str, Any]) -> str:
    """The funnel as a Markdown table: a row per repository, a column per stage."""
    lines = ["# Pipeline funnel", "", "| repository | PRs scanned | tasks | mine | build | validate |",
             "|---|---:|---:|---|---|---|"]

    def cell(counts: dict[str, int]) -> str:
        return ", ".join(f"{key} {value}" for key, value in sorted(counts.items())) or "-"

    for label, entry in funnel["repos"].items():
        stages = entry["stages"]
        lines.append(f"| {entry.get('repo') or label} | {entry.get('prs', {}).get('scanned', 0)} | "
                     f"{entry.get('tasks', 0)} | {cell(stages.get('mine', {}))} | {cell(stages.get('build', {}))} | "
                     f"{cell(stages.get('validate', {}))} |")
    lines += ["", f"publish: {cell(funnel.get('publish', {}))}", ""]
    return "\n".join(lines)
