"""Date pinning: install commands rewritten for ``uv pip install --exclude-newer``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from repo2env.languages.python.spec.install import PIP_INSTALL, split_guessed_install
from repo2env.languages.python.spec.python import _utc_day

if TYPE_CHECKING:
    pass


def date_pin(commit_date: datetime) -> str:
    """The first day of the month after the commit's (UTC) month: dependencies resolve as they
    stood at the end of that month.

    A month, not the commit's day, so that tasks whose dependency files did not change within a
    month share one env image; the price is up to a month of newer releases.
    """
    day = _utc_day(commit_date)
    return (date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)).isoformat()


# pip options uv's `uv pip install` accepts unchanged; the ones taking a value list it after them.
_UV_SAME_FLAGS = frozenset({
    "-e", "--editable", "-r", "--requirement", "-c", "--constraint", "--group", "-U", "--upgrade", "--no-deps",
    "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--no-build-isolation", "--force-reinstall",
    "--no-binary", "--only-binary", "-q", "--quiet", "-v", "--verbose", "--no-index", "--prefix", "--target",
    "--require-hashes", "--upgrade-package",
})
_VALUE_FLAGS = frozenset({
    "-e", "--editable", "-r", "--requirement", "-c", "--constraint", "--group", "-i", "--index-url",
    "--extra-index-url", "-f", "--find-links", "--no-binary", "--only-binary", "--prefix", "--target",
    "--upgrade-package", "--exclude-newer", "--exclude-newer-package", "--python", "--prerelease",
    "--reinstall-package",
})
_UV_RENAMED = {"--pre": ("--prerelease", "allow"), "--no-cache-dir": ("--no-cache",)}
_UV_DROPPED = frozenset({"--disable-pip-version-check", "--no-warn-script-location", "--no-input"})
_PIP_PREFIXES = (("python", "-m", "pip", "install"), ("python3", "-m", "pip", "install"),
                 ("pip", "install"), ("pip3", "install"))
# --compile-bytecode: pip writes .pyc files at install, uv does not unless asked. Without them the
# agent (who cannot write to site-packages) compiles each dependency at every import, and a suite
# with `filterwarnings = error` fails on a dependency's invalid escape sequence warning.
_UV_PREFIX = ("uv", "pip", "install", "--python", "python", "--compile-bytecode")
UV_BOOTSTRAP = f"{PIP_INSTALL} uv"
#: Pythons uv cannot compile bytecode for (its compile script needs ``py_compile.PycInvalidationMode``,
#: new in 3.7): there uv installs without ``--compile-bytecode``, and the install ends with
#: :data:`COMPILE_ALL` instead.
UV_COMPILES_FROM = (3, 7)
#: Compiles what the install put into site-packages (pip does it for its own installs).
COMPILE_ALL = ("python -c 'import compileall, sysconfig; "
               "compileall.compile_dir(sysconfig.get_paths()[\"purelib\"], quiet=1, workers=0)'")
#: Every spelling of the uv install command this module writes, longest first.
UV_PREFIXES = (_UV_PREFIX, _UV_PREFIX[:-1])


def uv_prefix(python: str | None = None) -> tuple[str, ...]:
    """The uv install command's first words on ``python`` (see :data:`UV_COMPILES_FROM`)."""
    return _UV_PREFIX if not python or _minor(python) >= UV_COMPILES_FROM else _UV_PREFIX[:-1]


def uv_install_args(tokens: Sequence[str]) -> list[str] | None:
    """The arguments after a uv install command's prefix (any of :data:`UV_PREFIXES`), or None."""
    for prefix in UV_PREFIXES:
        if tuple(tokens[: len(prefix)]) == prefix:
            return list(tokens[len(prefix):])
    return None


def _minor(python: str) -> tuple[int, int]:
    major, minor = python.split(".")[:2]
    return int(major), int(minor)

#: Build back-ends (and what they need to build) that an editable install may take newer than the
#: date pin. ``uv --exclude-newer`` limits the isolated build environment too, and before setuptools
#: 64 (August 2022) there is no ``build_editable`` hook (PEP 660): a date-pinned ``-e .`` of an older
#: setuptools project fails. Build tools do not run in the test process, so letting them reach
#: :data:`BUILD_BACKEND_FLOOR` keeps the project's runtime dependencies at the commit's date.
BUILD_BACKENDS = ("setuptools", "wheel", "setuptools-scm", "flit-core", "poetry-core", "tomli")

