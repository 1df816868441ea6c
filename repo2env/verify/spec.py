"""The grading specification: everything a grading of one task needs, derived once per task.

As SWE-bench's ``make_test_spec`` builds a ``TestSpec`` that every later step reads, :func:`grading_spec`
reads a :class:`~repo2env.models.Task` once (its patches parsed once, its test ids split once) into a
:class:`GradingSpec`: the hidden tests and the ids to run, how they are selected and started, where
pytest's configuration may come from, the gold patch's paths and runner references (what the agent
may do that the gold patch does too), the paths an agent may not change, the inputs the canaries
are drawn from, the timeout, and how the run's exit status and report are read. The grader
(:mod:`repo2env.verify.grader`), the Harbor verifier (``tests/spec.json``, read by
``publish/harbor_task/verify.py``) and every export read this one object.

What is particular to a test runner is kept in :class:`TestRunner` (pytest today: its command,
its configuration files, how ids are selected, which exit statuses are its own, the report's
format), so that a language profile can fill it for another runner.

One grading then draws what is random about it from the spec: the canaries
(:meth:`GradingSpec.plan_canaries`), their places among the ids (:meth:`GradingSpec.run_ids`) and
the sandbox paths (:meth:`GradingLayout.fresh`); :meth:`GradingSpec.script_settings` is what the
grading script (``verify/scripts/grade.sh``) reads.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shlex
import threading
from collections import OrderedDict
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from repo2env import defaults
from repo2env.languages import get_profile
from repo2env.languages.runner import TestRunnerFacts
from repo2env.models import FileCallees, Task, TestStatus
from repo2env.patches import parse
from repo2env.verify.canaries import CanaryPlan
from repo2env.verify.canary_maker import CanaryModule, canary_modules, plan_canaries, script_canary_modules
from repo2env.verify.filtering import (
    RUNNER_PATTERN,
    config_pattern,
    protected_path_pattern,
    runner_references,
)
from repo2env.verify.junit import (
    ID_OPTIONS,
    JUNIT_FAMILY_OPTION,
    names_its_rootdir,
    pytest_options,
    selection_args,
    split_node_id,
)
from repo2env.verify.reading import PYTEST_SESSION_STATUSES, SCRIPT_SESSION_STATUSES

#: The hidden tests' timeout when validation measured none for the task (it sets one from the gold
#: patch's gradings, see :data:`repo2env.models.ValidationReport.grading_timeout_s`).
DEFAULT_TIMEOUT_S = float(defaults.GRADE_TIMEOUT_S)

#: The files of the grading script, run as ``bash grade.sh grade.json`` (see grade.sh; run_tests.sh is
#: the test run it shares with derivation).
GRADING_SCRIPT_FILES = ("grade.sh", "run_tests.sh", "restore.py")


def grading_scripts() -> dict[str, str]:
    """The grading script and its helper, as shipped in the package (``verify/scripts/``): the
    grader copies them into every grading sandbox, a Harbor task's ``tests/`` holds the same files."""
    folder = resources.files("repo2env.verify") / "scripts"
    return {name: (folder / name).read_text(encoding="utf-8") for name in GRADING_SCRIPT_FILES}


def shell_assignments(settings: dict) -> str:
    """``settings`` as the shell assignments run_tests.sh's ``read_settings`` makes of them (its
    program's very rules: a list as an array, a string or number as a string, other entries and
    names that are no identifiers left out). The grader writes them beside ``grade.json`` as
    ``grade.json.sh``; grade.sh names it to read_settings, which sources it instead of starting an
    interpreter."""
    lines = []
    for name, value in json.loads(json.dumps(settings)).items():  # what the program reads back
        if not name.isidentifier():
            continue
        if isinstance(value, list):
            lines.append(name + "=(" + " ".join(shlex.quote(str(item)) for item in value) + ")")
        elif isinstance(value, (str, int, float)):
            lines.append(name + "=" + shlex.quote(str(value)))
    return "".join(line + "\n" for line in lines)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfigFile(_Spec):
    """A file the test runner reads its configuration from, and what makes it count as one."""

    name: str = Field(description="The file name, as the runner looks it up in a folder.")
    section: str = Field("", description="An extended regular expression (grep -E) one of its lines must match to "
                                         "count, e.g. pyproject.toml's [tool.pytest...] table; '' when any such file counts.")


