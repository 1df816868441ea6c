"""Which Python the environment gets: from requires-python, classifiers, tox, CI matrices and the commit date."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from repo2env.languages.python.spec.files import (
    RepoFiles,
    _ini_get,
    _load_yaml_quietly,
    _poetry_constraint,
    _Project,
    _read_project,
    _workflow_jobs,
)

if TYPE_CHECKING:
    pass


#: Pythons a base image can be made for on any machine (a Debian release ships each; see
#: ``bootstrap.DEBIAN_SUITE_FOR_PYTHON``), oldest first. The build offers inference every Python a
#: base image exists for or can be made for here (``bootstrap.makeable_pythons``: local CPythons too).
AVAILABLE_PYTHONS = ("3.9", "3.11", "3.13")

#: The day each Python had its final x.y.0 release. Inference may choose any of them for which a
#: base image exists or can be made, beyond AVAILABLE_PYTHONS.
PYTHON_RELEASE_DATES = {
    "2.7": date(2010, 7, 3), "3.4": date(2014, 3, 16), "3.5": date(2015, 9, 13),
    "3.6": date(2016, 12, 23), "3.7": date(2018, 6, 27), "3.8": date(2019, 10, 14), "3.9": date(2020, 10, 5),
    "3.10": date(2021, 10, 4), "3.11": date(2022, 10, 24), "3.12": date(2023, 10, 2), "3.13": date(2024, 10, 7),
    "3.14": date(2025, 10, 7),
}
#: Every Python a base image may be made for (pulled, or from a local CPython).
KNOWN_PYTHONS = tuple(PYTHON_RELEASE_DATES)

#: How long after a commit a new Python still counts as "of its time". Projects start testing on
#: a Python's release candidates months before its release, but pins and test tooling of a commit
#: older than that predate the Python and often break on it (pytest 6 does not import on 3.11).
ADOPTION_GRACE = timedelta(days=183)


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

    Python 2 only where the evidence leaves no Python 3: a project tested on Python 3 too is judged
    by its Python 3 versions alone (a 2016 project tested on 2.7 and 3.3-3.5 gets 3.6, the nearest
    Python 3 here), since the tooling of later years (uv's date pins, the own-code probe) runs on
    Python 3 only. The newest remaining Python wins. The reason names each source that was found, e.g.
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
        reason += (f"; {ideal} fits better: no base image can be made for it here (no registry, Debian "
                   f"release or local CPython has it: pyenv install {ideal}, or runtime bootstrap --python-from PATH)")
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
    python3 = [version for version in candidates if version[0] >= 3]
    if python3 and (not tested or any(version[0] >= 3 for version in tested)):
        candidates = python3
        tested = {version for version in tested if version[0] >= 3}
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
    allowed_minors = [(major, minor) for major in (2, 3) for minor in range(0, 30) if _allows(constraint, (major, minor))]
    if not allowed_minors:
        return [min(candidates)]

    def distance(version: _Minor) -> int:
        return min(abs(version[1] - minor[1]) + 100 * abs(version[0] - minor[0]) for minor in allowed_minors)

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
    for _, job in _workflow_jobs(project):
        strategy = job.get("strategy")
        if isinstance(strategy, dict):
            matrix_versions |= _python_values(strategy.get("matrix"))
        any_versions |= _python_values(job.get("steps"))
    # A lint job on the newest Python says little about the test matrix, so matrices come first.
    versions = matrix_versions or any_versions
    travis = _load_yaml_quietly(project.files.read(".travis.yml"))
    return versions | _python_values(travis)


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
