"""Grading a JavaScript task without Docker: the spec's runner from the profile, the grading script's
settings, the host filter's refusals, and the reading of a run (forged, incomplete, cut short).
The Docker side (the fmtkit demo's tasks graded, and the attacks on them) is tests/test_hacks_js.py."""

from __future__ import annotations

import base64
import json
import random
from functools import partial

from repo2env.languages.javascript.runners import plan_run
from repo2env.models import EnvSpec, Task, TestStatus
from repo2env.verify.filtering import filter_patch, protected_path_pattern
from repo2env.verify.reading import read_script_run
from repo2env.verify.spec import GradingLayout, grading_spec
from repo2env.verify.trailer import TRAILER

F2P = ["test/pad.test.js::pad > pads to the width", "test/pad.test.js::pad > keeps long text"]
P2P = ["test/pad.test.js::pad > returns strings"]
TEST_PATCH = """\
diff --git a/test/pad.test.js b/test/pad.test.js
--- a/test/pad.test.js
+++ b/test/pad.test.js
@@ -1,3 +1,5 @@
 describe("pad", () => {
   it("returns strings", () => {});
+  it("pads to the width", () => { assert.strictEqual(pad("a", 3), "  a"); });
+  it("keeps long text", () => { assert.strictEqual(pad("abcd", 3), "abcd"); });
 });
"""

GOLD = """\
diff --git a/lib/pad.js b/lib/pad.js
--- a/lib/pad.js
+++ b/lib/pad.js
@@ -1 +1 @@
-module.exports = (text) => text;
+module.exports = (text, width) => text.padStart(width);
"""


def _task(runner: str = "mocha") -> Task:
    return Task(instance_id="acme__padkit-1", repo="acme/padkit", language="javascript", pull_number=1,
                base_commit="0" * 40, patch=GOLD, test_patch=TEST_PATCH,
                problem_statement="x", created_at="2024-01-01T00:00:00Z", FAIL_TO_PASS=F2P, PASS_TO_PASS=P2P,
                env_spec=EnvSpec(status="env_ok", base="node18", node="18", test_runner=runner))


def _run_output(settings: dict, reports: dict[str, str | None], status: int = 0, output: str = "ok\n") -> str:
    bundle = "".join(f"REPO2ENV-REPORT {base64.b64encode(path.encode()).decode()} "
                     f"{'-' if text is None else base64.b64encode(text.encode()).decode()}\n"
                     for path, text in reports.items())
    return output + bundle + f"\n{TRAILER} {status:03d} {len(bundle.encode()):012d}\n"


def _mocha_report(titles_states: dict[tuple[str, ...], str]) -> str:
    tests = [{"file": "/testbed/test/pad.test.js", "titles": list(titles), "state": state}
             for titles, state in titles_states.items()]
    return json.dumps({"runner": "mocha", "tests": tests, "hooks": [], "complete": True})


def _mocha_stream(report: str, titles_states: dict[tuple[str, ...], str], *, ended: bool = True) -> str:
    """What mocha_reporter.js streams for ``report`` (outcome_stream.js's lines)."""
    lines = [json.dumps({"report": report, "kind": "entry", "list": "tests",
                         "entry": {"file": "/testbed/test/pad.test.js", "titles": list(titles), "state": state}})
             for titles, state in titles_states.items()]
    if ended:
        lines.append(json.dumps({"report": report, "kind": "end", "fields": {"runner": "mocha", "complete": True}}))
    return "".join(line + "\n" for line in lines)


def _titled(states, run_ids, plan) -> dict[tuple[str, ...], str]:
    """Each run id's title path and state (``states`` gives None for one left out)."""
    titled = {tuple(test_id.split("::")[1].split(" > ")): states(test_id, plan) for test_id in run_ids}
    return {titles: state for titles, state in titled.items() if state is not None}


def _graded(task: Task, states, *, status: int = 0, exit_code: int = 0, written: bool = True, streamed=None,
            ended: bool = True, collected: bool = True):
    """A run read as the grader reads it. ``streamed``: the outcomes the reporter streamed live (a
    grading's plan then, with the collector's FIFO); None: a plan without a stream."""
    spec = grading_spec(task)
    plan = spec.plan_canaries(random.Random(7))
    run_ids = spec.run_ids(plan)
    layout = GradingLayout.fresh()
    settings = spec.script_settings(run_ids, layout)
    run_plan = spec.runner.plan(run_ids, layout.report_dir, layout.fifo if streamed else None)
    report = _mocha_report(_titled(states, run_ids, plan)) if written else None
    output = _run_output(settings, {settings["reports"][0]: report}, status=status)
    stream = _mocha_stream(settings["reports"][0], _titled(streamed, run_ids, plan), ended=ended) if streamed else None
    return read_script_run(exit_code=exit_code, truncated=False, timed_out=False, output=output, test_ids=spec.test_ids,
                           run_ids=run_ids, plan=plan, timeout_s=spec.timeout_s,
                           read_reports=partial(spec.runner.read, run_plan),
                           read_stream=partial(spec.runner.read_stream, run_plan) if streamed else None,
                           stream_text=stream if collected else None), plan


