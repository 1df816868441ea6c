"""The install commands: the project with its test extras, requirement files, dependency groups, tox deps."""

from __future__ import annotations

import ast
import re
import shlex
import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from repo2env import pysyntax
from repo2env.languages.python.spec.files import (
    RepoFiles,
    _ini_get,
    _ini_lines,
    _poetry_constraint,
    _Project,
    _read_project,
    _valid_requirement,
    _workflow_jobs,
)
from repo2env.languages.python.spec.pytest_config import _config_imports, _conftest_imports, _plugins_needed

if TYPE_CHECKING:
    pass


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
    - the project's ``setup_requires``, so that old setuptools finds them installed
      (:func:`setup_requires_command`);
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
    - what the pytest configuration imports (a ``filterwarnings`` category's package), alone;
    - pytest and the plugins the pytest configuration needs (``--cov`` -> pytest-cov ...), with
      ``pytest<8`` for nose-era suites (pytest 8 dropped nose support);
    - what the conftest files import that nothing above names, one guessed distribution a command
      (:func:`conftest_imports_commands`), last so that each is skipped when it imports already.

    Pass the result through :func:`pinned_install` to resolve as of a date.
    """
    return _infer_install(_read_project(files))


def _infer_install(project: _Project) -> list[str]:
    commands = [PIP_UPGRADE]
    if command := setup_requires_command(project):
        commands.append(command)
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
    if command := config_imports_command(project):
        commands.append(command)
    commands.append(shlex.join(["python", "-m", "pip", "install", *_pytest_requirements(project)]))
    commands.extend(conftest_imports_commands(project))
    return list(dict.fromkeys(commands))


#: What a ``setup_requires`` names that the build provides already: the virtualenv has pip,
#: setuptools and wheel, and the build chooses their versions (old setuptools for pip's legacy
#: editable install, newer back-ends for PEP 660 ones, see ``pinning.BUILD_BACKENDS``).
_BUILD_PROVIDED = frozenset({"pip", "setuptools", "wheel", "distribute"})


def setup_requires_command(project: _Project) -> str | None:
    """The install of the project's own ``setup_requires`` (setup.py's literal, setup.cfg's
    ``[options]``), before its editable install, or None.

    pip's legacy editable install (``setup.py develop``, on Pythons without PEP 660 back-ends) runs
    setup.py in the virtualenv, where setuptools before 42 fetches a missing ``setup_requires`` with
    easy_install: the newest release, whatever the date pin and its ``Requires-Python`` (pluggy 2018's
    ``setuptools-scm`` came as 10.x, which does not import on 3.6). Installed first, as of the pin, it
    is there already. The project itself and what the build provides (:data:`_BUILD_PROVIDED`) are
    left out."""
    lines: list[str] = []
    value = project.setup_keywords.get("setup_requires")
    if isinstance(value, str):
        # setuptools takes a string as one requirement a line.
        value = value.splitlines()
    if isinstance(value, list):
        lines.extend(item for item in value if isinstance(item, str))
    cfg = _ini_get(project.setup_cfg, "options", "setup_requires") or ""
    # setuptools reads it as one requirement a line, or on one line as a list separated by ";".
    lines.extend(_ini_lines(cfg) if "\n" in cfg.strip() else [part.strip() for part in cfg.split(";")])
    own = {canonicalize_name(name) for name in (project.setup_keywords.get("name"),
                                                _ini_get(project.setup_cfg, "metadata", "name")) if isinstance(name, str)}
    requirements = [text for line in lines if (text := _valid_requirement(line)) is not None
                    and (name := canonicalize_name(Requirement(text).name)) not in _BUILD_PROVIDED and name not in own]
    requirements = list(dict.fromkeys(requirements))
    return shlex.join(["python", "-m", "pip", "install", *requirements]) if requirements else None


def config_imports_command(project: _Project) -> str | None:
    """The install of what the pytest configuration imports (see :func:`_config_imports`), or None."""
    names = _config_imports(project)
    return shlex.join(["python", "-m", "pip", "install", *names]) if names else None


#: The distribution of an import name where the two differ, for what a conftest imports
#: (:func:`conftest_imports_commands`): a module says nothing of the distribution that provides it,
#: and installing the import name (``yaml``, ``attr``) gets nothing or an unrelated project. None: no
#: distribution to guess (``google`` is a namespace many distributions share; setuptools comes with
#: every virtualenv). Any other name is taken for its distribution's (``six``, ``mock`` are listed to
#: say so).
IMPORT_DISTRIBUTIONS: dict[str, str | None] = {
    "yaml": "PyYAML", "attr": "attrs", "dateutil": "python-dateutil", "PIL": "Pillow", "bs4": "beautifulsoup4",
    "OpenSSL": "pyOpenSSL", "jwt": "PyJWT", "Crypto": "pycryptodome", "sklearn": "scikit-learn",
    "cv2": "opencv-python", "google": None, "pkg_resources": "setuptools", "setuptools": None, "six": "six",
    "mock": "mock",
}

# The form of a guessed install (see guessed_install): the import check, the pip install, the tolerance.
_GUESSED_INSTALL = re.compile(r"(python -c 'import [\w.]+' 2>/dev/null \|\| )(.+)( \|\| true)")


def guessed_install(module: str, distribution: str) -> str:
    """The install of ``distribution``, guessed from the import name ``module``: it runs only when
    ``module`` does not import already (a wrong guess cannot replace what provides it: ``serial``
    over pyserial), and never fails (the env layer runs its commands under ``set -e``; a name the
    index lacks, or one that does not install as of the date pin, leaves the rung as it was).
    :func:`split_guessed_install` reads it back; the pip install inside is date-pinned as any other."""
    pip = shlex.join(["python", "-m", "pip", "install", distribution])
    return f"python -c {shlex.quote(f'import {module}')} 2>/dev/null || {pip} || true"


def split_guessed_install(command: str) -> tuple[str, str, str] | None:
    """(import check, install command, tolerance) of a :func:`guessed_install` command, else None."""
    match = _GUESSED_INSTALL.fullmatch(command)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def conftest_imports_commands(project: _Project, *, fewer_extras: bool = False) -> list[str]:
    """One :func:`guessed_install` for each third-party module the conftest files import
    unconditionally (see :func:`_conftest_imports`) that no requirement the install names provides:
    its distribution from :data:`IMPORT_DISTRIBUTIONS`, else the import name; left out when that
    name or the import name is named already (compared canonicalised). With ``fewer_extras``, for
    the ladder's rung that installs the project without its extras and test requirements: only the
    project's dependencies, pytest's and the configuration's count as named."""
    named = _named_distributions(project, test_requirements=not fewer_extras)
    commands = []
    for module in _conftest_imports(project):
        distribution = IMPORT_DISTRIBUTIONS.get(module, module)
        if distribution is None or {canonicalize_name(distribution), canonicalize_name(module)} & named:
            continue
        commands.append(guessed_install(module, distribution))
    return commands