#: pytest's configuration files in the order it looks for them in one folder (pytest 9's TOML files
#: first), each with the line that makes it pytest's (pytest.ini counts even when empty).
PYTEST_CONFIG_FILES = (
    ConfigFile(name="pytest.toml"), ConfigFile(name=".pytest.toml"), ConfigFile(name="pytest.ini"),
    ConfigFile(name=".pytest.ini"), ConfigFile(name="pyproject.toml", section=r"^\[tool\.pytest[].]"),
    ConfigFile(name="tox.ini", section=r"^\[pytest\]"), ConfigFile(name="setup.cfg", section=r"^\[tool:pytest\]"),
)


class TestRunner(_Spec):
    """How the hidden tests are started, selected and read: the part that belongs to the test
    runner (pytest here; a language profile fills it for another runner)."""

    __test__ = False  # not a pytest test class, despite the name

    name: Literal["pytest", "jest", "vitest", "mocha", "jasmine", "ava", "tape", "node"] = "pytest"
    command: str = Field(description="Shell words that start the runner (the task's test command); every other "
                                     "argument is passed after them, one argument each.")
    options: list[str] = Field(description="Arguments after the command, before the configuration file and the ids: "
                                           "no cache, one rootdir, no JUnit prefix, collection errors do not stop the run.")
    config_files: list[ConfigFile] = Field(description="The runner's configuration files, in its own order.")
    config_dirs: list[str] = Field(description="Folders the configuration is taken from, nearest to the tests first: "
                                               "the first file of config_files found there is named explicitly.")
    report_option: str = Field("--junitxml=", description="The option that names the report's path (path appended).")
    report_options: list[str] = Field(default_factory=lambda: shlex.split(JUNIT_FAMILY_OPTION),
                                      description="Arguments that fix the report's format.")
    report_format: str = Field("junit-xml", description="The report's format: junit-xml (pytest), or a language "
                                                        "runner's (jest-json, mocha-json, node-tap ...).")
    session_statuses: list[int] = Field(description="Exit statuses of a run whose session ended on its own; any "
                                                    "other (a timeout, a kill, a signal, os._exit) earns nothing.")
    directory: str = Field("", description="The package folder the runner starts in (a monorepo's workspace); "
                                           "'' for the root.")
    config_patterns: list[str] = Field(default_factory=list, description="Files (fnmatch patterns, '*' crosses '/') "
                                       "the runner, its module loader or package manager read: an agent's patch may "
                                       "not change them (package.json files aside: their config_fields are restored).")
    config_fields: list[str] = Field(default_factory=list, description="package.json fields the runner reads, "
                                                                       "restored to the snapshot's.")
    outcome_stream: bool = Field(False, description="Whether a language runner's grading plan streams its outcomes "
                                                    "live to the root collector (its reports then the cross-check); "
                                                    "pytest's outcome plugin always does.")
    protected_paths: str = Field("", description="Paths an agent's patch may not change besides the grader's own "
                                                 "rules, as one regular expression: the language's test paths and "
                                                 "the runner's configuration files ('' for pytest: the rules are its).")

    #: A language runner's facts, from its profile (:func:`profile_runner`); None for pytest, whose
    #: run is this spec's own. Not serialized: a spec read back from JSON is pytest's (Harbor).
    _facts: TestRunnerFacts | None = PrivateAttr(None)

    @property
    def is_pytest(self) -> bool:
        return self.name == "pytest"

    @property
    def facts(self) -> TestRunnerFacts:
        """The profile's facts of a language runner (an error for pytest's part of a spec)."""
        if self._facts is None:
            raise ValueError(f"the {self.name} runner of this spec has no profile facts (made by profile_runner)")
        return self._facts

    def plan(self, run_ids: list[str], report_dir: str, outcome_fifo: str | None = None):
        """A language runner's run of ``run_ids``: the profile's plan (a ``sh -c`` command and its
        reports); given a grading's ``outcome_fifo``, one that streams its outcomes there when the
        runner's reporters can (``outcome_stream``)."""
        if outcome_fifo is None:
            return self.facts.plan(run_ids, report_dir)
        return self.facts.plan(run_ids, report_dir, outcome_fifo=outcome_fifo)

    def read_stream(self, run_plan, stream_text: str) -> dict[str, TestStatus]:
        """The outcome of each id of ``run_plan`` (one with ``outcome_stream``) from the live stream."""
        return dict(self.facts.read_stream(run_plan, stream_text))

    def read(self, run_plan, texts: dict[str, str | None]) -> dict[str, TestStatus]:
        """The outcome of each id of ``run_plan`` from its reports' ``texts`` (by path; None: not
        written), by the profile's reading: missing and unreadable count as failed."""
        return dict(self.facts.read(run_plan, texts.get))

    def selection(self, test_ids: list[str]) -> list[str]:
        """The arguments that make the runner run ``test_ids`` (see :func:`repo2env.verify.junit.selection_args`)."""
        return selection_args(test_ids)

    def run_settings(self, targets: list[str], *, junit: str, timeout_s: float) -> dict:
        """What ``verify/scripts/run_tests.sh`` reads to run ``targets`` (ids or files, already
        selected) once: grading and derivation run the tests through this one description."""
        return {
            "test_cmd": self.command, "timeout_s": f"{timeout_s:.0f}", "run_options": self.options,
            "config_dirs": self.config_dirs, "config_names": [config.name for config in self.config_files],
            "config_sections": [config.section for config in self.config_files],
            "report_options": [self.report_option + junit, *self.report_options], "test_ids": targets,
        }