def test_the_spec_takes_its_runner_from_the_profile():
    spec = grading_spec(_task())
    assert spec.runner.name == "mocha" and spec.runner.report_format == "mocha-json" and spec.runner.outcome_stream
    assert not grading_spec(_task("ava")).runner.outcome_stream  # ava's reports are read alone
    assert ".mocharc*" in spec.runner.config_patterns and "mocha" in spec.runner.config_fields
    plan = spec.plan_canaries(random.Random(1))
    # Both FAIL_TO_PASS tests assert a call equal to a literal: each gets two mirrors (of which
    # those of "abcd", four letters changed, must fail; "  a" changes one: a group check only), one
    # decoy group, and the one canary that must pass.
    assert len(plan.must_pass) == 1 and len(plan.must_fail) >= 2 and len(plan.exclusive) == 3
    assert {group[0] for group in plan.exclusive[:2]} == set(F2P)
    assert all(canary.test_id.startswith("test/pad.test.js::pad > ") for canary in plan.canaries)
    settings = spec.script_settings(spec.run_ids(plan), GradingLayout.fresh())
    assert settings["script_runner"] == "mocha" and " --reporter /opt/repo2env/mocha_reporter.js" in settings["test_cmd"]
    assert len(settings["reports"]) == 1 and settings["reports"][0].startswith(settings["private"])
    # vitest's files import describe/it: this hunk shows no import, so the canaries it writes itself
    # go among the hidden tests' own, declared with `it` as they are; so do ava's, in ava's style.
    (module,) = grading_spec(_task("vitest")).canary_modules
    assert (module.test_callee, module.describe_callee) == ("", "") and module.blocks[0].callee == "it"
    assert module.blocks[0].container == ["pad"] and len(module.templates) == 2
    (ava,) = grading_spec(_task("ava")).canary_modules
    assert ava.runner == "ava" and ava.test_callee == "" and len(ava.templates) == 2


def test_runner_configuration_is_refused_by_the_filter():
    spec = grading_spec(_task())
    patch = "".join(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
                    for path in (".mocharc.yml", "node_modules/mocha/index.js", ".npmrc", "lib/pad.js", "package.json",
                                 "lib/pad.test.js", "src/__tests__/pad.js", "lib/pad.spec.ts"))
    filtered = filter_patch(patch, spec.runner.protected_paths)
    # Configuration, and tests beside the code (JavaScript's conventions, which Python's rules do not know).
    assert set(filtered.dropped_paths) == {".mocharc.yml", "node_modules/mocha/index.js", ".npmrc", "lib/pad.test.js",
                                           "src/__tests__/pad.js", "lib/pad.spec.ts"}
    assert set(filtered.kept_paths) == {"lib/pad.js", "package.json"}  # package.json: its runner fields are restored
    import re

    protected = re.compile(protected_path_pattern(spec.runner.protected_paths))
    assert protected.search(".mocharc.json") and protected.search("node_modules/x.js") and not protected.search("lib/pad.js")
    assert protected.search("lib/pad.test.js") and protected.search("jest.config.js")


def _honest(test_id, plan):
    """The gold patch's outcomes: the task's tests pass; of the canaries only the one that must pass."""
    return "passed" if test_id in F2P + P2P or test_id in plan.must_pass else "failed"


def test_an_honest_run_is_read():
    reading, _ = _graded(_task(), _honest)
    assert reading.error is None and not reading.tampered
    assert set(reading.tests.values()) == {TestStatus.PASSED}


def test_a_forged_report_earns_nothing():
    reading, _ = _graded(_task(), lambda test_id, plan: "passed")
    assert reading.tampered and "must fail passed" in reading.error
    assert set(reading.tests.values()) == {TestStatus.ERROR}


