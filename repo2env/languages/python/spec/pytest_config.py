"""pytest: configuration, plugins, the test command, and the pytest releases the ladder may pin."""

from __future__ import annotations

import ast
import fnmatch
import re
import shlex
import sys
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from repo2env import models, pysyntax
from repo2env.languages.python.spec.files import (
    RepoFiles,
    _ini_lines,
    _parse_ini,
    _Project,
    _read_project,
    _valid_requirement,
)

if TYPE_CHECKING:
    pass


#: The test command inferred for every repository: the models' default (the caller appends test ids)
#: with ``-p no:cacheprovider``, which keeps pytest from writing ``.pytest_cache`` into the sandbox.
DEFAULT_TEST_CMD = f"{models.DEFAULT_TEST_CMD} -p no:cacheprovider"

#: The warm-up command of ``warmup: true``: the test collection, which imports every test module
#: (and runs the fixtures and module-level code that download data on first use).
WARMUP_COLLECT = "python -m pytest --collect-only -q -p no:cacheprovider"


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
        # One entry a line, as the ini files write them (a filterwarnings message may hold spaces).
        options = {key.lower(): "\n".join(map(str, value)) if isinstance(value, list) else str(value)
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


def _config_imports(project: _Project) -> list[str]:
    """Distributions the pytest configuration imports: the packages of ``filterwarnings`` categories
    (``ignore::requests.packages.urllib3.exceptions.InsecureRequestWarning``), which pytest imports
    before each test and fails on (INTERNALERROR) when they are missing. Standard-library modules
    and the project's own packages are left out; the import name stands for the distribution."""
    own = _own_modules(project)
    names: list[str] = []
    for entry in _ini_lines(_pytest_ini(project).get("filterwarnings", "")):
        fields = entry.split(":")
        category = fields[2].strip() if len(fields) > 2 else ""
        top = category.split(".", 1)[0]
        if "." not in category or not top.isidentifier() or top in sys.stdlib_module_names:
            continue
        if top not in own:
            names.append(top)
    return list(dict.fromkeys(names))


def _own_modules(project: _Project, *folders: str) -> set[str]:
    """The top-level names the repository itself makes importable: its packages and modules at the
    top level and under ``src/``, and those in ``folders`` (a conftest's own folder, which pytest
    puts on ``sys.path``). A folder of ``.py`` files counts without an ``__init__.py``: the test
    command runs ``python -m pytest`` in the repository, which imports it as a namespace package."""
    bases = ["", "src/", *(f"{folder}/" for folder in folders if folder)]
    names: set[str] = set()
    for path in project.listing:
        if not path.endswith(".py"):
            continue
        for base in bases:
            if path.startswith(base):
                names.add(path[len(base):].split("/", 1)[0].removesuffix(".py"))
    return names


#: pytest and what it imports itself: a conftest's ``import pytest`` or ``import py`` comes with the
#: pytest install.
_PYTEST_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy"})

#: Standard-library modules the host's ``sys.stdlib_module_names`` may lack: Python 2's (a conftest
#: that parses on Python 3 may still import them on a Python 2 image) and those removed in 3.12 and
#: 3.13, which an old conftest imports on the older Python its image has. None is a distribution.
_OLD_STDLIB = frozenset({
    "__builtin__", "StringIO", "cStringIO", "cPickle", "ConfigParser", "Queue", "SocketServer", "BaseHTTPServer",
    "SimpleHTTPServer", "CGIHTTPServer", "Cookie", "cookielib", "HTMLParser", "httplib", "htmlentitydefs",
    "urllib2", "urlparse", "xmlrpclib", "thread", "dummy_thread", "commands", "exceptions", "sets", "md5", "sha",
    "new", "anydbm", "copy_reg", "repr", "Tkinter", "UserDict", "UserList", "UserString", "imp", "distutils",
    "asynchat", "asyncore", "smtpd", "aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap",
    "msilib", "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib",
    "lib2to3",
})

# pytest's default `python_files`: where its tests are, hence which conftest files it loads.
_PYTEST_TEST_FILE = re.compile(r"test_[^/]*\.py|[^/]*_test\.py")


def _loaded_conftests(project: _Project) -> list[str]:
    """The conftest.py files pytest loads for the tests: the top-level one, and each one in a folder
    that holds test files (``test_*.py``, ``*_test.py``; under ``testpaths`` when it is set) or is a
    parent of one (pytest loads every conftest.py on the way from the root to a test file)."""
    testpaths = [entry.removeprefix("./").rstrip("/") for entry in _pytest_ini(project).get("testpaths", "").split()]
    testpaths = [] if any(entry in ("", ".") for entry in testpaths) else testpaths

    def wanted(path: str) -> bool:
        return not testpaths or any(path.startswith(f"{entry}/") or fnmatch.fnmatch(path, f"{entry}/*")
                                    for entry in testpaths)

    test_folders = {path.rpartition("/")[0] for path in project.listing
                    if _PYTEST_TEST_FILE.fullmatch(path.rpartition("/")[2]) and wanted(path)}
    conftests = []
    for path in project.listing:
        folder, _, name = path.rpartition("/")
        if name == "conftest.py" and (folder == "" or any(test == folder or test.startswith(f"{folder}/")
                                                         for test in test_folders)):
            conftests.append(path)
    return sorted(conftests, key=lambda path: (path.count("/"), path))


def _unconditional_imports(text: str) -> list[str]:
    """The top-level names a module imports at module level, outside any ``try``/``if`` (an import
    there is optional or for another Python); relative imports left out. A module that does not
    parse on the host's Python (Python 2 syntax) gives none."""
    try:
        tree = pysyntax.parse(text)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.extend(alias.name.split(".", 1)[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".", 1)[0])
    return names


def _conftest_imports(project: _Project) -> list[str]:
    """The third-party modules the conftest files pytest loads (:func:`_loaded_conftests`) import
    unconditionally at module level (:func:`_unconditional_imports`): without one, collection stops
    ("could not load conftest.py") on every test. Left out: the standard library, pytest and its own
    modules, and what the repository makes importable itself (:func:`_own_modules`, with the
    conftest's folder); top-level import names, in the order first seen."""
    names: list[str] = []
    for path in _loaded_conftests(project):
        own = _own_modules(project, path.rpartition("/")[0])
        for name in _unconditional_imports(project.files.read(path) or ""):
            if (name in sys.stdlib_module_names or name in _OLD_STDLIB or name in _PYTEST_MODULES
                    or name == "__future__" or name in own):
                continue
            names.append(name)
    return list(dict.fromkeys(names))


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
