"""Reading one run of the grading script into per-test outcomes: the one place that decides what a
run's exit status, output, report and live outcome stream mean.

The grader (:mod:`repo2env.verify.grader`) and a Harbor task's verifier (``tests/verify.py``) both
call :func:`read_run` on what they collected and score its outcomes; neither interprets a status
of its own. Standard library only: the verifier runs under the task image's Python (3.9 and up).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from repo2env.outcomes import TestStatus
from repo2env.verify.canaries import CanaryPlan
from repo2env.verify.junit import outcomes_for
from repo2env.verify.tamper import Stream, parse_stream, verdict
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
#: What the ``timeout`` wrapper of the test command exits with when it stops the tests (TERM, then KILL).
TIMEOUT_STATUSES = (124, 137)


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
             test_ids: list[str], run_ids: list[str], plan: CanaryPlan, timeout_s: float) -> RunReading:
    """Read one run: ``exit_code`` and ``output`` are the grading script's (``truncated`` when the
    output hit its cap, ``timed_out`` when the script itself was stopped), ``stream_text`` what the
    root collector read from the outcome plugin (None when it could not be read). ``test_ids`` are
    the task's tests, ``run_ids`` those and the canaries of ``plan``."""
    missing = {test_id: TestStatus.MISSING for test_id in test_ids}
    parsed = parse_trailer(output)
    if exit_code != 0 or truncated:
        # The tests' processes can write into this output too (through /proc/<pid>/fd/1), then
        # kill the script or fill the output cap: a trailer is the script's own only when the
        # script ran to its end and nothing was cut.
        parsed = None
    if parsed is None:
        message, applied = SCRIPT_FAILURES.get(exit_code, (
            f"the grading script did not finish (exit {exit_code}{', timed out' if timed_out else ''}"
            f"{', output over the cap' if truncated else ''})", True))
        if exit_code == RUNNER_REFERENCED:
            message = message.format(references=runner_references_of(output))
        return RunReading(tests=missing, error=message, script_finished=False, tampered=False, patch_applied=applied, test_status=exit_code,
                          test_output=output, xml_text=None, stream=None, all_outcomes={})
    test_status, xml_text, test_output = parsed
    stream = parse_stream(stream_text) if stream_text is not None else None
    all_outcomes, error = outcomes_for(run_ids, xml_text)
    outcomes = {test_id: all_outcomes[test_id] for test_id in test_ids}
    tampered = False
    if test_status in TIMEOUT_STATUSES:
        error = f"the tests timed out after {timeout_s:.0f} s"
    elif stream is None:
        error = "the live outcome stream could not be read"
        outcomes = dict(missing)
    else:
        lie = verdict(stream=stream, junit=all_outcomes, output=test_output, pytest_exit=test_status, plan=plan,
                      test_ids=test_ids)
        if lie is not None:
            tampered, error = True, f"tampered: {lie}"
            outcomes = {test_id: TestStatus.ERROR for test_id in test_ids}
    return RunReading(tests=outcomes, error=error, script_finished=True, tampered=tampered, patch_applied=True, test_status=test_status,
                      test_output=test_output, xml_text=xml_text, stream=stream, all_outcomes=all_outcomes)


def read_script_run(*, exit_code: int, truncated: bool, timed_out: bool, output: str, test_ids: list[str],
                    run_ids: list[str], plan: CanaryPlan, timeout_s: float, read_reports) -> RunReading:
    """:func:`read_run` for a language runner's run (``script_runner`` in the settings): the one report
    is the runner's reports, each on a line ``REPO2ENV-REPORT <path> <text>`` (base64; ``-``: not
    written), and ``read_reports(texts)`` reads them into every outcome they name (a runner plan's
    reading). Failed closed: a run cut short (a timeout) earns nothing; a report that is missing,
    incomplete or unreadable fails its tests; a canary that did not come out as it must (a
    forged report) makes every test an error."""
    import base64

    missing = {test_id: TestStatus.MISSING for test_id in test_ids}
    parsed = parse_trailer(output) if exit_code == 0 and not truncated else None
    if parsed is None:
        message, applied = SCRIPT_FAILURES.get(exit_code, (
            f"the grading script did not finish (exit {exit_code}{', timed out' if timed_out else ''}"
            f"{', output over the cap' if truncated else ''})", True))
        if exit_code == RUNNER_REFERENCED:
            message = message.format(references=runner_references_of(output))
        return RunReading(tests=missing, error=message, script_finished=False, tampered=False, patch_applied=applied,
                          test_status=exit_code, test_output=output, xml_text=None, stream=None, all_outcomes={})
    test_status, bundle, test_output = parsed
    texts: dict[str, str | None] = {}
    for line in (bundle or "").splitlines():
        fields = line.split(" ")
        if len(fields) != 3 or fields[0] != "REPO2ENV-REPORT":
            continue
        try:
            path = base64.b64decode(fields[1]).decode("utf-8")
            texts[path] = None if fields[2] == "-" else base64.b64decode(fields[2]).decode("utf-8", "replace")
        except ValueError:
            continue
    if test_status in TIMEOUT_STATUSES:
        return RunReading(tests=missing, error=f"the tests timed out after {timeout_s:.0f} s", script_finished=True,
                          tampered=False, patch_applied=True, test_status=test_status, test_output=test_output,
                          xml_text=bundle, stream=None, all_outcomes={})
    from repo2env.languages.javascript.reports import requested_outcomes

    all_outcomes = requested_outcomes(run_ids, read_reports(texts))
    outcomes = {test_id: all_outcomes[test_id] for test_id in test_ids}
    error, tampered = None, False
    # A must-pass canary that did not run (its file did not load, a hook of its describe failed: a
    # fix that breaks the module) is no lie; one reported as run and failed is.
    lie = next((f"a canary that must fail passed ({test_id})" for test_id in plan.must_fail
                if all_outcomes.get(test_id) == TestStatus.PASSED), None) or next(
        (f"a canary that must pass failed ({test_id})" for test_id in plan.must_pass
         if all_outcomes.get(test_id) == TestStatus.FAILED), None)
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
