"""SWE-bench-format rows in and out: the formats the field publishes, and a round trip through our
build and validation that reports how declared test lists differ from what we derive."""

from __future__ import annotations

import json

import pytest

from repo2env.errors import InputError, TaskFormatError
from repo2env.jsonl import read_tasks
from repo2env.publish.swebench import export_swebench, import_swebench, read_rows, task_from_swebench_row

ROW = {
    "instance_id": "acme__widgets-12", "repo": "acme/widgets", "base_commit": "0123456789abcdef0123456789abcdef01234567",
    "patch": "diff --git a/w.py b/w.py\n", "test_patch": "diff --git a/tests/t.py b/tests/t.py\n",
    "problem_statement": "Widgets break", "hints_text": "", "created_at": "2024-01-08T09:00:00Z", "version": 1.2,
    "environment_setup_commit": "0123456789abcdef0123456789abcdef01234567",
    "FAIL_TO_PASS": json.dumps(["tests/t.py::test_empty"]), "PASS_TO_PASS": "[]",
    "image_name": "swebench/sweb.eval.x86_64.acme__widgets-12", "meta": {"dataset": "extra fields are ignored"},
}


@pytest.mark.parametrize("shape", ["json", "jsonl", "instances", "parquet"])
def test_rows_in_every_published_shape(tmp_path, shape):
    path = tmp_path / f"rows.{'parquet' if shape == 'parquet' else 'json' if shape != 'jsonl' else 'jsonl'}"
    rows = [ROW, ROW | {"instance_id": "acme__widgets-13"}]
    if shape == "json":
        path.write_text(json.dumps(rows))
    elif shape == "instances":
        path.write_text(json.dumps({"instances": rows}))
    elif shape == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        from datasets import Dataset

        Dataset.from_list([{key: value for key, value in row.items() if key != "meta"} for row in rows]).to_parquet(str(path))
    loaded = read_rows(path)
    tasks = [task_from_swebench_row(row, where="row") for row in loaded]
    assert [task.pull_number for task in tasks] == [12, 13]
    assert tasks[0].FAIL_TO_PASS == tasks[0].declared_FAIL_TO_PASS == ["tests/t.py::test_empty"]
    assert tasks[0].version == "1.2" and tasks[0].environment_setup_commit is None


def test_bad_rows_are_one_line_errors(tmp_path):
    bad_id = tmp_path / "bad.jsonl"
    bad_id.write_text(json.dumps(ROW | {"instance_id": "no-number-here"}) + "\n")
    with pytest.raises(TaskFormatError, match="does not end with -<PR number>"):
        import_swebench(bad_id, tmp_path / "out", {})
    not_json = tmp_path / "x.json"
    not_json.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(InputError, match="not UTF-8"):
        read_rows(not_json)
    with pytest.raises(InputError, match="no such file"):
        read_rows(tmp_path / "absent.jsonl")


def test_import_groups_by_repository_and_records_clones(tmp_path, demo_repo):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(ROW) + "\n" + json.dumps(ROW | {"instance_id": "other__lib-3", "repo": "other/lib"}) + "\n")
    summary = import_swebench(rows, tmp_path / "out", {"acme/widgets": str(demo_repo.path)})
    assert summary.tasks == {"acme/widgets": 1, "other/lib": 1} and summary.missing_clones == ["other/lib"]
    assert (tmp_path / "out" / "acme__widgets" / "source.json").is_file()
    again = import_swebench(rows, tmp_path / "out", {})
    assert again.missing_clones == ["other/lib"], "a clone recorded earlier still counts"
    assert len(read_tasks(tmp_path / "out" / "acme__widgets" / "tasks.jsonl")) == 1, "re-import replaces, never doubles"


@pytest.mark.docker
def test_export_import_round_trip_validates_and_reports_declared_differences(validated, demo_repo, docker_client,
                                                                              tmp_path):
    """Export the validated demo as SWE-bench rows, corrupt one row's lists as a sloppy dataset
    would, import with the demo clone, build and validate: the difference is reported."""
    from conftest import quick_policy

    from repo2env.pipeline.stages import build_tasks_dir, validate_dir
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.build import BuildOptions
    from repo2env.validate.run import read_records

    folder, records = validated
    exported = tmp_path / "instances.jsonl"
    assert export_swebench([folder], exported) == sum(record.verdict == "accepted" for record in records.values())
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    row = next(row for row in rows if json.loads(row["PASS_TO_PASS"]))
    passing_before = json.loads(row["PASS_TO_PASS"])[0]
    row["FAIL_TO_PASS"] = json.dumps(json.loads(row["FAIL_TO_PASS"]) + [passing_before, "tests/test_gone.py::test_x"])
    single = tmp_path / "one.jsonl"
    single.write_text(json.dumps(row) + "\n")
    summary = import_swebench(single, tmp_path / "imported", {row["repo"]: str(demo_repo.path)})
    tasks_dir = summary.folders[row["repo"]]
    runtime = DockerBackend(docker_client)
    assert build_tasks_dir(tasks_dir, runtime=runtime, options=BuildOptions(jobs=1)).ok == 1
    validate_dir(tasks_dir, runtime, quick_policy())
    record = read_records(tasks_dir / "validation.jsonl")[0]
    assert record.declared_differences["f2p_passes_before"] == [passing_before]
    assert record.declared_differences["f2p_missing"] == ["tests/test_gone.py::test_x"]
    assert record.verdict == "accepted", "our derivation decides the lists, not the dataset's"


def test_the_evaluation_fields_are_read_from_the_grading_specification(monkeypatch):
    """The eval_script swebench runs is written from the task's grading specification (its hidden
    tests, their files, the ids and the runner's command), as the grader's and Harbor's are."""
    from repo2env.models import EnvSpec
    from repo2env.publish import swebench
    from repo2env.verify.spec import grading_spec

    test_patch = ("diff --git a/tests/t.py b/tests/t.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/t.py\n"
                  "@@ -0,0 +1,2 @@\n+def test_empty():\n+    assert True\n")
    task = task_from_swebench_row(ROW | {"test_patch": test_patch, "PASS_TO_PASS": ["tests/u.py::test_kept[a b]"]},
                                  where="row").model_copy(update={"env_spec": EnvSpec(
                                      status="env_ok", image="repo2env/task:acme__widgets-12", test_cmd="python -m pytest")})
    fields = swebench.harness_fields(task)
    spec = grading_spec(task)
    assert fields["eval_script"] == swebench.eval_script(spec) and fields["log_parser"] == "parse_log_pytest"
    lines = fields["eval_script"].splitlines()
    assert "python -m pytest -rA tests/t.py::test_empty 'tests/u.py::test_kept[a b]'" in lines
    assert lines.count("(git checkout HEAD -- tests/t.py 2>/dev/null || rm -f tests/t.py)") == 2
    assert "+def test_empty():" in lines, "the hidden tests' patch, applied inline"

    changed = spec.model_copy(update={"fail_to_pass": ["tests/t.py::test_other"], "pass_to_pass": []})
    monkeypatch.setattr(swebench, "grading_spec", lambda _task: changed)
    assert "python -m pytest -rA tests/t.py::test_other" in swebench.harness_fields(task)["eval_script"].splitlines()
    no_f2p = spec.model_copy(update={"fail_to_pass": []})
    monkeypatch.setattr(swebench, "grading_spec", lambda _task: no_f2p)
    assert swebench.harness_fields(task)["eval_script"] is None, "swebench grades nothing without FAIL_TO_PASS"
