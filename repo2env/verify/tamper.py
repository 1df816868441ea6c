"""Tamper detection: test outcomes streamed live out of the test process, cross-checked.

A small pytest plugin (a root-owned file, loaded by name through ``PYTEST_PLUGINS`` before any of
the project's code can run, which takes itself out of the environment, ``sys.path`` and
``sys.modules`` once loaded, so that nothing the tests start sees it) opens a FIFO that a root process in the grading sandbox created and reads; that process
removes the FIFO the moment the plugin has opened it, so nothing started later can open it by name,
and what it has read is out of the agent user's reach (its output goes straight to the grader).
The plugin writes one line per test report, one per failed collection and one with the session's
exit status. :func:`verdict` then compares four channels that a forger must keep consistent: the
stream, the JUnit report, the terminal summary line and pytest's exit status, and checks the
canaries (:mod:`repo2env.verify.canaries`).

A JavaScript runner's reporters (mocha's, jasmine's, jest's, vitest's, ``node --test``'s, and the
program that starts tape; see ``repo2env/languages/javascript/outcome_stream.js``) stream the same
way, through a descriptor the grading plan opens on the FIFO and hands over in a variable they take
out of the environment at load; :func:`streamed_verdict` compares that stream with the runner's
report files.

What remains: code inside the test process can find the plugin's (or reporter's) descriptor and
write lines of its own, or change reports before any hook sees them; only the canaries, whose names
and expected values it would have to tell apart from the real hidden tests, stand in its way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from repo2env.outcomes import TestStatus
from repo2env.verify.canaries import CanaryPlan
from repo2env.verify.junit import split_node_id

# {fifo} is filled in per grading. Written for every pytest from 3 to 9, stdlib only.
PLUGIN_SOURCE = '''\
import json as _json
import os as _os
import sys as _sys

# pytest-xdist's workers import -p plugins too; their reports reach the controller's hooks.
_stream = None if _os.environ.get("PYTEST_XDIST_WORKER") else _os.open({fifo!r}, _os.O_WRONLY)


def _without(value, item, separator):
    return separator.join(part for part in value.split(separator) if part and part != item)


# Out of sight once loaded, before any of the project's code runs: the environment loses the
# variables that named this plugin and its folder (so no process the tests start, and no inner
# pytest session such as pytester's, loads it or sees the grader), sys.path loses the folder.
_name, _folder = __name__, _os.path.dirname(_os.path.abspath(__file__))
for _variable, _item, _separator in (("PYTEST_PLUGINS", _name, ","), ("PYTHONPATH", _folder, _os.pathsep)):
    _rest = _without(_os.environ.get(_variable, ""), _item, _separator)
    if _rest:
        _os.environ[_variable] = _rest
    else:
        _os.environ.pop(_variable, None)
_sys.path[:] = [entry for entry in _sys.path if not entry or _os.path.abspath(entry) != _folder]


def _send(*fields):
    if _stream is not None:
        _os.write(_stream, (_json.dumps(fields) + "\\n").encode("utf-8"))


_send("S", _os.getpid())


def pytest_configure(config):
    # Registered by now: the plugin manager holds the module, sys.modules need not.
    _sys.modules.pop(_name, None)


def pytest_collectreport(report):
    if report.failed:
        _send("C", report.nodeid)


def pytest_runtest_logreport(report):
    _send("R", report.nodeid, report.when, report.outcome, bool(getattr(report, "wasxfail", False)))


def pytest_sessionfinish(session, exitstatus):
    _send("E", int(exitstatus))
'''

# Runs as root in the grading sandbox; its output is the stream. It may start before the grading's
# inputs are placed (the grader places them while its commands start): it waits up to 60 s for the
# FIFO's folder. The FIFO is made under another name and renamed into place once the tests' user may
# open it: made under its own name, it would be root's alone (umask 077) between mkfifo's two system
# calls, and a grading script that saw it there then could not open it (on a loaded machine, about one
# grading in a thousand failed that way).
COLLECTOR_SCRIPT = ('n=0; until [ -d "${0%/*}" ]; do [ $n -lt 6000 ] || exit 1; n=$((n+1)); sleep 0.01; done; '
                    'umask 077; mkfifo -m 622 "$0.new" && chmod 622 "$0.new" && mv -f "$0.new" "$0" && exec 3<"$0" '
                    '&& rm -f "$0" && exec cat <&3')

_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s(?: \([^)]*\))?\s*=*\s*$", re.MULTILINE)


@dataclass
class Stream:
    """What the plugin reported: per node id, its reports' phases and outcomes."""

    started: bool = False
    exit_status: int | None = None
    reports: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)
    collect_errors: list[str] = field(default_factory=list)
    unreadable_lines: int = 0

    def status(self, test_id: str) -> TestStatus:
        """The test's outcome as the live reports gave it (JUnit's ranking: the worst phase wins)."""
        reports = self.reports.get(stream_key(test_id))
        if not reports:
            return TestStatus.MISSING
        if any(outcome == "failed" and when != "call" for when, outcome, _ in reports):
            return TestStatus.ERROR
        if any(outcome == "failed" for _, outcome, _ in reports):
            return TestStatus.FAILED
        if any(outcome == "skipped" or xfail for _, outcome, xfail in reports):
            return TestStatus.SKIPPED
        if any(when == "call" and outcome == "passed" for when, outcome, _ in reports):
            return TestStatus.PASSED
        return TestStatus.MISSING

    def passed_count(self) -> int:
        """Passed calls, counted as pytest's summary line counts them: per report, so a node id that
        runs twice (identical parameters give identical ids before pytest 8.2) counts twice."""
        return sum(1 for reports in self.reports.values() for when, outcome, xfail in reports
                   if when == "call" and outcome == "passed" and not xfail)


