"""The Python profile's build recipe: pip/uv installs with the project in editable mode, proven to be
the project's own code (:mod:`repo2env.languages.python.own_code`), checked with pytest's collection
(under the watchdog: a collection that waits on the network without end is stopped and says on what).

The env layer installs in ``/testbed``, proves with ``own_code_probe.py`` that the project's import
names resolve there, records the files the install generated, then empties ``/testbed`` (the
editable install keeps pointing at it; site-packages stay). The task layer brings the snapshot and,
when the install generated files or the version comes from version control, runs the editable
install again (``--no-deps``) so they exist at the base commit.

A date-pinned install that fails is tried again with its cure, on that rung and every later one
(:meth:`PythonBuild.rungs_after_failure`): packages whose releases of the pin's time are gone from
the index are let reach the first release that exists, and dependencies whose sdists need an old
setuptools are built apart from the project's editable install.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tomllib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from repo2env.languages.build import (
    COLLECTION_STALLED,
    COLLECTION_TIMEOUT,
    OWN_CODE_MARKER,
    STALL_IDLE_S,
    TOOLS_DIR,
    BuildRecipe,
    EnvLayer,
    Shell,
    TaskLayer,
    watchdog_verdict,
    watched,
)
from repo2env.languages.files import RepoFiles
from repo2env.languages.python.own_code import (
    PROBE_PATH,
    OwnCode,
    install_parts,
    protect_own_install,
    read_own_code,
    reinstall_command,
    scm_environment,
)
from repo2env.languages.python.paths import PYTHON_PATHS
from repo2env.languages.python.spec import (
    AVAILABLE_PYTHONS,
    WARMUP_COLLECT,
    build_packages_needed,
    exempt_from_pin,
    infer_env_spec,
    install_failure_reason,
    install_ladder,
    old_setuptools_needed,
    releases_gone_before_pin,
    split_editable_build,
)
from repo2env.languages.python.spec.added import requirements_added
from repo2env.languages.python.spec.overrides import EnvOverride
from repo2env.models import EnvSpec, Task
from repo2env.patches import parse

#: Where env images keep the own-code probe.
PROBE = f"{TOOLS_DIR}/own_code_probe.py"
_DEPENDENCY_FILE = re.compile(
    r"^(?:pyproject\.toml|setup\.py|setup\.cfg|tox\.ini|Pipfile|poetry\.lock|uv\.lock"
    r"|[^/]*requirements[^/]*\.(?:txt|in)|requirements/[^/]+\.(?:txt|in))$"
)
_PYTHON_FLAVOUR = re.compile(r"py([23]\.\d{1,2})")


def added_requirements_install(requirements: dict[str, str], date_pin: str | None) -> str:
    """The command that installs ``requirements`` (name -> requirement) over the install: uv held
    to ``date_pin`` where the install brought uv, else pip. A failure is said, not fatal: the base
    commit's environment stands, and derivation says what the PR's tests miss."""
    wanted = " ".join(shlex.quote(text) for text in requirements.values())
    pin = f" --exclude-newer {shlex.quote(date_pin + 'T00:00:00Z')}" if date_pin else ""
    return (f"if command -v uv >/dev/null 2>&1; then uv pip install --python python{pin} {wanted}; "
            f"else python -m pip install {wanted}; fi "
            f"|| echo 'repo2env: the requirements the PR adds did not install: {' '.join(requirements)}'")


def available_pythons(bases: Sequence[str] | None) -> tuple[str, ...]:
    """The Pythons a build may choose: the ones every machine can bootstrap, and those of the
    ``py<X.Y>`` base-image flavours in ``bases`` (3.8, 3.10 pulled; 2.7, 3.6 made from a local
    CPython), oldest first."""
    local = {match.group(1) for flavour in bases or () if (match := _PYTHON_FLAVOUR.fullmatch(flavour))}
    return tuple(sorted(set(AVAILABLE_PYTHONS) | local, key=lambda python: tuple(map(int, python.split(".")))))


class PythonBuild(BuildRecipe):
    """The Python build recipe (module docstring)."""

    warmup_command = WARMUP_COLLECT

    def infer_env_spec(self, files: RepoFiles, commit_date: datetime, override: EnvOverride | None = None,
                       bases: Sequence[str] | None = None, *, touched: Sequence[str] = (),
                       patches: Sequence[str] = ()) -> EnvSpec:
        spec = infer_env_spec(files, commit_date, override, available_pythons(bases))
        return spec.model_copy(update={"added_dependencies": requirements_added(files, patches)})

    def install_ladder(self, spec: EnvSpec, files: RepoFiles, override: EnvOverride | None = None,
                       bases: Sequence[str] | None = None) -> list[tuple[str, EnvSpec]]:
        return install_ladder(spec, files, override, available_pythons(bases))

    def dependency_fingerprint(self, files: RepoFiles) -> str:
        """The dependency files (pyproject without its version), and the package layout the
        editable install points at."""
        digest = hashlib.sha256()
        for path in sorted(name for name in files.listing() if _DEPENDENCY_FILE.match(name)):
            text = files.read(path) or ""
            if path == "pyproject.toml":
                text = _pyproject_without_version(text)
            digest.update(f"{path}\0{text}\0".encode())
        layout = sorted({"/".join(name.split("/")[:2]) for name in files.listing()
                         if name.endswith("/__init__.py") and name.count("/") <= 2})
        digest.update("\n".join(layout).encode())
        return digest.hexdigest()[:16]

    def own_code(self, files: RepoFiles) -> OwnCode:
        return read_own_code(files)

    def prepare_rung(self, spec: EnvSpec, own: OwnCode) -> EnvSpec:
        # Every rung's install keeps the project's editable install the one that runs.
        return spec.model_copy(update={"install": protect_own_install(spec.install, own)})

    def env_layer(self, spec: EnvSpec, own: OwnCode, scm_version: str, *, agent_uid: int) -> EnvLayer:
        install = "; ".join(f"({command})" for command in spec.install) or "true"
        if own_lines := drop_own_editable_lines(spec.install):
            install = f"{own_lines}; {install}"
        if spec.added_dependencies:
            # What the PR adds to the requirements, once the base commit's install worked (set -e):
            # the PR's tests import it, and the sandbox has no network.
            install = f"{install}; ({added_requirements_install(spec.added_dependencies, spec.date_pin)})"
        editable = reinstall_command(spec.install, own.distribution) is not None
        check = shlex.quote(json.dumps(own.probe_arguments(editable=editable), separators=(",", ":")))
        dist = shlex.quote(own.distribution or "")
        # The source goes away after installing: the task layer brings its own commit's files, and
        # the editable install keeps pointing at /testbed. Before it goes: prove the install is the
        # project's own code, and record what the install generated in it (the task layer re-creates
        # those). `set -e`: any failing command fails the build.
        # Git (run by setuptools-scm and its file finder) refuses a repository it deems not owned by
        # the caller ("dubious ownership"); a throw-away HOME trusts /testbed for this step only.
        trust = 'export HOME="$(mktemp -d)"; printf \'[safe]\\n\\tdirectory = *\\n\' > "$HOME/.gitconfig"'
        agent = f"{agent_uid}:{agent_uid}"
        run = (f"set -e; {trust}; cd /testbed; {install}; python {PROBE} check {check}; "
               f"python {PROBE} generated {dist} > {TOOLS_DIR}/generated; "
               f'rm -rf /root/.cache "$HOME" /testbed; mkdir /testbed; chown {agent} /testbed')
        return EnvLayer(run=run, tools=self._tools(spec, own, agent), build_args=scm_environment(scm_version),
                        labels={"repo2env.python": spec.python},
                        base_hint=f"run 'repo2env runtime bootstrap --python {spec.python}'")

    def _tools(self, spec: EnvSpec, own: OwnCode, agent: str) -> dict[str, str]:
        """The files of ``/opt/repo2env``: the probe, and the task layer's reinstall script when the
        project is installed in editable mode."""
        tools = {"own_code_probe.py": PROBE_PATH.read_text()}
        again = reinstall_command(spec.install, own.distribution)
        if again is not None:
            dist = shlex.quote(own.distribution or "")
            # Generated files belong to the agent like the rest of /testbed, and git ignores them, so
            # they never show up in the agent's diff.
            tools["reinstall"] = "\n".join([
                "#!/bin/sh",
                "# The project's editable install again (no dependencies), for files it generates in /testbed.",
                "set -e", "cd /testbed",
                # The snapshot belongs to the agent: git (run by setuptools-scm) needs root to trust it.
                'export HOME="$(mktemp -d)"', "printf '[safe]\\n\\tdirectory = *\\n' > \"$HOME/.gitconfig\"",
                again,
                f"python {PROBE} generated {dist} > {TOOLS_DIR}/generated.task",
                f"python {PROBE} leftovers {dist} | while IFS= read -r path; do rm -rf \"$path\"; done",
                "mkdir -p .git/info",
                f'while IFS= read -r path; do chown -R {agent} "$path"; '
                "printf '/%s\\n' \"$path\" >> .git/info/exclude; done < " + f"{TOOLS_DIR}/generated.task",
                f"chown -R {agent} .git/info", 'rm -rf /root/.cache "$HOME"', "",
            ])
        return tools

    def task_layer(self, spec: EnvSpec, own: OwnCode, task: Task) -> TaskLayer:
        # Runtime calls to setuptools-scm (a package reading its version from git) agree with the build.
        scm = scm_environment(task.scm_version)
        wanted = "true" if own.vcs_version and scm else f"[ -s {TOOLS_DIR}/generated ]"
        return TaskLayer(environment=scm,
                         run=f"if [ -f {TOOLS_DIR}/reinstall ] && {wanted}; then sh {TOOLS_DIR}/reinstall; fi")

    def check_image(self, shell: Shell, task: Task, spec: EnvSpec, own: OwnCode, *, log_path: Path,
                    collect_check: bool, timeout_s: float, stall_idle_s: float = STALL_IDLE_S) -> str | None:
        """The own-code probe, then pytest's collection of the test files the PR touches that exist at
        the base (or the suite), then one collected test run (run-time hooks collection skips); both
        under the watchdog (``stall_idle_s``)."""
        editable = reinstall_command(spec.install, own.distribution) is not None
        touched = [path for path in _patch_paths(task.test_patch) if PYTHON_PATHS.classify(path) == "test"
                   and path.endswith(".py") and not path.endswith("conftest.py")]
        probe = shlex.join(["python", PROBE, "check", json.dumps(own.probe_arguments(editable=editable))])
        log_path.parent.mkdir(parents=True, exist_ok=True)
        checked = shell.exec(probe, timeout=60)
        log_path.write_text(f"$ {probe}\n{checked.output}\n(exit {checked.exit_code})\n")
        if checked.exit_code != 0:
            reasons = [line.split(OWN_CODE_MARKER, 1)[1] for line in checked.output.splitlines()
                       if OWN_CODE_MARKER in line]
            detail = "; ".join(reasons) if reasons else checked.output.strip()[-200:]
            return f"the project's own code is not what runs in the task image: {detail}"[:400]
        if not collect_check:
            return None
        existing = [path for path in touched if shell.exec(["test", "-f", path], timeout=10).exit_code == 0]
        command = f"python -m pytest --collect-only -q -p no:cacheprovider {' '.join(map(shlex.quote, existing))}"
        result = shell.exec(watched(command, idle_s=stall_idle_s), timeout=timeout_s)
        ran = _run_one_test(shell, result.output, timeout_s, stall_idle_s) if result.exit_code == 0 else None
        with log_path.open("a") as log:
            log.write(f"$ {command}\n{result.output}\n(exit {result.exit_code})\n")
            if ran is not None:
                log.write(f"$ {ran[0]}\n{ran[1].output}\n(exit {ran[1].exit_code})\n")
        if result.timed_out:
            return f"{COLLECTION_TIMEOUT} after {timeout_s:.0f} s"
        if stall := watchdog_verdict(result.output):
            return f"{COLLECTION_STALLED}: {stall}"
        if result.exit_code not in (0, 5):  # 5: nothing collected, which is not a broken environment
            lines = [line for line in result.output.splitlines() if "Error" in line or "error" in line]
            return (f"test collection failed (exit {result.exit_code}): "
                    f"{(lines[-1] if lines else result.output[-200:]).strip()[:200]}")
        if ran is not None and not ran[1].timed_out and (ran[1].exit_code == 3 or "INTERNALERROR>" in ran[1].output):
            lines = [line for line in ran[1].output.splitlines() if line.startswith("INTERNALERROR>")]
            return ("tests collect but cannot run (INTERNALERROR): "
                    f"{(lines[-1] if lines else ran[1].output[-200:]).strip()[:200]}")
        return None

    def image_facts(self, shell: Shell, spec: EnvSpec, task: Task) -> dict[str, str | None]:
        """The version of the pytest the image runs (2016's pin gets pytest 2.8, which lacks options
        derivation and grading pass otherwise: they follow it)."""
        version = shell.exec(["python", "-c", "import pytest; print(pytest.__version__)"], timeout=60)
        lines = version.output.strip().splitlines()
        return {"pytest_version": lines[-1].strip() if version.exit_code == 0 and lines else None}

    def explain_failure(self, log: str, spec: EnvSpec) -> str | None:
        return install_failure_reason(log, spec.python, spec.date_pin)

    def packages_needed(self, log: str) -> list[str]:
        """A source build that found no compiler (``command 'gcc' failed``, cffi's "No working
        compiler found") or no headers (``fatal error: ffi.h``): the Debian packages that cure it."""
        return build_packages_needed(log)

    def rungs_after_failure(self, log: str, failed: tuple[str, EnvSpec],
                            pending: list[tuple[str, EnvSpec]]) -> list[tuple[str, EnvSpec]]:
        """A date-pinned install's cures, each tried on the failed rung again and kept for every
        later rung: the packages whose releases of the pin's time the index lost (atomicwrites
        before 2022) let reach the first one that exists; else, for sdists that need the
        setuptools of their day (markupsafe 1.0 imports ``setuptools.Feature``), the project's
        editable install apart from its dependencies' builds."""
        rung, spec = failed
        if not spec.date_pin:
            return pending
        gone = releases_gone_before_pin(log)
        cures = [("exempt", lambda candidate: exempt_from_pin(candidate.install, gone))] if gone else []
        if old_setuptools_needed(log):
            cures.append(("split-build", lambda candidate: split_editable_build(candidate.install, candidate.python)))
        for name, cure in cures:
            if cure(spec) != spec.install:  # else cured already: this failure has another cause
                return [(f"{rung}+{name}", spec.model_copy(update={"install": cure(spec)})),
                        *((other, candidate.model_copy(update={"install": cure(candidate)})) for other, candidate in pending)]
        return pending


def _run_one_test(shell: Shell, collected: str, timeout_s: float, stall_idle_s: float = STALL_IDLE_S):
    """(command, result) of running the first test the collection listed, or None when it listed none.

    Collection does not run pytest's run-time hooks: a ``filterwarnings`` naming a module a rung left
    out (werkzeug's ``requests.packages.urllib3``) or a plugin broken at run time stops every test
    with an INTERNALERROR, which only a run shows. Whether the test passes does not matter here."""
    first = next((line.strip() for line in collected.splitlines() if "::" in line and not line.startswith(" ")), None)
    if first is None:
        return None
    command = f"python -m pytest -q -p no:cacheprovider -x {shlex.quote(first)}"
    return command, shell.exec(watched(command, idle_s=stall_idle_s), timeout=min(timeout_s, 120))


#: Deletes a requirement file's line that installs the project itself editable (``-e .``, quoted or
#: not, with extras or not): the spec's own editable install does that, and uv cannot take the line
#: on 3.6 (no PEP 660 hook) nor read it quoted (marshmallow 2018's ``-e '.'``).
_OWN_EDITABLE_LINE = r"""/^[[:space:]]*(-e|--editable)[[:space:]=]*["']?\.\/?(\[[^]]*\])?["']?[[:space:]]*(#.*)?$/d"""


def drop_own_editable_lines(install: list[str]) -> str:
    """The shell command that deletes the project's own editable line from every requirement file
    ``install`` names (``-r FILE``), in the env layer's copy of the snapshot (the task layer brings
    the files as they are); '' when it names none."""
    files: list[str] = []
    for command in install:
        parts = install_parts(command)
        if parts is not None:
            files.extend(value for flag, value in parts[1] if flag in ("-r", "--requirement") and value)
    if not files:
        return ""
    return shlex.join(["sed", "-i", "-E", _OWN_EDITABLE_LINE, *dict.fromkeys(files)]) + " 2>/dev/null || true"


def _patch_paths(patch: str) -> list[str]:
    """The path of each file of ``patch`` after it (before it, for a deletion)."""
    return [file.path for file in parse(patch).files]


def _pyproject_without_version(text: str) -> str:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text
    project = dict(document.get("project", {}))
    project.pop("version", None)
    return repr({key: document[key] for key in sorted(document) if key != "project"} | {"project": project})
