"""Folders written whole: what ``publish --to DIR`` and every ``export`` write, a clone ``mine`` makes
and the demo repository land complete or not at all.

The new tree is built in a staging folder beside the target (same file system) and renamed into
place; an old target (only when it may be overwritten) is moved aside first and removed with the
staging folder. After an interruption the target is therefore the old content, the new content, or
absent, never a mix. A staging folder a killed process leaves is hidden (``.<name>.partial-*``).

It sits at the bottom of the package (it imports only the errors) so that every stage can write
its folders this one way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from repo2env.errors import InputError

Result = TypeVar("Result")


def write_folder(target: Path, build: Callable[[Path], Result], *, overwrite: bool = False) -> Result:
    """Run ``build(folder)`` on an empty staging folder and rename it to ``target``: complete or
    absent. A ``target`` that exists with content is refused (an InputError) unless ``overwrite``,
    before the build and again when it is renamed into place (something else wrote it meanwhile);
    if ``build`` raises, ``target`` is left as it was. Returns what ``build`` returned."""
    target = Path(target).absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        raise InputError(f"{target} exists and is not empty", hint="choose another folder, or pass --overwrite")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        fresh = staging / "new"
        fresh.mkdir()
        result = build(fresh)
        if overwrite and target.exists():
            os.replace(target, staging / "previous")  # removed with the staging folder
        try:
            # Onto an empty folder or nothing; what another process wrote there meanwhile stays.
            os.replace(fresh, target)
        except OSError:
            raise InputError(f"{target} was written by something else while this was being made",
                             hint="look at what is there, then run again (or pass --overwrite)") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result