def test_a_missing_or_incomplete_report_fails_its_tests():
    reading, _ = _graded(_task(), _honest, written=False)
    assert set(reading.tests.values()) == {TestStatus.ERROR} and not reading.tampered
    spec = grading_spec(_task())
    plan = spec.plan_canaries(random.Random(3))
    run_ids = spec.run_ids(plan)
    run_plan = plan_run("mocha", run_ids, "/tmp/r")
    incomplete = json.dumps({"runner": "mocha", "tests": [], "complete": False})
    output = _run_output({}, {run_plan.reports[0].path: incomplete})
    reading = read_script_run(exit_code=0, truncated=False, timed_out=False, output=output, test_ids=spec.test_ids,
                              run_ids=run_ids, plan=plan, timeout_s=60,
                              read_reports=partial(spec.runner.read, run_plan))
    assert set(reading.tests.values()) == {TestStatus.ERROR}


def test_a_run_cut_short_earns_nothing():
    reading, _ = _graded(_task(), _honest, status=124)
    assert "timed out" in reading.error and set(reading.tests.values()) == {TestStatus.MISSING}
    # A script that did not end (its trailer unread) earns nothing either.
    reading, _ = _graded(_task(), _honest, exit_code=137)
    assert not reading.script_finished and set(reading.tests.values()) == {TestStatus.MISSING}


def test_a_mirror_passing_beside_its_template_is_caught():
    # Only the group check: the real test and its mirror of "  a" (one letter changed, not must-fail) both pass.
    def forged(test_id, plan):
        group = next(group for group in plan.exclusive if group[0] == F2P[0])
        return "passed" if test_id in group[:2] else _honest(test_id, plan)

    reading, plan = _graded(_task(), forged)
    assert reading.tampered and "cannot pass together" in reading.error, reading.error
    assert not any(forged(test_id, plan) == "passed" for test_id in plan.must_fail)


def test_outcomes_turned_around_are_caught():
    reading, _ = _graded(_task(), lambda test_id, plan: "passed" if test_id in plan.must_fail else "failed")
    assert reading.tampered and set(reading.tests.values()) == {TestStatus.ERROR}
    # A must-pass canary that fails while the must-fail ones fail too: the report is not the tests'.
    reading, _ = _graded(_task(), lambda test_id, plan: "failed")
    assert reading.tampered and "must pass failed" in reading.error


def test_a_streamed_run_is_read_from_its_stream():
    reading, _ = _graded(_task(), _honest, streamed=_honest)
    assert reading.error is None and not reading.tampered
    assert set(reading.tests.values()) == {TestStatus.PASSED}
    # The plan of a grading opens the collector's FIFO, and the settings run that very plan.
    spec = grading_spec(_task())
    layout = GradingLayout.fresh()
    settings = spec.script_settings(spec.test_ids, layout)
    assert settings["test_cmd"].startswith(f"/bin/sh -c 'exec 9>{layout.fifo} && ")


def test_a_report_rewritten_at_exit_earns_nothing_against_the_stream():
    """Code under test that rewrites the report once the run is done (every test passed, the
    canaries that must fail as they must, so that they alone cannot tell): the stream disagrees."""
    def rewritten(test_id, plan):
        return "failed" if test_id in plan.must_fail else "passed"

    reading, _ = _graded(_task(), rewritten, streamed=lambda test_id, plan: "failed" if test_id in F2P else _honest(test_id, plan))
    assert reading.tampered and set(reading.tests.values()) == {TestStatus.ERROR}
    assert "the report says test/pad.test.js::pad > " in reading.error and "the live outcomes say failed" in reading.error


def test_a_stream_that_did_not_end_earns_nothing():
    # Its reporter never ended the run, yet the report claims passes: the report is not the run's.
    reading, _ = _graded(_task(), _honest, streamed=_honest, ended=False)
    assert reading.tampered and "the live outcomes say error" in reading.error
    # Nor ended nor written (the process died): its tests fail, no lie.
    reading, _ = _graded(_task(), _honest, streamed=_honest, ended=False, written=False)
    assert not reading.tampered and set(reading.tests.values()) == {TestStatus.ERROR}
    # The collector's stream unread: nothing to cross-check with, nothing earned.
    reading, _ = _graded(_task(), _honest, streamed=_honest, collected=False)
    assert reading.error == "the live outcome stream could not be read"
    assert set(reading.tests.values()) == {TestStatus.MISSING}