def _named_distributions(project: _Project, *, test_requirements: bool = True) -> set[str]:
    """The canonical names of the distributions the install names: the project itself and its
    dependencies, pytest and its plugins, what the pytest configuration imports; with
    ``test_requirements``, also the chosen extras, requirement files, test requirements and
    dependency groups."""
    lines: list[Any] = [*_pytest_requirements(project), *_config_imports(project), *dependency_lines(project)]
    table = project.pyproject.get("project", {})
    if test_requirements:
        lines.extend(_test_requirement_lines(project))
    names = {str(canonicalize_name(Requirement(text).name)) for line in lines
             if isinstance(line, str) and (text := _valid_requirement(line)) is not None}
    poetry = project.tool("poetry", "dependencies")
    if isinstance(poetry, dict):
        names.update(str(canonicalize_name(name)) for name in poetry)
    if own := table.get("name") or project.setup_keywords.get("name"):
        names.add(str(canonicalize_name(str(own))))
    return names


def dependency_lines(project: _Project) -> list[Any]:
    """The project's dependencies (lines, unchecked): pyproject's, setup.py's and setup.cfg's."""
    lines: list[Any] = []
    for dependencies in (project.pyproject.get("project", {}).get("dependencies"),
                         project.setup_keywords.get("install_requires"),
                         _ini_lines(_ini_get(project.setup_cfg, "options", "install_requires"))):
        if isinstance(dependencies, list):
            lines.extend(dependencies)
    return lines