#: The upload date build back-ends may reach in an editable install with an older date pin: after
#: setuptools 64 (PEP 660), flit_core 3.4 and poetry-core 1.1 added editable builds, and before the
#: 2025 setuptools releases that reject long-deprecated ``setup.cfg`` spellings.
BUILD_BACKEND_FLOOR = "2023-01-01"

#: The upload date setuptools may reach in any date-pinned install: a dependency's sdist without a
#: ``[build-system]`` builds with ``setuptools>=40.8.0`` (pip's and uv's default), which a pin before
#: February 2019 excludes; newer setuptools would break sdists of that time (``use_2to3``).
DEFAULT_BUILD_FLOOR = "2019-03-01"


#: The first upload day of a setuptools that imports on each Python (measured by building a 2013
#: sdist): before 41.1 (August 2019) setuptools reads ``HTMLParser().unescape``, gone in 3.9; before
#: 66.1 (January 2023) it needs ``distutils`` and ``pkgutil.ImpImporter``, gone in 3.12. The earliest
#: day, not the Python's release: old sdists need old setuptools (``Feature``, gone in 46).
SETUPTOOLS_RUNS_ON = {"3.9": "2019-09-01", "3.10": "2019-09-01", "3.11": "2019-09-01",
                      "3.12": "2023-02-01", "3.13": "2023-02-01", "3.14": "2023-02-01"}


#: Pythons whose newest setuptools has no editable hook (PEP 660 came with setuptools 64, which needs
#: 3.7): uv installs a project in editable mode only through that hook, pip also by the legacy
#: ``setup.py develop``. There, :func:`pinned_install` has uv install the project and its
#: dependencies as of the pin, then pip re-install the project alone in editable mode.
LEGACY_EDITABLE_BELOW = (3, 7)


def legacy_editable(python: str | None) -> bool:
    """Whether an editable install on ``python`` must take pip's legacy path (see :data:`LEGACY_EDITABLE_BELOW`)."""
    return bool(python) and _minor(python) < LEGACY_EDITABLE_BELOW


def _legacy_editable_command(path: str) -> str:
    return shlex.join(["python", "-m", "pip", "install", "--no-deps", "-e", path])


def _is_legacy_editable(command: str) -> bool:
    """Whether ``command`` is the pip half of a legacy editable install (``pip install --no-deps -e PATH``)."""
    args = _pip_install_args(command)
    if args is None:
        return False
    options, targets = _split_args(args)
    return not targets and sorted(flag for flag, _ in options) == ["--no-deps", "-e"]


def build_floor(floor: str, python: str | None) -> str:
    """The upload day a build back-end may reach: ``floor``, or later when an older setuptools does
    not run on ``python`` (:data:`SETUPTOOLS_RUNS_ON`), which would fail every sdist a date-pinned
    install builds there."""
    return max(floor, SETUPTOOLS_RUNS_ON.get(python or "", floor))


def _pip_install_args(command: str) -> list[str] | None:
    """The arguments of a plain ``pip install`` command, or None for any other command."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if any(token in ("&&", "||", ";", "|") for token in tokens):
        return None
    for prefix in _PIP_PREFIXES:
        if tuple(tokens[: len(prefix)]) == prefix:
            return tokens[len(prefix):]
    return None


def _split_args(args: Sequence[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(options with their values, positional requirement arguments)."""
    options: list[tuple[str, str | None]] = []
    targets: list[str] = []
    tokens = iter(args)
    for token in tokens:
        if token.startswith("-") and token != "-":
            if "=" in token and token.startswith("--"):
                flag, value = token.split("=", 1)
                options.append((flag, value))
            elif token in _VALUE_FLAGS:
                options.append((token, next(tokens, "")))
            elif re.fullmatch(r"-[erc]\S+", token):
                options.append((token[:2], token[2:]))
            else:
                options.append((token, None))
        else:
            targets.append(token)
    return options, targets


