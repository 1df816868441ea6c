"""The logs a grading keeps, each capped: a 50 MB patch must not leave 100 MB of logs behind."""

from __future__ import annotations

from pathlib import Path

#: The most bytes any one grading log keeps (its head), followed by a note of what was cut.
LOG_CAP_BYTES = 1_000_000
#: junit.xml is what rescore reads again, so it keeps more; a report cut at this size fails closed.
JUNIT_CAP_BYTES = 16_000_000


def write_capped_log(path: Path, text: str, *, cap: int = LOG_CAP_BYTES) -> None:
    """Write ``text`` to ``path``, its bytes kept as they came (a patch need not be UTF-8: it is
    carried as surrogate escapes), and at most ``cap`` of them, then a note saying how many there were."""
    data = text.encode("utf-8", errors="surrogateescape")
    if len(data) > cap:
        data = data[:cap] + f"\n[repo2env: log truncated: {len(data)} bytes, the first {cap} kept]\n".encode()
    path.write_bytes(data)
