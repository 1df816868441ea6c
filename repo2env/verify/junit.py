"""Reading pytest's JUnit XML into per-test outcomes, failing closed.

pytest names a test in JUnit as (classname, name): the node id's file path with ``/`` turned into
``.`` and ``.py`` dropped, plus any classes, then the function name with its parameters
(``tests/test_a.py::TestX::test_y[1]`` -> ``("tests.test_a.TestX", "test_y[1]")``). A test that is
absent, errored, skipped or xfailed is not passed; so is every test when the XML cannot be read.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable

from repo2env.models import TestStatus

_RANK = {TestStatus.PASSED: 0, TestStatus.SKIPPED: 1, TestStatus.FAILED: 2, TestStatus.ERROR: 3}


class JUnitError(ValueError):
    """The XML is missing or cannot be parsed."""


def junit_key(node_id: str) -> tuple[str, str]:
    """pytest's (classname, name) for a node id."""
    parts = node_id.split("::")
    path = parts[0]
    module = path[:-3] if path.endswith(".py") else path
    classname = ".".join([module.replace("/", "."), *[part for part in parts[1:-1] if part != "()"]])
    return classname, parts[-1] if len(parts) > 1 else ""


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


def outcomes_for(test_ids: Iterable[str], xml_text: str | None) -> tuple[dict[str, TestStatus], str | None]:
    """Each requested test's outcome (MISSING when absent), and why everything failed if it did."""
    test_ids = list(test_ids)
    if xml_text is None:
        return {test_id: TestStatus.MISSING for test_id in test_ids}, "no JUnit XML was written"
    try:
        parsed = parse_junit(xml_text)
    except JUnitError as exc:
        return {test_id: TestStatus.MISSING for test_id in test_ids}, str(exc)
    return {test_id: parsed.get(junit_key(test_id), TestStatus.MISSING) for test_id in test_ids}, None
