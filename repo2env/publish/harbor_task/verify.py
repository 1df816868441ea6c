"""A Harbor task's verifier, run by tests/test.sh as root once the agent is done.

Harbor runs it in the verifier's own container (task.toml: ``environment_mode = "separate"``), a
pristine container of the task image, where the agent's diff arrives as the trial's artifact
(``agent_diff`` in task.json): the collection step wrote it in the agent's container. It grades
that diff the way ``repo2env grade`` does, with the same files: the grading script (``grade.sh``,
``run_tests.sh`` and ``restore.py``, copied from the package's ``verify/scripts``) and the run reader
(``lib/repo2env/...``, copied from the package, with a language runner's reading of its reports:
``reader`` in task.json). Steps:

1. /tests becomes root's alone (the hidden tests and the canaries never reach the agent's user),
   and every process of the agent's user is killed;
2. /testbed is reset to the snapshot commit (a no-op in a pristine container; in a container the
   agent used, if the task is run with a shared verifier, it undoes the agent's changes there), and
   the grading script applies the agent's diff as the agent's user: restore.py reverts what the
   filter's path rules protect (``protected_pattern``), applies the hidden tests, places the
   canaries; pytest runs the task's tests while a root collector reads the live outcome stream
   (a language runner's plan runs instead, and grade.sh returns its reports in its output once
   every process of the tests is dead; mocha's, jasmine's, jest's and vitest's reporters stream
   to the collector as well);
3. the run is read by the package's own reader (``repo2env.verify.reading``: exit statuses, JUnit,
   stream, summary line, canaries; ``read_script_run`` with the runner's reading for a language
   runner's reports), against the task's grading specification (``spec.json``), and scored;
   ``/logs/verifier/reward.txt`` gets the reward, ``reward.json`` its parts, ``grading.json`` the
   per-test outcomes and why it failed, if it did.

A missing or oversized diff scores 0 without running the tests. Standard library only: the
container's system Python may be 3.9.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
import types

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TESTS, "lib"))

from repo2env.outcomes import TestStatus  # noqa: E402 - the copies under lib/, after the path is set
from repo2env.verify.canaries import Canary, CanaryPlan  # noqa: E402
from repo2env.verify.reading import read_run, read_script_run  # noqa: E402
from repo2env.verify.reward import score  # noqa: E402
from repo2env.verify.tamper import COLLECTOR_SCRIPT  # noqa: E402

LOGS = os.environ.get("REPO2ENV_VERIFIER_LOGS", "/logs/verifier")
TESTBED = "/testbed"
OUTPUT_CAP_BYTES = 50_000_000
DIFF_CAP_BYTES = 50_000_000
COLLECTOR_GRACE_S = 15.0
GIT = ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
       "-c", "diff.external=", "-c", "core.pager=cat", "-c", "color.ui=false"]


def main() -> int:
    task = load("task.json")
    spec = load("spec.json")
    settings = load("grade.json")
    uid = str(task["agent_uid"])
    os.chmod(TESTS, 0o700)
    as_agent = ["setpriv", "--reuid=" + uid, "--regid=" + uid, "--init-groups"]
    kill_agent = as_agent + ["/bin/bash", "-c", "kill -9 -1 2>/dev/null; true"]
    subprocess.run(kill_agent, check=False)
    agent_diff, missing = read_agent_diff(task["agent_diff"])
    if missing:
        write_reward(unscored(spec, task, missing))
        return 0
    snapshot = task["snapshot"] or git_text("rev-list", "--max-parents=0", "HEAD").split()[-1]
    subprocess.run(GIT + ["reset", "-q", "--hard", snapshot], cwd=TESTBED, check=True)
    subprocess.run(GIT + ["clean", "-fdq"], cwd=TESTBED, check=True)
    subprocess.run(["chown", "-R", uid + ":" + uid, TESTBED], check=True)
    lay_out(settings, int(uid), agent_diff)

    collected = []
    collector = subprocess.Popen(["/bin/sh", "-c", COLLECTOR_SCRIPT, settings["fifo"]], stdout=subprocess.PIPE)
    reader = threading.Thread(target=lambda: collected.append(collector.stdout.read()), daemon=True)
    reader.start()
    scratch = os.path.join(TESTS, "grading-output")  # root's alone, like the grader's exec output
    with open(scratch, "wb") as output:
        grading = subprocess.Popen(as_agent + ["/bin/bash", os.path.join(settings["inputs"], "grade.sh"),
                                               os.path.join(settings["inputs"], "grade.json")],
                                   cwd=TESTBED, stdout=output, stderr=subprocess.STDOUT, env=agent_environment())
        try:
            exit_code, timed_out = grading.wait(timeout=float(spec["timeout_s"]) + 30), False
        except subprocess.TimeoutExpired:
            grading.kill()
            exit_code, timed_out = -9, True
    subprocess.run(kill_agent, check=False)
    reader.join(COLLECTOR_GRACE_S)
    if reader.is_alive():  # the collector never ended: its stream is unreadable, the grading fails closed
        collector.kill()
    stream_text = collected[0].decode("utf-8", "replace") if collected else None
    truncated = os.path.getsize(scratch) > OUTPUT_CAP_BYTES
    with open(scratch, "rb") as output:
        text = output.read(OUTPUT_CAP_BYTES).decode("utf-8", "surrogateescape")
    result = evaluate(spec, task, exit_code=exit_code, timed_out=timed_out, truncated=truncated, output=text,
                      stream_text=stream_text)
    write_reward(result)
    return 0


def evaluate(spec, task, *, exit_code, timed_out, truncated, output, stream_text):
    """The grading's result, read and scored as repo2env's grader does (see Grader.grade): ``spec``
    is the task's grading specification, ``task`` this folder's own draw (canaries, run ids)."""
    test_ids = list(dict.fromkeys(spec["fail_to_pass"] + spec["pass_to_pass"]))
    plan = CanaryPlan(tuple(Canary(**canary) for canary in task["canaries"]), {},
                      tuple(tuple(group) for group in task.get("exclusive", [])))
    if task.get("reader"):
        # A language runner's run (see Grader._grade): its reports, read by the runner's own reading
        # of the plan grade.sh ran, and the live stream its reporters sent the collector, if they do.
        reading = read_script_run(exit_code=exit_code, truncated=truncated, timed_out=timed_out, output=output,
                                  test_ids=test_ids, run_ids=task["run_ids"], plan=plan,
                                  timeout_s=float(spec["timeout_s"]), session_statuses=spec["runner"]["session_statuses"],
                                  read_reports=report_reader(task["reader"]), read_stream=stream_reader(task["reader"]),
                                  stream_text=stream_text)
    else:
        reading = read_run(exit_code=exit_code, truncated=truncated, timed_out=timed_out, output=output,
                           stream_text=stream_text, test_ids=test_ids, run_ids=task["run_ids"], plan=plan,
                           timeout_s=float(spec["timeout_s"]), session_statuses=spec["runner"]["session_statuses"])
    parts = score(reading.tests, spec["fail_to_pass"], spec["pass_to_pass"], task["mode"])
    return {"error": reading.error, "tampered": reading.tampered, "pytest_exit": reading.test_status,
            "reward": parts.reward, "f2p_rate": parts.f2p_rate, "p2p_rate": parts.p2p_rate, "resolved": parts.resolved,
            "tests": {test_id: str(status) for test_id, status in reading.tests.items()}}


def report_reader(reader):
    """``texts`` (report path -> its text, None when not written) -> each run id's outcome: the
    runner's reading function (``reader["function"]``, ``module:function`` under lib/) applied to
    the plan grade.sh ran (``reader["plan"]``: its command, its reports, the ids it ran)."""
    read = imported(reader["function"])
    run_plan = planned(reader)
    return lambda texts: read(run_plan, texts.get)


def stream_reader(reader):
    """``stream_text`` (what the collector read) -> each run id's outcome, by the runner's reading of
    its live stream (``reader["stream_function"]``); None when the plan streams nothing."""
    if not reader.get("stream_function") or not reader["plan"].get("outcome_stream"):
        return None
    read = imported(reader["stream_function"])
    run_plan = planned(reader)
    return lambda stream_text: read(run_plan, stream_text)


def imported(function):
    module, _, name = function.partition(":")
    return getattr(importlib.import_module(module), name)


def planned(reader):
    plan = dict(reader["plan"])
    plan["reports"] = tuple(types.SimpleNamespace(**report) for report in plan["reports"])
    plan["test_ids"] = tuple(plan["test_ids"])
    return types.SimpleNamespace(**plan)


def read_agent_diff(path):
    """(the agent's diff as bytes, None), or (None, why it cannot be graded)."""
    if not os.path.isfile(path):
        return None, "the agent's diff was not collected (no " + path + "): its changes cannot be graded"
    if os.path.getsize(path) > DIFF_CAP_BYTES:
        return None, "the agent's diff is larger than " + str(DIFF_CAP_BYTES) + " bytes"
    with open(path, "rb") as handle:
        return handle.read(), None


def unscored(spec, task, error):
    """The result of a grading that could not run: every test missing, reward 0."""
    test_ids = list(dict.fromkeys(spec["fail_to_pass"] + spec["pass_to_pass"]))
    tests = {test_id: TestStatus.MISSING for test_id in test_ids}
    parts = score(tests, spec["fail_to_pass"], spec["pass_to_pass"], task["mode"])
    return {"error": error, "tampered": False, "pytest_exit": None, "reward": parts.reward, "f2p_rate": parts.f2p_rate,
            "p2p_rate": parts.p2p_rate, "resolved": parts.resolved,
            "tests": {test_id: str(status) for test_id, status in tests.items()}}


def write_reward(result):
    """reward.json holds numbers only (Harbor reads every key as a reward); grading.json the rest."""
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(LOGS, "grading.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    parts = {"reward": result["reward"], "f2p_rate": result["f2p_rate"], "p2p_rate": result["p2p_rate"],
             "resolved": float(result["resolved"]), "tampered": float(result["tampered"])}
    with open(os.path.join(LOGS, "reward.json"), "w", encoding="utf-8") as handle:
        json.dump(parts, handle)
    with open(os.path.join(LOGS, "reward.txt"), "w", encoding="utf-8") as handle:
        handle.write(repr(float(result["reward"])) + "\n")


def lay_out(settings, uid, agent_diff):
    """The grading script's folders as the grader lays them out: the inputs root's and read-only to
    the agent's user, the private folder (hidden tests, canaries) the agent's, which restore.py
    empties before the tests run."""
    inputs, private = settings["inputs"], settings["private"]
    for folder in (inputs, private):
        shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(inputs, "plugin"), mode=0o755)
    os.chmod(inputs, 0o755)
    for name in ("grade.sh", "run_tests.sh", "restore.py", "grade.json"):
        shutil.copyfile(os.path.join(TESTS, name), os.path.join(inputs, name))
    plugin = settings["plugin"] + ".py"
    shutil.copyfile(os.path.join(TESTS, "plugin", plugin), os.path.join(inputs, "plugin", plugin))
    with open(os.path.join(inputs, "agent.diff"), "wb") as handle:
        handle.write(agent_diff)
    os.makedirs(private, mode=0o700)
    for name in ("test.diff", "canaries.json"):
        shutil.copyfile(os.path.join(TESTS, name), os.path.join(private, name))
        os.chown(os.path.join(private, name), uid, uid)
        os.chmod(os.path.join(private, name), 0o600)
    os.chown(private, uid, uid)
    os.chmod(private, 0o700)


def agent_environment():
    environment = dict(os.environ)
    environment.update(HOME="/home/agent", USER="agent", LOGNAME="agent")
    return environment


def git_text(*args):
    return subprocess.run(GIT + list(args), cwd=TESTBED, check=True, capture_output=True).stdout.decode()


def load(name):
    with open(os.path.join(TESTS, name), encoding="utf-8") as handle:
        return json.load(handle)


if __name__ == "__main__":
    sys.exit(main())