#: Options every run of the tests gets, derivation and grading alike (see :data:`repo2env.verify.junit.ID_OPTIONS`).
PYTEST_RUN_OPTIONS = ("-p", "no:cacheprovider", *shlex.split(ID_OPTIONS), "--continue-on-collection-errors")


def pytest_runner(test_command: str, test_ids: list[str], pytest_version: str | None = None) -> TestRunner:
    """The pytest part of a spec: the task's command, pytest's files and statuses; the options
    ``pytest_version`` lacks are left out (pytest 2.8 of a 2016 pin has no ``--rootdir`` or ``-o``)."""
    # pytest < 3.5 cannot be told its rootdir, and given its configuration file it takes the tests'
    # folder as one: it finds the snapshot's file itself, as in derivation (the filter keeps the
    # patch from adding or changing one: it knows every name such a pytest reads).
    config_dirs = config_search_dirs(test_ids) if names_its_rootdir(pytest_version) else []
    return TestRunner(command=test_command, options=pytest_options(list(PYTEST_RUN_OPTIONS), pytest_version),
                      report_options=pytest_options(shlex.split(JUNIT_FAMILY_OPTION), pytest_version),
                      config_files=list(PYTEST_CONFIG_FILES), config_dirs=config_dirs,
                      session_statuses=list(PYTEST_SESSION_STATUSES))


def profile_runner(task: Task) -> TestRunner:
    """The runner part of a spec from the task's language profile (a built task's runner, e.g. mocha)."""
    profile = get_profile(task.language)
    facts = profile.test_runner(task.env_spec)
    protected = "|".join(part for part in (profile.path_rules().test_pattern(), config_pattern(facts.config_patterns))
                         if part)
    runner = TestRunner(name=facts.name, command="", options=[], config_files=[], config_dirs=[], report_option="",
                        report_options=[], report_format=facts.report_format,
                        session_statuses=list(SCRIPT_SESSION_STATUSES),
                        directory=facts.directory, outcome_stream=facts.read_stream is not None,
                        config_patterns=list(facts.config_patterns),
                        config_fields=list(facts.config_fields), protected_paths=protected)
    runner._facts = facts
    return runner


def config_search_dirs(test_ids: list[str]) -> list[str]:
    """The folders pytest searches for its configuration, nearest first: from the test files'
    common folder up to the repository's root (``/testbed``)."""
    folders = [split_node_id(test_id)[0].split("/")[:-1] for test_id in test_ids]
    common: list[str] = []
    for parts in zip(*folders, strict=False) if folders else ():
        if len(set(parts)) != 1 or parts[0] in ("", ".", ".."):
            break
        common.append(parts[0])
    return ["/".join(["/testbed", *common[:depth]]) for depth in range(len(common), -1, -1)]