def stream_key(node_id: str) -> str:
    """A node id without the ``()`` instance level that pytest < 4 put between a class and its
    methods (``a.py::T::()::f``): the plugin streams that spelling, while canaries and the JUnit
    report name the method without it, so both sides are looked up by this key."""
    path, names, params = split_node_id(node_id)
    if "()" not in names:
        return node_id
    return "::".join([path, *[name for name in names if name != "()"]]) + params


def parse_stream(text: str) -> Stream:
    """Read the plugin's lines; a line that is not one of its records is counted, not trusted."""
    stream = Stream()
    for line in text.splitlines():
        try:
            record = json.loads(line)
            kind = record[0]
            if kind == "S":
                stream.started = True
            elif kind == "C":
                stream.collect_errors.append(str(record[1]))
            elif kind == "R":
                stream.reports.setdefault(stream_key(str(record[1])), []).append((str(record[2]), str(record[3]), bool(record[4])))
            elif kind == "E":
                stream.exit_status = int(record[1])
            else:
                stream.unreadable_lines += 1
        except (ValueError, IndexError, TypeError, KeyError):
            stream.unreadable_lines += 1
    return stream


def summary_counts(output: str) -> dict[str, int] | None:
    """pytest's last summary line (``4 failed, 5 passed in 0.12s``) as counts, or None."""
    found = _SUMMARY.findall(output)
    if not found:
        return None
    counts: dict[str, int] = {}
    for part in found[-1].split(", "):
        number, _, word = part.partition(" ")
        counts[word.rstrip("s") if word.endswith("errors") else word] = int(number)
    return counts


_USAGE_ERROR_LINE = re.compile(r"^ERROR: ", re.MULTILINE)


def _late_usage_error(stream: Stream, pytest_exit: int, output: str) -> bool:
    """Whether the run is old pytest's honest mismatch: pytest 3 (at least) raises the usage error
    for ids it cannot find (their module failed to collect, say) while collecting, leaves the
    session's status at 0 for ``pytest_sessionfinish``, then prints ``ERROR: ...`` and exits 4."""
    return stream.exit_status == 0 and pytest_exit == 4 and bool(_USAGE_ERROR_LINE.search(output))


def outcomes_verdict(outcomes: Mapping[str, TestStatus], plan: CanaryPlan) -> str | None:
    """Why ``outcomes`` (every id a language runner's reports name: the task's tests and the
    canaries) cannot be the tests' own, or None: a canary that must fail passed, tests that cannot
    pass together (a template and its mirrors, a decoy group) passed together, or a canary that must
    pass was reported as run and failed (one that did not run, its file not loading or a hook of its
    describe block failing, is an honest fix that breaks the module, no lie). A module where no
    canary could be placed fails closed: its report is checked by nothing, so no grading is trusted."""
    if plan.unplaced:
        return f"no canary could be placed in {', '.join(plan.unplaced)}"
    lie = next((f"a canary that must fail passed ({test_id})" for test_id in plan.must_fail
                if outcomes.get(test_id) == TestStatus.PASSED), None)
    if lie is not None:
        return lie
    for group in plan.exclusive:
        passed = [test_id for test_id in group if outcomes.get(test_id) == TestStatus.PASSED]
        if len(passed) > 1:
            return f"tests that cannot pass together passed ({', '.join(passed)})"
    return next((f"a canary that must pass failed ({test_id})" for test_id in plan.must_pass
                 if outcomes.get(test_id) == TestStatus.FAILED), None)