def _join_args(options: Iterable[tuple[str, str | None]], targets: Iterable[str]) -> list[str]:
    tokens: list[str] = []
    for flag, value in options:
        tokens.append(flag)
        if value is not None:
            tokens.append(value)
    return tokens + list(targets)


def _is_tooling(targets: Sequence[str]) -> bool:
    names = [_requirement_name(target) for target in targets]
    return bool(names) and all(name in ("pip", "uv") for name in names)


def _requirement_name(target: str) -> str | None:
    try:
        return str(canonicalize_name(Requirement(target).name))
    except InvalidRequirement:
        return None


def _only_exact_pins(options: Sequence[tuple[str, str | None]], targets: Sequence[str]) -> bool:
    if not targets or any(flag in ("-e", "--editable", "-r", "--requirement", "--group") for flag, _ in options):
        return False
    for target in targets:
        try:
            specifiers = list(Requirement(target).specifier)
        except InvalidRequirement:
            return False
        if len(specifiers) != 1 or specifiers[0].operator != "==" or specifiers[0].version.endswith("*"):
            return False
    return True


def pinned_install(commands: list[str], date_pin: str, python: str | None = None) -> list[str]:
    """Rewrite ``pip install`` commands to resolve as of ``date_pin`` (ISO day, exclusive).

    The result starts with ``python -m pip install uv``; each ``python -m pip install ARGS`` (also
    ``pip install``, ``python3 -m pip install``) becomes ``uv pip install --python python
    --compile-bytecode --exclude-newer <date_pin>T00:00:00Z ARGS`` with ``-e``, ``-r``, extras and
    ``--group`` as they were (uv takes them alike; ``--pre`` becomes ``--prerelease allow``; uv,
    unlike pip, writes bytecode only when asked). Left unchanged:

    - commands that are not a plain pip install (shell pipelines, apt-get ...);
    - installs of pip or uv themselves (tooling, not the project's dependencies);
    - installs with an option uv lacks (``--user``, ``--install-option`` ...): they stay on pip,
      unpinned, since pip's ``--uploaded-prior-to`` needs a pip (26+) old base images lack.

    An editable install with a pin before :data:`BUILD_BACKEND_FLOOR` also gets
    ``--exclude-newer-package NAME=<floor>`` for each of :data:`BUILD_BACKENDS`, so that the build
    back-end can do editable installs (PEP 660) while the project's dependencies stay pinned; any
    other install with a pin before :data:`DEFAULT_BUILD_FLOOR` lets setuptools and wheel reach that day. With
    ``python``, both floors are at least that Python's release day (:func:`build_floor`).

    A command whose requirements are all exact ``==`` pins gets no ``--exclude-newer``: its
    versions are chosen already, and their dependencies may need releases newer than the pin
    (``pytest==4.6.11`` needs a pluggy released after a 2018 pin). On a Python of
    :data:`LEGACY_EDITABLE_BELOW`, an editable install becomes two commands: uv installs the same
    targets not in editable mode (the dependencies pinned), then ``python -m pip install --no-deps
    -e PATH`` makes the project editable (:func:`_unpinned` joins them again). Applying it twice
    changes nothing more. Raises ``ValueError`` if ``date_pin`` is not an ISO date.
    """
    day = date.fromisoformat(date_pin).isoformat()
    legacy = legacy_editable(python)
    prefix = uv_prefix(python)
    rewritten = [UV_BOOTSTRAP]
    for command in commands:
        if (guessed := split_guessed_install(command)) is not None:
            check, inner, tolerance = guessed
            rewritten.extend(f"{check}{pinned}{tolerance}" for pinned in pinned_install([inner], date_pin, python)
                             if pinned not in (UV_BOOTSTRAP, COMPILE_ALL))
            continue
        args = _pip_install_args(command)
        if command == COMPILE_ALL:
            continue  # added again at the end
        if args is None or (legacy and _is_legacy_editable(command)):
            rewritten.append(command)
            continue
        options, targets = _split_args(args)
        translated = _uv_options(options)
        if _is_tooling(targets) or translated is None:
            rewritten.append(command)
            continue
        editable_paths: list[str] = []
        if legacy and any(flag in ("-e", "--editable") for flag, _ in translated):
            editable_paths = [value or "" for flag, value in translated if flag in ("-e", "--editable")]
            translated = [(flag, value) for flag, value in translated if flag not in ("-e", "--editable")]
            options = [(flag, value) for flag, value in options if flag not in ("-e", "--editable")]
            targets = [*editable_paths, *targets]
        exclude = [] if _only_exact_pins(options, targets) else [("--exclude-newer", f"{day}T00:00:00Z")]
        backend_floor, setuptools_floor = build_floor(BUILD_BACKEND_FLOOR, python), build_floor(DEFAULT_BUILD_FLOOR, python)
        # The project's editable install needs a back-end with PEP 660 hooks; pip's legacy one (see
        # LEGACY_EDITABLE_BELOW) does not, and old sdists among the dependencies want setuptools of
        # their time (markupsafe 1.0 imports setuptools.Feature, gone in 46).
        if exclude and day < backend_floor and any(flag in ("-e", "--editable") for flag, _ in options):
            exclude.extend(("--exclude-newer-package", f"{name}={backend_floor}T00:00:00Z")
                           for name in BUILD_BACKENDS)
        elif exclude and day < setuptools_floor:
            # wheel with it: the wheel of the pin's day breaks under that setuptools (bdist_wheel's
            # egg2dist with a license_file: "expected str ... not NoneType").
            exclude.extend(("--exclude-newer-package", f"{name}={setuptools_floor}T00:00:00Z")
                           for name in ("setuptools", "wheel"))
        rewritten.append(shlex.join([*prefix, *_join_args([*exclude, *translated], targets)]))
        rewritten.extend(_legacy_editable_command(re.sub(r"\[.*\]$", "", path)) for path in editable_paths)
    if prefix != _UV_PREFIX and any(uv_install_args(_words(_install_of(command))) is not None for command in rewritten):
        rewritten.append(COMPILE_ALL)
    return list(dict.fromkeys(rewritten))


