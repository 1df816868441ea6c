"""The data model: validation with field-naming errors, JSONL round trips, SWE-bench rows."""

from __future__ import annotations

import hashlib
import json

import pytest

from repo2env.dataset_rows import dataset_row, task_from_row
from repo2env.errors import TaskFormatError
from repo2env.jsonl import append_jsonl, read_task_ids, read_tasks, write_json, write_jsonl
from repo2env.models import (
    DEFAULT_TEST_CMD,
    SCHEMA_VERSION,
    EnvSpec,
    Funnel,
    GradeResult,
    RolloutResult,
    Task,
    ValidationReport,
)
from repo2env.publish.swebench import task_from_swebench_row
from repo2env.validate.run import read_records

SHA = "0123456789abcdef0123456789abcdef01234567"
SWEBENCH_FIELDS = {
    "repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
    "created_at", "version", "environment_setup_commit", "FAIL_TO_PASS", "PASS_TO_PASS", "image_name", "docker_image",
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
    # SWE-bench's on-disk form reads back into a Task (as `repo2env import swebench` reads it).
    back = task_from_swebench_row(as_strings, where="row")
    assert back.FAIL_TO_PASS == task.FAIL_TO_PASS and back.PASS_TO_PASS == task.PASS_TO_PASS
    # The image a harness runs it in, under both names harnesses read: none before the build, the
    # local tag after it, the pinned reference once pushed.
    assert row["image_name"] is None and row["docker_image"] is None
    built = task.model_copy(update={"env_spec": task.env_spec.model_copy(update={"image": "repo2env/task:x"})})
    assert built.to_swebench_row()["image_name"] == built.to_swebench_row()["docker_image"] == "repo2env/task:x"
    pushed = built.model_copy(update={"env_spec": built.env_spec.model_copy(update={"pushed_image": "r.io/task@sha256:1"})})
    assert pushed.to_swebench_row()["image_name"] == pushed.to_swebench_row()["docker_image"] == "r.io/task@sha256:1"


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


def test_the_prs_added_dependencies_decide_which_env_image_a_task_shares():
    node = EnvSpec(python="3.11", base="node18", node="18", package_manager="npm", install=["npm ci"])
    left_pad = node.model_copy(update={"added_dependencies": {"left-pad": "1.3.0"}})
    newer = node.model_copy(update={"added_dependencies": {"left-pad": "^1.3.1"}})
    assert len({node.spec_hash(), left_pad.spec_hash(), newer.spec_hash()}) == 3
    # Without any, the hash (and the env image tag) is what it was before the field existed.
    keyed = {"python": "3.11", "system_packages": [], "install": ["npm ci"], "date_pin": None,
             "deps_fingerprint": None, "base": "node18", "node": "18", "package_manager": "npm"}
    assert node.spec_hash() == hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]


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


def test_one_validation_report_for_the_task_and_the_jsonl_line(tmp_path):
    grade = GradeResult(instance_id="acme__widgets-12", reward=0.5, tests={"tests/t.py::test_empty": "passed", "tests/t.py::test_full": "failed"})
    rollouts = [RolloutResult(kind="gold", name="gold-0", reward=1.0, resolved=True),
                RolloutResult(kind="partial", name="partial-1", reward=0.5, grade=grade),
                RolloutResult(kind="policy", name="policy-0", reward=1.0), RolloutResult(kind="policy", reward=0.0),
                RolloutResult(kind="policy", reward=0.0), RolloutResult(kind="null", name="null-0", reward=0.0)]
    report = ValidationReport(instance_id="acme__widgets-12", repo="acme/widgets", verdict="accepted",
                              policy="default", FAIL_TO_PASS=["tests/t.py::test_empty"], rollouts=rollouts)
    assert report.rewards == {"gold": [1.0], "partial": [0.5], "policy": [1.0, 0.0, 0.0], "null": [0.0]}
    assert report.policy_pass_rate == pytest.approx(1 / 3)
    task = make_task(validation=report)
    assert Task.from_json_line(task.to_json_line()).validation.rollouts[1].grade == grade, "the task keeps grades"
    write_jsonl(tmp_path / "validation.jsonl", [report.record()])
    [line] = read_records(tmp_path / "validation.jsonl")
    assert [rollout.grade for rollout in line.rollouts] == [None] * 6, "the jsonl line leaves the grades out"
    assert line.rollouts[1].name == "partial-1" and line.rewards == report.rewards
    assert line.model_dump(exclude={"rollouts"}) == report.model_dump(exclude={"rollouts"})
    assert ValidationReport().verdict == "pending" and make_task().test_command() == EnvSpec().test_cmd


