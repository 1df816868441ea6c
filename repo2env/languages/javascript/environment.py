"""JavaScript environment inference: package manager, Node version, install commands, date pin.

Pure functions of the repository's files at a commit (:class:`~.project.ProjectFiles`) and the
commit date, like the Python spec's inference. :func:`infer_environment` puts them together:

- :func:`package_manager`: npm, yarn classic, yarn berry or pnpm, from the ``packageManager``
  field, the lock files, ``.yarnrc.yml`` and the lock files' format versions;
- :func:`infer_node`: the Node major among the ones with a base image, from ``engines.node``,
  ``.nvmrc``/``.node-version``/``volta`` pins, CI matrices and the commit date;
- :func:`install_commands`: ``npm ci``, ``yarn install --frozen-lockfile``/``--immutable``,
  ``pnpm install --frozen-lockfile``, scripts enabled or not;
- :func:`date_pin`: the lock file at the base commit when there is one, else ``npm install
  --before=<commit date>``. The ``before`` pin needs a registry whose packuments' ``time`` map
  holds true publication dates (the public npm registry's does; a mirror that records its own
  ingestion dates answers ENOVERSIONS: :func:`install_failure_reason` says so, and the ladder's
  next rung installs unpinned and records it).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import yaml

from repo2env.languages.javascript.project import ProjectFiles, dependencies, join
from repo2env.languages.javascript.runners import script_invocation

#: Node majors with a base image from Debian (see ``runtime.node_bootstrap.DEBIAN_NODE``).
AVAILABLE_NODES = ("12", "18", "20")
#: The day each Node major had its first release.
NODE_RELEASE_DATES = {
    "4": date(2015, 9, 8), "6": date(2016, 4, 26), "8": date(2017, 5, 30), "10": date(2018, 4, 24),
    "12": date(2019, 4, 23), "14": date(2020, 4, 21), "16": date(2021, 4, 20), "18": date(2022, 4, 19),
    "20": date(2023, 4, 18), "22": date(2024, 4, 24), "24": date(2025, 5, 6), "26": date(2026, 4, 22),
}
KNOWN_NODES = tuple(NODE_RELEASE_DATES)
#: How long after a commit a new Node still counts as "of its time" (projects test on the next
#: major's nightlies and release candidates months ahead).
ADOPTION_GRACE = timedelta(days=183)
#: The Node each pnpm major needs at least (pnpm's engines field).
PNPM_NODE_FLOOR = {"5": 10, "6": 12, "7": 14, "8": 16, "9": 18, "10": 18, "11": 20}
#: pnpm major by lockfileVersion of pnpm-lock.yaml.
PNPM_FOR_LOCKFILE = {"5.0": "5", "5.1": "5", "5.2": "5", "5.3": "6", "5.4": "7", "6.0": "8", "6.1": "8",
                     "7.0": "9", "9.0": "9"}
#: yarn berry major by yarn.lock's ``__metadata.version``.
YARN_FOR_LOCKFILE = {"4": "2", "5": "3", "6": "3", "7": "4", "8": "4"}
YARN_CLASSIC = "1.22.22"
LOCK_FILES = ("pnpm-lock.yaml", "yarn.lock", "npm-shrinkwrap.json", "package-lock.json")
#: How the build log's line about the packages a PR adds to package.json starts.
ADDED_DEPENDENCIES_MARKER = "repo2env: the PR's added dependencies: "
#: Set for every install: no browser, driver or git-hook downloads in an environment build.
INSTALL_ENV = {
    "CI": "true", "HUSKY": "0", "HUSKY_SKIP_INSTALL": "1", "ADBLOCK": "1", "DISABLE_OPENCOLLECTIVE": "1",
    "PUPPETEER_SKIP_DOWNLOAD": "1", "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD": "1", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
    "ELECTRON_SKIP_BINARY_DOWNLOAD": "1", "CYPRESS_INSTALL_BINARY": "0", "CHROMEDRIVER_SKIP_DOWNLOAD": "true",
    "GECKODRIVER_SKIP_DOWNLOAD": "true", "YARN_ENABLE_GLOBAL_CACHE": "false", "YARN_NODE_LINKER": "node-modules",
    "YARN_ENABLE_TELEMETRY": "0", "npm_config_audit": "false", "npm_config_fund": "false",
}


@dataclass(frozen=True)
class PackageManager:
    """Which package manager installs the project, which version, and why."""

    name: str  # "npm", "yarn" (classic), "yarn-berry" or "pnpm"
    version: str | None  # an exact version or a major; None: whatever the image has (npm)
    lock_file: str | None
    reason: str
    yarn_path: str | None = None  # .yarnrc.yml's yarnPath, when the repository ships its yarn


@dataclass(frozen=True)
class DatePin:
    """How dependencies are held at the base commit's date."""

    kind: str  # "lockfile", "before" or "none"
    detail: str  # the lock file, the ISO date, or why there is no pin


