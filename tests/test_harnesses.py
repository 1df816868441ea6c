"""SWE-bench-style harnesses on our exports, each the real client from PyPI in its own virtualenv
(tests/client_venvs.py): mini-swe-agent's `mini-extra swebench` runs on the published demo dataset
with no glue (the rows name the image; root's git works in /testbed), driven by a scripted
OpenAI-compatible model server (tests/scripted_llm.py); its preds.json is graded by `repo2env grade
--predictions` and by swebench 5's own harness (`swebench.harness.run_evaluation`) on our `export
swebench` rows, and both agree: the fix resolves, changing nothing does not."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_venvs import client_venv  # noqa: E402 - tests/ helpers
from scripted_llm import ScriptedCall, ScriptedLLM, patch_script  # noqa: E402

MINI_SWE_AGENT_REQUIREMENT = "mini-swe-agent==2.4.6"
SWEBENCH_REQUIREMENT = "swebench==5.0.2"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def submission(before: list[ScriptedCall]) -> list[ScriptedCall]:
    """``before``, then mini-swe-agent's submission as its swebench prompt asks for it: the change as
    a patch file, then the exact submit command that prints it."""
    return [*before, ScriptedCall("bash", {"command": "git add -A && git diff --cached > /tmp/patch.txt"}),
            ScriptedCall("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat /tmp/patch.txt"})]


@pytest.fixture(scope="session")
def mini_swe_agent():
    return client_venv("mini-swe-agent", [MINI_SWE_AGENT_REQUIREMENT]) / "mini-extra"


@pytest.fixture(scope="session")
def swebench_python():
    return client_venv("swebench", [SWEBENCH_REQUIREMENT]) / "python"


# swebench's report lists every image on the engine and inspects each: an image another test removes
# in between fails it with ImageNotFound (seen in a parallel CI run), so it runs by itself.
@pytest.mark.alone
def test_mini_swe_agent_runs_the_published_dataset_and_both_graders_score_its_predictions(
        published_demo, validated, mini_swe_agent, swebench_python, tmp_path):
    dataset, rows = published_demo
    fixed, untouched = list(rows)[:2]
    out = tmp_path / "mini"
    environment = {**os.environ, "OPENAI_API_KEY": "sk-scripted", "MSWEA_COST_TRACKING": "ignore_errors",
                   "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mini-config"), "MSWEA_SILENT_STARTUP": "1",
                   "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                   # datasets caches a local folder under its name alone (see dataset_rows.load_published):
                   # another "demo-envs" loaded on this machine before would come back instead.
                   "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets")}
    # One run per task, each with its own model script, into the same output folder (preds.json
    # gathers both, as mini-swe-agent resumes a run).
    for instance_id, script in ((fixed, submission(patch_script(rows[fixed]["patch"]))),
                                (untouched, submission([ScriptedCall("bash", {"command": "git status --short"})]))):
        with ScriptedLLM({"script": script}) as llm:
            ran = subprocess.run([str(mini_swe_agent), "swebench", "--subset", str(dataset), "--split", "train",
                                  "--filter", f"^{re.escape(instance_id)}$", "-w", "1", "-o", str(out),
                                  "-m", "openai/scripted", "-c", "swebench.yaml",
                                  "-c", f"model.model_kwargs.api_base={llm.url}", "--environment-class", "docker"],
                                 capture_output=True, text=True, timeout=1800, env=environment, cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    predictions = json.loads((out / "preds.json").read_text())
    assert set(predictions) == {fixed, untouched}, (out / "minisweagent.log").read_text()[-3000:]
    assert predictions[fixed]["model_patch"].startswith("diff --git"), "root's git worked in /testbed"
    assert predictions[untouched]["model_patch"] == ""

    # repo2env's grader reads preds.json (an object keyed by instance id) as it is.
    folder, _ = validated
    graded = subprocess.run([sys.executable, "-m", "repo2env", "grade", "--predictions", str(out / "preds.json"),
                             "--from", str(folder), "--out", str(tmp_path / "grades.jsonl"), "--json"],
                            capture_output=True, text=True, timeout=1800)
    assert graded.returncode == 0, graded.stderr
    rewards = {result["instance_id"]: result["reward"] for result in json.loads(graded.stdout)}
    assert rewards == {fixed: 1.0, untouched: 0.0}

    # swebench 5's own loader and harness read our `export swebench` rows and the same predictions.
    rows_path = tmp_path / "instances.jsonl"
    exported = subprocess.run([sys.executable, "-m", "repo2env", "export", "swebench", str(rows_path), "--from",
                               str(folder)], capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stderr
    loaded = subprocess.run([str(swebench_python), "-c", (
        "import json, sys; from swebench.harness.utils import load_swebench_dataset, make_test_spec; "
        "rows = load_swebench_dataset(sys.argv[1], 'test'); "
        "print(json.dumps({row['instance_id']: make_test_spec(row).image for row in rows}))"), str(rows_path)],
        capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)[fixed] == rows[fixed]["image"]
    reports = tmp_path / "swebench"
    evaluated = subprocess.run([str(swebench_python), "-m", "swebench.harness.run_evaluation", "--dataset_name",
                                str(rows_path), "--predictions_path", str(out / "preds.json"), "--instance_ids", fixed,
                                untouched, "--run_id", "repo2env", "--max_workers", "1", "--report_dir", str(reports)],
                               capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stdout[-3000:] + evaluated.stderr[-3000:]
    [report] = reports.glob("*.repo2env.json")
    summary = json.loads(report.read_text())
    assert summary["resolved_ids"] == [fixed] and untouched in summary["empty_patch_ids"] + summary["unresolved_ids"], \
        summary
