"""Reading one run of the grading script into per-test outcomes: the one place that decides what a
run's exit status, output, report and live outcome stream mean.

The grader (:mod:`repo2env.verify.grader`) and a Harbor task's verifier (``tests/verify.py``) both
call :func:`read_run` on what they collected and score its outcomes; neither interprets a status
of its own. The rules, in order:

1. the grading script's output counts only when the script ran to its end (exit 0, a trailer,
   nothing cut); its own statuses (90-93) say why it stopped;
2. a test run counts only when it **ended on its own**: its exit status is one of the runner's
   own (pytest's 0-5). A timeout, a kill, any signal, ``os._exit(7)`` earn nothing, whatever the
   run left behind, with the reason;
3. the outcomes come from the **live stream** the root collector read (what no file the tests'
   user can write decides); the JUnit report, the summary line, the session's own exit status
   and the canaries are cross-checks, and one that disagrees makes the run ``tampered``;
4. a session that never finished, a stream that could not be read or a report that cannot be read
   counts every test as failed, with the reason.

A language runner's run (a JavaScript task) is read by :func:`read_script_run` under rules 1 and 2
(its plan's own status is 0 only). When its plan streams outcomes (mocha, jasmine, jest, vitest:
their reporters write to the root collector too) rule 3 holds as for pytest: the outcomes come
from the stream, the reports the grading script returned once every process of the tests was
dead must agree with it (:func:`repo2env.verify.tamper.streamed_verdict`: a report claiming a
pass the stream did not see, a stream that never ended under a report claiming passes, are
``tampered``); a runner without a stream (ava, tape, node) is read from its reports alone. Either
way the canaries are a cross-check (:func:`repo2env.verify.tamper.outcomes_verdict`: the plan's
must-fail canaries, its exclusive groups of a template and its mirrors, its must-pass canary).

Standard library only: the verifier runs under the task image's Python (3.9 and up).
"""

from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass

from repo2env.outcomes import TestStatus
from repo2env.verify.canaries import CanaryPlan
from repo2env.verify.junit import outcomes_for
from repo2env.verify.tamper import Stream, outcomes_verdict, parse_stream, streamed_verdict, verdict
from repo2env.verify.trailer import parse_trailer

#: The grading script's own exit statuses (verify/scripts/grade.sh), each with what it means and
#: whether the agent's patch was applied.
APPLY_FAILED, TEST_PATCH_FAILED, RUNNER_REFERENCED, SETTINGS_UNREADABLE = 90, 91, 92, 93
SCRIPT_FAILURES = {
    APPLY_FAILED: ("the patch does not apply to the snapshot", False),
    TEST_PATCH_FAILED: ("the hidden tests do not apply on top of this patch", True),
    RUNNER_REFERENCED: ("the patch reaches into the test runner ({references}; read as Python decodes the files)", True),
    SETTINGS_UNREADABLE: ("the grading script could not read its settings", True),
}
#: pytest's own exit statuses (``pytest.ExitCode``: ok, tests failed, interrupted, internal error,
#: usage error, no tests collected): a run that ends with any other status did not end on its own.
#: The grading specification's runner says which statuses are its own (``TestRunner.session_statuses``).
PYTEST_SESSION_STATUSES = (0, 1, 2, 3, 4, 5)
#: A language runner's plan (:func:`repo2env.languages.javascript.runners.plan_run`) is one ``sh -c``
#: program that ends with ``exit 0`` whatever its runners gave: any other status did not end on its own.
SCRIPT_SESSION_STATUSES = (0,)


@dataclass(frozen=True)
class RunReading:
    """What one run of the grading script says: every test's outcome (failed closed), why it
    failed if it did, and the evidence it was read from."""

    tests: dict[str, TestStatus]
    error: str | None
    script_finished: bool
    tampered: bool
    patch_applied: bool
    test_status: int | None
    test_output: str
    xml_text: str | None
    stream: Stream | None
    all_outcomes: dict[str, TestStatus]