def test_validation_lines_and_published_rows_written_before_the_merge_still_read(tmp_path):
    # A validation.jsonl line as written before ValidationRecord and ValidationReport were one model.
    old = {"instance_id": "acme__widgets-12", "repo": "acme/widgets", "verdict": "rejected",
           "reasons": ["stub_passes"], "policy": "default", "FAIL_TO_PASS": ["tests/t.py::test_empty"],
           "PASS_TO_PASS": [], "flaky_tests": {}, "rewards": {"gold": [1.0, 1.0], "null": [0.0], "policy": [1.0, 0.0]},
           "reward_mean": 0.6, "reward_spread": 0.49, "distinct_rewards": 2, "partial_credit": False,
           "leak_score": 0.1, "leak_flagged": False, "declared_differences": {}, "policy_pass_rate": 0.5,
           "wall_s": 3.5, "tests_s": 2.0, "error": None}
    (tmp_path / "validation.jsonl").write_text(json.dumps(old) + "\n")
    [record] = read_records(tmp_path / "validation.jsonl")
    assert record.rewards == old["rewards"] and record.policy_pass_rate == 0.5
    assert (record.verdict, record.reasons, record.wall_s) == ("rejected", ["stub_passes"], 3.5)
    # A published row's `validation` column (a summary with rewards by kind) reads back the same way.
    row = dataset_row(make_task(validation=record))
    column = json.loads(row["validation"])
    assert column["rewards"] == old["rewards"] and "rollouts" not in column and "wall_s" not in column
    assert task_from_row(row).validation.rewards == old["rewards"]
    assert row["policy_pass_rate"] == 0.5 and row["reward_gold"] == 1.0 and row["reward_null"] == 0.0
    row["validation"] = json.dumps({"verdict": "accepted", "added_later": 1})
    assert task_from_row(row).validation.verdict == "accepted", "keys from a newer writer are ignored"


def test_one_default_test_command():
    from repo2env.languages.python.spec import DEFAULT_TEST_CMD as INFERRED

    assert EnvSpec().test_cmd == DEFAULT_TEST_CMD == "python -m pytest -rA"
    assert INFERRED.startswith(DEFAULT_TEST_CMD + " ")
    assert make_task(env_spec=None).test_command() == DEFAULT_TEST_CMD
    assert make_task(env_spec=EnvSpec(test_cmd="python -m pytest -x")).test_command() == "python -m pytest -x"


def test_the_episode_and_tool_defaults_are_written_once():
    """The harness budget, the agent tools' limits and the harness training jobs are read from
    repo2env.defaults by every place that offers them (schema, command line, composition, tools)."""
    import inspect

    from repo2env import defaults
    from repo2env.cli.harness import harness_run
    from repo2env.cli.train import train
    from repo2env.envs import RepoEnvConfig
    from repo2env.envs.tools import AgentTools
    from repo2env.models import EpisodeBudget
    from repo2env.pipeline import compose, harness_runs

    budget = EpisodeBudget()
    assert (budget.max_turns, budget.max_wall_s) == (defaults.EPISODE_MAX_TURNS, defaults.EPISODE_MAX_WALL_S)
    options = {option.name: option.default for option in harness_run.params}
    assert (options["max_turns"], options["max_wall"]) == (defaults.EPISODE_MAX_TURNS, defaults.EPISODE_MAX_WALL_S)
    assert compose.harness_options().budget == budget
    assert {option.name: option.default for option in train.params}["harness_jobs"] == defaults.HARNESS_TRAIN_JOBS
    for function in (compose.train_on_harness, harness_runs.harness_rollouts):
        assert inspect.signature(function).parameters["jobs"].default == defaults.HARNESS_TRAIN_JOBS
    tools = inspect.signature(AgentTools).parameters
    config = RepoEnvConfig()
    for name, value in (("command_timeout_s", defaults.TOOL_COMMAND_TIMEOUT_S),
                        ("test_timeout_s", defaults.TOOL_TEST_TIMEOUT_S),
                        ("output_cap_chars", defaults.TOOL_OUTPUT_CAP_CHARS)):
        assert tools[name].default == getattr(config, name) == value, name