def streamed_verdict(live: Mapping[str, TestStatus], reported: Mapping[str, TestStatus], run_ids: list[str]) -> str | None:
    """Why a language runner's reports (``reported``: each run id's outcome as its report files give
    it) cannot be the run's own, given the outcomes its reporters streamed live (``live``, the same
    ids), or None: a test the report says passed that the stream did not see pass (a report
    rewritten, or one whose runner's stream never ended), or one the stream saw pass that the
    report says failed, errored or was skipped. A test that passed live and is absent from the
    report is no lie (:func:`repo2env.verify.reading.read_script_run` counts it failed)."""
    for test_id in dict.fromkeys(run_ids):
        now, said = live.get(test_id, TestStatus.MISSING), reported.get(test_id, TestStatus.MISSING)
        if said == TestStatus.PASSED and now != TestStatus.PASSED:
            return f"the report says {test_id} passed, the live outcomes say {now.value}"
        if now == TestStatus.PASSED and said in (TestStatus.FAILED, TestStatus.ERROR, TestStatus.SKIPPED):
            return f"the live outcomes say {test_id} passed, the report says {said.value}"
    return None


def verdict(*, stream: Stream | None, junit: dict[str, TestStatus], output: str, pytest_exit: int,
            plan: CanaryPlan, test_ids: list[str], session_statuses: tuple[int, ...] = (0, 1, 2, 3, 4, 5)) -> str | None:
    """Why the run's reports cannot be trusted, or None when every channel agrees and every canary
    came out as it must. ``junit`` holds the outcomes of ``test_ids`` and the canaries;
    ``session_statuses`` are the runner's own exit statuses (a run that exits otherwise was cut
    short, and its status says nothing about its session)."""
    if stream is None or not stream.started:
        # The plugin is loaded before any of the project's code; only pytest failing to start at
        # all (nothing passed then) leaves the stream empty.
        passed = [test_id for test_id, status in junit.items() if status == TestStatus.PASSED]
        return f"no live outcomes were streamed, yet the report shows {len(passed)} passed" if passed else None
    for test_id in plan.must_fail:
        if junit.get(test_id) == TestStatus.PASSED or stream.status(test_id) == TestStatus.PASSED:
            return f"a canary that must fail passed ({test_id})"
    for group in plan.exclusive:
        # The same deterministic call asserted against different values: at most one can hold.
        passed = [test_id for test_id in group
                  if junit.get(test_id) == TestStatus.PASSED or stream.status(test_id) == TestStatus.PASSED]
        if len(passed) > 1:
            return f"tests that cannot pass together passed ({', '.join(passed)})"
    modules_collected_badly = {split_node_id(error)[0] for error in stream.collect_errors}
    for test_id in plan.must_pass:
        if stream.exit_status is not None and split_node_id(test_id)[0] not in modules_collected_badly \
                and stream.status(test_id) in (TestStatus.FAILED, TestStatus.ERROR):
            return f"a canary that must pass failed ({test_id})"
    for test_id in dict.fromkeys([*test_ids, *(canary.test_id for canary in plan.canaries)]):
        live, reported = stream.status(test_id), junit.get(test_id, TestStatus.MISSING)
        if reported == TestStatus.PASSED and live != TestStatus.PASSED:
            return f"the report says {test_id} passed, the live outcomes say {live.value}"
        if live == TestStatus.PASSED and reported in (TestStatus.FAILED, TestStatus.ERROR, TestStatus.SKIPPED):
            return f"the live outcomes say {test_id} passed, the report says {reported.value}"
    if stream.exit_status is None:
        if pytest_exit == 0 or any(status == TestStatus.PASSED for status in junit.values()):
            return "pytest's session never finished, yet the run reports passing tests"
        return None
    if pytest_exit in session_statuses and pytest_exit != stream.exit_status \
            and not _late_usage_error(stream, pytest_exit, output):
        return f"pytest ended its session with status {stream.exit_status}, the process exited with {pytest_exit}"
    counts = summary_counts(output)
    if counts is not None and counts.get("passed", 0) > stream.passed_count():
        return f"the summary line counts {counts['passed']} passed, the live outcomes {stream.passed_count()}"
    return None
