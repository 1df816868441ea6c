"""Publishing targets on the Hugging Face Hub (``hf://org/name``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from repo2env.errors import InputError


@dataclass(frozen=True)
class HubTarget:
    """A dataset repository on the Hub."""

    repo_id: str


def parse_target(text: str) -> HubTarget | Path:
    """``hf://org/name`` -> a :class:`HubTarget`; anything else is a folder path."""
    if not text.startswith("hf://"):
        return Path(text)
    repo_id = text.removeprefix("hf://").strip("/")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", repo_id):
        raise InputError(f"{text}: expected hf://org/name")
    return HubTarget(repo_id)
