"""SWE-bench-format rows in and out: ``repo2env import swebench`` and ``repo2env export swebench``.

SWE-bench, SWE-Gym and SWE-rebench publish the same instance fields (``instance_id``, ``repo``,
``base_commit``, ``patch``, ``test_patch``, ``problem_statement``, ``FAIL_TO_PASS`` ...) as JSON, JSONL
or parquet, with the two test lists often stored as JSON strings. Importing turns such rows into our
tasks, one tasks folder per repository, so they can be built, validated and trained on with our
runtime and verifier; the given FAIL_TO_PASS / PASS_TO_PASS are kept as ``declared`` lists, and
``validate`` re-derives them and reports the difference.

Exported rows (and published ones) carry what SWE-bench-style harnesses read to run a task with no
glue: the image under the names they look for (``image_name``, ``docker_image``, and swebench 5's
``image``), and, for tasks whose tests run with pytest, swebench 5's evaluation fields
(``eval_script``, ``log_parser``, ``eval_type``) so its own harness (``swebench.harness.
run_evaluation``) can grade predictions in the task's image. That harness grades with its own
checks; ``repo2env grade`` is the grader with this project's tamper defences.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo2env.errors import InputError, TaskFormatError
from repo2env.jsonl import update_tasks, write_json_lines, write_repository_record
from repo2env.models import RepositoryRecord, Task
from repo2env.publish.selection import select_from_folders
from repo2env.verify.spec import GradingSpec, grading_spec

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


#: swebench's markers around the test output in an evaluation log (swebench.harness.constants).
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
#: swebench's parser of pytest's ``-rA`` summary lines (its log_parsers registry).
PYTEST_LOG_PARSER = "parse_log_pytest"


def harness_fields(task: Task) -> dict[str, Any]:
    """What swebench 5's harness reads of a row to grade it (``image``, ``eval_script``,
    ``log_parser``, ``eval_type``), from the task's grading specification (as swebench's own rows
    come from its ``TestSpec``); the three evaluation fields are None for a task whose tests do not
    run with pytest (swebench has no parser for our other runners' output)."""
    image = task.env_spec.runnable_image if task.env_spec else None
    fields: dict[str, Any] = {"image": image, "eval_script": None, "log_parser": None, "eval_type": None}
    spec = grading_spec(task)
    command = spec.runner.command
    if not spec.runner.is_pytest or not (command.startswith("python -m pytest") or command.startswith("pytest")) \
            or not spec.fail_to_pass:
        return fields
    fields.update(eval_script=eval_script(spec), log_parser=PYTEST_LOG_PARSER, eval_type="pass_and_fail")
    return fields


def eval_script(spec: GradingSpec) -> str:
    """swebench's eval.sh for a task's grading specification: in /testbed (the task image's snapshot,
    one commit) reset the hidden tests' files, apply the hidden tests' patch, run the runner's command
    on the spec's test ids between swebench's markers (with the ``-rA`` summary its pytest parser
    reads), and reset the files again."""
    delimiter = "EOF_REPO2ENV_TEST_PATCH"
    while delimiter in spec.hidden_tests:
        delimiter += "_"
    command = spec.runner.command
    if " -rA" not in f" {command} ":
        command += " -rA"
    # A test file the snapshot has is checked out again; one the test patch creates is removed.
    reset = "; ".join(f"(git checkout HEAD -- {shlex.quote(path)} 2>/dev/null || rm -f {shlex.quote(path)})"
                     for path in spec.hidden_test_files)
    patch = spec.hidden_tests if spec.hidden_tests.endswith("\n") else spec.hidden_tests + "\n"
    return "\n".join([
        "#!/bin/bash", "set -uxo pipefail", "cd /testbed", reset or ":",
        f"git apply -v - <<'{delimiter}'", patch + delimiter,
        f": '{START_TEST_OUTPUT}'", f"{command} {' '.join(shlex.quote(test_id) for test_id in spec.test_ids)}",
        f": '{END_TEST_OUTPUT}'", reset or ":", "",
    ])


def export_swebench(folders: Iterable[Path], out_path: Path, *, json_lists: bool = True,
                    accepted_only: bool = True) -> int:
    """Write the tasks of ``folders`` (one row per instance id) as SWE-bench instances (JSONL), each
    with the image a harness runs it in and swebench's evaluation fields (:func:`harness_fields`);
    returns how many. Like every export, only built tasks (an image that runs), accepted ones unless
    not ``accepted_only``."""
    selected = select_from_folders(list(folders), include_rejected=not accepted_only)
    rows = [{**task.to_swebench_row(json_lists=json_lists), **harness_fields(task)} for task in selected.tasks]
    write_json_lines(out_path, rows)
    return len(rows)


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """SWE-bench predictions, as harnesses write them: JSONL (or a JSON list) of ``{instance_id,
    model_name_or_path, model_patch}``, or ``preds.json``, a JSON object keyed by instance id (as
    mini-swe-agent and swebench write it). Bytes that are not UTF-8 (a patch's Latin-1 lines) stay
    as they were, as surrogate escapes. An InputError names the prediction that is malformed."""
    if not Path(path).is_file():
        raise InputError(f"no predictions file at {path}")
    text = Path(path).read_bytes().decode("utf-8", errors="surrogateescape")
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            rows = json.loads(text)
        elif stripped.startswith("{") and _one_document(stripped):
            document = json.loads(text)
            # One prediction on one line is JSON lines too; an object of predictions is keyed by id.
            rows = [document] if "model_patch" in document else [
                {"instance_id": key, **value} if isinstance(value, dict) else value for key, value in document.items()]
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON lines or a JSON object of predictions ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(rows, list):
        raise InputError(f"{path}: expected a list of predictions or an object keyed by instance id")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or "instance_id" not in row or "model_patch" not in row:
            raise InputError(f"{path}: prediction {number} needs instance_id and model_patch")
        if not isinstance(row["instance_id"], str):
            raise InputError(f"{path}: prediction {number}: instance_id must be a string")
        if row["model_patch"] is not None and not isinstance(row["model_patch"], str):
            raise InputError(f"{path}: prediction {number} ({row['instance_id']}): model_patch must be a string "
                             f"(a diff) or null, not {type(row['model_patch']).__name__}")
    return rows


def _one_document(text: str) -> bool:
    """Whether ``text`` (starting with ``{``) is one JSON object rather than JSON lines."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True
