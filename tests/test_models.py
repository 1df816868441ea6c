"""The data model: validation with field-naming errors, JSONL round trips, SWE-bench rows."""

from __future__ import annotations

import json

import pytest

from repo2env.errors import TaskFormatError
from repo2env.jsonl import append_jsonl, read_task_ids, read_tasks, write_json, write_jsonl
from repo2env.models import SCHEMA_VERSION, EnvSpec, Funnel, Task

SHA = "0123456789abcdef0123456789abcdef01234567"
SWEBENCH_FIELDS = {
    "repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
    "created_at", "version", "environment_setup_commit", "FAIL_TO_PASS", "PASS_TO_PASS",
}


def make_task(**overrides) -> Task:
    fields = dict(
        instance_id="acme__widgets-12", repo="acme/widgets", pull_number=12, issue_numbers=[11],
        base_commit=SHA, patch="diff --git a/x.py b/x.py\n", test_patch="diff --git a/tests/t.py b/tests/t.py\n",
        problem_statement="Widgets break\nwhen empty", created_at="2024-01-08T09:00:00Z", version="1.2",
        FAIL_TO_PASS=["tests/t.py::test_empty"], PASS_TO_PASS=["tests/t.py::test_full"],
        env_spec=EnvSpec(python="3.9", install=["pip install -e .[test]"]),
    )
    fields.update(overrides)
    return Task(**fields)


def test_jsonl_round_trip_keeps_every_field(tmp_path):
    tasks = [make_task(), make_task(instance_id="acme__widgets-13", pull_number=13, leak_score=0.5)]
    path = tmp_path / "tasks.jsonl"
    assert write_jsonl(path, tasks) == 2
    again = read_tasks(path)
    assert again == tasks
    assert again[0].schema_version == SCHEMA_VERSION
    assert again[0].env_spec.python == "3.9"


def test_append_and_resume_ids(tmp_path):
    path = tmp_path / "tasks.jsonl"
    assert read_task_ids(path) == set()
    append_jsonl(path, [make_task()])
    append_jsonl(path, [make_task(instance_id="acme__widgets-14", pull_number=14)])
    assert read_task_ids(path) == {"acme__widgets-12", "acme__widgets-14"}
    assert len(path.read_text().splitlines()) == 2


def test_swebench_row_has_swebench_fields_and_json_string_option():
    task = make_task()
    row = task.to_swebench_row()
    assert set(row) == SWEBENCH_FIELDS
    assert row["FAIL_TO_PASS"] == ["tests/t.py::test_empty"]
    assert row["environment_setup_commit"] == SHA
    as_strings = task.to_swebench_row(json_lists=True)
    assert json.loads(as_strings["FAIL_TO_PASS"]) == ["tests/t.py::test_empty"]
    # SWE-bench's on-disk form reads back into a Task.
    back = Task.from_row({**as_strings, "pull_number": 12})
    assert back.FAIL_TO_PASS == task.FAIL_TO_PASS and back.PASS_TO_PASS == task.PASS_TO_PASS


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"base_commit": "abc"}, "base_commit", "40-hex"),
        ({"instance_id": "widgets-12"}, "instance_id", "owner__name-PR"),
        ({"repo": "widgets"}, "repo", "owner/name"),
        ({"created_at": "yesterday"}, "created_at", "ISO 8601"),
        ({"FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS", "JSON string"),
        ({"pull_number": "twelve"}, "pull_number", "integer"),
        ({"surprise": 1}, "surprise", "unknown field"),
    ],
)
def test_bad_rows_name_the_field(change, field, message):
    row = json.loads(make_task().to_json_line())
    row.update(change)
    with pytest.raises(TaskFormatError) as caught:
        Task.from_row(row, where="tasks.jsonl:7")
    text = str(caught.value)
    assert text.startswith("tasks.jsonl:7: ")
    assert f"field '{field}'" in text
    assert message in text


