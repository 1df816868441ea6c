"""SWE-bench-format rows in and out: ``repo2env import swebench`` and ``repo2env export swebench``.

SWE-bench, SWE-Gym and SWE-rebench publish the same instance fields (``instance_id``, ``repo``,
``base_commit``, ``patch``, ``test_patch``, ``problem_statement``, ``FAIL_TO_PASS`` ...) as JSON, JSONL
or parquet, with the two test lists often stored as JSON strings. Importing turns such rows into our
tasks, one tasks folder per repository, so they can be built, validated and trained on with our
runtime and verifier; the given FAIL_TO_PASS / PASS_TO_PASS are kept as ``declared`` lists, and
``validate`` re-derives them and reports the difference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo2env.errors import InputError, TaskFormatError
from repo2env.jsonl import update_tasks, write_json_lines, write_repository_record
from repo2env.models import RepositoryRecord, Task
from repo2env.publish.selection import select_from_folders

#: Fields we take from a SWE-bench-style row (others, dataset-specific, are ignored).
SWEBENCH_FIELDS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
                   "created_at", "version", "environment_setup_commit", "FAIL_TO_PASS", "PASS_TO_PASS")


@dataclass
class ImportSummary:
    """What an import wrote, per repository folder."""

    folders: dict[str, Path] = field(default_factory=dict)  # repo -> tasks folder
    tasks: dict[str, int] = field(default_factory=dict)  # repo -> tasks imported
    missing_clones: list[str] = field(default_factory=list)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON (a list, or ``{"instances": [...]}``), JSONL or parquet file."""
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several unrelated types for a bad file
            raise InputError(f"{path}: not a readable parquet file ({exc})") from None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (expected JSON, JSONL or parquet)") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            rows = json.loads(text)
        elif stripped.startswith("{") and "\n{" not in stripped.strip():
            document = json.loads(text)
            rows = document.get("instances", [document]) if isinstance(document, dict) else document
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON or JSONL (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise InputError(f"{path}: expected a list of instance objects")
    return rows


def task_from_swebench_row(row: Mapping[str, Any], *, where: str) -> Task:
    """One SWE-bench-style row as a :class:`Task` (its test lists kept as declared)."""
    fields = {name: row[name] for name in SWEBENCH_FIELDS if name in row and row[name] is not None}
    instance_id = str(fields.get("instance_id", ""))
    match = re.search(r"-(\d+)$", instance_id)
    if not match:
        raise TaskFormatError(f"{where}: instance_id {instance_id!r} does not end with -<PR number>")
    fields["pull_number"] = int(match.group(1))
    fields.setdefault("hints_text", "")
    fields["version"] = str(fields.get("version", ""))
    if "created_at" in fields:
        fields["created_at"] = str(fields["created_at"])
    task = Task.from_row(fields, where=where)
    if task.environment_setup_commit == task.base_commit:
        task = task.model_copy(update={"environment_setup_commit": None})
    return task.model_copy(update={"declared_FAIL_TO_PASS": list(task.FAIL_TO_PASS),
                                   "declared_PASS_TO_PASS": list(task.PASS_TO_PASS)})


def import_swebench(path: Path, out_root: Path, clones: Mapping[str, str]) -> ImportSummary:
    """Import the rows of ``path`` into ``out_root/<owner>__<name>/tasks.jsonl`` (one folder per
    repository, merged with what is there). ``clones`` maps ``owner/name`` to a local clone with the
    history, recorded for ``build``; repositories without one are imported and listed as missing."""
    rows = read_rows(path)
    by_repo: dict[str, list[Task]] = {}
    for index, row in enumerate(rows, start=1):
        task = task_from_swebench_row(row, where=f"{path} row {index}")
        by_repo.setdefault(task.repo, []).append(task)
    summary = ImportSummary()
    for repo, tasks in sorted(by_repo.items()):
        folder = out_root / repo.replace("/", "__")
        update_tasks(folder / "tasks.jsonl", tasks)
        summary.folders[repo], summary.tasks[repo] = folder, len(tasks)
        clone = clones.get(repo)
        if clone:
            if not Path(clone).exists():
                raise InputError(f"no such clone for {repo}: {clone}")
            write_repository_record(folder, RepositoryRecord(repo=repo, clone_path=str(Path(clone).resolve()),
                                                             source="swebench-import"))
        elif not (folder / "source.json").is_file():
            summary.missing_clones.append(repo)
    return summary


def export_swebench(folders: Iterable[Path], out_path: Path, *, json_lists: bool = True,
                    accepted_only: bool = True) -> int:
    """Write the tasks of ``folders`` as SWE-bench instances (JSONL); returns how many. Like every
    export, only built tasks (an image that runs), accepted ones unless not ``accepted_only``."""
    selected = select_from_folders(list(folders), include_rejected=not accepted_only)
    rows = [task.to_swebench_row(json_lists=json_lists) for task in selected.tasks]
    write_json_lines(out_path, rows)
    return len(rows)
