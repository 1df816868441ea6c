"""The JavaScript profile's test runner facts for one task (:func:`javascript_facts`), from the
runner adapters of :mod:`.runners`: ids ``<file>::<describe> > <title>``, the command that runs a list
of them with the runner's machine-readable report, the report's reading, and every file and
``package.json`` field the runner, Node's module loader or the package manager reads."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from functools import partial

from repo2env.languages.files import RepoFiles
from repo2env.languages.javascript.added_tests import added_tests
from repo2env.languages.javascript.project import ProjectFiles
from repo2env.languages.javascript.runners import (
    COMMON_CONFIG_PATTERNS,
    COMMON_PACKAGE_JSON_FIELDS,
    IMPORTED_TEST_API,
    PACKAGE_JSON_FIELDS,
    REPORT_FORMATS,
    RUNNER_CONFIG_PATTERNS,
    STREAM_RUNNERS,
    Invocation,
    RunPlan,
    config_files,
    plan_run,
    read_outcomes,
    reported_outcomes,
    script_invocation,
    streamed_outcomes,
)
from repo2env.languages.javascript.test_callees import imported_callees
from repo2env.languages.javascript.test_ids import split_test_id, test_id
from repo2env.languages.runner import TestRunnerFacts
from repo2env.models import EnvSpec


def javascript_facts(spec: EnvSpec, files: RepoFiles | None = None) -> TestRunnerFacts:
    """The runner of a built JavaScript task (``spec.test_runner`` in ``spec.package_dir``). With
    ``files`` (the repository at the base commit) the plan keeps the options its npm script gives the
    runner, and ``config_patterns`` are the very files it reads there (setup files its script or
    configuration names included); without, the runner's conventional names."""
    runner = spec.test_runner
    if not runner:
        raise ValueError("the spec names no test runner (not a built JavaScript task)")
    directory = spec.package_dir or ""
    invocation = spec_invocation(spec)
    patterns: Sequence[str] = (*COMMON_CONFIG_PATTERNS, *RUNNER_CONFIG_PATTERNS[runner])
    if files is not None:
        project = ProjectFiles.of(files)
        invocation = script_invocation(project.package_json(directory), runner)
        patterns = (*patterns, *config_files(runner, project, directory))
    plan: Callable[[Sequence[str], str], RunPlan] = partial(_plan, runner, directory, invocation)
    return TestRunnerFacts(
        name=runner, report_format=REPORT_FORMATS[runner],
        id_format="<test file>::<describe titles and the test title joined by ' > '>; <test file> alone when the "
                  "file does not load (repo2env.languages.javascript.test_ids)",
        config_patterns=tuple(dict.fromkeys(patterns)),
        config_fields=tuple(dict.fromkeys([*COMMON_PACKAGE_JSON_FIELDS, *PACKAGE_JSON_FIELDS[runner]])),
        directory=directory, split_id=split_test_id, join_id=test_id, plan=plan, read=read_outcomes,
        reported=reported_outcomes, read_stream=streamed_outcomes if runner in STREAM_RUNNERS else None,
        canary_style="describe-it",
        added_tests=partial(added_tests, modules=IMPORTED_TEST_API[runner]),
        test_callees=partial(imported_callees, module=IMPORTED_TEST_API[runner]) if IMPORTED_TEST_API[runner]
        else None,
        notes={"runner_pattern": "not yet: the JavaScript grader is the next phase"},
    )


def spec_invocation(spec: EnvSpec) -> Invocation | None:
    """The options and variables the build read from the npm script (``test_cmd``'s words after the
    runner, ``test_env``): derivation, grading, a Harbor verifier and the task image's cache warm-up
    run the tests as the image's check did. None when ``test_cmd`` does not start with the runner."""
    runner = spec.test_runner
    words = shlex.split(spec.test_cmd or "")
    if not runner or words[:1] != [runner]:
        return None
    flags = tuple(words[1:])
    return Invocation(script="test", env=dict(spec.test_env), options=() if runner == "node" else flags,
                      node_options=flags if runner == "node" else ())


def _plan(runner: str, directory: str, invocation, test_ids: Sequence[str], report_dir: str, *,
          random_seed: int | None = None, outcome_fifo: str | None = None) -> RunPlan:
    return plan_run(runner, test_ids, report_dir, directory=directory, invocation=invocation, random_seed=random_seed,
                    outcome_fifo=outcome_fifo)
