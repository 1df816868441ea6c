"""Report parsers and test ids of the JavaScript runners, without Docker: on the reports the real
runners wrote in ``tests/test_javascript_runners.py`` (kept in ``tests/data/javascript_reports``)."""

from __future__ import annotations

import json
import re

import pytest
from javascript_projects import REPORTS_DATA, requested

from repo2env.languages.javascript.reports import (
    ReportError,
    parse_ava_tap,
    parse_jasmine_json,
    parse_jest_json,
    parse_mocha_json,
    parse_node_tap,
    parse_tape_tap,
    relative_path,
    requested_outcomes,
)
from repo2env.languages.javascript.runners import (
    REPORT_FORMATS,
    RUNNERS,
    STREAM_RUNNERS,
    Invocation,
    Report,
    RunPlan,
    js_regex_escape,
    plan_run,
    read_outcomes,
    reported_outcomes,
    reporter_sources,
    streamed_outcomes,
)
from repo2env.languages.javascript.test_ids import escape_title, split_test_id, test_id
from repo2env.outcomes import TestStatus


def _recorded(runner: str) -> tuple[RunPlan, dict[str, str], str]:
    folder = REPORTS_DATA / runner
    plan_data = json.loads((folder / "plan.json").read_text())
    reports = tuple(Report(path=entry["name"], format=entry["format"], file=entry["file"])
                    for entry in plan_data["reports"])
    texts = {report.path: (folder / report.path).read_text() for report in reports
             if (folder / report.path).exists()}
    return RunPlan(runner, "", reports, tuple(plan_data["test_ids"])), texts, plan_data["root"]


