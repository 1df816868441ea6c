"""``repo2env demo run`` / ``make demo``: every stage that exists, on an embedded demo repository.

``language`` picks the demo (textkit for ``python``, fmtkit for ``javascript``). When mining keeps
no task (a language the pipeline cannot mine yet), the later stages say so instead of running on
nothing. Training is not run by the demo (it needs the train extra and minutes of CPU): its stage
says how.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repo2env.jsonl import read_tasks
from repo2env.languages import DEFAULT_LANGUAGE
from repo2env.pipeline import compose
from repo2env.runtime.backend import Backend
from repo2env.validate.run import read_records


@dataclass(frozen=True)
class StageReport:
    """One row of the demo's report."""

    name: str
    status: str  # "done", "failed" or "not run here"
    summary: str


@dataclass
class DemoReport:
    """What the demo run did, stage by stage."""

    out_dir: Path
    stages: list[StageReport] = field(default_factory=list)


def run_demo(out_dir: Path, *, backend: Backend, language: str = DEFAULT_LANGUAGE,
             progress: Callable[[str], None] = lambda message: None) -> DemoReport:
    """Build the ``language`` demo repository under ``out_dir/source`` (once) and run every built
    stage on it, its images and sandboxes on ``backend``. A folder that already holds another
    language's demo is refused."""
    report = DemoReport(out_dir=out_dir)
    source_dir = out_dir / "source"
    demo = compose.demo_repository(source_dir, language, progress=progress)
    if demo.reused:
        report.stages.append(StageReport("demo repository", "done", f"reused {demo.repo_path}"))
    else:
        merged = sum(1 for pull in demo.built.pulls if pull.merge_style != "unmerged")
        report.stages.append(StageReport("demo repository", "done",
                                         f"{demo.built.repo}: {merged} merged PRs at {demo.repo_path}"))

    progress("mining merged PRs from local history")
    tasks_dir = out_dir / "tasks"
    result = compose.mine(compose.open_repository(str(demo.repo_path), issues_path=demo.issues_path), tasks_dir)
    funnel = result.funnel
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(funnel.reasons().items()))
    report.stages.append(StageReport(
        "mine", "done",
        f"{funnel.counts['scanned']} PRs scanned, {len(result.new_tasks)} new tasks "
        f"({funnel.counts.get('already_mined', 0)} already mined); rejected: {reasons or 'none'}; "
        f"-> {result.tasks_path}",
    ))
    if not (tasks_dir / "tasks.jsonl").is_file() or not read_tasks(tasks_dir / "tasks.jsonl"):
        for stage in ("build", "validate", "publish", "train"):
            report.stages.append(StageReport(stage, "not run here", f"mining kept no {language} task to {stage}"))
        return report
    progress(f"building environments (env image + task images) on {backend.name}")
    built = compose.build(tasks_dir, backend=backend)
    report.stages.append(StageReport(
        "build", "done" if built.ok else "failed",
        f"{built.ok} env_ok ({built.reused} reused), {built.failed} env_failed; "
        f"{len(built.env_images)} env image(s) shared by {built.ok} tasks"))
    progress("validating with reference rollouts (default policy)")
    validated = compose.validate(tasks_dir, policy=compose.acceptance_policy(), backend=backend)
    records = read_records(tasks_dir / "validation.jsonl")
    accepted = sum(record.verdict == "accepted" for record in records)
    reasons = ", ".join(sorted({f"{record.instance_id.rsplit('-', 1)[1]}: {'+'.join(record.reasons)}"
                                for record in records if record.reasons}))
    report.stages.append(StageReport(
        "validate", "done",
        f"{accepted}/{len(records)} accepted ({validated.skipped} already validated)"
        f"{'; rejected PR ' + reasons if reasons else ''}; -> {tasks_dir / 'summary.md'}"))
    progress("publishing the accepted environments as a dataset folder")
    dataset_dir = out_dir / "dataset"
    # The default language's demo keeps the name it had before there were others.
    name = "repo2env/demo" if language == DEFAULT_LANGUAGE else f"repo2env/demo-{language}"
    published = compose.publish([tasks_dir], str(dataset_dir), compose.PublishOptions(name=name), backend=backend,
                                overwrite=True)
    splits = ", ".join(f"{split} {count}" for split, count in published.splits.items())
    without = published.without_harbor_folders
    report.stages.append(StageReport(
        "publish", "done", f"{published.rows} environments ({splits}), {published.harbor_tasks} Harbor tasks"
        f"{' (' + without + ')' if without else ''}, "
        f"{published.files} files -> {dataset_dir} (datasets.load_dataset loads it)"))
    report.stages.append(StageReport(
        "train", "not run here", f"'make train-demo' (or 'repo2env train --dataset {dataset_dir} ...') runs GRPO with "
        "RepoEnv on this dataset"))
    return report