def test_missing_field_and_bad_json_lines_name_file_and_line(tmp_path):
    row = json.loads(make_task().to_json_line())
    del row["test_patch"]
    path = tmp_path / "tasks.jsonl"
    path.write_text(make_task().to_json_line() + "\n" + json.dumps(row) + "\n")
    with pytest.raises(TaskFormatError, match=r"tasks.jsonl:2: field 'test_patch': required field is missing"):
        read_tasks(path)
    path.write_text("{not json\n")
    with pytest.raises(TaskFormatError, match=r"tasks.jsonl:1: not valid JSON"):
        read_tasks(path)


def test_env_spec_hash_depends_on_content_not_on_image_tag():
    spec = EnvSpec(python="3.11", install=["pip install -e ."], date_pin="2024-01-01")
    tagged = spec.model_copy(update={"image": "repo2env/env:abc", "image_digest": "sha256:0"})
    assert spec.spec_hash() == tagged.spec_hash()
    assert spec.spec_hash() != EnvSpec(python="3.9", install=["pip install -e ."], date_pin="2024-01-01").spec_hash()
    with pytest.raises(ValueError, match="3.11"):
        EnvSpec(python="python3")


def test_funnel_counts_and_reasons(tmp_path):
    funnel = Funnel(repo="acme/widgets")
    funnel.count("scanned", 3)
    funnel.reject(1, "mine", "not_merged")
    funnel.reject(2, "mine", "no_linked_issue", "no Fixes #N")
    funnel.reject(3, "mine", "no_linked_issue")
    assert funnel.reasons() == {"not_merged": 1, "no_linked_issue": 2}
    assert funnel.counts["rejected:no_linked_issue"] == 2
    write_json(tmp_path / "funnel.json", funnel)
    assert Funnel.model_validate_json((tmp_path / "funnel.json").read_text()) == funnel


def _concurrent_writer(path: str, worker: int, rounds: int) -> None:
    """One process of the lost-update test: updates its own rows many times."""
    from repo2env.jsonl import update_tasks
    from repo2env.models import EnvSpec as Spec

    base = read_tasks(path)
    mine = [task for task in base if task.pull_number % 4 == worker]
    for round_number in range(rounds):
        update_tasks(path, [task.model_copy(update={"env_spec": Spec(rung=f"w{worker}-r{round_number}")})
                            for task in mine])
        # A row of its own, once: a rewrite from a stale read would lose it for good.
        number = 1000 + 100 * worker + round_number
        update_tasks(path, [base[0].model_copy(update={"pull_number": number, "instance_id": f"acme__widgets-{number}"})])


def test_concurrent_runs_on_one_tasks_file_lose_nothing(tmp_path):
    """Four processes (as four `build`/`validate` runs on one folder) each rewrite their own rows
    while the others do: every row ends with its own writer's last update, none lost or doubled."""
    import multiprocessing

    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, [make_task(pull_number=number, instance_id=f"acme__widgets-{number}") for number in range(1, 41)])
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_concurrent_writer, args=(str(path), worker, 25)) for worker in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
        assert process.exitcode == 0
    tasks = read_tasks(path)
    added = [1000 + 100 * worker + number for worker in range(4) for number in range(25)]
    assert sorted(task.pull_number for task in tasks) == list(range(1, 41)) + added
    assert all(task.env_spec and task.env_spec.rung == f"w{task.pull_number % 4}-r24" for task in tasks
               if task.pull_number <= 40)
    assert not list(tmp_path.glob(".tasks.jsonl.*[!k]")), "no temporary file left behind"


def test_drop_rows_keeps_the_others(tmp_path):
    from repo2env.jsonl import drop_rows

    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, [make_task(pull_number=number, instance_id=f"acme__widgets-{number}") for number in (1, 2, 3)])
    assert drop_rows(path, lambda row: row["pull_number"] != 2) == 1
    assert [task.pull_number for task in read_tasks(path)] == [1, 3]
    assert drop_rows(tmp_path / "absent.jsonl", lambda row: False) == 0