@dataclass(frozen=True)
class JsEnvironment:
    """Everything the env layer of a JavaScript task needs, with the evidence for each choice."""

    node: str
    node_reason: str
    package_manager: PackageManager
    pin: DatePin
    install: tuple[str, ...]
    install_env: dict[str, str] = field(default_factory=dict)
    ignore_scripts: bool = False


# --- package manager --------------------------------------------------------------------------


def package_manager(files: ProjectFiles | Mapping[str, str]) -> PackageManager:
    """The package manager of the repository root, from (strongest first) ``packageManager``,
    the lock files, ``.yarnrc.yml``; npm when nothing says otherwise."""
    files = ProjectFiles.of(files)
    package = files.package_json()
    locks = [lock for lock in LOCK_FILES if files.exists(lock)]
    yarnrc = _yaml(files.read(".yarnrc.yml"))
    yarn_path = yarnrc.get("yarnPath") if isinstance(yarnrc.get("yarnPath"), str) else None
    declared = package.get("packageManager")
    if isinstance(declared, str) and (match := re.fullmatch(r"(npm|yarn|pnpm)@(\d+(?:\.\d+){0,2}[^+]*)(?:\+.*)?",
                                                              declared.strip())):
        tool, version = match.groups()
        lock = {"npm": ("npm-shrinkwrap.json", "package-lock.json"), "yarn": ("yarn.lock",),
                "pnpm": ("pnpm-lock.yaml",)}[tool]
        found_lock = next((one for one in lock if one in locks), None)
        name = "yarn-berry" if tool == "yarn" and int(version.split(".")[0]) >= 2 else tool
        return PackageManager(name, version, found_lock, f"packageManager {declared.split('+')[0]}",
                              yarn_path if name == "yarn-berry" else None)
    if "pnpm-lock.yaml" in locks:
        version = _pnpm_lock_version(files.read("pnpm-lock.yaml") or "")
        major = PNPM_FOR_LOCKFILE.get(version or "", "9")
        return PackageManager("pnpm", major, "pnpm-lock.yaml", f"pnpm-lock.yaml (lockfileVersion {version})")
    if "yarn.lock" in locks:
        lock_text = files.read("yarn.lock") or ""
        metadata = re.search(r"^__metadata:\s*\n\s+version:\s*(\d+)", lock_text, re.MULTILINE)
        if metadata or files.exists(".yarnrc.yml"):
            version = _yarn_version_from_path(yarn_path) or YARN_FOR_LOCKFILE.get(metadata.group(1) if metadata else "",
                                                                                 "4")
            evidence = f"yarn.lock __metadata version {metadata.group(1)}" if metadata else "yarn.lock and .yarnrc.yml"
            return PackageManager("yarn-berry", version, "yarn.lock", evidence, yarn_path)
        return PackageManager("yarn", YARN_CLASSIC, "yarn.lock", "yarn.lock (classic format)")
    for lock in ("npm-shrinkwrap.json", "package-lock.json"):
        if lock in locks:
            return PackageManager("npm", None, lock, lock)
    return PackageManager("npm", None, None, "no lock file")


def _pnpm_lock_version(text: str) -> str | None:
    match = re.search(r"^lockfileVersion:\s*['\"]?([\d.]+)", text, re.MULTILINE)
    if not match:
        return None
    version = match.group(1)
    return version if "." in version else f"{version}.0"