def _install_of(command: str) -> str:
    """The install command of a guessed install (see :func:`~repo2env.languages.python.spec.install.guessed_install`),
    else ``command``."""
    guessed = split_guessed_install(command)
    return command if guessed is None else guessed[1]


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return []


def _uv_options(options: Sequence[tuple[str, str | None]]) -> list[tuple[str, str | None]] | None:
    """pip's options as uv spells them, or None if one has no uv equivalent."""
    translated: list[tuple[str, str | None]] = []
    for flag, value in options:
        if flag in _UV_RENAMED:
            renamed = _UV_RENAMED[flag]
            translated.append((renamed[0], renamed[1] if len(renamed) > 1 else None))
        elif flag in _UV_SAME_FLAGS:
            translated.append((flag, value))
        elif flag not in _UV_DROPPED:
            return None
    return translated


def _unpinned(commands: list[str]) -> list[str]:
    """The inverse of :func:`pinned_install`: uv commands back to ``python -m pip install``, and a
    legacy editable install's two commands back to one."""
    restored: list[str] = []
    for command in commands:
        if command in (UV_BOOTSTRAP, COMPILE_ALL):
            continue
        if (guessed := split_guessed_install(command)) is not None:
            restored.extend(f"{guessed[0]}{inner}{guessed[2]}" for inner in _unpinned([guessed[1]]))
            continue
        if _is_legacy_editable(command) and restored and _joined_editable(restored[-1], command) is not None:
            restored[-1] = _joined_editable(restored[-1], command)
            continue
        try:
            tokens = shlex.split(command)
        except ValueError:
            restored.append(command)
            continue
        uv_args = uv_install_args(tokens)
        if uv_args is None:
            restored.append(command)
            continue
        options, targets = _split_args(uv_args)
        pip_options: list[tuple[str, str | None]] = []
        for flag, value in options:
            if flag in ("--exclude-newer", "--exclude-newer-package"):
                continue
            if flag == "--prerelease" and value == "allow":
                pip_options.append(("--pre", None))
            elif flag == "--no-cache":
                pip_options.append(("--no-cache-dir", None))
            else:
                pip_options.append((flag, value))
        restored.append(shlex.join(["python", "-m", "pip", "install", *_join_args(pip_options, targets)]))
    return restored


