"""Per-test outcomes from the reports JavaScript test runners write: ``{test_id: TestStatus}``.

Each parser reads one report as the runner wrote it and gives the id (:mod:`.test_ids`) of every
test it names. A file that failed to load is given under the file's own id with ``ERROR``. Paths
in reports are absolute (jest, vitest, mocha) and are made relative to ``root``, the repository
root inside the container; a path outside ``root`` is kept as it is (it matches no requested id).

Parsers never guess: a report that is not what the runner writes (not JSON, no test list, a TAP
stream without its closing plan) raises :class:`ReportError` or, for TAP, marks the file ``ERROR``.
:func:`requested_outcomes` then keeps only the ids that were asked for; an id the report does not
name is ``MISSING`` (grading counts it as a failure), and an id of a file that failed to load is
``ERROR``.

Formats, as the runners write them (see ``docs/languages.md``):

- jest ``--json --outputFile`` and vitest ``--reporter=json --outputFile``: one JSON object with
  ``testResults[].assertionResults[]`` (``ancestorTitles``, ``title``, ``status``); a file whose
  suite failed to run has ``status: "failed"``, a ``message`` and no assertion results;
- mocha and jasmine: the JSON our reporters (``mocha_reporter.js``, ``jasmine_reporter.js``) write,
  with each test's title path (the runners' own reporters join describe titles with spaces, which
  cannot be split back);
- TAP 13 (ava ``--tap``, tape, ``node --test --test-reporter=tap``), one stream per test file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from repo2env.languages.javascript.test_ids import split_test_id, test_id
from repo2env.outcomes import TestStatus


class ReportError(ValueError):
    """A report that is not what the runner writes: it proves nothing about any test."""


_JEST_STATUS = {
    "passed": TestStatus.PASSED,
    "failed": TestStatus.FAILED,
    "pending": TestStatus.SKIPPED,
    "skipped": TestStatus.SKIPPED,
    "todo": TestStatus.SKIPPED,
    "disabled": TestStatus.SKIPPED,
    "focused": TestStatus.PASSED,  # jest's name for a passed test.only in some versions
}


def relative_path(path: str, root: str) -> str:
    """``/testbed/test/a.js`` with root ``/testbed`` -> ``test/a.js``; relative paths are kept."""
    path = path.removeprefix("file://")
    pure, base = PurePosixPath(path), PurePosixPath(root)
    if pure.is_absolute():
        try:
            return pure.relative_to(base).as_posix()
        except ValueError:
            return pure.as_posix()
    return pure.as_posix().removeprefix("./")


def keep_worse(outcomes: dict[str, TestStatus], key: str, status: TestStatus) -> None:
    """Record ``status`` for ``key``. An id reported twice in one report (two tests of one title in
    one block) keeps its first outcome that is not a pass: a passing twin registered after a failing
    test cannot hide the failure, and the report reads as the live stream does (which keeps the worse
    outcome of each entry, ``runners.reported_outcomes``)."""
    if outcomes.get(key, TestStatus.PASSED) == TestStatus.PASSED:
        outcomes[key] = status


def parse_jest_json(text: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from jest's ``--json`` report (vitest's ``json`` reporter writes the same shape)."""
    report = _load_json(text, "jest/vitest JSON")
    results = report.get("testResults")
    if not isinstance(results, list):
        raise ReportError("the JSON report has no testResults list")
    outcomes: dict[str, TestStatus] = {}
    for file_result in results:
        if not isinstance(file_result, dict) or not isinstance(file_result.get("name"), str):
            raise ReportError("a testResults entry without a file name")
        file = relative_path(file_result["name"], root)
        assertions = file_result.get("assertionResults") or []
        for assertion in assertions:
            # vitest 1 lists the file's own unnamed suite as an ancestor titled "": not a describe block.
            ancestors = [title for title in assertion.get("ancestorTitles", []) if title != ""]
            titles = [*ancestors, assertion.get("title", "")]
            status = _JEST_STATUS.get(str(assertion.get("status")), TestStatus.ERROR)
            keep_worse(outcomes, test_id(file, titles), status)
        if file_result.get("status") == "failed" and not assertions:
            outcomes[test_id(file)] = TestStatus.ERROR  # the suite failed to run: an error at load
    return outcomes


parse_vitest_json = parse_jest_json

