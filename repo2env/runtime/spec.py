"""Environment inference: how to build and test a repository at one commit, read from its files.

Everything here is a pure function of the repository's files (a :class:`RepoFiles`) and the commit
date: no Docker, no network, no subprocess. The result is an :class:`~repo2env.models.EnvSpec`
that the layered build turns into images:

- :func:`infer_python` picks the base image's Python from ``requires-python``, trove classifiers,
  tox's envlist, CI matrices and the commit date;
- :func:`infer_install` lists the ``pip install`` commands (the project in editable mode with its
  test extras, test requirement files, dependency groups, tox deps, and always pytest);
- :func:`pinned_install` rewrites them for ``uv pip install --exclude-newer`` so dependencies
  resolve as they did on the commit's date (:func:`date_pin`);
- :func:`infer_test_cmd` gives the pytest command line the caller appends test ids to;
- :func:`infer_env_spec` puts it all together, with a per-repository override applied last;
- :func:`install_ladder` lists the fallbacks to try when the install or test collection fails.
"""

from __future__ import annotations

import ast
import configparser
import copy
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version as PackageVersion

from repo2env.models import EnvSpec
from repo2env.settings import load_yaml_text

if TYPE_CHECKING:
    from repo2env.runtime.overrides import EnvOverride

#: Pythons the base images are built for, oldest first (see ``bootstrap.DEBIAN_SUITE_FOR_PYTHON``).
AVAILABLE_PYTHONS = ("3.9", "3.11", "3.13")

#: The day each Python had its final x.y.0 release. Inference may choose any of them for which a
#: base image exists (``python:X.Y-slim`` pulled by ``runtime bootstrap``), beyond AVAILABLE_PYTHONS.
PYTHON_RELEASE_DATES = {
    "3.6": date(2016, 12, 23), "3.7": date(2018, 6, 27), "3.8": date(2019, 10, 14), "3.9": date(2020, 10, 5),
    "3.10": date(2021, 10, 4), "3.11": date(2022, 10, 24), "3.12": date(2023, 10, 2), "3.13": date(2024, 10, 7),
    "3.14": date(2025, 10, 7),
}
#: Every Python a base image may be made for (pulled; Debian suites ship only AVAILABLE_PYTHONS).
KNOWN_PYTHONS = tuple(PYTHON_RELEASE_DATES)

#: How long after a commit a new Python still counts as "of its time". Projects start testing on
#: a Python's release candidates months before its release, but pins and test tooling of a commit
#: older than that predate the Python and often break on it (pytest 6 does not import on 3.11).
ADOPTION_GRACE = timedelta(days=183)

#: The test command for every repository; the caller appends test ids. ``-rA`` reports every
#: outcome; ``-p no:cacheprovider`` keeps pytest from writing ``.pytest_cache`` into the sandbox.
DEFAULT_TEST_CMD = "python -m pytest -rA -p no:cacheprovider"

#: The warm-up command of ``warmup: true``: the test collection, which imports every test module
#: (and runs the fixtures and module-level code that download data on first use).
WARMUP_COLLECT = "python -m pytest --collect-only -q -p no:cacheprovider"

#: The ladder's rung names, in the order :func:`install_ladder` tries them. ``other-requirements-N``
#: rungs (another test requirement file instead of the chosen one) may follow ``inferred``.
LADDER_RUNGS = ("inferred", "fewer-extras", "older-python", "pinned-pytest", "no-date-pin")


@dataclass(frozen=True)
class PytestRelease:
    """A pytest release the ladder may pin."""

    version: str
    uploaded: date  #: the UTC day its files reached PyPI (what ``--exclude-newer`` compares with)
    oldest_python: str
    newest_python: str  #: from its trove classifiers, or its changelog where that says more


# The last patch of each minor series, plus earlier patches where a series was current for long.
# Upload days are when `uv pip install --exclude-newer` first finds the release (6.0.2's files came
# a week after its changelog date); Python ranges from each release's classifiers, except that
# 8.3.x lists up to 3.12 while 8.2.1's changelog added 3.13 support.
PYTEST_RELEASES = (
    PytestRelease("4.6.11", date(2020, 6, 5), "2.7", "3.9"),
    PytestRelease("5.4.3", date(2020, 6, 2), "3.5", "3.9"),
    PytestRelease("6.0.2", date(2020, 9, 11), "3.5", "3.9"),
    PytestRelease("6.1.2", date(2020, 10, 28), "3.5", "3.9"),
    PytestRelease("6.2.2", date(2021, 1, 25), "3.6", "3.9"),
    PytestRelease("6.2.4", date(2021, 5, 4), "3.6", "3.9"),
    PytestRelease("6.2.5", date(2021, 8, 30), "3.6", "3.10"),
    PytestRelease("7.0.1", date(2022, 2, 11), "3.6", "3.10"),
    PytestRelease("7.1.2", date(2022, 4, 23), "3.7", "3.10"),
    PytestRelease("7.1.3", date(2022, 9, 2), "3.7", "3.10"),
    PytestRelease("7.2.2", date(2023, 3, 3), "3.7", "3.11"),
    PytestRelease("7.3.2", date(2023, 6, 10), "3.7", "3.12"),
    PytestRelease("7.4.4", date(2023, 12, 31), "3.7", "3.12"),
    PytestRelease("8.0.2", date(2024, 2, 24), "3.8", "3.12"),
    PytestRelease("8.1.2", date(2024, 4, 26), "3.8", "3.12"),
    PytestRelease("8.2.2", date(2024, 6, 4), "3.8", "3.13"),
    PytestRelease("8.3.3", date(2024, 9, 10), "3.8", "3.13"),
    PytestRelease("8.3.5", date(2025, 3, 2), "3.8", "3.13"),
    PytestRelease("8.4.1", date(2025, 6, 18), "3.9", "3.14"),
    PytestRelease("8.4.2", date(2025, 9, 4), "3.9", "3.14"),
    PytestRelease("9.0.1", date(2025, 11, 12), "3.10", "3.14"),
    PytestRelease("9.0.3", date(2026, 4, 7), "3.10", "3.14"),
)


# --------------------------------------------------------------------------------------------
# The repository's files


class RepoFiles(Protocol):
    """The files of a repository at one commit."""

    def read(self, path: str) -> str | None:
        """The text of the file at ``path`` (POSIX, relative), or None if it is absent or binary."""
        ...

    def listing(self) -> list[str]:
        """Every file path at the commit (POSIX, relative to the repository root)."""
        ...


class DictRepoFiles(dict[str, str]):
    """A :class:`RepoFiles` held in memory: path -> text. For tests and small callers."""

    def read(self, path: str) -> str | None:
        """The text at ``path``, or None."""
        return self.get(path)

    def listing(self) -> list[str]:
        """All paths, sorted."""
        return sorted(self)


