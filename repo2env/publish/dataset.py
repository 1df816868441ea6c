"""``repo2env publish``: validated tasks -> a dataset tree (parquet, card, figure, manifest).

The tree is the same whether it lands in a folder or on the Hugging Face Hub::

    README.md                 dataset card (YAML metadata; ``configs:`` points at data/)
    data/<split>-00000-of-00001.parquet
    figures/validation.png    reward distributions of the reference rollouts (all published tasks)
    tasks/<instance_id>/      a Harbor task folder per published task that can have one (see
                              repo2env.publish.harbor), the same folders 'repo2env export harbor' writes
    figures/quality.png       task quality: adequacy, specification, interface (docs/quality.md)
    manifest.json             every other file with its size and sha256

A folder target is written next to itself and renamed into place (:func:`write_folder`), so after an
interruption it is either complete or absent; an existing target with other content is refused
unless ``overwrite``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from repo2env import __version__
from repo2env.dataset_rows import dataset_row
from repo2env.errors import InputError
from repo2env.folders import write_folder
from repo2env.jsonl import read_unique_tasks
from repo2env.models import Task, ValidationReport
from repo2env.publish.card import dataset_card, without_folders
from repo2env.publish.selection import left_out_because
from repo2env.runtime.backend import Backend

MANIFEST = "manifest.json"

#: Where the tree keeps its Harbor task folders.
HARBOR_FOLDER = "tasks"

#: Extra writers of the tree (e.g. the images tarball): (tasks, tree root) -> how many things written.
TreeWriter = Callable[[Sequence[Task], Path], int]


@dataclass(frozen=True)
class PublishOptions:
    """What goes into the dataset and how."""

    name: str = "repo2env-environments"
    split_by_date: date | None = None
    include_rejected: bool = False
    json_lists: bool = False
    license_id: str = "other"
    #: Push every task's image here first (``host[:port][/path]``); the rows record where and its digest.
    push_registry: str | None = None


@dataclass
class PublishSummary:
    """What a publish wrote."""

    target: str
    splits: dict[str, int] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)  # reason -> tasks not published
    files: int = 0
    harbor_tasks: int = 0
    harbor_left_out: Counter = field(default_factory=Counter)  # reason -> published tasks with no Harbor folder

    @property
    def rows(self) -> int:
        return sum(self.splits.values())

    @property
    def without_harbor_folders(self) -> str:
        """How many published tasks have no Harbor folder and why, as one phrase ('' when none)."""
        return without_folders(self.harbor_left_out)


def tasks_to_publish(folders: Sequence[Path], *, include_rejected: bool) -> tuple[list[Task], Counter, dict[str, Counter]]:
    """The tasks to publish from these task folders (one per instance id, see
    :func:`repo2env.jsonl.read_unique_tasks`; which go out: :func:`repo2env.publish.selection.left_out_because`),
    what was left out and why, and per-repo counts.

    Tasks never validated are refused (an InputError naming them) unless ``include_rejected``:
    publishing them would ship environments nobody checked.
    """
    chosen: list[Task] = []
    left_out: Counter = Counter()
    per_repo: dict[str, Counter] = {}
    unvalidated: list[str] = []
    for task in read_unique_tasks(folders):
        counts = per_repo.setdefault(task.repo, Counter())
        counts["mined"] += 1
        counts["built"] += bool(task.env_spec and task.env_spec.status == "env_ok")
        verdict = task.validation.verdict if task.validation else "pending"
        counts["validated"] += verdict != "pending"
        counts["accepted"] += verdict == "accepted"
        if verdict == "pending":
            unvalidated.append(task.instance_id)
        reason = left_out_because(task, include_rejected=include_rejected)
        if reason is None:
            chosen.append(task)
            counts["published"] += 1
        else:
            left_out[reason] += 1
    if unvalidated and not include_rejected:
        shown = ", ".join(unvalidated[:5]) + (f" and {len(unvalidated) - 5} more" if len(unvalidated) > 5 else "")
        raise InputError(f"{len(unvalidated)} task(s) were never validated: {shown}",
                         hint="run 'repo2env validate' first, or pass --include-rejected to publish them anyway")
    if not chosen:
        raise InputError("no task to publish (none is built and accepted)",
                         hint="run 'repo2env build' and 'repo2env validate', or pass --include-rejected")
    chosen.sort(key=lambda task: (task.created_at, task.instance_id))
    return chosen, left_out, per_repo


def split_name(task: Task, cutoff: date | None) -> str:
    """``train`` before the cutoff date, ``test`` on or after it; all ``train`` without one."""
    if cutoff is None:
        return "train"
    created = datetime.fromisoformat(task.created_at.replace("Z", "+00:00")).astimezone(UTC).date()
    return "train" if created < cutoff else "test"


def write_tree(folders: Sequence[Path], root: Path, options: PublishOptions, *,
               extra_writers: Sequence[TreeWriter] = (), images: Backend | None = None) -> PublishSummary:
    """Write the dataset tree of the chosen tasks under ``root`` (an empty folder); ``images`` is the
    backend the tasks' images are on (``options.push_registry`` pushes them from it; the Harbor folders
    read their snapshot commits from it; without one the verifier finds the commit itself)."""
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar

    from repo2env.publish.harbor import image_snapshots, write_task_folders
    from repo2env.publish.swebench import harness_fields
    from repo2env.runtime.images import layer_dockerfiles
    from repo2env.validate.report import quality_summary, write_figure, write_quality_figure
    from repo2env.validate.run import read_records

    disable_progress_bar()  # the CLI shows its own progress; datasets' bars would interleave with it
    tasks, left_out, per_repo = tasks_to_publish(folders, include_rejected=options.include_rejected)
    if options.push_registry:
        from repo2env.publish.images import push_images

        if images is None:
            raise InputError("--push-images needs the backend the images were built on")
        tasks = push_images(tasks, options.push_registry, backend=images)
    summary = PublishSummary(target=str(root), left_out=left_out)
    by_split: dict[str, list[dict]] = {}
    for task in tasks:
        # swebench's evaluation fields too (its harness grades the rows); the `image` column stays the local tag.
        evaluation = {name: value for name, value in harness_fields(task).items() if name != "image"}
        by_split.setdefault(split_name(task, options.split_by_date), []).append(
            {**dataset_row(task, layer_dockerfiles(task), json_lists=options.json_lists), **evaluation})
    (root / "data").mkdir(parents=True)
    for split, rows in sorted(by_split.items(), key=lambda item: item[0] != "train"):
        Dataset.from_list(rows).to_parquet(str(root / "data" / f"{split}-00000-of-00001.parquet"))
        summary.splits[split] = len(rows)
    published = {task.instance_id for task in tasks}
    records: list[ValidationReport] = [record for folder in folders for record in read_records(folder / "validation.jsonl")
                                       if record.instance_id in published]
    figures = []
    if records:
        (root / "figures").mkdir()
        write_figure(root / "figures" / "validation.png", records)
        figures.append("figures/validation.png")
    harbor = write_task_folders(tasks, root / HARBOR_FOLDER, dataset=options.name,
                                snapshots=image_snapshots(tasks, images))
    summary.harbor_tasks, summary.harbor_left_out = len(harbor.written), harbor.reasons
    quality_figure = "figures/quality.png" if records and write_quality_figure(root / "figures" / "quality.png",
                                                                               records) else None
    for writer in extra_writers:
        writer(tasks, root)
    (root / "README.md").write_text(dataset_card(
        name=options.name, splits=summary.splits, repos={repo: dict(counts) for repo, counts in per_repo.items()},
        license_id=options.license_id, figures=figures, harbor_tasks=summary.harbor_tasks,
        harbor_left_out=summary.harbor_left_out,
        json_lists=options.json_lists, quality_lines=quality_summary(records), quality_figure=quality_figure,
        languages=Counter(task.language for task in tasks)))
    summary.files = write_manifest(root, tasks=len(tasks))
    return summary


def write_manifest(root: Path, *, tasks: int) -> int:
    """``manifest.json``: every file of the tree but itself, with size and sha256; returns the count."""
    files = {}
    for path in sorted(path for path in root.rglob("*") if path.is_file() and path.name != MANIFEST):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        files[path.relative_to(root).as_posix()] = {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}
    (root / MANIFEST).write_text(json.dumps({"generator": f"repo2env {__version__}", "tasks": tasks,
                                             "created": datetime.now(UTC).isoformat(timespec="seconds"),
                                             "files": files}, indent=2) + "\n")
    return len(files) + 1


def check_published_tree(tree: Path) -> dict:
    """The manifest of a published dataset tree, after checking every file against it; an
    InputError saying what to do when the tree is not one or its files changed."""
    if not (tree / MANIFEST).is_file():
        raise InputError(f"{tree} is not a repo2env dataset (no {MANIFEST})",
                         hint="pass the folder 'repo2env publish' wrote, or hf://org/name")
    problems = verify_manifest(tree)
    if problems:
        raise InputError(f"{tree}: files do not match the manifest: {'; '.join(problems[:3])}",
                         hint="publish or download the dataset again")
    return json.loads((tree / MANIFEST).read_text())


def verify_manifest(root: Path) -> list[str]:
    """The files of a published tree whose content does not match its manifest (empty: intact)."""
    manifest = json.loads((root / MANIFEST).read_text())
    problems = []
    for name, entry in manifest["files"].items():
        path = root / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
            problems.append(f"{name}: sha256 differs")
    return problems


def publish_to_folder(folders: Sequence[Path], target: Path, options: PublishOptions, *, overwrite: bool = False,
                      extra_writers: Sequence[TreeWriter] = (), images: Backend | None = None) -> PublishSummary:
    """Write the dataset tree to ``target``: complete or absent, never half-written."""
    summary = write_folder(target, lambda root: write_tree(folders, root, options, extra_writers=extra_writers,
                                                           images=images), overwrite=overwrite)
    summary.target = str(Path(target).absolute())
    return summary
