"""``repo2env pull``: a published dataset -> task folders here whose environments run.

The dataset's files are checked against its manifest, its rows become tasks (one folder per
repository, merged with what is there), and each task's image is made to exist: already here with
the recorded id, loaded from the dataset's image tarball, pulled from the registry it was pushed to
(``publish --push-images``), or rebuilt from a clone of the repository.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from repo2env.dataset_rows import task_from_row
from repo2env.errors import InputError
from repo2env.jsonl import update_tasks, write_repository_record
from repo2env.models import RepositoryRecord, Task
from repo2env.publish.dataset import check_published_tree
from repo2env.publish.images import IMAGES_TARBALL, load_images, pull_pushed, runnable_here
from repo2env.runtime.backend import Backend

#: Builds the given tasks of a tasks folder; returns (built ok, {instance id: why it failed}).
Builder = Callable[[Path, frozenset[str]], tuple[int, dict[str, str]]]


@dataclass
class PullSummary:
    """What a pull brought and what runs."""

    folders: dict[str, Path] = field(default_factory=dict)
    tasks: int = 0
    runnable: int = 0
    loaded_images: int = 0
    pulled: int = 0
    rebuilt: int = 0
    not_runnable: dict[str, str] = field(default_factory=dict)  # instance id -> why


def dataset_tasks(tree: Path) -> list[Task]:
    """The tasks of a published dataset tree (every split), its manifest verified first."""
    import pyarrow.parquet as pq

    check_published_tree(tree)
    tasks = []
    for path in sorted((tree / "data").glob("*.parquet")):
        for index, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            tasks.append(task_from_row(row, where=f"{path.name} row {index}"))
    return tasks


def pull_dataset(tree: Path, out_root: Path, *, runtime: Backend | None = None,
                 clones: Mapping[str, str] | None = None, build: bool = True,
                 builder: Builder | None = None) -> PullSummary:
    """Bring the dataset at ``tree`` into ``out_root/<owner>__<name>/``; with a backend (``runtime``),
    make every task's image exist on it (load the tarball, else pull its pushed reference, else rebuild from ``clones``
    with ``builder`` when ``build``: the stage runner's build, :func:`repo2env.pipeline.stages.folder_builder`)."""
    tasks = dataset_tasks(tree)
    summary = PullSummary(tasks=len(tasks))
    by_repo: dict[str, list[Task]] = {}
    for task in tasks:
        by_repo.setdefault(task.repo, []).append(task)
    for repo, repo_tasks in sorted(by_repo.items()):
        folder = out_root / repo.replace("/", "__")
        update_tasks(folder / "tasks.jsonl", repo_tasks)
        summary.folders[repo] = folder
        clone = (clones or {}).get(repo)
        if clone:
            if not Path(clone).exists():
                raise InputError(f"no such clone for {repo}: {clone}")
            write_repository_record(folder, RepositoryRecord(repo=repo, clone_path=str(Path(clone).resolve()),
                                                             source="dataset"))
    if runtime is None:
        return summary
    if (tree / IMAGES_TARBALL).is_file():
        summary.loaded_images = len(load_images(runtime, tree / IMAGES_TARBALL))
    for repo, repo_tasks in sorted(by_repo.items()):
        missing = {task.instance_id for task in repo_tasks if not runnable_here(runtime, task)}
        # Pushed with --push-images: pulled by digest, so it is the very image that was validated.
        pulled = {task.instance_id for task in repo_tasks if task.instance_id in missing and pull_pushed(runtime, task)}
        summary.pulled += len(pulled)
        missing -= pulled
        summary.runnable += len(repo_tasks) - len(missing)
        if not missing:
            continue
        folder = summary.folders[repo]
        if not build or builder is None or not (folder / "source.json").is_file():
            why = ("no image here, none pushed that pulls, and no clone to rebuild from (pass --clone OWNER/NAME=PATH)"
                   if build else "--no-build")
            summary.not_runnable.update(dict.fromkeys(sorted(missing), why))
            continue
        built, failures = builder(folder, frozenset(missing))
        summary.rebuilt += built
        summary.runnable += built
        summary.not_runnable.update(failures)
    return summary
