"""The Python profile's test runner: pytest, read from its JUnit XML (:func:`pytest_facts`), and the
files pytest or Python itself load for configuration, which the grader restores or refuses."""

from __future__ import annotations

from repo2env.languages.runner import TestRunnerFacts

#: Test configuration the grader never takes from a patch, compared in lower case: pytest reads
#: ``pytest.toml``, ``.pytest.toml`` (pytest 9) and ``.pytest.ini`` before pyproject.toml, so they
#: would override the restored pytest sections.
TEST_CONFIG_NAMES = frozenset({"conftest.py", "pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "tox.ini",
                               "setup.cfg", "noxfile.py"})
#: Imported by ``site`` at start-up, as a module or a package of any suffix (.py, .pyc, .so, a folder).
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})
#: Any ``*.dist-info``/``*.egg-info`` on sys.path (the repository's root, an editable install's src/)
#: is package metadata to importlib, whose lookup ignores case, and pytest loads the plugins its
#: entry_points.txt declares; an ``*.egg`` folder on sys.path holds metadata too.
METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg")
#: Files Python imports or executes: a binary patch of one hides its text from every check.
IMPORTABLE_SUFFIXES = (".py", ".pyw", ".pyi", ".pth", ".pyc", ".pyo", ".so", ".pyd", ".toml", ".ini", ".cfg", ".txt")
#: What the agent's ``run_tests`` tool runs for a Python task (pytest, stopping at the first failure,
#: writing no cache), its targets appended.
VISIBLE_TESTS_COMMAND = "python -m pytest -q -x -p no:cacheprovider"
#: Added lines that reach into the test runner (pytest internals, its hooks, the JUnit report,
#: leaving the interpreter early).
RUNNER_PATTERN = (
    r"_pytest|pytest_(?:runtest|collect|report|configure|sessionfinish|sessionstart|unconfigure|plugin)"
    r"|junit|PYTEST_|sys\.modules\[\s*['\"]pytest|os\._exit|atexit|faulthandler|sys\.settrace|sys\.setprofile"
    r"|builtins\.__import__|__builtins__\["
)


def pytest_facts() -> TestRunnerFacts:
    """pytest as the grader runs it: ids as pytest prints them, outcomes from JUnit XML. Reading and
    selecting are the grader's own modules (see :mod:`repo2env.languages.runner`)."""
    return TestRunnerFacts(
        name="pytest", report_format="junit-xml",
        id_format="pytest node ids: <file>::<class>::<function>[<parameters>] (repo2env.languages.test_ids.split_node_id)",
        config_patterns=(*sorted(TEST_CONFIG_NAMES), "*.pth", *(f"{name}*" for name in sorted(STARTUP_MODULES)),
                         *(f"*{suffix}/*" for suffix in METADATA_SUFFIXES)),
        config_fields=("pyproject.toml [tool.pytest.ini_options]", "pyproject.toml [tool.pytest]",
                       "tox.ini [pytest]", "setup.cfg [tool:pytest]"),
        runner_pattern=RUNNER_PATTERN, canary_style="python",
        notes={"read": "repo2env.verify.junit.outcomes_for", "select": "repo2env.verify.junit.selection_args",
               "config_files": "repo2env.verify.spec.PYTEST_CONFIG_FILES"},
    )
