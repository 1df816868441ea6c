"""A task as a row of the published dataset, and back (pure functions); and a published folder's
rows read back (:func:`load_published`, the one place that reads them with ``datasets``).

One row carries what three kinds of users read: a conversational ``prompt`` column that TRL's GRPO
trainer uses as is, the SWE-bench instance fields (so SWE-bench tooling loads the rows), and what
repo2env itself needs to run the environment again without re-deriving anything (the EnvSpec and
the Dockerfile text of each image layer) together with the validation evidence. Nested records
travel as JSON strings, so every row has the same Arrow schema whatever the record holds.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from repo2env.errors import TaskFormatError
from repo2env.instruction import agent_messages
from repo2env.models import EnvSpec, QualityReport, Task, ValidationReport

#: What the ``validation`` column carries, and reads back (``rewards``: by rollout kind).
_VALIDATION_KEYS = ("verdict", "reasons", "policy", "rewards", "flaky_tests", "reward_mean", "reward_spread",
                    "distinct_rewards", "partial_credit", "leak_flagged")

#: Columns holding a JSON document (decoded by :func:`task_from_row`).
JSON_COLUMNS = ("env_spec", "validation", "dockerfiles", "quality")


def dataset_row(task: Task, dockerfiles: Mapping[str, str] | None = None, *, json_lists: bool = False) -> dict[str, Any]:
    """The published row of ``task``. ``json_lists``: FAIL_TO_PASS / PASS_TO_PASS as JSON strings,
    as SWE-bench's own datasets store them."""
    spec = task.env_spec or EnvSpec()
    report = task.validation or ValidationReport()
    rewards = report.rewards
    row: dict[str, Any] = {
        "prompt": agent_messages(task),
        **task.to_swebench_row(json_lists=json_lists),
        "language": task.language,
        "pull_number": task.pull_number,
        "issue_numbers": list(task.issue_numbers),
        "merge_commit": task.merge_commit or "",
        "scm_version": task.scm_version,
        "leak_score": task.leak_score,
        "image": spec.image or "",
        "image_digest": spec.image_digest or "",
        "pushed_image": spec.pushed_image or "",
        "env_image": spec.env_image or "",
        "python": spec.python,
        "test_cmd": spec.test_cmd,
        "env_spec": spec.model_dump_json(exclude={"log_path", "dockerfiles"}),
        "dockerfiles": json.dumps(dict(dockerfiles or {}), sort_keys=True),
        "verdict": report.verdict,
        "reasons": list(report.reasons),
        "reward_gold": _mean(rewards.get("gold")),
        "reward_null": _mean(rewards.get("null")),
        "reward_mean": report.reward_mean,
        "distinct_rewards": report.distinct_rewards,
        "partial_credit": bool(report.partial_credit),
        "policy_pass_rate": report.policy_pass_rate,
        # Fairness (docs/quality.md): the Interface section the prompt carries, the quality block
        # as JSON, and its two summaries as columns to filter on.
        "interface": task.interface,
        "adequacy": report.quality.adequacy if report.quality else None,
        "specification": report.quality.specification if report.quality else None,
        "quality": report.quality.model_dump_json() if report.quality else "",
        # A summary: the row's own columns carry the tests and the instance; grades stay local.
        "validation": json.dumps({"rewards": rewards, **report.model_dump(include=set(_VALIDATION_KEYS))},
                                 sort_keys=True),
    }
    return row


def task_from_row(row: Mapping[str, Any], *, where: str = "row") -> Task:
    """The :class:`Task` a published row describes (rollout details and local log paths are not
    published, so ``validation`` comes back with the verdict, the figures and the rewards by kind,
    as unnamed rollouts)."""
    try:
        spec = EnvSpec.model_validate_json(row["env_spec"]) if row.get("env_spec") else None
        validation = json.loads(row["validation"]) if row.get("validation") else {}
        quality = json.loads(row["quality"]) if row.get("quality") else None
    except (ValueError, TypeError) as exc:
        raise TaskFormatError(f"{where}: a JSON column does not parse ({exc})") from None
    fields = {name: row[name] for name in (
        "instance_id", "repo", "language", "pull_number", "issue_numbers", "base_commit", "merge_commit", "patch", "test_patch",
        "problem_statement", "hints_text", "created_at", "version", "scm_version", "environment_setup_commit",
        "FAIL_TO_PASS", "PASS_TO_PASS", "leak_score", "interface") if name in row and row[name] is not None}
    fields["merge_commit"] = fields.get("merge_commit") or None
    if fields.get("environment_setup_commit") == fields.get("base_commit"):
        fields["environment_setup_commit"] = None  # the SWE-bench row's stand-in for "not set"
    if spec is not None:
        try:
            dockerfiles = json.loads(row.get("dockerfiles") or "{}")
        except ValueError:
            dockerfiles = {}
        fields["env_spec"] = spec.model_copy(update={"dockerfiles": dockerfiles}) if isinstance(dockerfiles, dict) else spec
    if validation:
        # Only the keys the column is known to carry: a column written by a newer version may hold more.
        known = {key: value for key, value in validation.items() if key in _VALIDATION_KEYS}
        if isinstance(quality, dict):
            known["quality"] = {key: value for key, value in quality.items() if key in QualityReport.model_fields}
        try:
            fields["validation"] = ValidationReport.model_validate(known)
        except ValidationError as exc:
            raise TaskFormatError(f"{where}: the validation column is not a validation report ({exc})") from None
    return Task.from_row(fields, where=where)


def _mean(values: list[float] | None) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def load_published(folder: Path):
    """The splits of a published dataset folder as ``datasets`` reads them (the card's ``configs``
    decide them), a ``DatasetDict`` held in memory. Read fresh each time, with a cache of its own:
    ``datasets`` (5.x) caches a local folder under its name alone, so a folder published again, or
    another folder with the same name, would load the rows of whichever was read first."""
    from datasets import load_dataset
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()
    with tempfile.TemporaryDirectory(prefix="repo2env-datasets-") as cache:
        return load_dataset(str(folder), cache_dir=cache, keep_in_memory=True)
