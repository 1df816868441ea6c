"""The real clients of our exports (Harbor, mini-swe-agent, swebench), each installed from the package
index into its own virtualenv, as a user would install them.

Virtualenvs are cached between runs under ``$REPO2ENV_TEST_CACHE`` (default
``~/.cache/repo2env-tests``), one folder per client, Python and exact requirements: the first run
installs (minutes), later ones reuse (a marker file says the install finished; a folder without it
is rebuilt). Concurrent test workers wait for each other on a lock file. Where a client cannot be
installed here (no Python new enough, the index unreachable), the test asking for it is skipped
with the reason, except in CI (``CI`` set), where that is a failure: CI installs what the clients
need. Everywhere else the installed client is the test.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

COMPLETE_MARKER = ".repo2env-complete"
INSTALL_TIMEOUT_S = 1800


def cache_root() -> Path:
    """Where the test clients' virtualenvs live."""
    return Path(os.environ.get("REPO2ENV_TEST_CACHE") or Path.home() / ".cache" / "repo2env-tests")


def find_python(minimum: tuple[int, int]) -> tuple[str, str] | None:
    """A CPython of at least ``minimum`` on this machine and its X.Y: this one, then ``python3.X`` on
    PATH, then pyenv's builds (each tried: a pyenv shim of a version not selected does not run);
    None when there is none."""
    candidates = [sys.executable] if sys.version_info[:2] >= minimum else []
    candidates += [found for minor in range(14, minimum[1] - 1, -1) if (found := shutil.which(f"python3.{minor}"))]
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += [str(path) for path in sorted(pyenv_root.glob("versions/3.*/bin/python3"), reverse=True)]
    for candidate in candidates:
        try:
            answer = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                    capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        version = answer.stdout.strip()
        if answer.returncode == 0 and tuple(int(part) for part in version.split(".")) >= minimum:
            return candidate, version
    return None


def client_venv(name: str, requirements: list[str], *, minimum_python: tuple[int, int] = (3, 10)) -> Path:
    """The ``bin`` folder of a virtualenv holding ``requirements`` (pip specifiers, pinned), made
    once and cached; skips the calling test with the reason when it cannot be made here."""
    found = find_python(minimum_python)
    if found is None:
        unavailable(f"{name} needs Python >= {'.'.join(map(str, minimum_python))}, and none is installed here")
    python, version = found
    key = hashlib.sha256("\n".join([version, *requirements]).encode()).hexdigest()[:12]
    root = cache_root() / "venvs" / f"{name}-py{version}-{key}"
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f".{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / COMPLETE_MARKER).is_file():
            return root / "bin"
        shutil.rmtree(root, ignore_errors=True)
        made = subprocess.run([python, "-m", "venv", str(root)], capture_output=True, text=True)
        if made.returncode != 0:
            unavailable(f"cannot make a virtualenv for {name} with {python}: {made.stderr.strip()[-300:]}")
        installed = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
                                   capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        if installed.returncode != 0:
            shutil.rmtree(root, ignore_errors=True)
            errors = [line for line in installed.stderr.splitlines() if line.startswith("ERROR")] or ["pip failed"]
            unavailable(f"{name} ({' '.join(requirements)}) cannot be installed here: {errors[-1]}")
        (root / COMPLETE_MARKER).write_text("\n".join(requirements) + "\n")
    return root / "bin"


def unavailable(reason: str) -> None:
    """Skip the test (fail it in CI, whose set-up must provide the clients)."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)
