"""Harbor task folders: ``tasks/<instance_id>/`` in a published dataset, or ``repo2env export harbor DIR``.

One folder per task, in Harbor's task format (``task.toml`` schema 1.4)::

    instruction.md           the issue, framed as every other place the task meets a model
    task.toml                name, metadata, timeouts, the agent's user (``agent``, not root), the
                             network policy, and a verifier in its own environment (see below)
    environment/Dockerfile   FROM the task image (its pushed reference, pinned by digest, when
                             --push-images ran); task.toml's docker_image names the same image
    solution/solve.sh        applies solution/gold.diff, the pull request's own fix, to /testbed
    tests/test.sh            the verifier: tests/verify.py grades the agent's diff with the hidden
                             tests through the grading script repo2env's grader runs (tests/grade.sh,
                             tests/run_tests.sh and tests/restore.py, the package's own files) and writes
                             /logs/verifier/reward.txt and reward.json (reward, f2p_rate, p2p_rate,
                             resolved, tampered)

The verifier never shares the agent's container (``verifier.environment_mode = "separate"``), as
in every grading repo2env does: once the agent is done, a collection step in the agent's container
(``[[verifier.collect]]``, run as the agent's user) writes the agent's change as a git diff against
the image's snapshot commit to :data:`AGENT_DIFF_ARTIFACT`, which task.toml declares as the
trial's artifact; Harbor copies it out, starts a pristine container of the same image for the
verifier and uploads it there, and verify.py applies it. Whatever the agent did outside /testbed
(as root, say: site-packages, pytest itself) stays behind in the agent's container.

``tests/`` also holds the task's grading specification (``spec.json``, what
:func:`repo2env.verify.spec.grading_spec` derives), the hidden tests (``test.diff``), this folder's
canaries, the outcome plugin and, under ``lib/``, the package's run reader (exit statuses, JUnit,
live stream, tamper verdict, reward), so a verifier reads and scores outcomes exactly as the grader
does. Harbor uploads ``tests/`` only to the verifier's container, and verify.py makes it root's
alone before the tests run.

A language runner's task (a JavaScript task's mocha, jest, jasmine) is read as the grader reads it
(:func:`repo2env.verify.reading.read_script_run`): task.json's ``reader`` names the runner facts'
reading function (``read``) and the plan the grading script runs, whose reports grade.sh returns
in its output, and ``lib/`` holds the module of that function with every package module it
imports (standard library only: they run under the image's Python). The runner's reporters are
already in the image (the build put them in ``/opt/repo2env``). A runner whose facts give no such
reading gets no folder, and is named with that reason (:func:`no_folder_because`) wherever folders
are written.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import posixpath
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from repo2env.errors import InputError
from repo2env.folders import write_folder
from repo2env.instruction import instruction_text
from repo2env.languages import get_profile
from repo2env.languages.runner import TestRunnerFacts
from repo2env.models import Task
from repo2env.publish.card import without_folders
from repo2env.publish.selection import select_from_folders
from repo2env.runtime.backend import Backend
from repo2env.runtime.bootstrap import AGENT_UID
from repo2env.runtime.sandbox import agent_diff_command
from repo2env.verify.spec import GradingLayout, TestRunner, grading_scripts, grading_spec
from repo2env.verify.tamper import PLUGIN_SOURCE

#: The package's modules verify.py imports; tests/lib/ holds them with every package module they
#: import (:func:`verifier_library`; standard library only, Python 3.9+).
VERIFIER_MODULES = ("repo2env.outcomes", "repo2env.verify.canaries", "repo2env.verify.reading", "repo2env.verify.reward",
                    "repo2env.verify.tamper")
#: The package folders' own files a verifier needs besides (the others are namespace packages there).
VERIFIER_PACKAGES = ("__init__.py", "verify/__init__.py")
#: Harbor's own wrapper around the grading script, shipped in the package (publish/harbor_task/).
VERIFIER_FILES = ("test.sh", "verify.py")
#: How long Harbor gives the verifier beyond the tests' own timeout: the diff, the reset, the set-up.
VERIFIER_MARGIN_S = 300.0
AGENT_TIMEOUT_S = 3600.0
#: Where the collection step writes the agent's diff in the agent's container; Harbor carries it to
#: the same path in the verifier's container (task.toml's ``artifacts``).
AGENT_DIFF_ARTIFACT = "/tmp/repo2env-harbor/agent.diff"
COLLECT_TIMEOUT_S = 300.0
#: The task.toml schema these folders are written in (Harbor 0.2x's current one).
TASK_SCHEMA_VERSION = "1.4"
#: Harbor's network policies a task may declare: ``no-network`` (our sandboxes' own; on Docker,
#: Harbor enforces it with an egress sidecar built from an image on Docker Hub) or ``public``.
NETWORK_MODES = ("no-network", "public")
#: The agent's container's resources, as repo2env's own sandboxes get them (SandboxLimits' defaults).
CPUS, MEMORY_MB = 1, 2048


@dataclass(frozen=True)
class HarborFolders:
    """Which tasks got a Harbor folder, and why each other one did not."""

    written: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)  # instance id -> why it has no folder

    @property
    def reasons(self) -> Counter:
        """Reason -> how many tasks got no folder for it."""
        return Counter(self.left_out.values())


@dataclass(frozen=True)
class HarborExport:
    """What ``repo2env export harbor`` wrote, and which tasks it left out (instance id -> why)."""

    root: Path
    tasks: int
    left_out: dict[str, str] = field(default_factory=dict)


def image_reference(task: Task) -> str:
    """The image a Harbor task runs in (:attr:`EnvSpec.runnable_image`): pinned by digest when the
    images were pushed, else the local tag ``repo2env build`` made."""
    image = task.env_spec.runnable_image if task.env_spec else None
    if not image:
        raise InputError(f"task {task.instance_id} has no image", hint="run 'repo2env build' first")
    return image


def missing_verifier(runner: TestRunner, facts: TestRunnerFacts | None = None) -> str | None:
    """Why a task graded by ``runner`` (a language runner's ``facts`` from its profile) can have no
    Harbor verifier, None when it can: tests/verify.py reads pytest's runs with the grader's own
    modules, and a language runner's with its facts' reading function (:func:`verifier_reader`)."""
    if runner.is_pytest:
        return None
    try:
        verifier_reader(facts)
    except ValueError as exc:
        return f"no Harbor verifier reads {runner.name} runs: {exc}"
    return None


def verifier_reader(facts: TestRunnerFacts | None) -> tuple[str, list[str]]:
    """How a verifier reads a language runner's reports: its facts' ``read`` as ``module:function``,
    and the verifier's library with that module and the one of its reading of the live stream, if
    any (:func:`verifier_library`). ValueError, with why, when there is no such function or it needs
    more than the standard library and the package."""
    read = facts.read if facts is not None and facts.plan is not None else None
    if read is None:
        raise ValueError("its profile gives no plan and reading of its reports")
    function = verifier_function(read)
    modules = [function.partition(":")[0]]
    if facts.read_stream is not None:
        modules.append(verifier_function(facts.read_stream).partition(":")[0])
    return function, verifier_library(*dict.fromkeys(modules))


def verifier_function(function) -> str:
    """``function`` as the ``module:function`` a verifier imports; ValueError when it is no module's function."""
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if not module or getattr(sys.modules.get(module), name, None) is not function:
        raise ValueError(f"its reading ({function!r}) is not a module's function a verifier could import")
    return f"{module}:{name}"


def verifier_library(*modules: str) -> list[str]:
    """What tests/lib/repo2env/ holds for a verifier that imports ``modules`` besides
    :data:`VERIFIER_MODULES`: those modules and every package module they import, at any depth
    (lazily too), as paths relative to the package folder. ValueError naming an import outside the
    standard library (a verifier runs under the image's Python, with nothing of repo2env but these)."""
    package = Path(importlib.util.find_spec("repo2env").origin).parent
    files: dict[str, None] = dict.fromkeys(VERIFIER_PACKAGES)
    pending, seen = [*VERIFIER_MODULES, *modules], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        path = Path(importlib.util.find_spec(name).origin)
        files[path.relative_to(package).as_posix()] = None
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # ``from repo2env.verify import reading`` names a module too.
                imported = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for other in imported:
                if other.partition(".")[0] != "repo2env":
                    if other.partition(".")[0] not in sys.stdlib_module_names:
                        raise ValueError(f"{name} imports {other}, which a verifier's Python does not have")
                elif _is_module(other):
                    pending.append(other)
    return list(files)


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a name imported from a module (``repo2env.outcomes.TestStatus``)
        return False


def no_folder_because(task: Task) -> str | None:
    """Why ``task`` gets no Harbor folder, None when it gets one: a task with no FAIL_TO_PASS tests
    yet (never validated, published with --include-rejected) has nothing to verify, and its grading
    specification's runner must have a verifier (:func:`missing_verifier`)."""
    if not task.FAIL_TO_PASS:
        return "no FAIL_TO_PASS tests"
    runner = grading_spec(task).runner
    return missing_verifier(runner, _runner_facts(task, runner))


def _runner_facts(task: Task, runner: TestRunner) -> TestRunnerFacts | None:
    """A language runner's facts, from the task's profile (the ones its grading specification was made from)."""
    return None if runner.is_pytest else get_profile(task.language).test_runner(task.env_spec)


def harbor_task_files(task: Task, *, dataset: str, snapshot: str | None = None, network: str = "no-network",
                      timeout_s: float | None = None) -> dict[str, bytes]:
    """Every file of the task's Harbor folder, by path relative to it. ``snapshot`` is the commit
    of the image's /testbed the agent's change is taken against (read from the image's label);
    without it the collection step takes the repository's root commit (the snapshot has only
    one). ``network``: the task's network policy, one of :data:`NETWORK_MODES`. ``timeout_s``
    overrides the hidden tests' timeout of the task's grading specification."""
    if network not in NETWORK_MODES:
        raise InputError(f"network policy {network!r}: choose one of {', '.join(NETWORK_MODES)}")
    if not task.FAIL_TO_PASS:
        raise InputError(f"task {task.instance_id} has no FAIL_TO_PASS tests", hint="run 'repo2env validate' first")
    spec = grading_spec(task, timeout_s=timeout_s)
    facts = _runner_facts(task, spec.runner)
    missing = missing_verifier(spec.runner, facts)
    if missing:
        raise InputError(f"task {task.instance_id}: {missing}",
                         hint="export this task as a dataset or an OpenEnv environment instead")
    image = image_reference(task)
    # Drawn once per published task: the agent never sees tests/, and each folder has its own.
    plan = spec.plan_canaries()
    run_ids = spec.run_ids(plan)
    layout = GradingLayout.fresh()
    # No host-side filter runs on the agent's diff there: restore.py applies the path rules itself.
    settings = spec.script_settings(run_ids, layout, host_filtered=False)
    verifier = {
        "agent_uid": AGENT_UID, "snapshot": snapshot, "agent_diff": AGENT_DIFF_ARTIFACT, "mode": "graded",
        "run_ids": run_ids,
        "canaries": [dataclasses.asdict(canary) for canary in plan.canaries],
        "exclusive": [list(group) for group in plan.exclusive],
    }
    library = verifier_library()
    if facts is not None:
        # A language runner's run is read by its facts' reading of the plan grade.sh runs (the one
        # script_settings made), as the grader reads it.
        function, library = verifier_reader(facts)
        run_plan = spec.runner.plan(run_ids, layout.report_dir, layout.fifo)
        verifier["reader"] = {"function": function, "plan": dataclasses.asdict(run_plan)}
        if run_plan.outcome_stream:
            # Its reporters stream the outcomes to the verifier's collector too: read by the facts'
            # reading of the stream (a function of the same module as the reports' reading).
            verifier["reader"]["stream_function"] = verifier_function(facts.read_stream)
    text = {
        "instruction.md": instruction_text(task) + "\n",
        "task.toml": task_toml(task, dataset=dataset, image=image, snapshot=snapshot, network=network,
                               verifier_timeout_s=spec.timeout_s + VERIFIER_MARGIN_S),
        "environment/Dockerfile": dockerfile(task, image),
        "solution/solve.sh": SOLVE_SH,
        "solution/gold.diff": task.patch,
        "tests/spec.json": spec.model_dump_json(indent=1) + "\n",
        "tests/grade.json": json.dumps(settings, indent=1) + "\n",
        "tests/task.json": json.dumps(verifier, indent=1) + "\n",
        "tests/test.diff": spec.hidden_tests,
        "tests/canaries.json": json.dumps(plan.definitions) + "\n",
        f"tests/plugin/{layout.plugin}.py": PLUGIN_SOURCE.format(fifo=layout.fifo),
        **{f"tests/{name}": content for name, content in grading_scripts().items()},
        **{f"tests/{name}": _packaged("repo2env.publish", f"harbor_task/{name}") for name in VERIFIER_FILES},
        **{f"tests/lib/repo2env/{name}": _packaged("repo2env", name) for name in library},
    }
    # A patch's bytes as they came (a Latin-1 file stays Latin-1): carried as surrogate escapes.
    return {path: content.encode("utf-8", errors="surrogateescape") for path, content in text.items()}


SOLVE_SH = """#!/bin/bash
# The reference solution: the pull request's own fix (gold.diff beside this file), applied to /testbed.
set -euo pipefail
cd /testbed
git -c safe.directory='*' apply --whitespace=nowarn --binary "$(dirname "$0")/gold.diff"
"""


def collect_command(snapshot: str | None) -> str:
    """The collection step, run in the agent's container as the agent's user once the agent is
    done: the agent's other processes are stopped, then its change to /testbed is written as a
    git diff against ``snapshot`` (else the repository's root commit) to the artifact path, whole
    or not at all. It runs with the agent's rights on the agent's repository, so an agent can at
    worst spoil its own diff: the verifier applies it to a pristine snapshot like any patch."""
    folder = posixpath.dirname(AGENT_DIFF_ARTIFACT)
    against = snapshot or '"$(git rev-list --max-parents=0 HEAD | tail -n 1)"'
    return (f"kill -9 -1 2>/dev/null; mkdir -p {folder} && rm -f {AGENT_DIFF_ARTIFACT} && cd /testbed && "
            f"{agent_diff_command(against)} > {AGENT_DIFF_ARTIFACT}.partial && "
            f"mv {AGENT_DIFF_ARTIFACT}.partial {AGENT_DIFF_ARTIFACT}")


def task_toml(task: Task, *, dataset: str, image: str, verifier_timeout_s: float, snapshot: str | None = None,
              network: str = "no-network") -> str:
    """task.toml: Harbor's task configuration, schema :data:`TASK_SCHEMA_VERSION` (strings written
    as TOML basic strings)."""
    def string(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    owner = dataset.split("/", 1)[0] if "/" in dataset else "repo2env"
    title = next((line.strip() for line in task.problem_statement.splitlines() if line.strip()), task.instance_id)
    lines = [
        f"schema_version = {string(TASK_SCHEMA_VERSION)}",
        f"artifacts = [{string(AGENT_DIFF_ARTIFACT)}]", "",
        "[task]", f"name = {string(f'{owner}/{task.instance_id}')}", f"description = {string(title[:200])}",
        f'keywords = ["repo2env", "swe", {string(task.language)}]', "",
        "[metadata]", 'author_name = "repo2env"', 'category = "software-engineering"',
        f'tags = ["repo2env", "swe", {string(task.language)}]', f"repo = {string(task.repo)}",
        f"instance_id = {string(task.instance_id)}", f"pull_number = {task.pull_number}",
        f"base_commit = {string(task.base_commit)}", f"created_at = {string(task.created_at)}", "",
        "# The verifier runs in a pristine container of the same image, as root; it grades the agent's diff,",
        "# which the collection step below writes in the agent's container and Harbor carries over (artifacts).",
        "[verifier]", f"timeout_sec = {float(verifier_timeout_s)}", 'environment_mode = "separate"', 'user = "root"', "",
        "[[verifier.collect]]", f"command = {string(collect_command(snapshot))}", 'user = "agent"',
        f"timeout_sec = {COLLECT_TIMEOUT_S}", "",
        "[agent]", f"timeout_sec = {AGENT_TIMEOUT_S}", 'user = "agent"', "",
        "[environment]", f"docker_image = {string(image)}", 'workdir = "/testbed"', "build_timeout_sec = 600.0",
        f"network_mode = {string(network)}", f"cpus = {CPUS}", f"memory_mb = {MEMORY_MB}", "",
    ]
    return "\n".join(lines)


def dockerfile(task: Task, image: str) -> str:
    """environment/Dockerfile: the task image as it is (built by repo2env; the Dockerfile of each of
    its layers is in the dataset's ``dockerfiles`` column)."""
    return (f"# {task.repo} at {task.base_commit} with its dependencies installed and no git history, as\n"
            f"# repo2env built it for {task.instance_id}; the agent works in /testbed.\n"
            f"FROM {image}\nWORKDIR /testbed\n")


def write_task_folders(tasks: Iterable[Task], root: Path, *, dataset: str,
                       snapshots: Mapping[str, str | None] | None = None, network: str = "no-network") -> HarborFolders:
    """Write each task's Harbor folder under ``root/<instance_id>/``; returns which tasks got one
    and why each other one did not (:func:`no_folder_because`)."""
    result = HarborFolders()
    for task in tasks:
        reason = no_folder_because(task)
        if reason:
            result.left_out[task.instance_id] = reason
            continue
        snapshot = (snapshots or {}).get(task.instance_id)
        files = harbor_task_files(task, dataset=dataset, snapshot=snapshot, network=network)
        for relative, payload in files.items():
            path = root / task.instance_id / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(payload)
            if path.suffix == ".sh":
                path.chmod(0o755)
        result.written.append(task.instance_id)
    return result


def image_snapshots(tasks: Iterable[Task], backend: Backend | None) -> dict[str, str | None]:
    """The snapshot commit of each task's image: the one its build recorded (``env_spec.snapshot_commit``),
    else its image's ``repo2env.snapshot`` label where ``backend`` has the image, else None (the
    collection step then takes the repository's root commit)."""
    snapshots: dict[str, str | None] = {}
    for task in tasks:
        recorded = task.env_spec.snapshot_commit if task.env_spec else None
        image = None
        if recorded is None and backend is not None and task.env_spec and task.env_spec.image:
            image = backend.images.get(task.env_spec.image)
        snapshots[task.instance_id] = recorded or (image.labels.get("repo2env.snapshot") if image else None)
    return snapshots


def export_harbor(folders: Iterable[Path], out_dir: Path, *, dataset: str = "repo2env", accepted_only: bool = True,
                  overwrite: bool = False, network: str = "no-network", push_registry: str | None = None,
                  backend: Backend | None = None) -> HarborExport:
    """Write the Harbor folders of the tasks in ``folders`` (one per instance id; accepted ones
    unless not ``accepted_only``, built ones always) to ``out_dir``: complete or absent. A task with
    no Harbor folder (:func:`no_folder_because`) is left out and named with its reason; none with
    one is refused. With ``push_registry`` the images are pushed there from ``backend`` first and
    the folders pin them by digest; the snapshot commits are read from ``backend``'s images when given."""
    tasks = select_from_folders(list(folders), include_rejected=not accepted_only).tasks
    if not tasks:
        raise InputError("no task to export (none is built and accepted)",
                         hint="run 'repo2env build' and 'repo2env validate', or pass --include-rejected")
    if network not in NETWORK_MODES:
        raise InputError(f"--network {network!r}: choose one of {', '.join(NETWORK_MODES)}")
    left_out = {task.instance_id: reason for task in tasks if (reason := no_folder_because(task))}
    tasks = [task for task in tasks if task.instance_id not in left_out]
    if not tasks:
        raise InputError(f"no Harbor folder to write: {without_folders(Counter(left_out.values()))}",
                         hint="export them as a dataset ('repo2env publish') or SWE-bench rows instead")
    if push_registry:
        from repo2env.publish.images import push_images

        if backend is None:
            raise InputError("--push-images needs the backend the images were built on")
        tasks = push_images(tasks, push_registry, backend=backend)
    snapshots = image_snapshots(tasks, backend)
    written = write_folder(out_dir, lambda root: write_task_folders(tasks, root, dataset=dataset, snapshots=snapshots,
                                                                   network=network), overwrite=overwrite)
    return HarborExport(root=Path(out_dir).absolute(), tasks=len(written.written), left_out=left_out)


def _packaged(package: str, name: str) -> str:
    return (resources.files(package) / name).read_text(encoding="utf-8")