class GradingSpec(_Spec):
    """What every grading of one task runs and checks (see the module docstring)."""

    instance_id: str
    fail_to_pass: list[str] = Field(description="Tests the fix must make pass (the reward's numerator).")
    pass_to_pass: list[str] = Field(description="Tests that must keep passing.")
    hidden_tests: str = Field(description="The PR's test patch, applied after the agent's patch is filtered.")
    hidden_test_files: list[str] = Field(description="Every path the hidden tests' patch touches.")
    gold_paths: list[str] = Field(description="Every path the gold patch touches (its new top-level modules are "
                                              "allowed to the agent's patch too).")
    gold_runner_references: list[str] = Field(description="References to the test runner the gold patch itself "
                                                          "adds (a pytest plugin's repository): allowed to the agent.")
    runner_pattern: str = Field(RUNNER_PATTERN, description="Added lines matching this reach into the test runner.")
    protected_pattern: str = Field(description="Paths an agent's patch may not change (tests, test configuration, "
                                               "start-up hooks, metadata), as one regular expression.")
    runner: TestRunner
    timeout_s: float = Field(gt=0, description="Seconds the hidden tests may run; a run cut short earns nothing.")
    canary_modules: list[CanaryModule] = Field(description="What the canaries of each FAIL_TO_PASS module are drawn from.")
    canary_free_modules: list[str] = Field(default_factory=list, description="FAIL_TO_PASS modules that get no canaries "
                                           "(their tests count their own module's tests; validation found them).")

    @property
    def test_ids(self) -> list[str]:
        """FAIL_TO_PASS then PASS_TO_PASS, each once: what a grading reads."""
        return list(dict.fromkeys([*self.fail_to_pass, *self.pass_to_pass]))

    def plan_canaries(self, rng=None) -> CanaryPlan:
        """The canaries of one grading (the system's randomness unless ``rng`` is given)."""
        join_id = None if self.runner.is_pytest else self.runner.facts.join_id
        return plan_canaries(self.canary_modules, self.test_ids, rng, join_id=join_id)

    def run_ids(self, plan: CanaryPlan) -> list[str]:
        """The ids one grading runs: the task's, in their order, with the canaries at random places among them."""
        run_ids = list(self.test_ids)
        for canary in plan.canaries:
            run_ids.insert(secrets.randbelow(len(run_ids) + 1), canary.test_id)
        return run_ids

    def script_settings(self, run_ids: list[str], layout: GradingLayout, *, host_filtered: bool = True) -> dict:
        """The settings of one run of the grading script (``grade.json`` beside it in the sandbox):
        where its inputs are, what to run and for how long, and what restore.py checks the patch
        against. Without ``host_filtered`` (a Harbor verifier: no filter ran on the agent's diff)
        restore.py keeps only the changes ``protected_pattern`` allows."""
        if not self.runner.is_pytest:
            return self._runner_settings(run_ids, layout, host_filtered=host_filtered)
        settings = {
            "inputs": layout.inputs, "private": layout.private, "junit": layout.junit, "python_path": layout.plugin_dir,
            "plugin": layout.plugin, "fifo": layout.fifo,
            **self.runner.run_settings(self.runner.selection(run_ids), junit=layout.junit, timeout_s=self.timeout_s),
            "gold_paths": self.gold_paths, "runner_pattern": self.runner_pattern,
            "gold_references": self.gold_runner_references,
        }
        if not host_filtered:
            settings["protected_pattern"] = self.protected_pattern
        return settings


    def _runner_settings(self, run_ids: list[str], layout: GradingLayout, *, host_filtered: bool) -> dict:
        """:meth:`script_settings` for a language runner: its plan (one ``sh -c`` program that runs
        exactly ``run_ids`` and writes the reports ``reports`` lists) is the test command run_tests.sh
        runs, with no other argument; ``script_runner`` makes grade.sh return the reports, and
        restore.py append the canaries and restore the runner's package.json fields."""
        plan = self.runner.plan(run_ids, layout.report_dir, layout.fifo)
        settings = {
            "inputs": layout.inputs, "private": layout.private, "junit": layout.junit, "python_path": "",
            "plugin": layout.plugin, "fifo": layout.fifo,
            "test_cmd": "/bin/sh -c " + shlex.quote(plan.command), "timeout_s": f"{self.timeout_s:.0f}",
            "run_options": [], "config_dirs": [], "config_names": [], "config_sections": [], "report_options": [],
            "test_ids": [], "script_runner": self.runner.name, "reports": [report.path for report in plan.reports],
            "config_patterns": self.runner.config_patterns, "config_fields": self.runner.config_fields,
            "gold_paths": self.gold_paths, "runner_pattern": self.runner_pattern,
            "gold_references": self.gold_runner_references,
        }
        if not host_filtered:
            settings["protected_pattern"] = self.protected_pattern
        return settings


@dataclass(frozen=True)
class GradingLayout:
    """The sandbox paths of one grading, random so that nothing in the sandbox can know them in
    advance: the inputs (root's, read-only to the agent: scripts, settings, the filtered patch, the
    outcome plugin), the private folder (the agent's, because pytest runs as the agent: the JUnit
    report, and the hidden tests and canaries that restore.py deletes once placed), the outcome
    plugin's module name and the FIFO its live outcomes go through."""

    inputs: str
    private: str
    junit: str
    plugin: str
    fifo: str

    @property
    def plugin_dir(self) -> str:
        return f"{self.inputs}/plugin"

    @property
    def report_dir(self) -> str:
        """Where a language runner's reports go (the private folder: the tests run as the agent)."""
        return f"{self.private}/reports"

    @classmethod
    def fresh(cls) -> GradingLayout:
        inputs = f"/tmp/repo2env-grade-{secrets.token_hex(8)}"
        private = f"/tmp/repo2env-junit-{secrets.token_hex(8)}"
        return cls(inputs=inputs, private=private, junit=f"{private}/{secrets.token_hex(8)}.xml",
                   plugin=f"repo2env_outcomes_{secrets.token_hex(6)}", fifo=f"{inputs}/{secrets.token_hex(8)}.fifo")


