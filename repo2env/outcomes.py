"""A test's outcome (re-exported by :mod:`repo2env.models`), in a module of its own with no imports
beyond the standard library: the grading modules that read outcomes (``verify/junit.py``,
``verify/reward.py``, ``verify/tamper.py``) also run inside a task's sandbox, under its system
Python (3.9 and up, no pydantic), as a Harbor task's verifier."""

from __future__ import annotations

import enum

try:
    from enum import StrEnum
except ImportError:  # Python < 3.11: the same behaviour for what the grading modules use

    class StrEnum(str, enum.Enum):  # type: ignore[no-redef]  # noqa: UP042 - enum.StrEnum is what is missing
        def __str__(self) -> str:
            return str(self.value)


class TestStatus(StrEnum):
    """One test's outcome. Anything but PASSED counts as a failure when grading."""

    __test__ = False  # not a pytest test class, despite the name

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    MISSING = "missing"