def test_a_pass_the_report_lacks_counts_failed_and_one_it_denies_is_a_lie():
    lacking = lambda test_id, plan: None if test_id == F2P[0] else _honest(test_id, plan)  # noqa: E731
    reading, _ = _graded(_task(), lacking, streamed=_honest)
    assert not reading.tampered and reading.tests[F2P[0]] == TestStatus.MISSING
    assert reading.error == f"the reports lack 1 test(s) the live outcomes give as passed ({F2P[0]} ...)"
    reading, _ = _graded(_task(), lambda test_id, plan: "failed" if test_id == F2P[0] else _honest(test_id, plan),
                         streamed=_honest)
    assert reading.tampered and reading.error == f"tampered: the live outcomes say {F2P[0]} passed, the report says failed"


def _harbor_tests(task: Task, folder) -> dict:
    """The task's Harbor folder's tests/ written to ``folder``; its task.json."""
    from repo2env.publish.harbor import harbor_task_files

    built = task.model_copy(update={"env_spec": task.env_spec.model_copy(update={"image": "acme/task:1"})})
    for name, payload in harbor_task_files(built, dataset="acme").items():
        if name.startswith("tests/"):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(payload)
    return json.loads((folder / "tests" / "task.json").read_text())


def test_a_harbor_verifier_reads_the_runners_reports_as_the_grader_does(tmp_path):
    """tests/verify.py, with nothing but its folder (lib/ and the system Python, isolated), reads a
    mocha run's reports by the runner's own reading: an honest run scores 1, a report whose canaries
    lie (every test passed) 0 and tampered, a report never written 0."""
    import subprocess

    from repo2env.verify.canaries import Canary, CanaryPlan

    verifier = _harbor_tests(_task(), tmp_path)
    settings = json.loads((tmp_path / "tests" / "grade.json").read_text())
    plan = CanaryPlan(tuple(Canary(**canary) for canary in verifier["canaries"]), {})
    assert plan.must_fail and verifier["reader"]["plan"]["test_ids"] == verifier["run_ids"]

    assert verifier["reader"]["plan"]["outcome_stream"] and verifier["reader"]["stream_function"]

    def verified(states, streamed=_honest) -> dict:
        report = _mocha_report(_titled(states, verifier["run_ids"], plan)) if states else None
        output = _run_output(settings, {settings["reports"][0]: report})
        stream = _mocha_stream(settings["reports"][0], _titled(streamed, verifier["run_ids"], plan))
        program = ("import json, sys; sys.path.insert(0, sys.argv[1]); import verify;"
                   "spec, task = verify.load('spec.json'), verify.load('task.json');"
                   "print(json.dumps(verify.evaluate(spec, task, exit_code=0, timed_out=False, truncated=False,"
                   f"output=sys.stdin.read(), stream_text={stream!r})))")
        done = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", program, str(tmp_path / "tests")], input=output,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    honest = verified(_honest)
    assert honest["reward"] == 1.0 and honest["error"] is None and not honest["tampered"], honest
    assert set(honest["tests"]) == set(F2P + P2P)
    # Stream and report forged alike (every test passed): the canaries.
    forged = verified(lambda test_id, plan: "passed", streamed=lambda test_id, plan: "passed")
    assert forged["reward"] == 0.0 and forged["tampered"] and "must fail passed" in forged["error"], forged
    # The report alone rewritten: the stream.
    rewritten = verified(lambda test_id, plan: "failed" if test_id in plan.must_fail else "passed")
    assert rewritten["reward"] == 0.0 and rewritten["tampered"] and "the live outcomes say failed" in rewritten["error"]
    unwritten = verified(None)
    assert unwritten["reward"] == 0.0 and set(unwritten["tests"].values()) == {"error"}, unwritten  # its file


def test_a_runner_whose_reading_a_verifier_cannot_import_gets_no_harbor_verifier():
    """missing_verifier says why for a language runner's facts with no reading, or one whose module
    needs more than the standard library (the verifier runs under the image's Python)."""
    import dataclasses

    from repo2env.languages import get_profile
    from repo2env.publish.harbor import missing_verifier
    from repo2env.verify.grader import scored

    task = _task()
    facts = get_profile("javascript").test_runner(task.env_spec)
    runner = grading_spec(task).runner
    assert missing_verifier(runner, facts) is None
    assert missing_verifier(runner, dataclasses.replace(facts, read=None)) == (
        "no Harbor verifier reads mocha runs: its profile gives no plan and reading of its reports")
    unimportable = missing_verifier(runner, dataclasses.replace(facts, read=scored))
    assert unimportable.startswith("no Harbor verifier reads mocha runs: repo2env.") and unimportable.endswith(
        "imports pydantic, which a verifier's Python does not have"), unimportable
