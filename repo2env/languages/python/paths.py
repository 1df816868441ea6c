"""Which paths of a Python repository are tests, auxiliary files or source (:data:`PYTHON_PATHS`).

How a path is classified (:meth:`PythonPaths.classify`), first rule that matches wins:

1. **test** -- anything under a test tree: a directory at any depth named (any case) ``test``, ``tests``,
   ``testing``, ``testsuite``, ``__tests__``, ``test_*``/``tests-*`` or ``*_test(s)``/``*-test(s)``
   (``unit_tests/``, ``test_data/``), data and config files included (``tests/pytest.ini``,
   ``tests/data/x.json``); a file named ``test_*.py``, ``*_test.py``, ``*_tests.py``, ``tests.py``
   (Django's convention) or ``conftest.py`` anywhere, or ``test.py`` at the top level (inside a
   package, ``test.py`` is an API such as ``werkzeug.test``, the test client the package ships); ``pytest.ini`` and ``tox.ini``
   anywhere, because the grader resets those test-config files before adding the PR's tests, so a
   change to them must travel with the tests. A bare substring is never enough: ``src/_pytest/main.py``,
   ``latest/foo.py``, ``src/attestation.py``, ``contest.py``, ``pytest_plugin.py`` and a top-level
   ``testing_utils.py`` (a helper module the package ships) are all source. The price of "any
   depth": a package's own ``django/test/`` or ``numpy/testing/`` counts as test.
2. **aux** -- never a ``.py``/``.pyi`` file (code can be imported by tests, so it stays in the fix,
   even ``docs/conf.py``); otherwise prose (``*.md``, ``*.rst``, ``*.markdown``, ``*.adoc``) at any
   level, anything under ``docs/``, ``doc/``, ``changelog.d/``, ``changelog/``, ``changes/``,
   ``newsfragments/``, ``news/`` or ``release(-)notes/`` (towncrier and reno fragments), and files
   named ``CHANGES*``, ``CHANGELOG*``, ``HISTORY*``, ``NEWS*``, ``AUTHORS*``, ``CONTRIBUTORS*``,
   ``README*`` or ``RELEASE*NOTES*`` (any case) when they carry no extension or a text one
   (``.txt``, ``.md``, ``.rst`` ...), so a package's ``news.json`` stays source.
3. **source** -- everything else, including ``setup.cfg`` and ``pyproject.toml`` (mixed content).

The test-tree and documentation rules are the ones most ecosystems share
(:mod:`repo2env.languages.conventions`).
"""

from __future__ import annotations

import re

from repo2env.languages.base import PathKind, PathRules
from repo2env.languages.conventions import TEST_DIR, is_aux, split_path

# Case-sensitive on purpose: pytest's and unittest's discovery patterns are.
_TEST_FILE = re.compile(r"test_[^/]*\.py|[^/]*_tests?\.py|tests\.py|conftest\.py")
#: Test files that configure the test run and hold no test: a diff whose test part is only these
#: changes how tests run, not what they check (the miner does not count it as a test change).
TEST_CONFIG_FILES = frozenset({"pytest.ini", "tox.ini"})
PYTHON_SUFFIXES = (".py", ".pyi")


class PythonPaths(PathRules):
    """The Python profile's path rules (module docstring); they read no file of the repository."""

    code_suffixes = PYTHON_SUFFIXES

    def classify(self, path: str) -> PathKind:
        directory, name, extension = split_path(path)
        if TEST_DIR.search(directory) or _TEST_FILE.fullmatch(name) or name in TEST_CONFIG_FILES \
                or (not directory and name == "test.py"):
            return "test"
        if extension in PYTHON_SUFFIXES:
            return "source"
        return "aux" if is_aux(directory, name, extension) else "source"

    def is_test_config(self, path: str) -> bool:
        return path.rpartition("/")[2] in TEST_CONFIG_FILES

    def test_pattern(self) -> str:
        names = "|".join(re.escape(name) for name in sorted(TEST_CONFIG_FILES))
        return rf"(?i:{TEST_DIR.pattern})|(?:^|/)(?:{_TEST_FILE.pattern}|{names})\Z"


PYTHON_PATHS = PythonPaths()
