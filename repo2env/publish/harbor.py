"""Harbor task folders: ``tasks/<instance_id>/`` in a published dataset, or ``repo2env export harbor DIR``.

One folder per task, in Harbor's task format::

    instruction.md           the issue, framed as every other place the task meets a model
    task.toml                name, metadata, timeouts; [environment] docker_image = the task image
    environment/Dockerfile   FROM the task image (its pushed reference when --push-images ran)
    solution/solve.sh        applies solution/gold.diff, the pull request's own fix, to /testbed
    tests/test.sh            the verifier: tests/verify.py grades /testbed with the hidden tests
                             through the grading script repo2env's grader runs (tests/grade.sh,
                             tests/run_tests.sh, tests/restore.py: the package's own files) and writes
                             /logs/verifier/reward.txt and reward.json (reward, f2p_rate, p2p_rate,
                             resolved, tampered)

``tests/`` also holds the task's grading specification (``spec.json``, what
:func:`repo2env.verify.spec.grading_spec` derives), the hidden tests (``test.diff``), this folder's
canaries, the outcome plugin and, under ``lib/``, the package's run reader (exit statuses, JUnit,
live stream, tamper verdict, reward), so a verifier reads and scores outcomes exactly as the
grader does. Harbor uploads ``tests/`` only
after the agent has finished, and verify.py makes it root's alone before the tests run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from repo2env.errors import InputError
from repo2env.instruction import instruction_text
from repo2env.models import Task
from repo2env.publish.selection import select_from_folders
from repo2env.runtime.backend import Backend
from repo2env.runtime.bootstrap import AGENT_UID
from repo2env.verify.spec import GradingLayout, grading_scripts, grading_spec
from repo2env.verify.tamper import PLUGIN_SOURCE

#: The package's modules a verifier imports, under tests/lib/ (standard library only, Python 3.9+).
VERIFIER_LIBRARY = ("__init__.py", "outcomes.py", "verify/__init__.py", "verify/canaries.py", "verify/junit.py",
                    "verify/reading.py", "verify/reward.py", "verify/tamper.py", "verify/trailer.py")
#: Harbor's own wrapper around the grading script, shipped in the package (publish/harbor_task/).
VERIFIER_FILES = ("test.sh", "verify.py")
#: How long Harbor gives the verifier beyond the tests' own timeout: the diff, the reset, the set-up.
VERIFIER_MARGIN_S = 300.0
AGENT_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class HarborExport:
    """What ``repo2env export harbor`` wrote."""

    root: Path
    tasks: int


def image_reference(task: Task) -> str:
    """The image a Harbor task runs in: the pushed reference (registry, name and digest) when the
    images were pushed, else the local tag ``repo2env build`` made."""
    spec = task.env_spec
    if spec is None or not (spec.pushed_image or spec.image):
        raise InputError(f"task {task.instance_id} has no image", hint="run 'repo2env build' first")
    return spec.pushed_image or spec.image


def harbor_task_files(task: Task, *, dataset: str, snapshot: str | None = None,
                      timeout_s: float | None = None) -> dict[str, bytes]:
    """Every file of the task's Harbor folder, by path relative to it. ``snapshot`` is the commit
    of the image's /testbed the agent's change is taken against (read from the image's label);
    without it the verifier takes the repository's root commit (the snapshot has only one).
    ``timeout_s`` overrides the hidden tests' timeout of the task's grading specification."""
    if not task.FAIL_TO_PASS:
        raise InputError(f"task {task.instance_id} has no FAIL_TO_PASS tests", hint="run 'repo2env validate' first")
    spec = grading_spec(task, timeout_s=timeout_s)
    if not spec.runner.is_pytest:
        # tests/verify.py reads pytest's run (JUnit XML, the outcome stream): it would grade nothing here.
        raise InputError(f"task {task.instance_id}: a Harbor verifier for {spec.runner.name} tasks is not built yet",
                         hint="export this task as a dataset or an OpenEnv environment instead")
    image = image_reference(task)
    # Drawn once per published task: the agent never sees tests/, and each folder has its own.
    plan = spec.plan_canaries()
    run_ids = spec.run_ids(plan)
    layout = GradingLayout.fresh()
    # No host-side filter runs on the agent's diff there: restore.py applies the path rules itself.
    settings = spec.script_settings(run_ids, layout, host_filtered=False)
    verifier = {
        "agent_uid": AGENT_UID, "snapshot": snapshot, "mode": "graded", "run_ids": run_ids,
        "canaries": [dataclasses.asdict(canary) for canary in plan.canaries],
        "exclusive": [list(group) for group in plan.exclusive],
    }
    text = {
        "instruction.md": instruction_text(task) + "\n",
        "task.toml": task_toml(task, dataset=dataset, image=image, verifier_timeout_s=spec.timeout_s + VERIFIER_MARGIN_S),
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
        **{f"tests/lib/repo2env/{name}": _packaged("repo2env", name) for name in VERIFIER_LIBRARY},
    }
    # A patch's bytes as they came (a Latin-1 file stays Latin-1): carried as surrogate escapes.
    return {path: content.encode("utf-8", errors="surrogateescape") for path, content in text.items()}


SOLVE_SH = """#!/bin/bash
# The reference solution: the pull request's own fix (gold.diff beside this file), applied to /testbed.
set -euo pipefail
cd /testbed
git -c safe.directory='*' apply --whitespace=nowarn --binary "$(dirname "$0")/gold.diff"
"""


def task_toml(task: Task, *, dataset: str, image: str, verifier_timeout_s: float) -> str:
    """task.toml: Harbor's task configuration (strings written as TOML basic strings)."""
    def string(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    owner = dataset.split("/", 1)[0] if "/" in dataset else "repo2env"
    lines = [
        'version = "1.0"', "",
        "[task]", f"name = {string(f'{owner}/{task.instance_id}')}", "",
        "[metadata]", 'author_name = "repo2env"', 'category = "software-engineering"',
        'tags = ["repo2env", "swe", "python"]', f"repo = {string(task.repo)}",
        f"instance_id = {string(task.instance_id)}", f"pull_number = {task.pull_number}",
        f"base_commit = {string(task.base_commit)}", f"created_at = {string(task.created_at)}", "",
        "[verifier]", f"timeout_sec = {float(verifier_timeout_s)}", "",
        "[agent]", f"timeout_sec = {AGENT_TIMEOUT_S}", "",
        "[environment]", f"docker_image = {string(image)}", 'workdir = "/testbed"', "build_timeout_sec = 600.0",
        "allow_internet = false", "",
    ]
    return "\n".join(lines)


def dockerfile(task: Task, image: str) -> str:
    """environment/Dockerfile: the task image as it is (built by repo2env; the Dockerfile of each of
    its layers is in the dataset's ``dockerfiles`` column)."""
    return (f"# {task.repo} at {task.base_commit} with its dependencies installed and no git history, as\n"
            f"# repo2env built it for {task.instance_id}; the agent works in /testbed.\n"
            f"FROM {image}\nWORKDIR /testbed\n")


def write_task_folders(tasks: Iterable[Task], root: Path, *, dataset: str,
                       snapshots: Mapping[str, str | None] | None = None) -> int:
    """Write each task's Harbor folder under ``root/<instance_id>/``; returns how many. A task with
    no FAIL_TO_PASS tests yet (never validated, published with --include-rejected) has no verifier
    and gets no folder."""
    count = 0
    for task in tasks:
        if not task.FAIL_TO_PASS:
            continue
        snapshot = (snapshots or {}).get(task.instance_id)
        for relative, payload in harbor_task_files(task, dataset=dataset, snapshot=snapshot).items():
            path = root / task.instance_id / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(payload)
            if path.suffix == ".sh":
                path.chmod(0o755)
        count += 1
    return count


def image_snapshots(tasks: Iterable[Task], backend: Backend | None) -> dict[str, str | None]:
    """The snapshot commit of each task's image (its ``repo2env.snapshot`` label), where ``backend``
    has the image; None where not, and {} without a backend (the verifier then takes the root commit)."""
    if backend is None:
        return {}
    snapshots: dict[str, str | None] = {}
    for task in tasks:
        image = backend.images.get(task.env_spec.image) if task.env_spec and task.env_spec.image else None
        snapshots[task.instance_id] = image.labels.get("repo2env.snapshot") if image else None
    return snapshots


def harbor_writer(dataset: str, backend: Backend | None = None) -> Callable[[Sequence[Task], Path], int]:
    """A publish tree writer (see :data:`repo2env.publish.dataset.TreeWriter`): ``tasks/<instance_id>/``
    (the snapshot commits read from ``backend``'s images when given)."""
    def write(tasks: Sequence[Task], root: Path) -> int:
        return write_task_folders(tasks, root / "tasks", dataset=dataset, snapshots=image_snapshots(tasks, backend))

    return write


def export_harbor(folders: Iterable[Path], out_dir: Path, *, dataset: str = "repo2env", accepted_only: bool = True,
                  overwrite: bool = False, backend: Backend | None = None) -> HarborExport:
    """Write the Harbor folders of the tasks in ``folders`` (accepted ones unless not
    ``accepted_only``; built ones always) to ``out_dir``: complete or absent (the snapshot commits
    read from ``backend``'s images when given)."""
    tasks = select_from_folders(list(folders), include_rejected=not accepted_only).tasks
    if not tasks:
        raise InputError("no task to export (none is built and accepted)",
                         hint="run 'repo2env build' and 'repo2env validate', or pass --include-rejected")
    out_dir = Path(out_dir).absolute()
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())) and not overwrite:
        raise InputError(f"{out_dir} exists and is not empty", hint="choose another folder, or pass --overwrite")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        count = write_task_folders(tasks, staging / "tasks", dataset=dataset, snapshots=image_snapshots(tasks, backend))
        if out_dir.exists():
            os.replace(out_dir, staging / "previous")  # removed with the staging folder
        os.replace(staging / "tasks", out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return HarborExport(root=out_dir, tasks=count)


def _packaged(package: str, name: str) -> str:
    return (resources.files(package) / name).read_text(encoding="utf-8")