def _yarn_version_from_path(yarn_path: str | None) -> str | None:
    match = re.search(r"yarn-(\d+\.\d+\.\d+[^/]*?)\.c?js$", yarn_path or "")
    return match.group(1) if match else None


def _yaml(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return value if isinstance(value, dict) else {}


# --- Node version -----------------------------------------------------------------------------

_Version = tuple[int, int, int]


def _parse_version(text: str) -> tuple[_Version, int] | None:
    """``"12.17"`` -> ((12, 17, 0), 2): the version and how many parts were given (x/* stop it)."""
    parts = re.findall(r"\d+|[xX*]", text.strip().lstrip("v=").split("-")[0])
    numbers: list[int] = []
    for part in parts[:3]:
        if not part.isdigit():
            break
        numbers.append(int(part))
    if not numbers:
        return None
    given = len(numbers)
    while len(numbers) < 3:
        numbers.append(0)
    return (numbers[0], numbers[1], numbers[2]), given


def _comparators(part: str) -> list[tuple[str, _Version]] | None:
    """One space-separated comparator set of a semver range -> (operator, version) pairs."""
    part = re.sub(r"(>=|<=|>|<|=|\^|~)\s+", r"\1", part.strip())
    hyphen = re.fullmatch(r"(\S+)\s+-\s+(\S+)", part)
    if hyphen:
        low, high = _parse_version(hyphen.group(1)), _parse_version(hyphen.group(2))
        if not low or not high:
            return None
        upper = _bump(high[0], high[1]) if high[1] < 3 else None
        return [(">=", low[0]), ("<", upper) if upper else ("<=", high[0])]
    result: list[tuple[str, _Version]] = []
    for token in part.split():
        match = re.fullmatch(r"(>=|<=|>|<|=|\^|~>?)?(.+)", token)
        if not match:
            return None
        operator, version_text = match.group(1) or "", match.group(2)
        if version_text in ("*", "x", "X", "latest", "lts", "current", "node"):
            continue
        parsed = _parse_version(version_text)
        if parsed is None:
            return None
        version, given = parsed
        if operator == "^":
            upper = (version[0] + 1, 0, 0) if version[0] else (0, version[1] + 1, 0)
            result += [(">=", version), ("<", upper)]
        elif operator.startswith("~"):
            result += [(">=", version), ("<", _bump(version, min(given, 2)))]
        elif operator in ("", "="):
            result += [(">=", version), ("<", _bump(version, given))] if given < 3 else [("=", version)]
        elif operator == "<=" and given < 3:
            result.append(("<", _bump(version, given)))
        elif operator == ">" and given < 3:
            result.append((">=", _bump(version, given)))
        else:
            result.append((operator, version))
    return result


def _bump(version: _Version, given: int) -> _Version:
    if given <= 1:
        return (version[0] + 1, 0, 0)
    if given == 2:
        return (version[0], version[1] + 1, 0)
    return (version[0], version[1], version[2] + 1)


def _satisfies(version: _Version, comparators: Sequence[tuple[str, _Version]]) -> bool:
    checks = {">=": version.__ge__, "<=": version.__le__, ">": version.__gt__, "<": version.__lt__,
              "=": version.__eq__}
    return all(checks[operator](bound) for operator, bound in comparators)


def node_range_allows(range_text: str, major: int) -> bool | None:
    """Whether a semver range (``engines.node``) allows some release of Node ``major``; None when
    the range cannot be read."""
    sets = [_comparators(part) for part in range_text.split("||")]
    if any(one is None for one in sets):
        return None
    for comparators in sets:
        assert comparators is not None
        # A set is an interval: it meets the major's span iff it holds one of the span's ends or
        # one of its own bounds (moved inside for strict ones) lies in the span.
        probes = [(major, 0, 0), (major, 9999, 9999)]
        probes += [bound for _, bound in comparators if bound[0] == major]
        probes += [(bound[0], bound[1], bound[2] + 1) for _, bound in comparators if bound[0] == major]
        if any(_satisfies(probe, comparators) for probe in probes):
            return True
    return False


_LTS_NAMES = {"argon": 4, "boron": 6, "carbon": 8, "dubnium": 10, "erbium": 12, "fermium": 14, "gallium": 16,
              "hydrogen": 18, "iron": 20, "jod": 22, "krypton": 24}


def _pinned_major(text: str) -> int | None:
    """The major an ``.nvmrc``/``.node-version``/volta pin names (``v14.17.0``, ``16``,
    ``lts/fermium``); None for moving targets (``node``, ``lts/*``, ``stable``)."""
    value = text.strip().splitlines()[0].strip() if text.strip() else ""
    lts = re.fullmatch(r"lts/(\w+)", value.lower())
    if lts:
        return _LTS_NAMES.get(lts.group(1))
    parsed = _parse_version(value)
    return parsed[0][0] if parsed and re.match(r"v?\d", value) else None


def _ci_nodes(files: ProjectFiles) -> dict[str, set[int]]:
    """Node majors the CI configuration tests on, per source."""
    found: dict[str, set[int]] = {}
    for path in files.glob(".github/workflows/*.yml", ".github/workflows/*.yaml"):
        majors: set[int] = set()
        workflow = _yaml(files.read(path))
        for value in _walk_node_versions(workflow):
            majors.update(_majors_of(value))
        if majors:
            found[f"{path.rsplit('/', 1)[-1]} matrix"] = majors
    travis = _yaml(files.read(".travis.yml"))
    if travis.get("node_js") is not None:
        values = travis["node_js"] if isinstance(travis["node_js"], list) else [travis["node_js"]]
        majors = {major for value in values for major in _majors_of(value)}
        if majors:
            found[".travis.yml node_js"] = majors
    return found


def _walk_node_versions(node: Any) -> Iterable[Any]:
    """Values under keys that name Node versions in a workflow (``node-version``, ``node``...)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if str(key) in ("node-version", "node_version", "node", "nodejs", "node-versions"):
                yield value
            else:
                yield from _walk_node_versions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk_node_versions(item)


def _majors_of(value: Any) -> set[int]:
    if isinstance(value, list):
        return {major for item in value for major in _majors_of(item)}
    text = str(value).strip()
    if "${{" in text:
        return set()
    major = _pinned_major(text)
    return {major} if major is not None and major >= 4 else set()


def infer_node(files: ProjectFiles | Mapping[str, str], commit_date: datetime,
               available: Sequence[str] = AVAILABLE_NODES) -> tuple[str, str]:
    """The Node major of the base image for the repository at a commit, with a short reason.

    The result is one of ``available``. Evidence narrows the choice in turn: a pin
    (``.nvmrc``, ``.node-version``, ``volta.node``: the lowest available major at or above it,
    else the highest below); ``engines.node`` (the majors it allows, else the nearest); the
    majors CI tests on (inside their range, else the nearest); the commit date (majors released
    before it plus :data:`ADOPTION_GRACE`; none: the oldest left). The newest major left wins.
    The reason names each source that was found, and says so when a major without a base image
    would fit better.
    """
    files = ProjectFiles.of(files)
    chosen, reason = _choose_node(files, commit_date, available)
    ideal, _ = _choose_node(files, commit_date, KNOWN_NODES)
    if ideal != chosen and ideal not in available:
        reason += f"; Node {ideal} fits better: no base image (give a local Node {ideal} prefix)"
    return chosen, reason


def _choose_node(files: ProjectFiles, commit_date: datetime, available: Sequence[str]) -> tuple[str, str]:
    candidates = sorted(int(major) for major in available)
    reasons: list[str] = []
    package = files.package_json()
    pin_sources = [(".nvmrc", files.read(".nvmrc")), (".node-version", files.read(".node-version"))]
    volta = package.get("volta")
    if isinstance(volta, dict) and isinstance(volta.get("node"), str):
        pin_sources.append(("volta.node", volta["node"]))
    for source, text in pin_sources:
        pinned = _pinned_major(text) if text else None
        if pinned is not None:
            above = [major for major in candidates if major >= pinned]
            chosen = min(above) if above else max(candidates)
            return str(chosen), f"{source} {text.strip().splitlines()[0]}"
    engines = package.get("engines")
    engine_range = engines.get("node") if isinstance(engines, dict) else None
    if isinstance(engine_range, str) and engine_range.strip():
        allowed = [major for major in candidates if node_range_allows(engine_range, major)]
        if allowed:
            candidates = allowed
        elif all(node_range_allows(engine_range, major) is not None for major in candidates):
            candidates = _nearest(candidates, [major for major in map(int, KNOWN_NODES)
                                               if node_range_allows(engine_range, major)])
        reasons.append(f"engines.node {engine_range.strip()}")
    tested = _ci_nodes(files)
    if tested:
        every = set().union(*tested.values())
        low, high = min(every), max(every)
        within = [major for major in candidates if low <= major <= high]
        candidates = within or _nearest(candidates, [low, high])
        reasons.extend(f"{source} {min(majors)}-{max(majors)}" if len(majors) > 1 else f"{source} {min(majors)}"
                       for source, majors in tested.items())
    day = commit_date.astimezone(UTC).date() if commit_date.tzinfo else commit_date.date()
    released = [major for major in candidates
                if NODE_RELEASE_DATES.get(str(major), date.max) <= day + ADOPTION_GRACE]
    chosen = max(released) if released else min(candidates)
    if chosen != max(candidates) or not reasons:
        reasons.append(f"commit date {day.isoformat()}")
    return str(chosen), "; ".join(reasons)


def _nearest(candidates: Sequence[int], targets: Sequence[int]) -> list[int]:
    if not targets:
        return list(candidates)
    distance = {major: min(abs(major - target) for target in targets) for major in candidates}
    best = min(distance.values())
    return [major for major in candidates if distance[major] == best]


# --- install and pin --------------------------------------------------------------------------


def date_pin(files: ProjectFiles | Mapping[str, str], commit_date: datetime) -> DatePin:
    """The lock file at the commit when there is one; else ``npm install --before`` the commit's day."""
    manager = package_manager(files)
    if manager.lock_file:
        return DatePin("lockfile", manager.lock_file)
    moment = commit_date.astimezone(UTC) if commit_date.tzinfo else commit_date.replace(tzinfo=UTC)
    return DatePin("before", moment.strftime("%Y-%m-%dT%H:%M:%SZ"))


#: Where the install puts the package manager a project asks for (yarn, pnpm), outside /testbed.
PACKAGE_MANAGER_PREFIX = "/tmp/repo2env-pm"


def _tool(manager: PackageManager) -> str:
    """The command that starts the package manager, installed at the version it asks for into
    :data:`PACKAGE_MANAGER_PREFIX` and started from there. Not with ``npx``: npm 7 (Node 12 on
    bullseye), as root, runs ``npx``'s command as the owner of the working folder, which cannot
    read root's npx cache ("sh: 1: yarn: Permission denied", zustand 2019-2021)."""
    if manager.name == "npm":
        return "npm"
    if manager.name == "yarn-berry" and manager.yarn_path:
        return f"node {shlex.quote(manager.yarn_path)}"
    package = {"yarn": f"yarn@{manager.version or YARN_CLASSIC}",
               "yarn-berry": f"@yarnpkg/cli-dist@{manager.version or '4'}",
               "pnpm": f"pnpm@{manager.version or '9'}"}[manager.name]
    binary = "pnpm" if manager.name == "pnpm" else "yarn"
    return (f"npm install --global --prefix {PACKAGE_MANAGER_PREFIX} --no-audit --no-fund --loglevel=error "
            f"{shlex.quote(package)} && {PACKAGE_MANAGER_PREFIX}/bin/{binary}")


def install_commands(manager: PackageManager, pin: DatePin, *, ignore_scripts: bool = False,
                     directory: str = "") -> tuple[str, ...]:
    """The shell commands that install the project's dependencies (dev ones included) as pinned.

    With a lock file, the frozen install of its package manager; without one, ``npm install
    --before=<date>`` (``pin.kind == "before"``) or plain ``npm install`` (``"none"``).
    ``ignore_scripts`` skips the dependencies' (and the project's) install scripts: a fallback
    for scripts that download binaries or build native code that the tests do not need."""
    cd = f"cd {shlex.quote(directory)} && " if directory else ""
    tool = _tool(manager)
    if pin.kind != "lockfile":
        before = f" --before={shlex.quote(pin.detail)}" if pin.kind == "before" else ""
        scripts = " --ignore-scripts" if ignore_scripts else ""
        return (f"{cd}npm install --no-audit --no-fund --no-package-lock{before}{scripts}",)
    if manager.name == "npm":
        return (f"{cd}npm ci --no-audit --no-fund" + (" --ignore-scripts" if ignore_scripts else ""),)
    if manager.name == "yarn":
        return (f"{cd}{tool} install --frozen-lockfile --non-interactive --network-timeout 600000"
                + (" --ignore-scripts" if ignore_scripts else ""),)
    if manager.name == "yarn-berry":
        return (f"{cd}{tool} install --immutable" + (" --mode=skip-build" if ignore_scripts else ""),)
    return (f"{cd}{tool} install --frozen-lockfile" + (" --ignore-scripts" if ignore_scripts else ""),)


def added_dependencies_install(manager: str, packages: Mapping[str, str], *, before: str | None = None,
                               ignore_scripts: bool = False) -> str | None:
    """The shell command that adds ``packages`` (name -> range: what the PR adds to package.json)
    to the ``node_modules`` that ``manager``'s install made, leaving package.json and the lock file
    as they are; None when there are none. It never fails: a failure says so in the build log (the
    task's tests that need a package then do not load, and derivation says that).

    npm's ``--no-save``, with the rung's ``--before`` pin, for npm's and yarn's trees (yarn's, with
    Yarn Berry's ``node-modules`` linker too, are the same hoisted layout; yarn itself has no mode
    that leaves package.json alone). Peer-dependency conflicts are accepted: the tree installed is
    the project's, only the packages are new. pnpm's tree is a store of links npm would rewrite, so
    it is left as it is, with the reason in the log."""
    if not packages:
        return None
    listed = ", ".join(f"{name}@{version}" for name, version in packages.items())
    if manager == "pnpm":
        return f"echo {shlex.quote(f'{ADDED_DEPENDENCIES_MARKER}not installed ({listed}): pnpm keeps node_modules as links npm cannot add to')}"
    options = " --ignore-scripts" if ignore_scripts else ""
    options += f" --before={shlex.quote(before)}" if before else ""
    specs = " ".join(shlex.quote(f"{name}@{version}") for name, version in packages.items())
    failed = f"{ADDED_DEPENDENCIES_MARKER}failed to install ({listed}); the tests that need them will not load"
    return (f"npm install --no-save --no-audit --no-fund --legacy-peer-deps{options} {specs} "
            f"|| echo {shlex.quote(failed)}")


def install_ladder(environment: JsEnvironment) -> list[tuple[str, tuple[str, ...]]]:
    """Install attempts to try in order, each ``(rung, commands)``: as pinned; scripts off; for an
    npm lock file out of step with package.json, ``npm install`` (the lock still pins what it
    lists); for a ``before`` pin the registry refuses (ENOVERSIONS), unpinned, then unpinned with
    scripts off (today's release of an old dependency's native module may not build on the image's
    Node, and tests rarely need it: iltorb under bundlesize in axios of 2019)."""
    manager, pin = environment.package_manager, environment.pin
    rungs = [("pinned", install_commands(manager, pin)),
             ("no-scripts", install_commands(manager, pin, ignore_scripts=True))]
    if pin.kind == "lockfile" and manager.name == "npm":
        rungs.append(("npm-install", ("npm install --no-audit --no-fund",)))
    if pin.kind == "before":
        unpinned = DatePin("none", "the registry refused --before")
        rungs.append(("unpinned", install_commands(manager, unpinned)))
        rungs.append(("unpinned-no-scripts", install_commands(manager, unpinned, ignore_scripts=True)))
    return rungs


def install_failure_reason(log: str) -> str:
    """A short class for a failed install's log: what the next rung should change."""
    # npm 7+ says ETARGET "No matching version found for x@1.2.3 with a date before ..." for an exact pin.
    if "ENOVERSIONS" in log or "No versions available" in log or "with a date before" in log:
        return "registry_dates"  # --before against a registry whose `time` map is not publication dates
    if "npm ci` can only install packages when your package.json and package-lock.json" in log or \
            "EUSAGE" in log and "lock" in log:
        return "lockfile_out_of_sync"
    if "YN0028" in log or "lockfile would have been modified" in log or "ERR_PNPM_OUTDATED_LOCKFILE" in log or \
            "Your lockfile needs to be updated" in log:
        return "lockfile_out_of_sync"
    if re.search(r"(?:request to|fetch|clone) \S*(?:github\.com|gitlab\.com|bitbucket\.org|codeload\.github\.com)\S* "
                 r"failed|git (?:dep|clone)\S* .*(?:github|gitlab)|ls-remote .*(?:github|gitlab)", log):
        return "git_host_dependency"  # a dependency fetched from a git host, not from the registry
    if "ETARGET" in log or "No matching version found for" in log:
        return "missing_version"  # a range no version the registry serves here satisfies
    if "gyp ERR!" in log or "node-pre-gyp" in log:
        return "native_build"
    if re.search(r"E(?:NOTFOUND|AI_AGAIN|CONNREFUSED|TIMEDOUT)|ECONNRESET|self.signed certificate|"
                 r"UNABLE_TO_GET_ISSUER_CERT", log):
        return "network"
    if "EBADENGINE" in log or "Unsupported engine" in log or "The engine \"node\" is incompatible" in log:
        return "node_version"
    return "install_failed"


def infer_environment(files: ProjectFiles | Mapping[str, str], commit_date: datetime,
                      available: Sequence[str] = AVAILABLE_NODES) -> JsEnvironment:
    """Node, package manager, pin and install commands for the repository at a commit. A pnpm
    that needs a newer Node than the one chosen moves the choice up when a base image allows."""
    files = ProjectFiles.of(files)
    node, reason = infer_node(files, commit_date, available)
    manager = package_manager(files)
    if manager.name == "pnpm" and manager.version:
        floor = PNPM_NODE_FLOOR.get(manager.version.split(".")[0], 0)
        higher = sorted(int(major) for major in available if int(major) >= floor)
        if int(node) < floor and higher:
            node, reason = str(higher[0]), f"{reason}; pnpm {manager.version} needs Node {floor}+"
    pin = date_pin(files, commit_date)
    return JsEnvironment(node=node, node_reason=reason, package_manager=manager, pin=pin,
                         install=install_commands(manager, pin), install_env=dict(INSTALL_ENV))


# --- workspaces -------------------------------------------------------------------------------


def workspace_globs(files: ProjectFiles | Mapping[str, str]) -> list[str]:
    """The workspace patterns of the root: package.json ``workspaces`` (a list, or yarn's
    ``{packages: [...]}``) and ``pnpm-workspace.yaml``'s ``packages``; negations dropped."""
    files = ProjectFiles.of(files)
    declared = files.package_json().get("workspaces")
    if isinstance(declared, dict):
        declared = declared.get("packages")
    globs = [str(one) for one in declared] if isinstance(declared, list) else []
    pnpm = _yaml(files.read("pnpm-workspace.yaml")).get("packages")
    if isinstance(pnpm, list):
        globs += [str(one) for one in pnpm]
    return [one.strip().rstrip("/") for one in globs if not str(one).startswith("!")]


def workspace_packages(files: ProjectFiles | Mapping[str, str]) -> list[str]:
    """The directories of the workspace packages (each with a package.json), sorted."""
    files = ProjectFiles.of(files)
    globs = workspace_globs(files)
    excluded = [one[1:].rstrip("/") for one in _all_workspace_entries(files) if one.startswith("!")]
    found = set()
    for path in files.glob("*package.json"):
        directory = path.rsplit("/", 1)[0] if "/" in path else ""
        if not directory or "node_modules/" in f"{directory}/":
            continue
        if any(_glob_matches(pattern, directory) for pattern in globs) and not any(
                _glob_matches(pattern, directory) for pattern in excluded):
            found.add(directory)
    return sorted(found)


def _all_workspace_entries(files: ProjectFiles) -> list[str]:
    declared = files.package_json().get("workspaces")
    if isinstance(declared, dict):
        declared = declared.get("packages")
    entries = [str(one) for one in declared] if isinstance(declared, list) else []
    pnpm = _yaml(files.read("pnpm-workspace.yaml")).get("packages")
    return entries + ([str(one) for one in pnpm] if isinstance(pnpm, list) else [])


def _glob_matches(pattern: str, directory: str) -> bool:
    """A workspace glob (``packages/*``, ``packages/**``, ``apps/web``) against a directory."""
    regex = ""
    for part in re.split(r"(\*\*|\*|\?)", pattern.removeprefix("./")):
        regex += {"**": ".*", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
    return re.fullmatch(regex, directory) is not None


def packages_touched(files: ProjectFiles | Mapping[str, str], paths: Iterable[str]) -> list[str]:
    """The workspace packages (directories) that changed ``paths`` fall in, sorted; ``""`` stands
    for the root (a path in no workspace package, or a repository without workspaces)."""
    packages = sorted(workspace_packages(files), key=len, reverse=True)
    touched = set()
    for path in paths:
        owner = next((package for package in packages if path.startswith(f"{package}/")), "")
        touched.add(owner)
    return sorted(touched)


# --- TypeScript -------------------------------------------------------------------------------


#: Node loaders/require hooks that transpile TypeScript -> the transform's name.
_LOADERS = {"tsx": "tsx", "ts-node": "ts-node", "esbuild-register": "esbuild-register", "@swc/register": "swc",
            "@babel/register": "babel"}


@dataclass(frozen=True)
class TypeScriptSupport:
    """How the project's own toolchain runs TypeScript tests (None: it does not)."""

    transform: str | None  # "ts-jest", "babel", "vitest", "ts-node", "tsx", "swc", "esbuild-register"
    reason: str


def typescript_support(files: ProjectFiles | Mapping[str, str], runner: str, directory: str = "") -> TypeScriptSupport:
    """Which of the project's dependencies transpiles TypeScript tests for ``runner``. The
    project's transform is used as it is; nothing is added to the environment for it."""
    files = ProjectFiles.of(files)
    package = files.package_json(directory)
    declared = dependencies(package)
    if runner == "vitest":
        return TypeScriptSupport("vitest", "vitest transpiles TypeScript itself (esbuild)")
    configs = " ".join(text for path in files.glob(join(directory, "jest.config.*"), join(directory, ".mocharc*"),
                                                   join(directory, "ava.config.*"))
                       if (text := files.read(path)))
    invocation = script_invocation(package, runner)
    options = " ".join([*(invocation.options if invocation else ()), *(invocation.node_options if invocation else ())])
    runner_config = package.get({"jest": "jest", "mocha": "mocha", "ava": "ava"}.get(runner, ""), {})
    text = f"{configs} {options} {runner_config}"
    if runner == "jest" and ("ts-jest" in text or "ts-jest" in declared and "preset" not in text):
        return TypeScriptSupport("ts-jest", "ts-jest in the jest configuration" if "ts-jest" in text
                                 else f"depends on ts-jest {declared['ts-jest']}")
    if runner == "jest" and "@swc/jest" in text:
        return TypeScriptSupport("swc", "@swc/jest in the jest configuration")
    for loader, transform in _LOADERS.items():
        if re.search(rf"(?:^|[\s'\"/=]){re.escape(loader)}(?:/|\b)", text):
            return TypeScriptSupport(transform, f"{loader} in the {runner} options")
    babel_files = files.glob(join(directory, "babel.config.*"), join(directory, ".babelrc*"))
    babel_text = " ".join(text for path in babel_files if (text := files.read(path)))
    if isinstance(package.get("babel"), dict):
        babel_text += str(package["babel"])
    babel_typescript = [name for name in ("@babel/preset-typescript", "@babel/plugin-transform-typescript")
                        if name in declared or name.split("/")[1] in babel_text]
    if babel_typescript and runner == "jest":
        return TypeScriptSupport("babel", f"babel-jest with {babel_typescript[0]}")
    return TypeScriptSupport(None, f"no TypeScript transform for {runner} found")