@dataclass
class _Project:
    """The parsed packaging and test configuration of a repository; empty parts when absent."""

    files: RepoFiles
    listing: list[str]
    pyproject: dict[str, Any] = field(default_factory=dict)
    pyproject_text: str = ""
    setup_cfg: configparser.ConfigParser | None = None
    setup_cfg_text: str = ""
    setup_py: str = ""
    setup_keywords: dict[str, Any] = field(default_factory=dict)
    tox: configparser.ConfigParser | None = None

    @property
    def installable(self) -> bool:
        """Whether ``pip install .`` has something to build."""
        if self.setup_py:
            return True
        if self.pyproject.keys() & {"project", "build-system"} or "poetry" in self.pyproject.get("tool", {}):
            return True
        return self.setup_cfg is not None and (
            self.setup_cfg.has_section("metadata") or self.setup_cfg.has_section("options"))

    def tool(self, *keys: str) -> Any:
        """``pyproject.toml``'s ``[tool.<keys>]`` value, or None."""
        node: Any = self.pyproject.get("tool", {})
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node


def _read_project(files: RepoFiles) -> _Project:
    project = _Project(files=files, listing=files.listing())
    project.pyproject_text = files.read("pyproject.toml") or ""
    if project.pyproject_text:
        try:
            project.pyproject = tomllib.loads(project.pyproject_text)
        except tomllib.TOMLDecodeError:
            project.pyproject = {}
    project.setup_cfg_text = files.read("setup.cfg") or ""
    project.setup_cfg = _parse_ini(project.setup_cfg_text)
    project.setup_py = files.read("setup.py") or ""
    project.setup_keywords = _setup_py_keywords(project.setup_py)
    project.tox = _tox_config(project)
    return project


def _parse_ini(text: str) -> configparser.ConfigParser | None:
    if not text:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _ini_get(parser: configparser.ConfigParser | None, section: str, key: str) -> str | None:
    if parser is None or not parser.has_section(section):
        return None
    return parser.get(section, key, fallback=None)


def _ini_lines(value: str | None) -> list[str]:
    """A multi-line ini value as its non-empty, non-comment lines."""
    if not value:
        return []
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def _tox_config(project: _Project) -> configparser.ConfigParser | None:
    """tox's configuration as an ini file with ``[tox]`` and ``[testenv]`` sections, wherever it lives."""
    tox_ini = _parse_ini(project.files.read("tox.ini") or "")
    if tox_ini is not None and (tox_ini.has_section("tox") or tox_ini.has_section("testenv")):
        return tox_ini
    if project.setup_cfg is not None and project.setup_cfg.has_section("tox:tox"):
        embedded = configparser.ConfigParser(interpolation=None, strict=False)
        embedded.read_dict({"tox": dict(project.setup_cfg.items("tox:tox"))})
        if project.setup_cfg.has_section("testenv"):
            embedded.read_dict({"testenv": dict(project.setup_cfg.items("testenv"))})
        return embedded
    legacy = project.tool("tox", "legacy_tox_ini")
    if isinstance(legacy, str):
        return _parse_ini(legacy)
    return None


# setup.py is code; these keywords are read from the literal values passed to setup(), following
# module-level names (EXTRAS = {...}; setup(extras_require=EXTRAS)) one step.
_SETUP_KEYWORDS = ("python_requires", "extras_require", "tests_require", "ext_modules",
                   "name", "packages", "py_modules", "package_dir")  # the last four: own_code.py
_UNRESOLVED = object()  # a keyword passed to setup() whose value is not a literal