_MOCHA_STATE = {"passed": TestStatus.PASSED, "failed": TestStatus.FAILED, "pending": TestStatus.SKIPPED}


def parse_mocha_json(text: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from the report of ``mocha_reporter.js`` (``{"tests": [...], "complete": true}``).

    A failed hook (``before``/``beforeEach``...) fails the tests it held back from running: they
    are reported by the hook's suite path, and the tests of that suite that did not run are
    missing from the report (so ``MISSING``, a failure, for a grader)."""
    report = _load_json(text, "mocha reporter JSON")
    tests = report.get("tests")
    if not isinstance(tests, list) or report.get("complete") is not True:
        raise ReportError("the mocha report is incomplete (no test list, or the run did not end)")
    outcomes: dict[str, TestStatus] = {}
    for test in tests:
        titles, file = test.get("titles"), test.get("file")
        if not isinstance(titles, list) or not isinstance(file, str):
            raise ReportError("a mocha report entry without titles or file")
        keep_worse(outcomes, test_id(relative_path(file, root), [str(title) for title in titles]),
                   _MOCHA_STATE.get(str(test.get("state")), TestStatus.ERROR))
    return outcomes


_JASMINE_STATE = {"passed": TestStatus.PASSED, "failed": TestStatus.FAILED, "pending": TestStatus.SKIPPED,
                  "excluded": TestStatus.SKIPPED}


def parse_jasmine_json(text: str, file: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from the report of ``jasmine_reporter.js`` for the one spec file ``file`` (jasmine's
    results do not name files). ``excluded`` (filtered out, or not focused) and ``pending`` are
    skipped. Errors outside any spec (an ``afterAll`` that threw, a file that failed at load in
    jasmines that go on) make the file ``ERROR``."""
    report = _load_json(text, "jasmine reporter JSON")
    tests = report.get("tests")
    if not isinstance(tests, list) or report.get("complete") is not True:
        raise ReportError("the jasmine report is incomplete (no spec list, or the run did not end)")
    outcomes: dict[str, TestStatus] = {}
    for test in tests:
        titles = test.get("titles") if isinstance(test, dict) else None
        if not isinstance(titles, list):
            raise ReportError("a jasmine report entry without titles")
        keep_worse(outcomes, test_id(file, [str(title) for title in titles]),
                   _JASMINE_STATE.get(str(test.get("state")), TestStatus.ERROR))
    if report.get("global_errors"):
        outcomes[test_id(file)] = TestStatus.ERROR
    return outcomes


@dataclass
class _TapPoint:
    name: str
    ok: bool
    directive: str  # "", "skip" or "todo"
    depth: int
    children: list[_TapPoint] = field(default_factory=list)


_TAP_POINT = re.compile(r"^(?P<indent> *)(?P<ok>ok|not ok)\b(?: +(?P<number>\d+))?(?: +-)?(?: +(?P<rest>.*))?$")
_TAP_PLAN = re.compile(r"^(?P<indent> *)1\.\.(?P<count>\d+)\b")
_TAP_SUBTEST = re.compile(r"^(?P<indent> *)# Subtest: (?P<name>.*)$")
_DIRECTIVE = re.compile(r"(?<!\\)#\s*(?P<word>skip|todo)\b.*$", re.IGNORECASE)


def _split_directive(rest: str) -> tuple[str, str]:
    match = _DIRECTIVE.search(rest)
    if not match:
        return rest.strip(), ""
    return rest[:match.start()].strip(), match.group("word").lower()


def _tap_unescape(name: str) -> str:
    return re.sub(r"\\([\\#])", r"\1", name)


def _tap_status(point: _TapPoint) -> TestStatus:
    if point.directive:
        return TestStatus.SKIPPED
    return TestStatus.PASSED if point.ok else TestStatus.FAILED


def _tap_tree(text: str) -> tuple[list[_TapPoint], bool]:
    """The test points of a TAP stream with node's indented subtests as children, and whether the
    top level's plan closed it. Points of one level must count up from 1 (a line that does not,
    e.g. ``ok 99`` printed by a test, is not a test point)."""
    levels: dict[int, list[_TapPoint]] = {}
    top: list[_TapPoint] = []
    closed = False
    for line in text.splitlines():
        point = _TAP_POINT.match(line)
        if point:
            depth = len(point.group("indent"))
            siblings = levels.setdefault(depth, [])
            number = point.group("number")
            if number is not None and int(number) != len(siblings) + 1:
                continue
            name, directive = _split_directive(point.group("rest") or "")
            node = _TapPoint(name=_tap_unescape(name), ok=point.group("ok") == "ok", directive=directive, depth=depth)
            node.children = [child for deeper, points in sorted(levels.items()) if deeper > depth for child in points]
            for deeper in [deeper for deeper in levels if deeper > depth]:
                del levels[deeper]
            siblings.append(node)
            if depth == 0:
                top.append(node)
            continue
        plan = _TAP_PLAN.match(line)
        if plan and not plan.group("indent") and int(plan.group("count")) == len(levels.get(0, [])):
            closed = True
    return top, closed


def parse_node_tap(text: str, file: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from ``node --test --test-reporter=tap`` run on the one test file ``file``.

    ``describe`` blocks are the points with subtests; their leaves are the tests. Node wraps a
    file's tests in a point named by the file's path when it runs the file in a subprocess (Node 18
    always, later Nodes when the file fails to load): that wrapper is unwrapped, and when it failed
    with no test inside, the file failed to load."""
    top, closed = _tap_tree(text)
    outcomes: dict[str, TestStatus] = {}
    file_names = {file, f"{root.rstrip('/')}/{file}", f"./{file}"}
    for point in top:
        if point.name in file_names:
            if point.children:
                _node_leaves(point.children, file, (), outcomes)
            elif not point.ok:
                outcomes[test_id(file)] = TestStatus.ERROR
            continue
        _node_leaves([point], file, (), outcomes)
    if not closed:
        outcomes[test_id(file)] = TestStatus.ERROR
    return outcomes


def _node_leaves(points: list[_TapPoint], file: str, parents: tuple[str, ...],
                 outcomes: dict[str, TestStatus]) -> None:
    for point in points:
        titles = (*parents, point.name)
        if point.children:
            _node_leaves(point.children, file, titles, outcomes)
        else:
            keep_worse(outcomes, test_id(file, titles), _tap_status(point))


def parse_ava_tap(text: str, file: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from ``ava --tap`` run on the one test file ``file`` (run alone, ava names a test by
    its title). Ava reports a file that failed as a point naming the file (``<file> exited with a
    non-zero exit code``, ``No tests found in <file>``): that file is ``ERROR``; so is a stream
    without its plan or without any test."""
    top, closed = _tap_tree(text)
    outcomes: dict[str, TestStatus] = {}
    failed_file = not closed
    for point in top:
        if not point.ok and not point.directive and file in point.name and re.search(
                r"exited|uncaught|unhandled|no tests found|timed out", point.name, re.IGNORECASE):
            failed_file = True
            continue
        keep_worse(outcomes, test_id(file, [point.name]), _tap_status(point))
    if failed_file or not top:  # no test at all ("1..0"): the file did not run as asked
        outcomes[test_id(file)] = TestStatus.ERROR
    return outcomes


_TAPE_TEST = re.compile(r"^# (?P<skip>SKIP |TODO )?(?P<name>.*)$")


def parse_tape_tap(text: str, file: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from tape run on the one test file ``file``. Tape writes a ``# <name>`` comment
    when a test (or a ``t.test`` subtest: tape does not nest names) starts, then its assertions:
    a test passes when none of its assertions failed, ``# SKIP <name>`` and ``# TODO <name>`` are skipped. Assertion
    numbers must count up from 1 (a stray ``ok 99`` a test prints is ignored), and the stream must
    end with a plan matching that count, else the file is ``ERROR``."""
    outcomes: dict[str, TestStatus] = {}
    current: str | None = None
    assertions = 0
    closed = False
    for line in text.splitlines():
        if not line.startswith(("#", "ok", "not ok", "1..")):
            continue
        point = _TAP_POINT.match(line)
        if point and not point.group("indent"):
            number = point.group("number")
            if number is None or int(number) != assertions + 1:
                continue
            assertions += 1
            _, directive = _split_directive(point.group("rest") or "")
            if current is not None and point.group("ok") == "not ok" and not directive:
                outcomes[test_id(file, [current])] = TestStatus.FAILED
            continue
        plan = _TAP_PLAN.match(line)
        if plan and not plan.group("indent"):
            closed = int(plan.group("count")) == assertions
            current = None
            continue
        comment = _TAPE_TEST.match(line)
        if comment and not closed:
            name = comment.group("name")
            if comment.group("skip"):
                outcomes[test_id(file, [name])] = TestStatus.SKIPPED
                current = None
            else:
                current = name
                outcomes.setdefault(test_id(file, [name]), TestStatus.PASSED)
    if not closed:
        outcomes[test_id(file)] = TestStatus.ERROR
    return outcomes


# --- the live outcome stream of the TAP runners ---------------------------------------------------
# Their stream's entries (``node_reporter.mjs``, ``tape_stream.js``) hold what the TAP report's lines
# are made of; each is read by writing those lines and reading them as the report is read, so that
# the stream and the report name the same tests alike.


def _stream_tests(text: str, what: str) -> list:
    report = _load_json(text, what)
    tests = report.get("tests")
    if not isinstance(tests, list) or report.get("complete") is not True:
        raise ReportError(f"the {what} is incomplete (no test list, or the run did not end)")
    return tests


def _node_tap_escape(name: str) -> str:
    """A name as Node's TAP reporter writes it (its ``tapEscape``)."""
    for char, escaped in (("\b", "\\b"), ("\f", "\\f"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"),
                          ("\v", "\\v"), ("\\", "\\\\"), ("#", "\\#")):
        name = name.replace(char, escaped)
    return name


def _node_tap_lines(point: object, number: int, depth: int) -> list[str]:
    if not isinstance(point, dict) or not isinstance(point.get("children", []), list):
        raise ReportError("a node stream entry that is not a test point")
    indent = "    " * depth
    lines = [line for child_number, child in enumerate(point.get("children", []), 1)
             for line in _node_tap_lines(child, child_number, depth + 1)]
    directive = {"skip": " # SKIP", "todo": " # TODO"}.get(str(point.get("directive")), "")
    lines.append(f"{indent}{'ok' if point.get('ok') is True else 'not ok'} {number} - "
                 f"{_node_tap_escape(str(point.get('name', '')))}{directive}")
    return lines


def parse_node_stream(text: str, file: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from the live stream of ``node_reporter.mjs`` for the one test file ``file``
    (``{"tests": [top-level point, ...], "complete": true}``, each point its ``name``, ``ok``,
    ``directive`` and subtests' points): written as Node's TAP reporter writes them and read by
    :func:`parse_node_tap`."""
    points = _stream_tests(text, "node stream")
    lines = [line for number, point in enumerate(points, 1) for line in _node_tap_lines(point, number, 0)]
    return parse_node_tap("\n".join(["TAP version 13", *lines, f"1..{len(points)}"]), file, root)


def parse_tape_stream(text: str, file: str, root: str = "/testbed") -> dict[str, TestStatus]:
    """Outcomes from the live stream of ``tape_stream.js`` for the one test file ``file``
    (``{"tests": [{"header"} or {"header", "point"}, ...], "complete": true}``: a ``#`` line tape
    wrote, and an assertion it wrote ``not ok`` under it): written as tape writes them and read by
    :func:`parse_tape_tap`."""
    lines = ["TAP version 13"]
    failed = 0
    for entry in _stream_tests(text, "tape stream"):
        if not isinstance(entry, dict) or not isinstance(entry.get("header"), str):
            raise ReportError("a tape stream entry without its # line")
        lines.append(entry["header"])
        if isinstance(entry.get("point"), str):
            failed += 1
            lines.append(f"not ok {failed} {entry['point']}".rstrip())
    return parse_tape_tap("\n".join([*lines, f"1..{failed}"]), file, root)


def requested_outcomes(requested: Iterable[str], reported: Mapping[str, TestStatus]) -> dict[str, TestStatus]:
    """The outcome of each requested id: as reported; ``ERROR`` when it was not reported and its
    file failed to load; ``MISSING`` otherwise."""
    outcomes: dict[str, TestStatus] = {}
    for one in requested:
        if one in reported:
            outcomes[one] = reported[one]
            continue
        file, _ = split_test_id(one)
        outcomes[one] = TestStatus.ERROR if reported.get(file) == TestStatus.ERROR else TestStatus.MISSING
    return outcomes


def _load_json(text: str, what: str) -> dict:
    try:
        report = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ReportError(f"the {what} report is not JSON ({exc})") from None
    if not isinstance(report, dict):
        raise ReportError(f"the {what} report is not a JSON object")
    return report