def read_run(*, exit_code: int, truncated: bool, timed_out: bool, output: str, stream_text: str | None,
             test_ids: list[str], run_ids: list[str], plan: CanaryPlan, timeout_s: float,
             session_statuses: tuple[int, ...] | list[int] = PYTEST_SESSION_STATUSES) -> RunReading:
    """Read one run (rules: module docstring). ``exit_code`` and ``output`` are the grading
    script's (``truncated`` when the output hit its cap, ``timed_out`` when the script itself was
    stopped), ``stream_text`` what the root collector read from the outcome plugin (None when it
    could not be read). ``test_ids`` are the task's tests, ``run_ids`` those and the canaries of
    ``plan``; ``session_statuses`` the runner's own exit statuses."""
    missing = {test_id: TestStatus.MISSING for test_id in test_ids}
    parsed = parse_trailer(output)
    if exit_code != 0 or truncated:
        # The tests' processes can write into this output too (through /proc/<pid>/fd/1), then
        # kill the script or fill the output cap: a trailer is the script's own only when the
        # script ran to its end and nothing was cut.
        parsed = None
    if parsed is None:
        return _unfinished(missing, exit_code, output, timed_out=timed_out, truncated=truncated)
    test_status, xml_text, test_output = parsed
    reading = {"test_status": test_status, "test_output": test_output, "xml_text": xml_text, "script_finished": True,
               "patch_applied": True, "tampered": False}
    stream = parse_stream(stream_text) if stream_text is not None else None
    reported, report_error = outcomes_for(run_ids, xml_text)
    reading.update(stream=stream, all_outcomes=reported)
    if stream is None:  # the collector's own failure: nothing to cross-check the report with
        error = cut_short(test_status, timeout_s) if test_status not in session_statuses else \
            "the live outcome stream could not be read"
        return RunReading(tests=missing, error=error, **reading)
    lie = verdict(stream=stream, junit=reported, output=test_output, pytest_exit=test_status, plan=plan,
                  test_ids=test_ids, session_statuses=tuple(session_statuses))
    if lie is not None:
        return RunReading(tests={test_id: TestStatus.ERROR for test_id in test_ids}, error=f"tampered: {lie}",
                          **{**reading, "tampered": True})
    if test_status not in session_statuses:
        return RunReading(tests=missing, error=cut_short(test_status, timeout_s), **reading)
    if stream.exit_status is None:
        # pytest stopped before its session began (a conftest.py that does not import, a usage
        # error): no report either. Anything else is a session that never finished.
        error = report_error if xml_text is None else f"pytest's session never finished (exit {test_status})"
        return RunReading(tests=missing, error=error, **reading)
    if report_error is not None:
        return RunReading(tests=missing, error=f"the JUnit report cannot be read ({report_error})", **reading)
    tests = {test_id: stream.status(test_id) for test_id in test_ids}
    unreported = [test_id for test_id, status in tests.items()
                  if status == TestStatus.PASSED and reported[test_id] != TestStatus.PASSED]
    error = None
    if unreported:
        # Passed live, absent from the report (the verdict calls any other disagreement a lie):
        # counted failed, the report being the cross-check every outcome needs.
        tests.update({test_id: TestStatus.MISSING for test_id in unreported})
        error = f"the JUnit report lacks {len(unreported)} test(s) the live outcomes give as passed ({unreported[0]} ...)"
    return RunReading(tests=tests, error=error, **reading)


def cut_short(status: int, timeout_s: float) -> str:
    """Why a test run that exited with ``status`` (not one of the runner's own) earns nothing."""
    if status == 124:
        return f"the tests timed out after {timeout_s:.0f} s (a run cut short earns nothing)"
    if status == 137:
        return f"the tests were killed (SIGKILL: their own, or the timeout's after {timeout_s:.0f} s); a run cut short earns nothing"
    if 128 < status < 160:
        number = status - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"the tests were stopped by {name} (exit {status}); a run cut short earns nothing"
    return f"the tests exited with status {status}, not one of the runner's own: the run did not end on its own and earns nothing"


def report_texts(bundle: str) -> dict[str, str | None]:
    """The runner's reports in a script run's bundle (grade.sh's ``REPO2ENV-REPORT <path> <text>``
    lines, both base64; ``-``: the report was not written, None here), by path. Other lines, and
    lines that do not decode, are skipped."""
    import base64

    texts: dict[str, str | None] = {}
    for line in bundle.splitlines():
        fields = line.split(" ")
        if len(fields) != 3 or fields[0] != "REPO2ENV-REPORT":
            continue
        try:
            path = base64.b64decode(fields[1]).decode("utf-8")
            texts[path] = None if fields[2] == "-" else base64.b64decode(fields[2]).decode("utf-8", "replace")
        except ValueError:
            continue
    return texts