def _setup_py_keywords(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return _setup_py_keywords_by_pattern(text)
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and (entry := _dict_entry(node, names)):
            names[entry[0]] = entry[1]
    keywords: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if callee != "setup":
            continue
        for keyword in node.keywords:
            if keyword.arg in _SETUP_KEYWORDS:
                value = _literal(keyword.value, names)
                keywords[keyword.arg] = value if value is not None else _UNRESOLVED
    if "python_requires" not in keywords or keywords["python_requires"] is _UNRESOLVED:
        keywords.update({k: v for k, v in _setup_py_keywords_by_pattern(text).items() if k == "python_requires"})
    return keywords


def _dict_entry(node: ast.Assign, names: Mapping[str, ast.expr]) -> tuple[str, ast.Dict] | None:
    """A top-level ``NAME["key"] = value`` on a dict literal: (NAME, the dict with that entry).

    ``EXTRAS_REQUIRE["tests"] = EXTRAS_REQUIRE["tests_no_zope"] + ["zope.interface"]`` (attrs): the
    value reads the dict as it stood before, so ``NAME`` in it is replaced by that earlier dict.
    """
    target = node.targets[0]
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)):
        return None
    earlier = names.get(target.value.id)
    if not isinstance(earlier, ast.Dict):
        return None

    class Earlier(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.expr:
            return earlier if name.id == target.value.id else name

    value = Earlier().visit(copy.deepcopy(node.value))
    return target.value.id, ast.Dict(keys=[*earlier.keys, target.slice], values=[*earlier.values, value])


def _literal(node: ast.expr, names: Mapping[str, ast.expr], depth: int = 0) -> Any:
    """The value of a literal expression, or None. Dict values that are not literals become None."""
    if depth > 8:
        return None
    if isinstance(node, ast.Name) and node.id in names:
        return _literal(names[node.id], names, depth + 1)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        container = _literal(node.value, names, depth + 1)
        return container.get(node.slice.value) if isinstance(container, dict) else None
    if isinstance(node, ast.Dict):
        entries = ((_literal(key, names, depth + 1), value) for key, value in zip(node.keys, node.values, strict=True)
                   if key is not None)
        return {key: _literal(value, names, depth + 1) for key, value in entries if isinstance(key, str)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {keyword.arg: _literal(keyword.value, names, depth + 1) for keyword in node.keywords if keyword.arg}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, names, depth + 1), _literal(node.right, names, depth + 1)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        return None
    if isinstance(node, ast.List | ast.Tuple):
        items = [_literal(item, names, depth + 1) for item in node.elts]
        return [item for item in items if item is not None]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _setup_py_keywords_by_pattern(text: str) -> dict[str, Any]:
    """Fallback for a setup.py that does not parse as Python 3 (print statements and the like)."""
    keywords: dict[str, Any] = {}
    if match := re.search(r"python_requires\s*=\s*(['\"])(.+?)\1", text):
        keywords["python_requires"] = match.group(2)
    if "extras_require" in text:
        names = re.findall(r"['\"]([A-Za-z][\w.-]*)['\"]\s*:", text)
        keywords["extras_require"] = dict.fromkeys(names)
    if "Extension(" in text:
        keywords["ext_modules"] = _UNRESOLVED
    return keywords


# --------------------------------------------------------------------------------------------
# Python


_Minor = tuple[int, int]


def _xy(text: str) -> _Minor:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _text(version: _Minor) -> str:
    return f"{version[0]}.{version[1]}"


def _utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date() if moment.tzinfo else moment.date()


def infer_python(files: RepoFiles, commit_date: datetime,
                 available: Sequence[str] = AVAILABLE_PYTHONS) -> tuple[str, str]:
    """Choose the base image's Python for the repository at a commit, with a short reason.

    The result is always one of ``available`` (the Pythons with a base image; by default
    :data:`AVAILABLE_PYTHONS`). Evidence narrows the choice in turn:

    1. ``requires-python`` (pyproject ``[project]``, Poetry's ``python`` dependency, setup.cfg or
       setup.py ``python_requires``): the Pythons it allows; none allowed -> the nearest ones.
    2. Versions the project is tested on: trove classifiers, tox's envlist, GitHub Actions and
       Travis matrices, nox sessions. Pythons inside their range; none -> the nearest ones.
    3. The commit date: Pythons released before the commit date plus :data:`ADOPTION_GRACE`;
       none -> the oldest remaining.

    The newest remaining Python wins. The reason names each source that was found, e.g.
    ``"requires-python >=3.5; tox envlist 3.5-3.8"``, and the commit date when it narrowed the
    choice; when a Python of :data:`KNOWN_PYTHONS` without a base image would fit better, it says
    so (``"3.8 fits better: no base image"``).
    """
    return _infer_python(_read_project(files), commit_date, available)


def _infer_python(project: _Project, commit_date: datetime,
                  available: Sequence[str] = AVAILABLE_PYTHONS) -> tuple[str, str]:
    chosen, reason = _choose_python(project, commit_date, available)
    ideal, _ = _choose_python(project, commit_date, KNOWN_PYTHONS)
    if ideal != chosen and ideal not in available:
        reason += f"; {ideal} fits better: no base image (runtime bootstrap --python {ideal} needs a registry)"
    return chosen, reason


def _choose_python(project: _Project, commit_date: datetime, available: Sequence[str]) -> tuple[str, str]:
    candidates = sorted(_xy(version) for version in available)
    reasons: list[str] = []
    constraint = _requires_python(project)
    if constraint is not None:
        allowed = [version for version in candidates if _allows(constraint, version)]
        candidates = allowed or _nearest_allowed(constraint, candidates)
        reasons.append(f"requires-python {constraint}")
    tested_sources = _tested_versions(project)
    tested = set().union(*tested_sources.values()) if tested_sources else set()
    if tested:
        low, high = min(tested), max(tested)
        within = [version for version in candidates if low <= version <= high]
        candidates = within or _nearest_to_range(candidates, low, high)
        reasons.extend(f"{source} {_range_text(versions)}" for source, versions in tested_sources.items())
    horizon = _utc_day(commit_date) + ADOPTION_GRACE
    released = [version for version in candidates
                if PYTHON_RELEASE_DATES.get(_text(version), date.max) <= horizon]
    chosen = max(released) if released else min(candidates)
    if chosen != max(candidates) or not reasons:
        reasons.append(f"commit date {_utc_day(commit_date).isoformat()}")
    return _text(chosen), "; ".join(reasons)


def _range_text(versions: set[_Minor]) -> str:
    low, high = min(versions), max(versions)
    return _text(low) if low == high else f"{_text(low)}-{_text(high)}"


def _allows(constraint: SpecifierSet, version: _Minor) -> bool:
    # A minor series is allowed if some patch release of it is: `>=3.9.1` allows 3.9, `<=3.9` too.
    return any(constraint.contains(f"{version[0]}.{version[1]}.{patch}", prereleases=True) for patch in (0, 99))


def _nearest_allowed(constraint: SpecifierSet, candidates: list[_Minor]) -> list[_Minor]:
    allowed_minors = [(3, minor) for minor in range(0, 30) if _allows(constraint, (3, minor))]
    if not allowed_minors:
        return [min(candidates)]

    def distance(version: _Minor) -> int:
        return min(abs(version[1] - minor[1]) for minor in allowed_minors)

    best = min(distance(version) for version in candidates)
    return [version for version in candidates if distance(version) == best]


def _nearest_to_range(candidates: list[_Minor], low: _Minor, high: _Minor) -> list[_Minor]:
    below = [version for version in candidates if version < low]
    above = [version for version in candidates if version > high]
    # Straddling (tested only on 3.10): keep both neighbours and let the commit date choose.
    return ([max(below)] if below else []) + ([min(above)] if above else [])


def _requires_python(project: _Project) -> SpecifierSet | None:
    raw_values: list[str] = []
    declared = project.pyproject.get("project", {}).get("requires-python")
    if isinstance(declared, str):
        raw_values.append(declared)
    poetry_python = (project.tool("poetry", "dependencies") or {}).get("python")
    if isinstance(poetry_python, str) and (converted := _poetry_constraint(poetry_python)) is not None:
        raw_values.append(converted)
    if cfg_value := _ini_get(project.setup_cfg, "options", "python_requires"):
        raw_values.append(cfg_value)
    setup_value = project.setup_keywords.get("python_requires")
    if isinstance(setup_value, str):
        raw_values.append(setup_value)
    for raw in raw_values:
        if (constraint := _specifier_set(raw)) is not None and str(constraint):
            return constraint
    return None


def _specifier_set(raw: str) -> SpecifierSet | None:
    text = raw.strip().strip("'\"")
    for attempt in (text, re.sub(r"([<>~]=?)\s*(\d+(?:\.\d+)*)\.\*", r"\1\2", text)):
        try:
            return SpecifierSet(attempt)
        except InvalidSpecifier:
            continue
    return None


_CLASSIFIER = re.compile(r"Programming Language :: Python :: (\d)\.(\d+)\b")
_TOX_FACTOR = re.compile(r"^py(?:(\d)(\d+)|(\d)\.(\d+))$")
_BARE_VERSION = re.compile(r"^(?:cpython-?)?(\d)\.(\d+)(?:\.\d+)?$")
_PYTHON_KEYS = frozenset({"python-version", "python-versions", "python_version", "python", "py", "pyver"})


def _tested_versions(project: _Project) -> dict[str, set[_Minor]]:
    """Source label -> the Python versions it says the project is tested on, for sources found."""
    sources = {
        "classifiers": _classifier_versions(project),
        "tox envlist": _tox_versions(project),
        "CI matrix": _ci_versions(project),
        "nox sessions": _nox_versions(project),
    }
    return {label: versions for label, versions in sources.items() if versions}


def _classifier_versions(project: _Project) -> set[_Minor]:
    text = "\n".join((project.pyproject_text, project.setup_cfg_text, project.setup_py))
    return {(int(major), int(minor)) for major, minor in _CLASSIFIER.findall(text)}


def _tox_versions(project: _Project) -> set[_Minor]:
    envs: list[str] = []
    raw = _ini_get(project.tox, "tox", "envlist") or _ini_get(project.tox, "tox", "env_list")
    if raw:
        envs.extend(_expand_envlist(raw))
    native = project.tool("tox", "env_list")
    if isinstance(native, list):
        envs.extend(str(env) for env in native)
    versions: set[_Minor] = set()
    for env in envs:
        for factor in env.split("-"):
            if match := _TOX_FACTOR.match(factor):
                major, minor = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
                versions.add((int(major), int(minor)))
            elif match := _BARE_VERSION.match(factor):
                versions.add((int(match.group(1)), int(match.group(2))))
    return versions


def _expand_envlist(raw: str) -> list[str]:
    """tox's envlist as env names: split on commas and newlines outside braces, braces expanded."""
    names, depth, current = [], 0, []
    for char in raw:
        depth += char == "{"
        depth -= char == "}"
        if depth == 0 and (char in ",\n" or char.isspace()):
            names.append("".join(current))
            current = []
        else:
            current.append(char)
    names.append("".join(current))
    return [expanded for name in names if name.strip() for expanded in _expand_braces(name.strip())]


def _expand_braces(text: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    alternatives: list[str] = []
    for option in match.group(1).split(","):
        option = option.strip()
        if span := re.fullmatch(r"(\d+)-(\d+)", option):
            # tox 4's generative ranges: py3{8-11} is py38, py39, py310, py311.
            alternatives.extend(str(number) for number in range(int(span.group(1)), int(span.group(2)) + 1))
        else:
            alternatives.append(option)
    return [expanded for option in alternatives
            for expanded in _expand_braces(text[:match.start()] + option + text[match.end():])]


def _ci_versions(project: _Project) -> set[_Minor]:
    """Pythons in GitHub Actions matrices (or, without matrices, any setup-python) and Travis."""
    matrix_versions: set[_Minor] = set()
    any_versions: set[_Minor] = set()
    for path in project.listing:
        if not (path.startswith(".github/workflows/") and path.endswith((".yml", ".yaml"))):
            continue
        workflow = _load_yaml_quietly(project.files.read(path))
        jobs = workflow.get("jobs") if isinstance(workflow, dict) else None
        if not isinstance(jobs, dict):
            continue
        for job in jobs.values():
            if not isinstance(job, dict):
                continue
            strategy = job.get("strategy")
            if isinstance(strategy, dict):
                matrix_versions |= _python_values(strategy.get("matrix"))
            any_versions |= _python_values(job.get("steps"))
    # A lint job on the newest Python says little about the test matrix, so matrices come first.
    versions = matrix_versions or any_versions
    travis = _load_yaml_quietly(project.files.read(".travis.yml"))
    return versions | _python_values(travis)


def _load_yaml_quietly(text: str | None) -> Any:
    if not text:
        return None
    try:
        return load_yaml_text(text)
    except yaml.YAMLError:
        return None


def _python_values(node: Any) -> set[_Minor]:
    """Versions under python-version-like keys anywhere in a YAML tree."""
    found: set[_Minor] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and key.lower() in _PYTHON_KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str | int) and (match := _BARE_VERSION.match(str(item).strip())):
                        found.add((int(match.group(1)), int(match.group(2))))
            else:
                found |= _python_values(value)
    elif isinstance(node, list):
        for item in node:
            found |= _python_values(item)
    return found


def _nox_versions(project: _Project) -> set[_Minor]:
    text = project.files.read("noxfile.py") or ""
    versions: set[_Minor] = set()
    for group in re.findall(r"python\s*=\s*(\[[^\]]*\]|\([^)]*\)|['\"][^'\"]*['\"])", text):
        versions |= {(int(major), int(minor)) for major, minor in re.findall(r"['\"](\d)\.(\d+)['\"]", group)}
    return versions


# --------------------------------------------------------------------------------------------
# Install commands


_TEST_NAMES = ("test", "tests", "testing")
_DEV_NAMES = ("dev", "develop", "development")
PIP_INSTALL = "python -m pip install"
PIP_UPGRADE = f"{PIP_INSTALL} --upgrade pip"


def _test_names(declared: Iterable[str]) -> list[str]:
    """The test-ish names among ``declared`` (extras, groups), else the dev-ish ones, in order."""
    names = list(dict.fromkeys(declared))
    for wanted in (_TEST_NAMES, _DEV_NAMES):
        chosen = [name for name in names if str(canonicalize_name(name)) in wanted]
        if chosen:
            return chosen
    return []


def infer_install(files: RepoFiles) -> list[str]:
    """The shell commands that install the repository and its test dependencies, unpinned.

    In order, each at most once:

    - ``python -m pip install --upgrade pip`` (old base images' pip cannot do PEP 660 editable
      installs or ``--group``);
    - the project in editable mode, with its test extras (``test``/``tests``/``testing``, else
      ``dev``, plus the ``extras`` tox installs) when it has a pyproject.toml, setup.py or setup.cfg;
    - requirement files: the base ``requirements.txt``, and the test ones the project's own test
      runner installs (tox's ``deps``, nox test sessions, CI test jobs), else the best-named test
      one (``requirements/test.txt``, ``test-requirements.txt`` ...; a dev one when there is no
      test one); never docs, lint, pre-commit, typing or minimum-version ones. The other test
      files are :func:`install_ladder` rungs, one at a time;
    - PEP 735 dependency groups (test-ish, else dev) with ``--group``;
    - literal test requirements from setup.py/setup.cfg ``tests_require``, tox ``deps``, Poetry,
      PDM and Hatch test dependencies, in one command;
    - pytest and the plugins the pytest configuration needs (``--cov`` -> pytest-cov ...), with
      ``pytest<8`` for nose-era suites (pytest 8 dropped nose support).

    Pass the result through :func:`pinned_install` to resolve as of a date.
    """
    return _infer_install(_read_project(files))


def _infer_install(project: _Project) -> list[str]:
    commands = [PIP_UPGRADE]
    if project.installable:
        extras = _chosen_extras(project)
        target = f".[{','.join(extras)}]" if extras else "."
        commands.append(shlex.join(["python", "-m", "pip", "install", "-e", target]))
    requirement_files = _requirement_files(project)
    commands.extend(shlex.join(["python", "-m", "pip", "install", "-r", path]) for path in requirement_files)
    groups = _test_names(project.pyproject.get("dependency-groups", {}) or {})
    if groups:
        commands.append(shlex.join(["python", "-m", "pip", "install", *(t for g in groups for t in ("--group", g))]))
    literal = _literal_test_requirements(project)
    if literal:
        commands.append(shlex.join(["python", "-m", "pip", "install", *literal]))
    commands.append(shlex.join(["python", "-m", "pip", "install", *_pytest_requirements(project)]))
    return list(dict.fromkeys(commands))


def _declared_extras(project: _Project) -> list[str]:
    names: list[str] = []
    optional = project.pyproject.get("project", {}).get("optional-dependencies")
    if isinstance(optional, dict):
        names.extend(optional)
    dynamic = project.tool("setuptools", "dynamic", "optional-dependencies")
    if isinstance(dynamic, dict):
        names.extend(dynamic)
    poetry_extras = project.tool("poetry", "extras")
    if isinstance(poetry_extras, dict):
        names.extend(poetry_extras)
    if project.setup_cfg is not None and project.setup_cfg.has_section("options.extras_require"):
        names.extend(project.setup_cfg.options("options.extras_require"))
    setup_extras = project.setup_keywords.get("extras_require")
    if isinstance(setup_extras, dict):
        names.extend(str(name) for name in setup_extras if isinstance(name, str))
    return names


def _chosen_extras(project: _Project) -> list[str]:
    chosen = _test_names(_declared_extras(project))
    # The extras tox installs for its test envs are the ones the suite is known to run with.
    tox_extras = [extra.strip() for line in _ini_lines(_ini_get(project.tox, "testenv", "extras"))
                  for extra in line.split(",") if extra.strip() and "{" not in extra and ":" not in extra]
    return list(dict.fromkeys(chosen + tox_extras))


_REQUIREMENT_FILE = re.compile(r"(?i)^(?:[\w.-]*[-_.])?requirements?(?:[-_.][\w.-]*)?\.txt$")
_BASE_REQUIREMENT_STEMS = frozenset({"requirements", "requirement", "base", "main", "common", "core", "install"})


# Requirement files for another job than running the tests: their pins often conflict with the
# project's (a pre-commit hook's, a lint job's, a minimum-versions CI matrix's).
_OTHER_PURPOSE_WORDS = frozenset({
    "doc", "docs", "documentation", "sphinx", "lint", "linting", "linters", "style", "precommit", "typing",
    "mypy", "types", "typecheck", "min", "minimum", "minimal", "mindeps", "oldest", "lowest", "bench",
    "benchmark", "benchmarks", "release", "publish", "upload",
})
#: How many other test requirement files the ladder tries, one at a time, after the chosen one.
MAX_REQUIREMENT_ALTERNATIVES = 2


def _requirement_files(project: _Project) -> list[str]:
    """Requirement files to install: see :func:`_requirement_choice`."""
    base, chosen, _ = _requirement_choice(project)
    return list(dict.fromkeys(base + chosen))


def _requirement_choice(project: _Project) -> tuple[list[str], list[str], list[str]]:
    """(base files, chosen test files, other test files to try one at a time instead of those).

    Installed: the base requirement files, then the ones the project's own test runner installs
    (tox's ``deps``, nox test sessions, CI test jobs); when no runner names one, the best-named
    test file (``requirements/tests.txt`` before ``requirements/tests-extra.txt``), else dev file.
    Files for other purposes (docs, lint, pre-commit, typing, minimum versions) are never chosen.
    """
    base, test, dev = [], [], []
    for path in project.listing:
        directory, _, name = path.rpartition("/")
        top_level = directory == "" and _REQUIREMENT_FILE.match(name)
        if not (top_level or (directory == "requirements" and name.lower().endswith(".txt"))):
            continue
        stem = name.lower().removesuffix(".txt")
        words = set(re.split(r"[-_.]", stem))
        if (words & _OTHER_PURPOSE_WORDS or {"pre", "commit"} <= words
                or any(re.fullmatch(r"py2\d*", w) for w in words)):
            continue
        if words & set(_TEST_NAMES):
            test.append(path)
        elif words & set(_DEV_NAMES):
            dev.append(path)
        elif stem in _BASE_REQUIREMENT_STEMS and (directory == "" or "requirements.txt" not in project.listing):
            base.append(path)
    candidates = sorted(test or dev, key=_requirement_file_rank)
    runner = [path for path in _runner_requirement_files(project) if path not in base]
    chosen = runner or candidates[:1]
    alternatives = [path for path in candidates if path not in chosen][:MAX_REQUIREMENT_ALTERNATIVES]
    return base, chosen, alternatives


def _requirement_file_rank(path: str) -> tuple[int, int, str]:
    """Fewer words besides test/requirements first (``tests.txt`` before ``tests-extra.txt``), then
    shallower, then by name."""
    words = set(re.split(r"[-_.]", path.rpartition("/")[2].lower().removesuffix(".txt")))
    other = words - set(_TEST_NAMES) - set(_DEV_NAMES) - {"requirements", "requirement", "reqs", "req"}
    return len(other), path.count("/"), path


def _runner_requirement_files(project: _Project) -> list[str]:
    """Requirement files the project's test runner installs: tox, nox test sessions, CI test jobs."""
    found = _tox_requirement_files(project) + _nox_requirement_files(project) + _ci_requirement_files(project)
    return [path for path in dict.fromkeys(found) if path in project.listing]


_R_OPTION = re.compile(r"""(?:^|\s|["'])(?:-r|--requirement)(?:\s*|=|["']\s*,\s*["'])([\w./{}-]+\.(?:txt|in))""")


def _nox_requirement_files(project: _Project) -> list[str]:
    text = project.files.read("noxfile.py") or ""
    found: list[str] = []
    # Each session is a function; only test sessions count (not lint, docs, build ...).
    for name, body in re.findall(r"^def\s+(\w+)\s*\([^)]*\)[^:]*:\n((?:[ \t]+.*\n|\n)*)", text, flags=re.MULTILINE):
        if "test" in name.lower() or "pytest" in body:
            found.extend(path.removeprefix("./") for path in _R_OPTION.findall(body))
    return found


def _ci_requirement_files(project: _Project) -> list[str]:
    found: list[str] = []
    for path in project.listing:
        if not (path.startswith(".github/workflows/") and path.endswith((".yml", ".yaml"))):
            continue
        workflow = _load_yaml_quietly(project.files.read(path))
        jobs = workflow.get("jobs") if isinstance(workflow, dict) else None
        if not isinstance(jobs, dict):
            continue
        for job_name, job in jobs.items():
            if not isinstance(job, dict) or not isinstance(job.get("steps"), list):
                continue
            runs = "\n".join(str(step.get("run", "")) for step in job["steps"] if isinstance(step, dict))
            label = f"{job_name} {job.get('name', '')}".lower()
            if "test" in label or "pytest" in runs:
                found.extend(path.removeprefix("./") for path in _R_OPTION.findall(runs))
    return found


def _tox_deps(project: _Project) -> list[str]:
    lines = _ini_lines(_ini_get(project.tox, "testenv", "deps"))
    native = project.tool("tox", "env_run_base", "deps")
    if isinstance(native, list):
        lines.extend(str(line) for line in native)
    # `py38: mock` applies to some envs only; which one we emulate is unknown, so skip them.
    return [line for line in lines if not re.match(r"^!?[\w{},.-]+:\s", line)]


def _tox_requirement_files(project: _Project) -> list[str]:
    found = []
    for line in _tox_deps(project):
        if match := re.match(r"^-r\s*(.+)$", line):
            path = match.group(1).strip().replace("{toxinidir}/", "").replace("{toxinidir}", "")
            path = path.removeprefix("./")
            if "{" not in path and path in project.listing:
                found.append(path)
    return found


def _valid_requirement(line: str) -> str | None:
    """``line`` if it is a PEP 508 requirement by name (not a path, URL, option or tox substitution)."""
    text = line.split(" #", 1)[0].strip()
    if not text or text.startswith(("-", ".", "/")) or "{" in text:
        return None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    return None if requirement.url else text


def _literal_test_requirements(project: _Project) -> list[str]:
    lines: list[str] = []
    tests_require = project.setup_keywords.get("tests_require")
    if isinstance(tests_require, list):
        lines.extend(str(item) for item in tests_require)
    lines.extend(_ini_lines(_ini_get(project.setup_cfg, "options", "tests_require")))
    lines.extend(_tox_deps(project))
    lines.extend(_poetry_test_requirements(project))
    pdm_groups = project.tool("pdm", "dev-dependencies")
    if isinstance(pdm_groups, dict):
        for name in _test_names(pdm_groups):
            lines.extend(str(item) for item in pdm_groups[name] or [])
    hatch_envs = project.tool("hatch", "envs")
    if isinstance(hatch_envs, dict):
        for name in ("default", "test", "tests", "hatch-test"):
            env = hatch_envs.get(name)
            if isinstance(env, dict):
                lines.extend(str(item) for item in env.get("dependencies", []) or [])
                lines.extend(str(item) for item in env.get("extra-dependencies", []) or [])
    own_name = canonicalize_name(str(project.pyproject.get("project", {}).get("name", "") or ""))
    valid = [text for line in lines if (text := _valid_requirement(line)) is not None]
    return list(dict.fromkeys(text for text in valid if canonicalize_name(Requirement(text).name) != own_name))


def _poetry_test_requirements(project: _Project) -> list[str]:
    tables: dict[str, Any] = {}
    groups = project.tool("poetry", "group")
    if isinstance(groups, dict):
        tables.update({name: group.get("dependencies") for name, group in groups.items() if isinstance(group, dict)})
    legacy = project.tool("poetry", "dev-dependencies")
    if isinstance(legacy, dict):
        tables.setdefault("dev", legacy)
    lines = []
    for name in _test_names(tables):
        for package, constraint in (tables[name] or {}).items():
            if (line := _poetry_requirement(package, constraint)) is not None:
                lines.append(line)
    return lines


def _poetry_requirement(package: str, constraint: Any) -> str | None:
    """A Poetry dependency entry as a PEP 508 line; None for path/git/url entries."""
    extras: list[str] = []
    if isinstance(constraint, dict):
        if constraint.keys() & {"path", "git", "url"}:
            return None
        extras = [str(extra) for extra in constraint.get("extras", []) or []]
        constraint = constraint.get("version", "*")
    if not isinstance(constraint, str):
        return None
    specifier = _poetry_constraint(constraint)
    if specifier is None:
        return None
    return f"{package}{'[' + ','.join(extras) + ']' if extras else ''}{specifier}"


def _poetry_constraint(constraint: str) -> str | None:
    """Poetry's ``^1.2``/``~1.2``/``1.2.*`` constraints in PEP 440; None for ``||`` alternatives."""
    if "||" in constraint or "|" in constraint:
        return None
    parts = []
    for part in (piece.strip() for piece in constraint.split(",")):
        if part in ("", "*"):
            continue
        if part.startswith("^") or (part.startswith("~") and not part.startswith("~=")):
            numbers = [int(n) for n in re.findall(r"\d+", part)]
            if not numbers:
                return None
            if part.startswith("^"):
                # ^ bumps the first non-zero component: ^1.2 -> <2, ^0.2 -> <0.3, ^0.0.3 -> <0.0.4.
                index = next((i for i, n in enumerate(numbers) if n != 0), len(numbers) - 1)
            else:
                index = 0 if len(numbers) == 1 else 1
            upper = numbers[:index] + [numbers[index] + 1]
            parts.append(f">={'.'.join(map(str, numbers))},<{'.'.join(map(str, upper))}")
        elif re.fullmatch(r"\d+(\.\d+)*(\.\*)?", part):
            parts.append(f"=={part}")
        else:
            parts.append(part.replace(" ", ""))
    return ",".join(parts)


# --------------------------------------------------------------------------------------------
# pytest: configuration, plugins, the test command


# Options in a repository's addopts that fail with "unrecognized arguments" without their plugin.
_OPTION_PLUGINS = {
    "--cov": "pytest-cov", "--no-cov": "pytest-cov", "-n": "pytest-xdist", "--numprocesses": "pytest-xdist",
    "--dist": "pytest-xdist", "--timeout": "pytest-timeout", "--reruns": "pytest-rerunfailures",
    "--benchmark": "pytest-benchmark", "--doctest-plus": "pytest-doctestplus", "--mpl": "pytest-mpl",
    "--html": "pytest-html", "--asyncio-mode": "pytest-asyncio", "--hypothesis": "hypothesis",
    "--ds": "pytest-django", "--reuse-db": "pytest-django", "--nomigrations": "pytest-django",
    "--flake8": "pytest-flake8", "--mypy": "pytest-mypy", "--black": "pytest-black", "--isort": "pytest-isort",
    "--randomly": "pytest-randomly", "--snapshot-update": "syrupy",
}
# Ini keys that mean a plugin the suite relies on (unknown keys only warn, but tests then fail).
_INI_PLUGINS = {
    "django_settings_module": "pytest-django", "asyncio_mode": "pytest-asyncio", "timeout": "pytest-timeout",
    "env": "pytest-env", "mock_use_standalone_module": "pytest-mock",
}
# Options that need the cache provider the default command disables.
_CACHE_OPTIONS = ("--lf", "--last-failed", "--ff", "--failed-first", "--nf", "--new-first", "--sw", "--stepwise",
                  "--cache-clear", "--cache-show")


def _pytest_ini(project: _Project) -> dict[str, str]:
    """The pytest configuration pytest itself would use (first of pytest.ini, pyproject, tox, setup.cfg)."""
    for path in ("pytest.ini", ".pytest.ini"):
        parser = _parse_ini(project.files.read(path) or "")
        if parser is not None and parser.has_section("pytest"):
            return dict(parser.items("pytest"))
    for keys in (("pytest", "ini_options"), ("pytest",)):
        table = project.tool(*keys)
        options = {key.lower(): " ".join(map(str, value)) if isinstance(value, list) else str(value)
                   for key, value in (table or {}).items() if not isinstance(value, dict)}
        if options:
            return options
    if project.tox is not None and project.tox.has_section("pytest"):
        return dict(project.tox.items("pytest"))
    if project.setup_cfg is not None and project.setup_cfg.has_section("tool:pytest"):
        return dict(project.setup_cfg.items("tool:pytest"))
    return {}


def _addopts(project: _Project) -> list[str]:
    try:
        return shlex.split(_pytest_ini(project).get("addopts", ""))
    except ValueError:
        return _pytest_ini(project).get("addopts", "").split()


def _plugins_needed(project: _Project) -> list[str]:
    ini = _pytest_ini(project)
    plugins: list[str] = []
    for option in _addopts(project):
        name = option.split("=", 1)[0]
        if re.fullmatch(r"-n(\d+|auto|logical)", name):
            plugins.append("pytest-xdist")
        for prefix, plugin in _OPTION_PLUGINS.items():
            if name == prefix or (prefix.startswith("--") and name.startswith(prefix + "-")):
                plugins.append(plugin)
    plugins.extend(plugin for key, plugin in _INI_PLUGINS.items() if key in ini)
    plugins.extend(line for line in _ini_lines(ini.get("required_plugins", "").replace(" ", "\n"))
                   if _valid_requirement(line))
    return list(dict.fromkeys(plugins))


def _uses_nose(project: _Project) -> bool:
    """Whether the suite was written for nose (setup()/teardown() module functions, yield tests)."""
    if project.setup_cfg is not None and project.setup_cfg.has_section("nosetests"):
        return True
    texts = [project.files.read(path) or "" for path in ("tox.ini", ".travis.yml", "Makefile")]
    if any("nosetests" in text for text in texts):
        return True
    names = set()
    for line in _all_requirement_lines(project):
        if (text := _valid_requirement(line)) is not None:
            names.add(canonicalize_name(Requirement(text).name))
    return "nose" in names


def _all_requirement_lines(project: _Project) -> list[str]:
    lines = list(_literal_test_requirements(project))
    for path in _requirement_files(project):
        lines.extend((project.files.read(path) or "").splitlines())
    extras: list[Any] = []
    optional = project.pyproject.get("project", {}).get("optional-dependencies")
    if isinstance(optional, dict):
        extras.extend(optional.values())
    setup_extras = project.setup_keywords.get("extras_require")
    if isinstance(setup_extras, dict):
        extras.extend(setup_extras.values())
    for value in extras:
        if isinstance(value, list):
            lines.extend(str(item) for item in value)
    return lines


def _pytest_requirements(project: _Project) -> list[str]:
    return ["pytest<8" if _uses_nose(project) else "pytest", *_plugins_needed(project)]


def infer_test_cmd(files: RepoFiles) -> str:
    """The pytest command line for the repository; the caller appends test ids.

    pytest reads the repository's own configuration (pytest.ini, pyproject, tox.ini, setup.cfg)
    itself, so this is :data:`DEFAULT_TEST_CMD` unless that configuration's ``addopts`` use the
    cache (``--lf``, ``--sw`` ...), which ``-p no:cacheprovider`` would turn into a usage error.
    unittest- and nose-style suites run under pytest too (:func:`infer_install` keeps pytest<8
    for nose ones).
    """
    return _infer_test_cmd(_read_project(files))


def _infer_test_cmd(project: _Project) -> str:
    if any(option.split("=", 1)[0] in _CACHE_OPTIONS for option in _addopts(project)):
        return DEFAULT_TEST_CMD.replace(" -p no:cacheprovider", "")
    return DEFAULT_TEST_CMD


# --------------------------------------------------------------------------------------------
# System packages


_C_BUILD_REQUIRES = ("cython", "pybind11", "scikit-build", "scikit-build-core", "meson-python", "cffi", "numpy")
_RUST_BUILD_REQUIRES = ("setuptools-rust", "maturin")


#: What building a C extension needs on the base images: a compiler, and the headers of the
#: Debian Python the bootstrapped images run (``Python.h``; pulled python images have their own).
COMPILER_PACKAGES = ("build-essential", "python3-dev")


def infer_system_packages(files: RepoFiles) -> list[str]:
    """Debian packages the env layer needs to build the project itself: :data:`COMPILER_PACKAGES`
    for C/C++/Cython extensions, plus ``cargo`` for Rust ones. Dependencies come as wheels."""
    return _infer_system_packages(_read_project(files))


def _infer_system_packages(project: _Project) -> list[str]:
    build_system = project.pyproject.get("build-system", {})
    build_requires = {canonicalize_name(Requirement(text).name) for item in build_system.get("requires", []) or []
                      if (text := _valid_requirement(str(item))) is not None}
    backend = str(build_system.get("build-backend", ""))
    rust = bool(build_requires & set(_RUST_BUILD_REQUIRES)) or backend.startswith("maturin")
    compiled = (
        rust
        or bool(build_requires & set(_C_BUILD_REQUIRES))
        or "ext_modules" in project.setup_keywords
        or "Extension(" in project.setup_py
        or "cythonize" in project.setup_py
        or any(path.endswith(".pyx") for path in project.listing)
    )
    return (list(COMPILER_PACKAGES) if compiled else []) + (["cargo"] if rust else [])


# --------------------------------------------------------------------------------------------
# Date pinning


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
    other install with a pin before :data:`DEFAULT_BUILD_FLOOR` lets setuptools reach that day. With
    ``python``, both floors are at least that Python's release day (:func:`build_floor`).

    A command whose requirements are all exact ``==`` pins gets no ``--exclude-newer``: its
    versions are chosen already, and their dependencies may need releases newer than the pin
    (``pytest==4.6.11`` needs a pluggy released after a 2018 pin). Applying it twice changes
    nothing more. Raises ``ValueError`` if ``date_pin`` is not an ISO date.
    """
    day = date.fromisoformat(date_pin).isoformat()
    rewritten = [UV_BOOTSTRAP]
    for command in commands:
        args = _pip_install_args(command)
        if args is None:
            rewritten.append(command)
            continue
        options, targets = _split_args(args)
        translated = _uv_options(options)
        if _is_tooling(targets) or translated is None:
            rewritten.append(command)
            continue
        exclude = [] if _only_exact_pins(options, targets) else [("--exclude-newer", f"{day}T00:00:00Z")]
        backend_floor, setuptools_floor = build_floor(BUILD_BACKEND_FLOOR, python), build_floor(DEFAULT_BUILD_FLOOR, python)
        if exclude and day < backend_floor and any(flag in ("-e", "--editable") for flag, _ in options):
            exclude.extend(("--exclude-newer-package", f"{name}={backend_floor}T00:00:00Z")
                           for name in BUILD_BACKENDS)
        elif exclude and day < setuptools_floor:
            exclude.append(("--exclude-newer-package", f"setuptools={setuptools_floor}T00:00:00Z"))
        rewritten.append(shlex.join([*_UV_PREFIX, *_join_args([*exclude, *translated], targets)]))
    return list(dict.fromkeys(rewritten))


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
    """The inverse of :func:`pinned_install`: uv commands back to ``python -m pip install``."""
    restored: list[str] = []
    for command in commands:
        if command == UV_BOOTSTRAP:
            continue
        try:
            tokens = shlex.split(command)
        except ValueError:
            restored.append(command)
            continue
        if tuple(tokens[: len(_UV_PREFIX)]) != _UV_PREFIX:
            restored.append(command)
            continue
        options, targets = _split_args(tokens[len(_UV_PREFIX):])
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


# --------------------------------------------------------------------------------------------
# The spec, and its fallbacks


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
    - ``fewer-extras``: only the editable project (no extras), pytest and its plugins, and any
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
        fewer = _fewer_extras(logical, keep={_canonical(command) for command in own})
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
            pin_commands = pytest_pin_commands(release, _pytest_plugins(logical, project), spec.date_pin)
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


def pytest_pin_commands(release: PytestRelease, plugins: list[str], date_pin: str) -> list[str]:
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
    return [UV_BOOTSTRAP, shlex.join([*_UV_PREFIX, *options, pin, *plugins])]


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
            if name and name != "pytest" and (name.startswith("pytest-") or name in known):
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
    written = {pinned_install([command], pin, python)[-1]: command for command in own} if pin else {}
    logical: list[str] = []
    for command in install:
        if command in written:
            logical.append(written[command])
        elif command != UV_BOOTSTRAP or UV_BOOTSTRAP in own:
            logical.extend(_unpinned([command]))
    return logical


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
    older = sorted((version for version in available if _xy(version) < _xy(python)), key=_xy)
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


# --------------------------------------------------------------------------------------------
# Why an install failed


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FAILED_BUILD = re.compile(r"Failed to (?:download and )?build `([A-Za-z0-9_.-]+)==([^`\s]+)`")
_PROJECT_BUILD = re.compile(r"Failed to (?:download and )?build `(?:([A-Za-z0-9_.-]+) @ )?file://")
_NO_COMPILER = re.compile(r"(?:command|execute) '?[\w./-]*(?:gcc|cc|g\+\+|c\+\+|clang)'? failed|Python\.h: No such file|"
                          r"No such file or directory: '[\w./-]*gcc'|gcc: not found|"
                          r"unable to execute '[\w./-]*gcc'|could not find a C compiler", re.IGNORECASE)
_NO_RUST = re.compile(r"can't find Rust compiler|cargo: not found|rustc: not found", re.IGNORECASE)
#: What :func:`install_failure_reason` says when a source build lacked a compiler.
MISSING_COMPILER = "no C/Rust compiler in the image"
# Headers old sdists compile against -> the Debian package that has them.
_HEADER_PACKAGES = {
    "Python.h": "python3-dev", "ffi.h": "libffi-dev", "openssl/": "libssl-dev", "libxml/": "libxml2-dev",
    "libxslt/": "libxslt1-dev", "zlib.h": "zlib1g-dev", "jpeglib.h": "libjpeg-dev", "yaml.h": "libyaml-dev",
    "sqlite3.h": "libsqlite3-dev", "bzlib.h": "libbz2-dev", "lzma.h": "liblzma-dev", "pg_config": "libpq-dev",
    "libpq-fe.h": "libpq-dev", "mysql_config": "default-libmysqlclient-dev", "krb5": "libkrb5-dev",
}
_MISSING_HEADER = re.compile(r"fatal error: ([\w./+-]+): No such file or directory|"
                             r"(pg_config|mysql_config) executable not found|(\w+_config): not found")


def build_packages_needed(log: str) -> list[str]:
    """The Debian packages a failed source build in ``log`` asks for: a compiler (with Python's
    headers) when there was none, and the package of each missing header that
    :data:`_HEADER_PACKAGES` knows. Empty when the log shows neither."""
    text = _ANSI.sub("", log.replace("\x1b[0m\n", ""))
    needed = list(COMPILER_PACKAGES) if _NO_COMPILER.search(text) else []
    if _NO_RUST.search(text):
        needed.append("cargo")
    for match in _MISSING_HEADER.finditer(text):
        missing = next(group for group in match.groups() if group)
        needed.extend(package for header, package in _HEADER_PACKAGES.items()
                      if missing == header or missing.startswith(header))
    return list(dict.fromkeys(needed))
_NEEDS_PYTHON = re.compile(r"Python\s*(>=?|~=|==|<=?)\s*(3\.\d+)")


def install_failure_reason(log: str, python: str, pin: str | None) -> str | None:
    """A one-line reason for a failed env install, read from uv's error in the build ``log``; None
    when the log shows no uv error this recognises.

    Says when a date-pinned dependency has no wheel for ``python`` (uv then builds it from source,
    and that fails: often for want of a compiler), when the resolver finds no release before the
    date pin, or when the releases of the day need another Python.
    """
    # Docker wraps each chunk of a build's stderr in colour codes, and the log puts a line break
    # after each chunk: dropping both gives back uv's own lines.
    text = _ANSI.sub("", log.replace("\x1b[0m\n", ""))
    as_of = f" as of {pin}" if pin else ""
    packages = build_packages_needed(log)
    if _NO_COMPILER.search(text) or _NO_RUST.search(text):
        compiler = f" ({MISSING_COMPILER}: add {', '.join(packages)} to system_packages)"
    elif packages:
        compiler = f" (missing headers: add {', '.join(packages)} to system_packages)"
    else:
        compiler = ""
    if match := _FAILED_BUILD.search(text):
        name, version = match.groups()
        return (f"{name} {version}{as_of} has no wheel for Python {python}, and building it from source "
                f"failed{compiler}")
    if match := _PROJECT_BUILD.search(text):
        cause = _first_cause(text, match.end())
        name = f" {match.group(1)}" if match.group(1) else ""
        return f"building the project{name} failed{compiler}{': ' + cause if cause else ''}"
    if "No solution found when resolving" in text:
        cause = _first_cause(text, text.index("No solution found when resolving"))
        filtered = re.search(r"`([A-Za-z0-9_.-]+)` was filtered by `exclude-newer`", text)
        if filtered:
            return f"{filtered.group(1)} has no release{as_of} that fits: {cause}"
        needs = _NEEDS_PYTHON.search(cause or "")
        if needs and "Python" in (cause or ""):
            return f"dependencies{as_of} do not support Python {python}: {cause}"
        return f"no dependency versions{as_of} fit together: {cause}"
    return None


def _first_cause(text: str, start: int) -> str:
    """The last ``cause:`` line of uv's error after ``start`` (the innermost), shortened."""
    causes = re.findall(r"^\s*cause: (.+)$", text[start:start + 20_000], flags=re.MULTILINE)
    cause = causes[-1] if causes else ""
    cause = re.sub(r",? we can conclude that .*$", "", cause).removeprefix("Because ")
    return cause.strip()[:240]