def _test_requirement_lines(project: _Project) -> list[Any]:
    """The requirements (lines, unchecked) of the chosen extras, requirement files, literal test
    requirements and test dependency groups."""
    lines: list[Any] = list(_literal_test_requirements(project))
    for path in _requirement_files(project):
        lines.extend((project.files.read(path) or "").splitlines())
    chosen = {str(canonicalize_name(name)) for name in _chosen_extras(project)}
    table = project.pyproject.get("project", {})
    extras = [table.get("optional-dependencies"), project.setup_keywords.get("extras_require")]
    if project.setup_cfg is not None and project.setup_cfg.has_section("options.extras_require"):
        extras.append({name: _ini_lines(value) for name, value in project.setup_cfg.items("options.extras_require")})
    for extra in extras:
        if isinstance(extra, dict):
            lines.extend(item for name, value in extra.items() if str(canonicalize_name(str(name))) in chosen
                         and isinstance(value, list) for item in value)
    groups = project.pyproject.get("dependency-groups", {}) or {}
    if isinstance(groups, dict):
        lines.extend(item for name in _test_names(groups) if isinstance(groups[name], list) for item in groups[name])
    return lines


def _pytest_requirements(project: _Project) -> list[str]:
    return ["pytest<8" if _uses_nose(project) else "pytest", *_plugins_needed(project)]


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


def _nox_test_sessions(project: _Project) -> list[str]:
    """The source of each nox test session of the noxfile: each session is a function, and only
    test sessions count (named like one, or running pytest; not lint, docs, build ...). A noxfile
    that does not parse is cut into functions by their ``def`` lines."""
    text = project.files.read("noxfile.py") or ""
    try:
        functions = [(node.name, ast.get_source_segment(text, node) or "") for node in pysyntax.parse(text).body
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    except (SyntaxError, ValueError):
        functions = re.findall(r"^def\s+(\w+)\s*\([^)]*\)[^:]*:\n((?:[ \t]+.*\n|\n)*)", text, flags=re.MULTILINE)
    return [source for name, source in functions if "test" in name.lower() or "pytest" in source]


def _nox_requirement_files(project: _Project) -> list[str]:
    return [path.removeprefix("./") for source in _nox_test_sessions(project) for path in _R_OPTION.findall(source)]


# Installed by every runner anyway, or the runner's own tooling: never a test dependency to add.
_RUNNER_TOOLING = {"pip", "setuptools", "wheel", "nox", "tox", "virtualenv"}
_OPTIONS_WITH_A_VALUE = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable"}


def _nox_test_requirements(project: _Project) -> list[str]:
    """The literal requirements a nox test session installs: ``session.install("pretend", "pytest>=6")``;
    options, paths and ``.`` are not requirements (the project itself is installed anyway)."""
    found: list[str] = []
    for source in _nox_test_sessions(project):
        try:
            function = pysyntax.parse(textwrap.dedent(source))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(function):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "install"
                    and isinstance(node.func.value, ast.Name)):
                words = [arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
                         for arg in node.args]
                # A word after -r/-c/-e is a file or a path, not a requirement.
                found.extend(word for before, word in zip([None, *words], words, strict=False)
                             if word is not None and before not in _OPTIONS_WITH_A_VALUE)
    return [line for line in found if (requirement := _valid_requirement(line)) is not None
            and canonicalize_name(Requirement(requirement).name) not in _RUNNER_TOOLING]


def _ci_requirement_files(project: _Project) -> list[str]:
    found: list[str] = []
    for job_name, job in _workflow_jobs(project):
        if not isinstance(job.get("steps"), list):
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


def _literal_test_requirements(project: _Project) -> list[str]:
    lines: list[str] = []
    tests_require = project.setup_keywords.get("tests_require")
    if isinstance(tests_require, list):
        lines.extend(str(item) for item in tests_require)
    lines.extend(_ini_lines(_ini_get(project.setup_cfg, "options", "tests_require")))
    lines.extend(_tox_deps(project))
    lines.extend(_nox_test_requirements(project))
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


