"""The command line as a user meets it: real processes, one-line errors, honest exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

STAGES = ("mine", "build", "run", "grade", "validate", "publish", "pipeline")


def repo2env(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repo2env", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def assert_one_line_error(result: subprocess.CompletedProcess, fragment: str, code: int = 1) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    assert fragment in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("error:")]) == 1


def test_help_lists_the_stage_commands_in_pipeline_order():
    result = repo2env("--help")
    assert result.returncode == 0
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert [name for name in listed if name in STAGES] == list(STAGES)
    assert {"demo", "doctor", "runtime"} <= set(listed)


@pytest.mark.parametrize("stage", ["pipeline"])
def test_stages_not_built_yet_exit_2_and_say_so(stage):
    result = repo2env(stage, "--anything")
    assert_one_line_error(result, "not implemented yet", code=2)


def test_mine_with_a_missing_path_is_a_one_line_error(tmp_path):
    assert_one_line_error(repo2env("mine", "--repo", str(tmp_path / "nonexistent")), "no such path")
    assert not (tmp_path / "generated").exists()


def test_mine_with_a_nonsense_repo_spec(tmp_path):
    assert_one_line_error(repo2env("mine", "--repo", "not a repo", cwd=tmp_path), "neither an existing path")


def test_mine_with_a_directory_that_is_not_a_repository(tmp_path):
    assert_one_line_error(repo2env("mine", "--repo", str(tmp_path)), "is not a git repository")


def test_mine_with_a_broken_issues_file(demo_repo, tmp_path):
    broken = tmp_path / "issues.json"
    broken.write_text("{oops")
    result = repo2env("mine", "--repo", str(demo_repo.path), "--issues", str(broken), "--out", str(tmp_path / "out"))
    assert_one_line_error(result, "is not valid JSON")
    assert not (tmp_path / "out").exists(), "nothing is written when the input is bad"


def test_demo_init_then_mine_through_the_cli(tmp_path):
    created = repo2env("demo", "init", str(tmp_path / "demo"))
    assert created.returncode == 0, created.stderr
    again = repo2env("demo", "init", str(tmp_path / "demo"))
    assert_one_line_error(again, "already exists")
    out = tmp_path / "tasks"
    mined = repo2env("mine", "--repo", str(tmp_path / "demo" / "repo"), "--issues", str(tmp_path / "demo" / "issues.json"),
                     "--out", str(out), "--json")
    assert mined.returncode == 0, mined.stderr
    funnel = json.loads(mined.stdout)
    assert funnel["repo"] == "repo2env-demo/textkit"
    assert funnel["counts"]["kept"] == len((out / "tasks.jsonl").read_text().splitlines()) > 0
    assert "rejected: no_linked_issue" in mined.stderr


@pytest.mark.docker
def test_doctor_reports_engine_base_image_and_package_access(docker_client):
    result = repo2env("doctor", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    checks = {check["name"]: check for check in report["checks"]}
    assert report["ready"] is True
    assert checks["docker engine"]["ok"]
    assert checks["base image repo2env/base:py3.11"]["ok"]
    assert "ca_bundle" not in checks and checks["CA bundle for builds"]["detail"]


def test_demo_run_with_a_relative_output_folder(tmp_path):
    """What `make demo` runs: a relative --out, twice (the second run reuses and resumes)."""
    first = repo2env("demo", "run", "--out", "generated/demo", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "not built yet" in first.stderr
    assert (tmp_path / "generated" / "demo" / "dataset" / "manifest.json").is_file(), "the demo publishes"
    tasks = tmp_path / "generated" / "demo" / "tasks" / "tasks.jsonl"
    count = len(tasks.read_text().splitlines())
    assert count > 0
    second = repo2env("demo", "run", "--out", "generated/demo", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert len(tasks.read_text().splitlines()) == count