@pytest.mark.parametrize("runner", RUNNERS)
def test_recorded_reports_give_the_expected_outcomes(runner):
    plan, texts, root = _recorded(runner)
    assert set(plan.test_ids) == set(requested(runner))
    assert read_outcomes(plan, texts.get, root=root) == requested(runner)


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_truncated_report_earns_no_pass(runner):
    plan, texts, root = _recorded(runner)
    cut = {path: text[: len(text) // 2] for path, text in texts.items()}
    reported = reported_outcomes(plan, cut.get, root=root)
    for test, status in read_outcomes(plan, cut.get, root=root).items():
        if status == TestStatus.PASSED:
            # Only a TAP stream keeps the points before the cut, and its file is then an error.
            assert runner in ("ava", "tape", "node") and reported[split_test_id(test)[0]] == TestStatus.ERROR


def test_a_missing_report_leaves_every_id_missing_or_errored():
    for runner in RUNNERS:
        plan, _, root = _recorded(runner)
        outcomes = read_outcomes(plan, lambda path: None, root=root)
        assert set(outcomes.values()) <= {TestStatus.MISSING, TestStatus.ERROR}, runner


def test_vitest_1s_unnamed_file_suite_is_no_describe_block():
    plan, texts, root = _recorded("vitest")
    report = json.loads(texts["1-jest-json"])
    for file_result in report["testResults"]:
        for assertion in file_result["assertionResults"]:
            assertion["ancestorTitles"] = ["", *assertion["ancestorTitles"]]  # as vitest 1 writes them
    shifted = dict(texts, **{"1-jest-json": json.dumps(report)})
    assert read_outcomes(plan, shifted.get, root=root) == requested("vitest")


def test_reports_that_are_not_what_the_runner_writes_are_refused():
    for text in ("", "not json", "[]", '{"numTotalTests": 3}', '{"testResults": [{"status": "passed"}]}'):
        with pytest.raises(ReportError):
            parse_jest_json(text)
    plan, texts, root = _recorded("mocha")
    report = json.loads(next(iter(texts.values())))
    with pytest.raises(ReportError):
        parse_mocha_json(json.dumps({**report, "complete": False}), root)
    with pytest.raises(ReportError):
        parse_mocha_json(json.dumps({"tests": [{"titles": "not a list", "file": "x", "state": "passed"}],
                                     "complete": True}))


def test_tap_lines_a_test_prints_are_not_test_points():
    plan, texts, root = _recorded("tape")
    text = texts["1-tape-tap"]
    assert "ok 99 - printed by a test" in text  # tape writes the test's console.log into the stream
    outcomes = parse_tape_tap(text, "test/format.test.js", root)
    assert outcomes[test_id("test/format.test.js", ["fails"])] == TestStatus.FAILED
    # A forged block appended after the plan changes nothing.
    forged = text + "# fails\nok 5 should be strictly equal\n1..5\n"
    assert parse_tape_tap(forged, "test/format.test.js", root) == outcomes
    # Node escapes '#' and '\\' in names, and puts a test's output in comments.
    node_plan, node_texts, node_root = _recorded("node")
    node_outcomes = parse_node_tap(node_texts["1-node-tap"], "test/format.test.js", node_root)
    assert "test/format.test.js::ok 99 - printed by a test" not in node_outcomes
    assert parse_node_tap("TAP version 13\nok 1 - a \\# b \\\\ c\n1..1\n", "t.js") == {
        test_id("t.js", ["a # b \\ c"]): TestStatus.PASSED}
    assert parse_node_tap("TAP version 13\nok 1 - a # SKIP not now\nok 2 - b # todo\n1..2\n", "t.js") == {
        "t.js::a": TestStatus.SKIPPED, "t.js::b": TestStatus.SKIPPED}


@pytest.mark.parametrize("titles", [
    ("format", "pads numbers"),
    ("a > b", "c"),
    ("a ", "> b"),
    ("x >", ">y", " > "),
    ("back\\slash", "\\> already", "ends with \\"),
    ("a :: b", "c::d"),
    ("renders <div>", "a->b", "1 >= 0"),
    (">",),
    ("",),
])
def test_ids_split_back_into_their_titles(titles):
    made = test_id("test/x.test.js", titles)
    assert split_test_id(made) == ("test/x.test.js", titles)
    assert made.count(" > ") == len(titles) - 1


def test_id_escaping_is_readable_and_refuses_paths_with_the_file_separator():
    assert test_id("./test/format.test.js", ["format", "pads numbers"]) == "test/format.test.js::format > pads numbers"
    assert escape_title("a > b") == "a \\> b"
    assert escape_title("renders <div>") == "renders <div>"
    assert test_id("test/broken.test.js") == "test/broken.test.js"
    assert split_test_id("test/broken.test.js") == ("test/broken.test.js", ())
    with pytest.raises(ValueError):
        test_id("weird::name.test.js", ["t"])


@pytest.mark.parametrize("name", ["a :: b > c (x) [y]*", "1+1=2?", "^start$ end", "{a|b}", "back\\slash", "a/b.c"])
def test_name_patterns_match_their_name_literally(name):
    # The escaped characters mean the same in JavaScript and Python regular expressions.
    assert re.fullmatch(js_regex_escape(name), name)
    assert not re.fullmatch(js_regex_escape(name), name + "x")


def test_requested_outcomes_fail_closed():
    reported = {"a.js::t": TestStatus.PASSED, "b.js": TestStatus.ERROR}
    assert requested_outcomes(["a.js::t", "a.js::u", "b.js::v", "b.js"], reported) == {
        "a.js::t": TestStatus.PASSED, "a.js::u": TestStatus.MISSING, "b.js::v": TestStatus.ERROR,
        "b.js": TestStatus.ERROR}


def test_paths_in_reports_are_made_relative_to_the_repository():
    assert relative_path("/testbed/test/a.js", "/testbed") == "test/a.js"
    assert relative_path("file:///testbed/test/a.js", "/testbed/") == "test/a.js"
    assert relative_path("./test/a.js", "/testbed") == "test/a.js"
    assert relative_path("/elsewhere/a.js", "/testbed") == "/elsewhere/a.js"


def test_every_runner_has_a_report_format_and_every_reporter_path_a_source():
    assert set(REPORT_FORMATS) == set(RUNNERS)
    for runner in RUNNERS:
        # A grading's plan (a collector FIFO given) names every reporter of its runner.
        plan = plan_run(runner, ["test/a.test.js::t"], "/tmp/r", outcome_fifo="/tmp/g/x.fifo")
        assert {report.format for report in plan.reports} == {REPORT_FORMATS[runner]}
        assert all(path in plan.command for path in reporter_sources() if runner in path)
        assert plan.outcome_stream == (runner in STREAM_RUNNERS)
    # ES modules are strict already; every CommonJS reporter says so.
    assert all(text.startswith("'use strict';") for path, text in reporter_sources().items() if path.endswith(".js"))


def test_only_a_grading_plan_of_a_streaming_runner_opens_the_collector():
    fifo = "/tmp/repo2env-grade-1/abc.fifo"
    for runner in RUNNERS:
        plain = plan_run(runner, ["test/a.test.js::t"], "/tmp/r")
        graded = plan_run(runner, ["test/a.test.js::t"], "/tmp/r", outcome_fifo=fifo)
        assert not plain.outcome_stream and "REPO2ENV_OUTCOME_FD" not in plain.command and fifo not in plain.command
        if runner in STREAM_RUNNERS:
            # Opened before anything else runs; each runner process is told its descriptor and report.
            assert graded.command.startswith(f"exec 9>{fifo} && cd /testbed")
            assert graded.command.count("REPO2ENV_OUTCOME_FD=9 REPO2ENV_OUTCOME_REPORT=") == len(graded.reports)
        else:
            assert graded.command == plain.command


def _record(report, kind, **fields):
    return json.dumps({"report": report, "kind": kind, **fields})


def test_the_stream_is_read_as_the_reports_and_a_forged_line_cannot_hide_a_failure():
    ids = ["test/a.test.js::d > one", "test/a.test.js::d > two", "test/b.test.js::three"]
    plan = plan_run("mocha", ids, "/tmp/r", outcome_fifo="/tmp/f")
    first, second = (report.path for report in plan.reports)
    entry = lambda file, titles, state: {"file": f"/testbed/{file}", "titles": titles, "state": state}  # noqa: E731
    lines = [
        _record(first, "entry", list="tests", entry=entry("test/a.test.js", ["d", "one"], "passed")),
        _record(first, "entry", list="tests", entry=entry("test/a.test.js", ["d", "two"], "failed")),
        "not json", json.dumps(["R", "x"]), _record("/tmp/elsewhere.json", "end", fields={"complete": True}),
        # A line the tests' code adds: it cannot turn the real failure into a pass.
        _record(first, "entry", list="tests", entry=entry("test/a.test.js", ["d", "two"], "passed")),
        _record(first, "end", fields={"runner": "mocha", "complete": True}),
        _record(second, "entry", list="tests", entry=entry("test/b.test.js", ["three"], "passed")),
    ]
    outcomes = streamed_outcomes(plan, "\n".join(lines))
    # b's process never ended its stream: its file counts as an error, as a report never written does.
    assert outcomes == {ids[0]: TestStatus.PASSED, ids[1]: TestStatus.FAILED, ids[2]: TestStatus.ERROR}
    ended = "\n".join([*lines, _record(second, "end", fields={"complete": True})])
    assert streamed_outcomes(plan, ended)[ids[2]] == TestStatus.PASSED


def test_a_passing_twin_of_a_failing_test_in_one_report_cannot_hide_the_failure():
    """Two tests of one title in one block (the code under test can register a passing twin after
    each test it wraps): the id keeps the failure, in every report format, as the stream does."""
    jest = {"testResults": [{"name": "/testbed/test/a.test.js", "status": "failed", "assertionResults": [
        {"ancestorTitles": ["d"], "title": "one", "status": "failed"},
        {"ancestorTitles": ["d"], "title": "one", "status": "passed"}]}]}
    assert parse_jest_json(json.dumps(jest)) == {"test/a.test.js::d > one": TestStatus.FAILED}
    mocha = {"complete": True, "tests": [{"file": "/testbed/test/a.test.js", "titles": ["d", "one"], "state": state}
                                         for state in ("failed", "passed")]}
    assert parse_mocha_json(json.dumps(mocha)) == {"test/a.test.js::d > one": TestStatus.FAILED}
    jasmine = {"complete": True, "tests": [{"titles": ["d", "one"], "state": state} for state in ("failed", "passed")]}
    assert parse_jasmine_json(json.dumps(jasmine), "spec/a.spec.js") == {"spec/a.spec.js::d > one": TestStatus.FAILED}
    node = "TAP version 13\nnot ok 1 - one\nok 2 - one\n1..2\n"
    assert parse_node_tap(node, "test/a.test.js") == {"test/a.test.js::one": TestStatus.FAILED}
    assert parse_ava_tap(node, "test/a.test.js") == {"test/a.test.js::one": TestStatus.FAILED}
    tape = "TAP version 13\n# one\nnot ok 1 should be equal\n# one\nok 2 should be equal\n\n1..2\n"
    assert parse_tape_tap(tape, "test/a.test.js") == {"test/a.test.js::one": TestStatus.FAILED}
    # Across reports too (a file run twice).
    plan = plan_run("mocha", ["test/a.test.js::d > one", "test/b.test.js::two"], "/tmp/r")
    first, second = (report.path for report in plan.reports)
    texts = {first: json.dumps(mocha), second: json.dumps({"complete": True, "tests": [
        {"file": "/testbed/test/a.test.js", "titles": ["d", "one"], "state": "passed"}]})}
    assert reported_outcomes(plan, texts.get)["test/a.test.js::d > one"] == TestStatus.FAILED


def test_a_jest_stream_reads_as_its_json_report():
    ids = ["test/a.test.js::d > one", "test/a.test.js::d > two", "test/broken.test.js::x"]
    plan = plan_run("jest", ids, "/tmp/r", outcome_fifo="/tmp/f")
    [report] = plan.reports
    lines = [
        _record(report.path, "entry", list="testResults", entry={"name": "/testbed/test/a.test.js", "status": "failed",
                "assertionResults": [{"ancestorTitles": ["d"], "title": "one", "status": "passed"},
                                     {"ancestorTitles": ["d"], "title": "two", "status": "failed"}]}),
        _record(report.path, "entry", list="testResults",
                entry={"name": "/testbed/test/broken.test.js", "status": "failed", "assertionResults": []}),
        _record(report.path, "end", fields={"runner": "jest"}),
    ]
    assert streamed_outcomes(plan, "\n".join(lines)) == {
        ids[0]: TestStatus.PASSED, ids[1]: TestStatus.FAILED, ids[2]: TestStatus.ERROR}
    assert streamed_outcomes(plan, "\n".join(lines[:2])) == dict.fromkeys(ids, TestStatus.MISSING)


#: What Node 18.20 and 20.19 both wrote, run on a file with odd names (their reports, the lines kept).
NODE_TAP = """TAP version 13
# Subtest: has \\# hash and \\\\ backslash
ok 1 - has \\# hash and \\\\ backslash
# Subtest: new\\\\nline\\\\ttab
ok 2 - new\\\\nline\\\\ttab
# Subtest:   spaced \x20
ok 3 -   spaced \x20
# Subtest: skip reason
ok 4 - skip reason # SKIP because
# Subtest: group
    # Subtest: inner ok
    ok 1 - inner ok
    # Subtest: inner bad
    not ok 2 - inner bad
    # Subtest: inner todo
    ok 3 - inner todo # TODO
    1..3
not ok 5 - group
1..5
"""


def test_a_node_stream_names_its_tests_as_the_tap_report_does():
    # The points node_reporter.mjs sends for the run NODE_TAP reports (names as the events give them).
    point = lambda name, ok=True, directive="", children=(): {  # noqa: E731
        "name": name, "ok": ok, "directive": directive, "children": list(children)}
    points = [point("has # hash and \\ backslash"), point("new\nline\ttab"), point("  spaced  "),
              point("skip reason", directive="skip"),
              point("group", False, children=[point("inner ok"), point("inner bad", False), point("inner todo", True, "todo")])]
    reported = parse_node_tap(NODE_TAP, "test/odd.test.js")
    assert TestStatus.FAILED in reported.values() and TestStatus.SKIPPED in reported.values()
    ids = list(reported)
    plan = plan_run("node", ids, "/tmp/r", outcome_fifo="/tmp/f")
    [report] = plan.reports
    lines = [_record(report.path, "entry", list="tests", entry=one) for one in points]
    end = _record(report.path, "end", fields={"runner": "node", "complete": True})
    assert streamed_outcomes(plan, "\n".join([*lines, end])) == reported
    # A forged pass of the failed test cannot hide its failure; a stream never ended errs its file.
    forged = _record(report.path, "entry", list="tests", entry=point("group", children=[point("inner bad")]))
    assert streamed_outcomes(plan, "\n".join([*lines, forged, end])) == reported
    assert set(streamed_outcomes(plan, "\n".join(lines)).values()) == {TestStatus.ERROR}


def test_a_tape_stream_reads_its_failures_under_the_line_the_report_does():
    tap = ("TAP version 13\n# pads\nok 1 should be equal\n# shouts\nnot ok 2 should be equal\n  ---\n  ...\n"
           "# a comment the test wrote\nnot ok 3 after the comment\nnot ok 4 later # TODO\n# SKIP skipped why\n"
           "\n1..4\n# tests 4\n")
    reported = parse_tape_tap(tap, "test/t.test.js")
    ids = list(reported)
    plan = plan_run("tape", ids, "/tmp/r", outcome_fifo="/tmp/f")
    [report] = plan.reports
    entries = [{"header": "# pads"}, {"header": "# shouts"}, {"header": "# shouts", "point": "should be equal"},
               {"header": "# a comment the test wrote"},
               {"header": "# a comment the test wrote", "point": "after the comment"},
               {"header": "# a comment the test wrote", "point": "later # TODO"}, {"header": "# SKIP skipped why"}]
    lines = [_record(report.path, "entry", list="tests", entry=entry) for entry in entries]
    end = _record(report.path, "end", fields={"runner": "tape", "complete": True})
    assert streamed_outcomes(plan, "\n".join([*lines, end])) == reported == {
        "test/t.test.js::pads": TestStatus.PASSED, "test/t.test.js::shouts": TestStatus.FAILED,
        "test/t.test.js::a comment the test wrote": TestStatus.FAILED,
        "test/t.test.js::skipped why": TestStatus.SKIPPED}
    assert set(streamed_outcomes(plan, "\n".join(lines)).values()) == {TestStatus.ERROR}


def test_the_tap_runners_stream_through_programs_of_their_own():
    node = plan_run("node", ["test/a.test.js::t"], "/tmp/r", outcome_fifo="/tmp/f",
                    invocation=Invocation("test", node_options=("--require", "./test/setup.js"))).command
    # The stream's module first: the script's preloads run in the runner's process too, after it.
    assert "node --require /opt/repo2env/outcome_stream.js --require ./test/setup.js --test" in node
    assert ("--test-reporter=tap --test-reporter-destination=/tmp/r/node-0.tap "
            "--test-reporter=/opt/repo2env/node_reporter.mjs --test-reporter-destination=stdout") in node
    tape = plan_run("tape", ["test/a.test.js::t"], "/tmp/r", outcome_fifo="/tmp/f").command
    assert "REPO2ENV_OUTCOME_REPORT=/tmp/r/tape-0.tap node /opt/repo2env/tape_stream.js" in tape
    assert "tape_stream" not in plan_run("tape", ["test/a.test.js::t"], "/tmp/r").command


def test_plans_run_whole_files_unfiltered_and_titles_by_pattern():
    ids = ["test/a.test.js", "test/a.test.js::x > y", "test/b.test.js::p > q", "test/c.test.js::r"]
    jest = plan_run("jest", ids, "/tmp/r")
    assert [report.path for report in jest.reports] == ["/tmp/r/jest-0.json", "/tmp/r/jest-1.json"]
    first, second = jest.command.split("; (")[1:3]
    assert "--runTestsByPath test/a.test.js" in first and " -t " not in first
    assert "-t '^ *(?:p q|r)$'" in second and "test/b.test.js test/c.test.js" in second
    mocha = plan_run("mocha", ids, "/tmp/r", invocation=Invocation("test", {"TZ": "UTC"}, ("--require", "t/env")))
    assert [report.file for report in mocha.reports] == ["test/a.test.js", "test/b.test.js", "test/c.test.js"]
    assert "TZ=UTC" in mocha.command and "--require t/env" in mocha.command
    assert "--grep '^ *(?:p q)$'" in mocha.command
    # In a workspace package, files are passed relative to the package, ids stay repository-relative.
    workspace = plan_run("vitest", ["packages/core/test/a.test.ts::t"], "/tmp/r", directory="packages/core")
    assert workspace.command.startswith("cd /testbed/packages/core && ")
    assert " test/a.test.ts" in workspace.command and workspace.test_ids == ("packages/core/test/a.test.ts::t",)
    node = plan_run("node", ["test/a.test.js::d > it works"], "/tmp/r")
    assert "--test-name-pattern='(?:^| )(?:it works)$'" in node.command
    ava = plan_run("ava", ["test/a.js::!negated", "test/a.js::plain"], "/tmp/r")
    assert "--match '*!negated' --match plain" in ava.command
    with pytest.raises(ValueError):
        plan_run("karma", ids, "/tmp/r")
