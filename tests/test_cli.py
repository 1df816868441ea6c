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
    assert checks["backend docker"]["ok"] and report["backend"] == "docker"
    assert checks["base image repo2env/base:py3.11"]["ok"]
    assert "ca_bundle" not in checks and checks["CA bundle for builds"]["detail"]


@pytest.mark.timeout(3600)  # the demo run is the session fixture's, made for the first test that asks
def test_demo_run_with_a_relative_output_folder(demo_run, tmp_path):
    """What `make demo` runs: a relative --out, twice (the second run reuses and resumes)."""
    import shutil

    folder, first = demo_run
    assert first.returncode == 0, first.stderr
    assert "make train-demo" in first.stderr
    assert (folder / "generated" / "demo" / "dataset" / "manifest.json").is_file(), "the demo publishes"
    # The second run resumes in a copy: the first's folder is the session's, read by other tests.
    shutil.copytree(folder / "generated", tmp_path / "generated", symlinks=True)
    tasks = tmp_path / "generated" / "demo" / "tasks" / "tasks.jsonl"
    count = len(tasks.read_text().splitlines())
    assert count > 0
    second = repo2env("demo", "run", "--out", "generated/demo", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert len(tasks.read_text().splitlines()) == count


# --- bad input: one line, never a traceback, nothing lost -----------------------------------------


def run_cli(*args: str, env: dict | None = None, stdin: bytes | None = None, file_size_limit: int | None = None,
            cwd=None) -> subprocess.CompletedProcess:
    """``repo2env ARGS`` with bytes in and text out; ``file_size_limit`` makes every file the process
    writes stop at that many bytes (EFBIG), which is how a full disk looks to a writer."""
    import os

    def limit_files() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    result = subprocess.run([sys.executable, "-m", "repo2env", *args], input=stdin, capture_output=True, timeout=300,
                            env={**os.environ, **(env or {})}, cwd=cwd,
                            preexec_fn=limit_files if file_size_limit is not None else None)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(errors="replace"),
                                       result.stderr.decode(errors="replace"))


def mine_demo(demo_repo, out, **kwargs) -> subprocess.CompletedProcess:
    return run_cli("mine", "--repo", str(demo_repo.path), "--issues", str(demo_repo.issues_path), "--out", str(out),
                   **kwargs)


class read_only:
    """A folder nobody can write into, root included (root ignores mode bits: the immutable flag)."""

    def __init__(self, path):
        import os

        self.path, self.root = path, os.geteuid() == 0

    def __enter__(self):
        if self.root:
            flagged = subprocess.run(["chattr", "+i", str(self.path)], capture_output=True)
            if flagged.returncode != 0:
                pytest.skip(f"cannot make a folder read-only for root here: {flagged.stderr.decode().strip()}")
        else:
            self.path.chmod(0o555)
        return self.path

    def __exit__(self, *exc_info):
        if self.root:
            subprocess.run(["chattr", "-i", str(self.path)], check=True)
        else:
            self.path.chmod(0o755)


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", b'{"instance_id": "caf\xe9"}\n'],
                         ids=["binary", "latin-1"])
def test_a_tasks_file_that_is_not_utf8_is_a_one_line_error(tmp_path, content):
    (tmp_path / "tasks.jsonl").write_bytes(content)
    for command in (["run", "--task", "a__b-1", "--from", str(tmp_path), "--", "true"],
                    ["validate", "--from", str(tmp_path)]):
        assert_one_line_error(run_cli(*command), "not UTF-8 text")
    assert (tmp_path / "tasks.jsonl").read_bytes() == content, "the input is left as it was"


def test_a_prediction_whose_patch_is_not_a_string_is_a_one_line_error(tmp_path):
    predictions = tmp_path / "preds.jsonl"
    text = json.dumps({"instance_id": "a__b-1", "model_name_or_path": "m", "model_patch": {"diff": "x"}}) + "\n"
    predictions.write_text(text)
    assert_one_line_error(run_cli("grade", "--predictions", str(predictions), "--from", str(tmp_path)),
                          "model_patch must be a string")
    assert predictions.read_text() == text


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-5", "soon"])
def test_timeouts_must_be_finite_positive_seconds(value):
    for command in (["grade", "--task", "a__b-1", "--patch", "p.diff"], ["run", "--task", "a__b-1"]):
        assert_one_line_error(run_cli(*command, "--timeout", value), "--timeout", code=2)


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_grading_width_is_a_one_line_error(value, tmp_path):
    assert_one_line_error(run_cli("validate", str(tmp_path), "--grading-jobs", value), "--grading-jobs")


@pytest.mark.parametrize("host", ["tcp://[bad", "tcp://localhost:notaport", ":::"])
def test_a_malformed_docker_host_is_a_one_line_error(host):
    assert_one_line_error(run_cli("images", "ls", env={"DOCKER_HOST": host}), "DOCKER_HOST")


def test_mine_into_a_read_only_folder_is_a_one_line_error(demo_repo, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with read_only(out):
        assert_one_line_error(mine_demo(demo_repo, out), str(out))
    assert list(out.iterdir()) == []


def test_grade_with_a_missing_predictions_file_is_a_one_line_error(tmp_path):
    assert_one_line_error(run_cli("grade", "--predictions", str(tmp_path / "nothing.jsonl"), "--from", str(tmp_path)),
                          "no predictions file")


def test_mine_on_a_full_disk_keeps_whole_rows_and_a_rerun_completes(demo_repo, tmp_path):
    clean = tmp_path / "clean"
    assert mine_demo(demo_repo, clean).returncode == 0
    expected = (clean / "tasks.jsonl").read_text().splitlines()
    full = tmp_path / "full"
    limit = len("".join(line + "\n" for line in expected[:2])) + 100  # two rows and a bit of the third fit
    failed = mine_demo(demo_repo, full, file_size_limit=limit)
    assert_one_line_error(failed, "File too large")
    kept = (full / "tasks.jsonl").read_bytes()
    assert kept.endswith(b"\n") and kept.decode().splitlines() == expected[:2], "no torn half row is left"
    resumed = mine_demo(demo_repo, full)
    assert resumed.returncode == 0, resumed.stderr
    assert (full / "tasks.jsonl").read_text().splitlines() == expected


def test_mine_cuts_a_torn_last_line_on_resume(demo_repo, tmp_path):
    out = tmp_path / "out"
    assert mine_demo(demo_repo, out).returncode == 0
    tasks = out / "tasks.jsonl"
    rows = tasks.read_text().splitlines()
    # What a kill -9 in the middle of a write leaves: the last row cut short, no newline.
    tasks.write_text("".join(row + "\n" for row in rows[:-1]) + rows[-1][: len(rows[-1]) // 2])
    resumed = mine_demo(demo_repo, out)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert len([line for line in resumed.stderr.splitlines() if line.startswith("warning: cut a torn last line")]) == 1
    assert tasks.read_text().splitlines() == rows