def grading_spec(task: Task, *, timeout_s: float | None = None) -> GradingSpec:
    """The task's grading specification (derived once per task and kept: a task graded many times,
    as validation and training do, reads its patches once). ``timeout_s`` overrides the task's own
    timeout (the one validation measured, else :data:`DEFAULT_TIMEOUT_S`)."""
    timeout = timeout_s if timeout_s is not None else task_timeout_s(task)
    key = _task_key(task, timeout)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return cached
    spec = _derive(task, timeout)
    with _CACHE_LOCK:
        _CACHE[key] = spec
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return spec


def task_timeout_s(task: Task) -> float:
    """The hidden tests' timeout for ``task``: validation's (set from the gold patch's gradings), else the default."""
    measured = task.validation.grading_timeout_s if task.validation else None
    return measured if measured else DEFAULT_TIMEOUT_S


def _derive(task: Task, timeout_s: float) -> GradingSpec:
    gold = parse(task.patch)
    hidden = parse(task.test_patch)
    test_ids = list(dict.fromkeys([*task.FAIL_TO_PASS, *task.PASS_TO_PASS]))
    canary_free = list(task.validation.canary_free_modules) if task.validation else []
    if not get_profile(task.language).runs_tests_as_pytest():
        runner = profile_runner(task)
        return GradingSpec(
            instance_id=task.instance_id, fail_to_pass=list(task.FAIL_TO_PASS), pass_to_pass=list(task.PASS_TO_PASS),
            hidden_tests=task.test_patch, hidden_test_files=hidden.paths, gold_paths=gold.paths,
            gold_runner_references=sorted(runner_references(gold)),
            protected_pattern=protected_path_pattern(runner.protected_paths), runner=runner, timeout_s=timeout_s,
            canary_modules=[module for module in script_canary_modules(hidden, task.FAIL_TO_PASS, runner.facts, test_ids,
                                                                       _file_callees(task))
                            if module.path not in canary_free],
            canary_free_modules=canary_free)
    return GradingSpec(
        instance_id=task.instance_id, fail_to_pass=list(task.FAIL_TO_PASS), pass_to_pass=list(task.PASS_TO_PASS),
        hidden_tests=task.test_patch, hidden_test_files=hidden.paths, gold_paths=gold.paths,
        gold_runner_references=sorted(runner_references(gold)), protected_pattern=protected_path_pattern(),
        runner=pytest_runner(task.test_command(), test_ids, _pytest_version(task)), timeout_s=timeout_s,
        canary_modules=[module for module in canary_modules(hidden, task.FAIL_TO_PASS, test_ids)
                        if module.path not in canary_free],
        canary_free_modules=canary_free,
    )


_CACHE: OrderedDict[str, GradingSpec] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 256


def _file_callees(task: Task) -> dict[str, FileCallees]:
    """The names each hidden test file declares tests with, as the build read them from the whole
    file the way a grading restores it (none for a task built before it read them)."""
    return dict(task.env_spec.test_callees) if task.env_spec else {}


def _pytest_version(task: Task) -> str | None:
    return task.env_spec.pytest_version if task.env_spec else None


def _task_key(task: Task, timeout_s: float) -> str:
    """A digest of everything a spec is derived from."""
    spec = task.env_spec
    fields = [task.instance_id, task.patch, task.test_patch, task.FAIL_TO_PASS, task.PASS_TO_PASS,
              task.test_command(), timeout_s, _pytest_version(task),
              task.validation.canary_free_modules if task.validation else [],
              task.language, spec.test_runner if spec else None, spec.package_dir if spec else None,
              {path: names.model_dump() for path, names in spec.test_callees.items()} if spec else {}]
    return hashlib.sha256(json.dumps(fields).encode("utf-8", "surrogateescape")).hexdigest()


__all__ = ["DEFAULT_TIMEOUT_S", "GRADING_SCRIPT_FILES", "ConfigFile", "GradingLayout",
           "GradingSpec", "TestRunner", "grading_scripts", "grading_spec", "task_timeout_s"]