def _joined_editable(install: str, legacy: str) -> str | None:
    """``pip install .[x] more`` and its legacy editable half ``pip install --no-deps -e .`` as the
    one command they came from (``pip install -e .[x] more``), or None when they do not pair."""
    args, legacy_args = _pip_install_args(install), _pip_install_args(legacy)
    if args is None or legacy_args is None:
        return None
    path = next(value for flag, value in _split_args(legacy_args)[0] if flag == "-e")
    options, targets = _split_args(args)
    paired = [target for target in targets if target == path or (target.startswith(path + "[") and target.endswith("]"))]
    if not paired:
        return None
    rest = [target for target in targets if target != paired[0]]
    return shlex.join(["python", "-m", "pip", "install", *_join_args([*options, ("-e", paired[0])], rest)])


def exempt_from_pin(commands: list[str], releases: dict[str, str]) -> list[str]:
    """``commands`` with each date-pinned uv install letting the packages of ``releases`` (name ->
    ISO day, see :func:`~repo2env.languages.python.spec.failures.releases_gone_before_pin`) reach that day:
    their releases of the pin's time are gone from the index. Applying it twice changes nothing more."""
    exempted: list[str] = []
    for command in commands:
        if (guessed := split_guessed_install(command)) is not None:
            exempted.extend(f"{guessed[0]}{inner}{guessed[2]}" for inner in exempt_from_pin([guessed[1]], releases))
            continue
        words = _words(command)
        uv_args = uv_install_args(words)
        if uv_args is None or "--exclude-newer" not in uv_args:
            exempted.append(command)
            continue
        options, targets = _split_args(uv_args)
        have = {value.split("=", 1)[0] for flag, value in options if flag == "--exclude-newer-package" and value}
        extra = [("--exclude-newer-package", f"{name}={day}T00:00:00Z") for name, day in sorted(releases.items())
                 if name not in have]
        exempted.append(shlex.join([*words[: len(words) - len(uv_args)], *_join_args([*options, *extra], targets)])
                        if extra else command)
    return exempted


def split_editable_build(commands: list[str], python: str | None = None) -> list[str]:
    """``commands`` with each date-pinned editable uv install split in two, for dependencies whose
    sdists need an old setuptools (see :func:`~repo2env.languages.python.spec.failures.old_setuptools_needed`):
    the same targets installed *not* editable, with setuptools and wheel of their day (the default
    build floor); then the project alone (``--no-deps``) editable, with the back-ends that can do
    that (the editable floor). Applying it twice changes nothing more."""
    split: list[str] = []
    floor = build_floor(DEFAULT_BUILD_FLOOR, python)
    for command in commands:
        words = _words(command)
        uv_args = uv_install_args(words)
        options, targets = _split_args(uv_args) if uv_args is not None else ([], [])
        paths = [value for flag, value in options if flag in ("-e", "--editable") and value]
        if uv_args is None or not paths or ("--no-deps", None) in options or "--exclude-newer" not in uv_args:
            split.append(command)
            continue
        prefix = words[: len(words) - len(uv_args)]
        backends = {f"{name}=" for name in BUILD_BACKENDS}
        plain = [(flag, value) for flag, value in options if flag not in ("-e", "--editable")
                 and not (flag == "--exclude-newer-package" and value and any(value.startswith(b) for b in backends))]
        pinned_day = next(value for flag, value in options if flag == "--exclude-newer")
        floors = [("--exclude-newer-package", f"{name}={floor}T00:00:00Z") for name in ("setuptools", "wheel")
                  if pinned_day < f"{floor}T00:00:00Z"]
        split.append(shlex.join([*prefix, *_join_args([*plain, *floors], [*paths, *targets])]))
        backend_options = [(flag, value) for flag, value in options
                           if flag in ("--exclude-newer", "--exclude-newer-package") and (flag, value) not in floors]
        for path in paths:
            split.append(shlex.join([*prefix, *_join_args([*backend_options, ("--no-deps", None)],
                                                          [])] + ["-e", re.sub(r"\[.*\]$", "", path)]))
    return list(dict.fromkeys(split))
