"""repo2env: merged pull requests -> RL environments for coding agents.

Standard library only, and Python 3.9 syntax: Harbor tasks' verifiers carry a copy of this file.
"""

from __future__ import annotations

__version__ = "0.1.0"

#: The distribution's name on package indexes (``pip install repo2env-rl``): the name ``repo2env`` on
#: PyPI belongs to an unrelated project. The import package and the command stay ``repo2env``.
DISTRIBUTION = "repo2env-rl"


def install_hint(extra: str | None = None) -> str:
    """The pip command that installs this package (with ``extra``), for messages and generated files."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"
