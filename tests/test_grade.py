"""Grading the demo tasks on real containers: rewards, partial credit, modes, logs, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from repo2env.jsonl import write_jsonl
from repo2env.verify.grader import rescore

pytestmark = pytest.mark.docker


def test_gold_null_and_partial_fixes(graded_demo, grader, demo_repo):
    for pull in demo_repo.pulls:
        if not pull.partial_fixes:
            continue
        task = graded_demo[pull.number]
        gold = grader.grade(task, task.patch)
        assert (gold.reward, gold.resolved, gold.error) == (1.0, True, None)
        empty = grader.grade(task, "")
        assert (empty.reward, empty.f2p_rate, empty.p2p_rate) == (0.0, 0.0, 1.0)
        for partial in pull.partial_fixes:
            result = grader.grade(task, partial.patch)
            expected = len(partial.passes) / len(task.FAIL_TO_PASS)
            assert result.reward == pytest.approx(expected, abs=1e-6), partial.name
            assert {test for test, status in result.tests.items() if status == "passed"} >= set(partial.passes)


def test_stop_early_grades_fail_to_pass_first_and_otherwise_changes_nothing(graded_demo, grader, demo_repo):
    pull = next(p for p in demo_repo.pulls if p.partial_fixes and p.pass_to_pass)
    task = graded_demo[pull.number]
    empty = grader.grade(task, "", stop_early=True, run_name="early-empty")
    assert empty.stopped_early and empty.reward == 0.0 and empty.error is None and not empty.tampered
    assert set(empty.tests) == set(task.FAIL_TO_PASS), "PASS_TO_PASS does not run once F2P decided the reward"
    # The early grading is a grading like any other: its own canaries, cross-checked.
    canaries = json.loads((Path(empty.log_dir) / "canaries.json").read_text())
    assert canaries["must_fail"] and canaries["must_pass"]
    assert Path(empty.log_dir).name == "early-empty-f2p"
    assert json.loads((Path(empty.log_dir) / "result.json").read_text())["stopped_early"] is True
    for patch in (task.patch, pull.partial_fixes[0].patch):
        early = grader.grade(task, patch, stop_early=True)
        full = grader.grade(task, patch)
        assert not early.stopped_early, "an F2P test passed: the patch is graded in full"
        assert (early.reward, early.resolved, early.tests) == (full.reward, full.resolved, full.tests)
    assert grader.grade(task, pull.partial_fixes[0].patch, mode="binary", stop_early=True).stopped_early


def test_modes_and_rescoring_from_logs(graded_demo, grader, demo_repo):
    pull = next(p for p in demo_repo.pulls if p.partial_fixes)
    task = graded_demo[pull.number]
    partial = pull.partial_fixes[0]
    graded = grader.grade(task, partial.patch, mode="graded")
    run_dir = Path(graded.log_dir)
    for name in ("submitted.diff", "applied.diff", "test_output.txt", "result.json"):
        assert (run_dir / name).is_file(), name
    assert 0 < graded.reward < 1
    binary = rescore(run_dir, task, "binary")
    assert binary.reward == 0.0 and binary.mode == "binary"
    f2p = rescore(run_dir, task, "f2p")
    assert f2p.reward == graded.f2p_rate
    again = rescore(run_dir, task, "graded")
    assert again.reward == graded.reward and again.tests == graded.tests


def test_unappliable_patch_scores_zero_with_the_reason(graded_demo, grader):
    task = next(iter(graded_demo.values()))
    bogus = ("diff --git a/src/textkit/slug.py b/src/textkit/slug.py\n--- a/src/textkit/slug.py\n"
             "+++ b/src/textkit/slug.py\n@@ -1,3 +1,3 @@\n-this line is not there\n+nor this\n context\n")
    result = grader.grade(task, bogus)
    assert result.reward == 0.0 and not result.patch_applied
    assert "does not apply" in result.error


def test_test_changes_in_a_patch_are_dropped_and_reported(graded_demo, grader):
    task = next(iter(graded_demo.values()))
    result = grader.grade(task, task.patch + task.test_patch)
    assert result.reward == 1.0
    assert result.filtered_paths and all(path.startswith("tests/") for path in result.filtered_paths)


def test_grade_cli_with_a_patch_and_with_predictions(graded_demo, built_demo, tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    tasks = list(graded_demo.values())
    write_jsonl(folder / "tasks.jsonl", tasks)
    (folder / "source.json").write_text((built_demo[0] / "source.json").read_text())
    patch_file = tmp_path / "gold.diff"
    patch_file.write_text(tasks[0].patch)
    one = subprocess.run([sys.executable, "-m", "repo2env", "grade", "--task", tasks[0].instance_id, "--patch",
                          str(patch_file), "--from", str(folder), "--json"], capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["reward"] == 1.0
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({"instance_id": task.instance_id, "model_name_or_path": "m",
                                               "model_patch": patch}) + "\n"
                                   for task, patch in ((tasks[0], tasks[0].patch), (tasks[1], ""))))
    many = subprocess.run([sys.executable, "-m", "repo2env", "grade", "--predictions", str(predictions), "--from",
                           str(folder), "--json", "--mode", "binary"], capture_output=True, text=True, timeout=300)
    assert many.returncode == 0, many.stderr
    assert [row["reward"] for row in json.loads(many.stdout)] == [1.0, 0.0]
    assert len((folder / "grades.jsonl").read_text().splitlines()) == 3
    missing = subprocess.run([sys.executable, "-m", "repo2env", "grade", "--task", tasks[0].instance_id, "--patch",
                              str(tmp_path / "nope.diff"), "--from", str(folder)], capture_output=True, text=True)
    assert missing.returncode == 1 and missing.stderr.startswith("error: no patch file")


# --- bytes end to end, capped logs, unwritable folders ----------------------------------------------

LATIN1_FILE = (b"diff --git a/notes/caf\xe9.txt b/notes/caf\xe9.txt\nnew file mode 100644\n--- /dev/null\n"
               b"+++ b/notes/caf\xe9.txt\n@@ -0,0 +1 @@\n+cr\xe8me br\xfbl\xe9e\n")


def grading_folder(graded_demo, built_demo, tmp_path, number: int = 2) -> tuple[Path, object]:
    folder = tmp_path / "tasks"
    folder.mkdir()
    task = graded_demo[number]
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text((built_demo[0] / "source.json").read_text())
    return folder, task


def test_a_patch_that_is_not_utf8_is_graded_byte_for_byte(graded_demo, built_demo, tmp_path):
    """Patches are bytes: a Latin-1 line next to the gold fix, from a file and from stdin."""
    folder, task = grading_folder(graded_demo, built_demo, tmp_path)
    patch = task.patch.encode() + LATIN1_FILE
    (tmp_path / "latin1.diff").write_bytes(patch)
    for source, stdin in ((str(tmp_path / "latin1.diff"), None), ("-", patch)):
        result = subprocess.run([sys.executable, "-m", "repo2env", "grade", "--task", task.instance_id, "--patch",
                                 source, "--from", str(folder), "--json"], input=stdin, capture_output=True, timeout=300)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        graded = json.loads(result.stdout)
        assert graded["reward"] == 1.0 and graded["error"] is None, "the whole patch applied, the fix with it"
        logs = Path(graded["log_dir"])
        assert (logs / "submitted.diff").read_bytes() == patch
        assert (logs / "applied.diff").read_bytes() == patch
    assert (tmp_path / "latin1.diff").read_bytes() == patch


def test_every_log_of_a_grading_is_capped(graded_demo, grader):
    from repo2env.verify.logs import LOG_CAP_BYTES

    task = graded_demo[2]
    lines = 60_000  # about 3.6 MB: the logs would keep it twice
    big = (f"diff --git a/notes/big.txt b/notes/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes/big.txt\n"
           f"@@ -0,0 +1,{lines} @@\n" + "".join(f"+line {i:08d} of a big generated file\n" for i in range(lines)))
    result = grader.grade(task, task.patch + big)
    assert result.reward == 1.0, result.error
    logs = Path(result.log_dir)
    for name in ("submitted.diff", "applied.diff", "test_output.txt", "result.json"):
        size = (logs / name).stat().st_size
        assert size <= LOG_CAP_BYTES + 200, (name, size)
    assert (logs / "submitted.diff").read_text().endswith(f"bytes, the first {LOG_CAP_BYTES} kept]\n")


def test_grading_into_a_read_only_folder_is_a_one_line_error(graded_demo, built_demo, tmp_path):
    from test_cli import assert_one_line_error, read_only, run_cli

    folder, task = grading_folder(graded_demo, built_demo, tmp_path)
    (tmp_path / "gold.diff").write_text(task.patch)
    locked = tmp_path / "locked"
    locked.mkdir()
    grade = ("grade", "--task", task.instance_id, "--patch", str(tmp_path / "gold.diff"), "--from", str(folder))
    with read_only(locked):
        assert_one_line_error(run_cli(*grade, "--out", str(locked / "grades.jsonl")), str(locked))
    with read_only(folder):
        assert_one_line_error(run_cli(*grade), str(folder))
    assert list(locked.iterdir()) == []


def test_a_warm_spare_past_its_idle_lifetime_is_replaced(graded_demo, tmp_path, docker_client):
    import time

    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.sandbox import SandboxLimits
    from repo2env.verify.grader import Grader

    task = graded_demo[2]
    limits = SandboxLimits(idle_timeout_s=1, exec_timeout_s=180, output_cap_bytes=50_000_000)
    with Grader(DockerBackend(docker_client), tmp_path, timeout_s=120, limits=limits, keep_warm=True) as grader:
        assert grader.grade(task, task.patch).reward == 1.0
        spare = next(iter(grader._spares.values())).result()
        deadline = time.monotonic() + 30
        while spare.alive and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not spare.alive, "the idle spare stopped itself"
        assert grader.grade(task, task.patch).reward == 1.0, "the next grading starts a fresh sandbox instead"
