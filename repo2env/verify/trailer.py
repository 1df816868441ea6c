"""The end of the grading script's output: ``REPO2ENV-GRADE-TRAILER <pytest status> <XML bytes>``
after the test output's tail and the JUnit XML (see ``verify/scripts/grade.sh``). Standard library
only: a Harbor task's verifier reads it inside the sandbox."""

from __future__ import annotations

import re

TRAILER = "REPO2ENV-GRADE-TRAILER"


def parse_trailer(output: str) -> tuple[int, str | None, str] | None:
    """(pytest exit status, JUnit XML or None, test output) from the script's output, or None when
    the trailer is missing (the script did not finish)."""
    raw = output.encode("utf-8", errors="surrogateescape")
    trailer_length = len(TRAILER) + 1 + 3 + 1 + 12 + 2
    tail = raw[-trailer_length:].decode("ascii", errors="replace")
    match = re.fullmatch(rf"\n{re.escape(TRAILER)} (\d{{3}}) (-?\d{{11,12}})\n", tail)
    if match is None:
        return None
    status, size = int(match.group(1)), int(match.group(2))
    body = raw[:-trailer_length]
    if size < 0:
        return status, None, body.decode("utf-8", errors="replace")
    if size > len(body):
        return None
    return status, body[len(body) - size:].decode("utf-8", errors="replace"), body[:len(body) - size].decode("utf-8", errors="replace")