def read_script_run(*, exit_code: int, truncated: bool, timed_out: bool, output: str, test_ids: list[str],
                    run_ids: list[str], plan: CanaryPlan, timeout_s: float, read_reports,
                    session_statuses: tuple[int, ...] | list[int] = SCRIPT_SESSION_STATUSES,
                    read_stream=None, stream_text: str | None = None) -> RunReading:
    """:func:`read_run` for a language runner's run (``script_runner`` in the settings): the one report
    is the runner's reports, each on a line ``REPO2ENV-REPORT <path> <text>`` (base64; ``-``: not
    written), and ``read_reports(texts)`` reads them into the outcome of each run id (the profile's
    reading of the runner's plan, :meth:`repo2env.verify.spec.TestRunner.read`; an id it leaves out is
    missing). Failed closed: a run that did not end on its own (its status not one of
    ``session_statuses``: the plan's program ends with ``exit 0``, so a timeout, a kill, any
    signal) earns nothing; a report that is missing,
    incomplete or unreadable fails its tests; a canary that did not come out as it must (a
    forged report) makes every test an error.

    ``read_stream`` (given when the plan streams its outcomes live): ``read_stream(stream_text)``
    reads what the root collector read (``stream_text``; None when it could not be read: every
    test fails) into each run id's outcome. The stream's outcomes are then the run's, the reports
    the cross-check: a disagreement makes every test an error (``tampered``), a test that passed
    live but is absent from its report counts failed."""
    missing = {test_id: TestStatus.MISSING for test_id in test_ids}
    parsed = parse_trailer(output) if exit_code == 0 and not truncated else None
    if parsed is None:
        return _unfinished(missing, exit_code, output, timed_out=timed_out, truncated=truncated)
    test_status, bundle, test_output = parsed
    texts = report_texts(bundle or "")
    if test_status not in session_statuses:
        return RunReading(tests=missing, error=cut_short(test_status, timeout_s), script_finished=True,
                          tampered=False, patch_applied=True, test_status=test_status, test_output=test_output,
                          xml_text=bundle, stream=None, all_outcomes={})
    all_outcomes = dict(read_reports(texts))
    outcomes = {test_id: all_outcomes.get(test_id, TestStatus.MISSING) for test_id in test_ids}
    error, tampered = None, False
    lie = None
    if read_stream is not None:
        if stream_text is None:  # the collector's own failure: nothing to cross-check the reports with
            return RunReading(tests=missing, error="the live outcome stream could not be read", script_finished=True,
                              tampered=False, patch_applied=True, test_status=test_status, test_output=test_output,
                              xml_text=bundle, stream=None, all_outcomes=all_outcomes)
        live = dict(read_stream(stream_text))
        lie = streamed_verdict(live, all_outcomes, run_ids)
        outcomes = {test_id: live.get(test_id, TestStatus.MISSING) for test_id in test_ids}
        unreported = [test_id for test_id, status in outcomes.items()
                      if status == TestStatus.PASSED and all_outcomes.get(test_id) != TestStatus.PASSED]
        if unreported:
            # Passed live, absent from the reports (streamed_verdict calls any other disagreement a
            # lie): counted failed, the reports being the cross-check every outcome needs.
            outcomes.update({test_id: TestStatus.MISSING for test_id in unreported})
            error = f"the reports lack {len(unreported)} test(s) the live outcomes give as passed ({unreported[0]} ...)"
        all_outcomes = {test_id: live.get(test_id, TestStatus.MISSING) for test_id in run_ids}
    lie = lie or outcomes_verdict(all_outcomes, plan)
    if lie is not None:
        tampered, error = True, f"tampered: {lie}"
        outcomes = {test_id: TestStatus.ERROR for test_id in test_ids}
    return RunReading(tests=outcomes, error=error, script_finished=True, tampered=tampered, patch_applied=True,
                      test_status=test_status, test_output=test_output, xml_text=bundle, stream=None,
                      all_outcomes=all_outcomes)


def runner_references_of(output: str) -> str:
    """The runner references restore.py printed before it refused the patch (status 92)."""
    found = re.search(r"^REPO2ENV-RUNNER-REFERENCES (.*)$", output, re.MULTILINE)
    try:
        return ", ".join(json.loads(found.group(1))) if found else "unknown references"
    except ValueError:
        return "unreadable references"


def _unfinished(missing: dict[str, TestStatus], exit_code: int, output: str, *, timed_out: bool,
                truncated: bool) -> RunReading:
    """The reading of a grading script that did not finish with its own trailer: every test missing,
    the reason from its exit status (SCRIPT_FAILURES), or that it was cut short."""
    message, applied = SCRIPT_FAILURES.get(exit_code, (
        f"the grading script did not finish (exit {exit_code}{', timed out' if timed_out else ''}"
        f"{', output over the cap' if truncated else ''})", True))
    if exit_code == RUNNER_REFERENCED:
        message = message.format(references=runner_references_of(output))
    return RunReading(tests=missing, error=message, script_finished=False, tampered=False, patch_applied=applied,
                      test_status=exit_code, test_output=output, xml_text=None, stream=None, all_outcomes={})
