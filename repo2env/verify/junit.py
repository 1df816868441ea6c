"""Reading pytest's JUnit XML into per-test outcomes, failing closed.

pytest names a test in JUnit as (classname, name): the node id's file path with ``/`` turned into
``.`` and ``.py`` dropped, plus any classes, then the function name with its parameters
(``tests/test_a.py::TestX::test_y[1]`` -> ``("tests.test_a.TestX", "test_y[1]")``). The parameters
are opaque: they may hold ``::``, ``.``, ``/``, ``[`` and ``]``, so a node id is split the way
pytest splits it, never on every ``::``. A test that is absent, errored, skipped or xfailed is not
passed; so is every test when the XML cannot be read.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable

# split_node_id lives below every layer; importers of it from here keep working.
from repo2env.languages.test_ids import split_node_id
from repo2env.outcomes import TestStatus

_RANK = {TestStatus.PASSED: 0, TestStatus.SKIPPED: 1, TestStatus.FAILED: 2, TestStatus.ERROR: 3}


class JUnitError(ValueError):
    """The XML is missing or cannot be parsed."""


def junit_keys(node_id: str) -> list[tuple[str, str]]:
    """The (classname, name) pairs pytest may write for a node id, the current spelling first.

    Older pytest looked for the parameters' ``[`` before the first ``::`` too, so a file path
    holding ``[`` was split there; that older spelling is the second candidate when it differs."""
    path, names, params = split_node_id(node_id)
    keys = [_junit_key(path, names, params)]
    legacy_head, bracket, legacy_params = node_id.partition("[")
    legacy_path, *legacy_names = legacy_head.split("::")
    legacy = _junit_key(legacy_path, legacy_names, bracket + legacy_params)
    return keys if legacy in keys else [*keys, legacy]


def junit_key(node_id: str) -> tuple[str, str]:
    """pytest's (classname, name) for a node id."""
    return junit_keys(node_id)[0]


def _junit_key(path: str, names: list[str], params: str) -> tuple[str, str]:
    module = re.sub(r"\.py$", "", path.replace("/", "."))
    # "()" is the instance level that pytest < 7 put in node ids of methods; JUnit leaves it out.
    parts = [module, *[name for name in names if name != "()"]]
    parts[-1] += params
    return ".".join(parts[:-1]), _xml_visible(parts[-1])


def _xml_visible(text: str) -> str:
    """What pytest's ``bin_xml_escape`` makes of a name: characters XML cannot hold become ``#xNN``."""
    return _XML_ILLEGAL.sub(lambda match: f"#x{ord(match.group()):02X}" if ord(match.group()) <= 0xFF
                            else f"#x{ord(match.group()):04X}", text)


_XML_ILLEGAL = re.compile("[^\u0009\u000a\u000d\u0020-\u007e\u0080-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


#: Options of collection and of every run that keep node ids and JUnit names what this module
#: expects, whatever the repository's configuration says (given last, they win over its addopts):
#: - one rootdir, the folder they run in. Node ids are relative to pytest's rootdir, the folder of
#:   the nearest ini file above the tests: with ``tests/pytest.ini`` the ids (``test_a.py::test_x``)
#:   would name no file from ``/testbed`` and could not be selected. The ini file is still read.
#: - no JUnit prefix: ``--junitprefix=NAME`` in addopts would put NAME before every classname.
ID_OPTIONS = "--rootdir=/testbed --junitprefix="

#: JUnit names as pytest 5+ writes them by default, from every pytest that has the ini option. One
#: word, ``=`` and all: pytest 3's ``-o`` takes any number of values and would swallow the test ids
#: that follow it ("-o/--override-ini expects option=value style").
JUNIT_FAMILY_OPTION = "--override-ini=junit_family=xunit2"

#: The pytest release that brought each option repo2env passes (older pytest refuses it as an
#: unrecognized argument: a 2016 commit's pinned pytest 2.8): ``--rootdir`` 3.5, ``-o``
#: (``--override-ini``) and ``--continue-on-collection-errors`` 3.0.
_OPTION_SINCE = {"--rootdir": (3, 5), "-o": (3, 0), "--override-ini": (3, 0), "--continue-on-collection-errors": (3, 0)}


def pytest_options(options: str | list[str], pytest_version: str | None) -> list[str]:
    """``options`` (shell words) without the ones ``pytest_version`` lacks (an option's value goes
    with it); all of them when the version is unknown. Without ``--rootdir`` pytest < 3.5 takes the
    folder of the repository's ini file or setup.py as its rootdir: ``/testbed`` for nearly every
    project of that time."""
    words = shlex.split(options) if isinstance(options, str) else list(options)
    version = _release(pytest_version)
    kept: list[str] = []
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
            continue
        since = _OPTION_SINCE.get(word.split("=", 1)[0])
        if version is not None and since is not None and version < since:
            skip_value = word == "-o"
            continue
        kept.append(word)
    return kept


def names_its_rootdir(pytest_version: str | None) -> bool:
    """Whether this pytest keeps the rootdir it is given (``--rootdir``, 3.5+; an unknown version is
    taken to). An older one, given its configuration file with ``-c``, takes the test files' common
    folder as its rootdir instead (``tests/``), and its ids and JUnit names would no longer be the
    ones derivation saw."""
    version = _release(pytest_version)
    return version is None or version >= _OPTION_SINCE["--rootdir"]


def _release(version: str | None) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None

#: Most bytes of ids one pytest command line gets; the kernel allows 2 MiB of arguments and
#: environment together, and the grading script's environment and options take some of it.
SELECTION_MAX_BYTES = 1_500_000
#: Most ids one pytest command line names one by one. Old pytest (3.x) collects a module again for
#: each id it is given: 400 ids of one module took 66 s there against 1.5 s for the file (measured on
#: a 2019 marshmallow task), so a derivation or a grading of a large test file took minutes.
SELECTION_MAX_IDS = 100


def selection_args(test_ids: Iterable[str], *, max_bytes: int = SELECTION_MAX_BYTES,
                   max_ids: int = SELECTION_MAX_IDS) -> list[str]:
    """The command-line arguments that make pytest run ``test_ids``, each at most once.

    pytest before 7 split an argument on every ``::``, so a parametrised id with ``::`` inside its
    brackets selects nothing there (``ERROR: not found``) and the whole run is lost; such an id is
    selected by its function instead, and its own outcome is still read from the report. Ids that
    would not fit on one command line (a whole large suite), or more than ``max_ids`` of them (old
    pytest's cost grows with the square of their number), are selected by their files: more tests
    run, and only the requested ones are read."""
    selected: dict[str, None] = {}
    for test_id in test_ids:
        path, names, params = split_node_id(test_id)
        if "::" in params:
            test_id = "::".join([path, *names])
        selected[test_id] = None
    if len(selected) > max_ids or sum(len(argument.encode()) + 1 for argument in selected) > max_bytes:
        return list(dict.fromkeys(split_node_id(argument)[0] for argument in selected))
    return list(selected)


def parse_junit(xml_text: str) -> dict[tuple[str, str], TestStatus]:
    """Every testcase's outcome; a test reported twice (a failing teardown) keeps its worst outcome."""
    if not xml_text.strip():
        raise JUnitError("the JUnit XML is empty")
    try:
        root = ElementTree.fromstring(xml_text)
    except ElementTree.ParseError as exc:
        raise JUnitError(f"the JUnit XML cannot be parsed: {exc}") from None
    outcomes: dict[tuple[str, str], TestStatus] = {}
    for case in root.iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        status = TestStatus.PASSED
        for child in case:
            if child.tag == "failure":
                status = max(status, TestStatus.FAILED, key=_RANK.__getitem__)
            elif child.tag == "error":
                status = max(status, TestStatus.ERROR, key=_RANK.__getitem__)
            elif child.tag == "skipped":  # skips and xfails alike: the test did not pass
                status = max(status, TestStatus.SKIPPED, key=_RANK.__getitem__)
        previous = outcomes.get(key)
        outcomes[key] = status if previous is None else max(previous, status, key=_RANK.__getitem__)
    return outcomes


def failure_lines(test_ids: Iterable[str], xml_text: str | None, *, limit: int = 20) -> dict[str, str]:
    """For each of ``test_ids`` (at most ``limit``), the first line of why the report says it did
    not pass (its failure, error or skip message), or that the report does not hold it."""
    try:
        root = ElementTree.fromstring(xml_text) if xml_text and xml_text.strip() else None
    except ElementTree.ParseError:
        root = None
    reasons: dict[tuple[str, str], str] = {}
    for case in root.iter("testcase") if root is not None else ():
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                text = (child.get("message") or child.text or child.tag).strip()
                first = next((line.strip() for line in text.splitlines() if line.strip()), child.tag)
                reasons.setdefault((case.get("classname", ""), case.get("name", "")), f"{child.tag}: {first[:200]}")
    lines: dict[str, str] = {}
    for test_id in list(test_ids)[:limit]:
        found = next((reasons[key] for key in junit_keys(test_id) if key in reasons), None)
        lines[test_id] = found or "not in the report (not collected, or not run)"
    return lines


#: Why a run's outcomes are all missing when pytest wrote no report.
NO_JUNIT = "no JUnit XML was written"


def outcomes_for(test_ids: Iterable[str], xml_text: str | None) -> tuple[dict[str, TestStatus], str | None]:
    """Each requested test's outcome (MISSING when absent), and why everything failed if it did."""
    test_ids = list(test_ids)
    if xml_text is None:
        return {test_id: TestStatus.MISSING for test_id in test_ids}, NO_JUNIT
    try:
        parsed = parse_junit(xml_text)
    except JUnitError as exc:
        return {test_id: TestStatus.MISSING for test_id in test_ids}, str(exc)
    return {test_id: _lookup(parsed, test_id) for test_id in test_ids}, None


def _lookup(parsed: dict[tuple[str, str], TestStatus], test_id: str) -> TestStatus:
    for key in junit_keys(test_id):
        if key in parsed:
            return parsed[key]
    return TestStatus.MISSING
