"""The spec, and its fallbacks: :func:`infer_env_spec` and the install ladder."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version as PackageVersion

from repo2env.languages.python.spec.files import RepoFiles, _Project, _read_project, _valid_requirement
from repo2env.languages.python.spec.install import (
    _infer_install,
    _requirement_choice,
    config_imports_command,
    conftest_imports_commands,
    setup_requires_command,
)
from repo2env.languages.python.spec.overrides import EnvOverride
from repo2env.languages.python.spec.pinning import (
    UV_BOOTSTRAP,
    _is_tooling,
    _join_args,
    _pip_install_args,
    _requirement_name,
    _split_args,
    _unpinned,
    date_pin,
    pinned_install,
    uv_prefix,
)
from repo2env.languages.python.spec.pytest_config import (
    _INI_PLUGINS,
    _OPTION_PLUGINS,
    PYTEST_RELEASES,
    WARMUP_COLLECT,
    PytestRelease,
    _infer_test_cmd,
)
from repo2env.languages.python.spec.python import (
    AVAILABLE_PYTHONS,
    _allows,
    _infer_python,
    _requires_python,
    _xy,
)
from repo2env.languages.python.spec.system_packages import _infer_system_packages
from repo2env.models import EnvSpec

#: The ladder's rung names, in the order :func:`install_ladder` tries them. ``other-requirements-N``
#: rungs (another test requirement file instead of the chosen one) may follow ``inferred``.
LADDER_RUNGS = ("inferred", "fewer-extras", "older-python", "pinned-pytest", "no-date-pin")


def infer_env_spec(files: RepoFiles, commit_date: datetime, override: EnvOverride | None = None,
                   available: Sequence[str] = AVAILABLE_PYTHONS) -> EnvSpec:
    """Everything needed to build and test the repository at a commit; ``override`` applied last.

    ``install`` holds the commands the env layer runs, already rewritten by :func:`pinned_install`
    when there is a date pin (by default :func:`date_pin` of the commit date). An override may set
    ``python``, replace ``install``, add ``pre_install``/``extra_install`` commands around it (they
    are pinned too), add ``system_packages``, set ``test_cmd``, set or disable (``False``) the
    date pin, and ask for a ``warmup`` (``True``: :data:`WARMUP_COLLECT`, or a command). ``rung`` is
    left unset; :func:`install_ladder` names the rungs.
    """
    project = _read_project(files)
    python, reason = _infer_python(project, commit_date, available)
    system_packages = _infer_system_packages(project)
    install = _infer_install(project)
    test_cmd = _infer_test_cmd(project)
    pin: str | None = date_pin(commit_date)
    warmup: str | None = None
    if override is not None:
        if override.warmup:
            warmup = WARMUP_COLLECT if override.warmup is True else override.warmup
        if override.python is not None:
            python, reason = override.python, "override"
        if override.install is not None:
            install = list(override.install)
        install = [*override.pre_install, *install, *override.extra_install]
        system_packages = list(dict.fromkeys([*system_packages, *override.system_packages]))
        if override.test_cmd is not None:
            test_cmd = override.test_cmd
        if override.date_pin is False:
            pin = None
        elif isinstance(override.date_pin, str):
            pin = override.date_pin
    if pin and _xy(python)[0] < 3:
        # uv, which applies date pins, installs into Python 3 only; pip has no upload-date filter
        # that runs on Python 2.
        pin, reason = None, f"{reason}; no date pin on Python 2 (uv installs into Python 3 only)"
    return EnvSpec(
        python=python,
        python_reason=reason,
        system_packages=system_packages,
        install=pinned_install(install, pin, python) if pin else install,
        test_cmd=test_cmd,
        date_pin=pin,
        warmup=warmup,
    )


def pytest_for(date_pin: str, python: str, requirement: str = "pytest") -> PytestRelease | None:
    """The pytest release to pin for a date pin and Python: the newest in :data:`PYTEST_RELEASES`
    uploaded before ``date_pin`` that supports ``python`` and satisfies ``requirement`` (e.g.
    ``pytest<8``); if none was out yet, the oldest that supports ``python``; None if none does."""
    pin = date.fromisoformat(date_pin)
    version = _xy(python)
    try:
        allowed = Requirement(requirement).specifier
    except InvalidRequirement:
        allowed = SpecifierSet()
    fitting = [release for release in PYTEST_RELEASES
               if _xy(release.oldest_python) <= version <= _xy(release.newest_python)
               and allowed.contains(release.version)]
    available = [release for release in fitting if release.uploaded < pin]
    if available:
        return max(available, key=lambda release: PackageVersion(release.version))
    return min(fitting, key=lambda release: PackageVersion(release.version), default=None)


def install_ladder(
    spec: EnvSpec, files: RepoFiles, override: EnvOverride | None = None,
    available: Sequence[str] = AVAILABLE_PYTHONS,
) -> list[tuple[str, EnvSpec]]:
    """The specs to try, in order, when installing or collecting tests fails: (rung name, spec).

    - ``inferred``: ``spec`` itself;
    - ``other-requirements-1``, ``-2``: another test requirement file instead of the chosen one
      (see :func:`infer_install`), one at a time;
    - ``fewer-extras``: only the project's ``setup_requires``, the editable project (no extras),
      pytest and its plugins, what the pytest configuration and the conftest files import, and any
      command that is not a pip install (a broken extra or requirement file is the likeliest
      failure); the base requirements.txt stays when the project is not installable;
    - ``older-python``: ``spec`` on the next older ``available`` Python the project's
      ``requires-python`` allows (old pins often lack wheels or break on a new Python);
    - ``pinned-pytest``: the previous rung (``older-python`` if there was one, else ``spec``)
      with pytest pinned by :func:`pytest_for` (a requirement file may pin a pytest that does not
      run on the image's Python; an unpinned one may be too new for the suite);
    - ``no-date-pin``: the previous rung without the date pin, pytest still pinned (the index may
      not serve upload times, or a dependency of the day may be yanked).

    A rung is left out when it would equal an earlier one or cannot apply (no older Python, no
    date pin), and when ``override`` fixed what it changes (its ``python``, ``install`` or
    ``date_pin``). ``override`` must be the one ``spec`` was inferred with: every rung keeps the
    user's own commands exactly as written (unpinned in ``no-date-pin``, in their place), and
    ``pinned-pytest`` is left out when they install pytest themselves and otherwise pins it before
    their ``extra_install`` commands. Each spec's ``rung`` is its name.
    """
    project = _read_project(files)
    rungs: list[tuple[str, EnvSpec]] = [("inferred", spec.model_copy(update={"rung": "inferred"}))]
    own = _own_commands(override)
    logical = _logical_install(spec.install, own, spec.date_pin, spec.python)

    def repinned(commands: list[str], pin: str | None, python: str = spec.python) -> list[str]:
        return pinned_install(commands, pin, python) if pin else commands

    if override is None or override.install is None:
        _, chosen, alternatives = _requirement_choice(project)
        for number, alternative in enumerate(alternatives, start=1):
            swapped = _swap_requirement_files(logical, chosen, alternative)
            if swapped != logical:
                rungs.append((f"other-requirements-{number}",
                              spec.model_copy(update={"install": repinned(swapped, spec.date_pin)})))
        keep = {_canonical(command) for command in own}
        # Without what the pytest configuration or a conftest imports, no test runs; a conftest's
        # module that only a dropped extra or test requirement named is installed by itself. Without
        # the setup_requires, old setuptools fetches today's (see setup_requires_command).
        needed = [setup_requires_command(project), config_imports_command(project),
                  *conftest_imports_commands(project)]
        keep.update(_canonical(command) for command in needed if command)
        fewer = _fewer_extras(logical, keep=keep)
        extra = {_canonical(command) for command in override.extra_install} if override else set()
        at = next((i for i, command in enumerate(fewer) if _canonical(command) in extra), len(fewer))
        fewer = list(dict.fromkeys([*fewer[:at], *conftest_imports_commands(project, fewer_extras=True), *fewer[at:]]))
        rungs.append(("fewer-extras", spec.model_copy(update={"install": repinned(fewer, spec.date_pin)})))
    base, base_logical = spec, logical
    older = _older_python(spec.python, project, available)
    if older is not None and (override is None or override.python is None):
        base = spec.model_copy(update={"python": older, "python_reason": f"older than {spec.python}",
                                       "install": repinned(logical, spec.date_pin, older)})
        rungs.append(("older-python", base))
    if spec.date_pin:
        pytest_requirement = _pytest_requirement(logical)
        release = pytest_for(spec.date_pin, base.python, pytest_requirement)
        # A pytest the user's own commands install is theirs to choose.
        if release is not None and not _installs_pytest(own):
            pin_commands = pytest_pin_commands(release, _pytest_plugins(logical, project), spec.date_pin, base.python)
            # Before the override's extra commands, so that what they install has the last word.
            extra = {_canonical(command) for command in override.extra_install} if override else set()
            at = next((i for i, command in enumerate(logical) if _canonical(command) in extra), len(logical))
            base_logical = [*logical[:at], *pin_commands, *logical[at:]]
            base = base.model_copy(update={"install": repinned(base_logical, spec.date_pin, base.python)})
            rungs.append(("pinned-pytest", base))
        if override is None or override.date_pin is None:
            rungs.append(("no-date-pin", base.model_copy(update={"install": base_logical, "date_pin": None})))
    distinct: list[tuple[str, EnvSpec]] = []
    for name, candidate in rungs:
        named = candidate.model_copy(update={"rung": name})
        if all(_build_inputs(named) != _build_inputs(earlier) for _, earlier in distinct):
            distinct.append((name, EnvSpec.model_validate(named.model_dump())))
    return distinct


def pytest_pin_commands(release: PytestRelease, plugins: list[str], date_pin: str,
                        python: str | None = None) -> list[str]:
    """The commands that pin pytest to ``release`` in a ladder rung, with its ``plugins`` (requirements).

    Alone, pytest is one exact pin. With plugins, each is installed again as of the later of the date
    pin and the day after pytest's upload (``--exclude-newer-package``, forced with
    ``--reinstall-package`` so that a newer one installed before is replaced): a plugin of today on
    an old pytest fails at collection (pytest-xprocess importing ``_pytest._io.TerminalWriter``,
    pytest-cov passing ``wrapper=True`` to an old pluggy). The ``no-date-pin`` rung keeps these
    commands as they are. No cut-off applies to the rest: pytest's own dependencies may be newer
    than the pin (``pytest==4.6.11`` needs atomicwrites, whose releases before 2022 are gone).
    """
    pin = f"pytest=={release.version}"
    if not plugins:
        return [shlex.join(["python", "-m", "pip", "install", pin])]
    day = max(date.fromisoformat(date_pin), release.uploaded + timedelta(days=1)).isoformat()
    names = list(dict.fromkeys(name for plugin in plugins if (name := _requirement_name(plugin))))
    options = [*(f"--exclude-newer-package={name}={day}T00:00:00Z" for name in names),
               *(f"--reinstall-package={name}" for name in names)]
    return [UV_BOOTSTRAP, shlex.join([*uv_prefix(python), *options, pin, *plugins])]


# Named like a plugin, but not one: pytest-runner adds ``setup.py test`` (a setup_requires), and
# loads nothing into pytest.
_NOT_PLUGINS = frozenset({"pytest", "pytest-runner"})


def _pytest_plugins(commands: list[str], project: _Project) -> list[str]:
    """The pytest plugins (requirements as written) that ``commands`` install, by name or through a
    requirement file of the repository."""
    known = set(_OPTION_PLUGINS.values()) | set(_INI_PLUGINS.values())
    plugins: list[str] = []
    for command in commands:
        args = _pip_install_args(command)
        if args is None:
            continue
        options, targets = _split_args(args)
        lines = [line for flag, path in options if flag in ("-r", "--requirement") and path
                 for line in (project.files.read(path) or "").splitlines()]
        for target in [*targets, *(text for line in lines if (text := _valid_requirement(line)))]:
            name = _requirement_name(target)
            if name and name not in _NOT_PLUGINS and (name.startswith("pytest-") or name in known):
                plugins.append(target)
    return list(dict.fromkeys(plugins))


def _own_commands(override: EnvOverride | None) -> list[str]:
    """The install commands the user wrote in ``override``, in the order the spec runs them."""
    if override is None:
        return []
    return [*override.pre_install, *(override.install or []), *override.extra_install]


def _logical_install(install: list[str], own: list[str], pin: str | None, python: str | None = None) -> list[str]:
    """``install`` without its date pin: the user's own commands exactly as written, the inferred
    ones as :func:`_unpinned` spells them."""
    # What each of the user's commands became (one command, or two for a legacy editable install).
    written = {tuple(pinned_install([command], pin, python)[1:] or [command]): command for command in own} if pin else {}
    logical: list[str] = []
    inferred: list[str] = []
    index = 0
    while index < len(install):
        mine = next((spelled for spelled in written if tuple(install[index:index + len(spelled)]) == spelled), None)
        if mine is not None:
            logical.extend(_unpinned(inferred))
            inferred = []
            logical.append(written[mine])
            index += len(mine)
            continue
        if install[index] != UV_BOOTSTRAP or UV_BOOTSTRAP in own:
            inferred.append(install[index])
        index += 1
    return [*logical, *_unpinned(inferred)]


def _installs_pytest(commands: list[str]) -> bool:
    for command in commands:
        args = _pip_install_args(command)
        # By name, or a local wheel or sdist of it (``./vendor/pytest-7.0.0-py3-none-any.whl``).
        if args is not None and any(_requirement_name(target) == "pytest"
                                    or re.match(r"pytest-\d", target.rpartition("/")[2])
                                    for target in _split_args(args)[1]):
            return True
    return False


def _swap_requirement_files(commands: list[str], replaced: list[str], alternative: str) -> list[str]:
    """``commands`` with the installs of the ``replaced`` requirement files turned into one
    install of ``alternative`` (where the first of them was)."""
    swapped: list[str] = []
    inserted = False
    for command in commands:
        args = _pip_install_args(command)
        files = [value for flag, value in _split_args(args)[0] if flag in ("-r", "--requirement")] if args else []
        if files and all(path in replaced for path in files):
            if not inserted:
                swapped.append(shlex.join(["python", "-m", "pip", "install", "-r", alternative]))
                inserted = True
            continue
        swapped.append(command)
    if not inserted:
        return commands
    return swapped


def _build_inputs(spec: EnvSpec) -> dict[str, Any]:
    return spec.model_dump(include={"python", "system_packages", "install", "test_cmd", "date_pin"})


def _older_python(python: str, project: _Project, available: Sequence[str]) -> str | None:
    constraint = _requires_python(project)
    # Never from Python 3 down to 2: the chosen Python 3 says the project runs on Python 3.
    older = sorted((version for version in available
                    if _xy(version) < _xy(python) and _xy(version)[0] == _xy(python)[0]), key=_xy)
    for version in reversed(older):
        if constraint is None or _allows(constraint, _xy(version)):
            return version
    return None


def _is_pytest_only(targets: Sequence[str]) -> bool:
    names = [_requirement_name(target) for target in targets]
    plugins = set(_OPTION_PLUGINS.values()) | set(_INI_PLUGINS.values())
    return bool(names) and all(name is not None and (name == "pytest" or name.startswith("pytest-")
                                                     or name in plugins) for name in names)


def _pytest_requirement(commands: list[str]) -> str:
    """The pytest requirement of the command that ensures pytest (``pytest`` or ``pytest<8``)."""
    for command in commands:
        args = _pip_install_args(command)
        if args is None:
            continue
        _, targets = _split_args(args)
        if _is_pytest_only(targets):
            for target in targets:
                if _requirement_name(target) == "pytest":
                    return target
    return "pytest"


def _canonical(command: str) -> str:
    """A pip install command spelled as :func:`_unpinned` spells it; other commands unchanged."""
    args = _pip_install_args(command)
    return command if args is None else shlex.join(["python", "-m", "pip", "install", *_join_args(*_split_args(args))])


def _fewer_extras(commands: list[str], keep: set[str]) -> list[str]:
    kept: list[str] = []
    has_editable = any(
        flag in ("-e", "--editable") for command in commands
        if (args := _pip_install_args(command)) is not None for flag, _ in _split_args(args)[0])
    for command in commands:
        args = _pip_install_args(command)
        if args is None or _canonical(command) in keep:
            kept.append(command)
            continue
        options, targets = _split_args(args)
        flags = {flag for flag, _ in options}
        if _is_tooling(targets) or (_is_pytest_only(targets) and not flags & {"-r", "--requirement", "--group"}):
            kept.append(command)
        elif flags & {"-e", "--editable"}:
            local = [(flag, re.sub(r"\[.*\]$", "", value) if flag in ("-e", "--editable") and value else value)
                     for flag, value in options]
            kept.append(shlex.join(["python", "-m", "pip", "install", *_join_args(local, targets)]))
        elif not has_editable and [value for flag, value in options if flag in ("-r", "--requirement")] == [
                "requirements.txt"]:
            kept.append(command)
    return list(dict.fromkeys(kept))
