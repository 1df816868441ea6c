"""Shared fixtures: a Docker engine with the base image (for tests marked ``docker``), the demo built and
validated once per session, a local image registry.

Under pytest-xdist (``-n N``) every worker builds its own images in a namespace of its own
(``<namespace>-gw0``, ...): a test that garbage-collects, overwrites or counts the namespace's
images sees only its worker's. The demos built and validated once are built once per run, not per
worker: the first worker to ask builds them, in the run's namespace, and the others read its folder
(:func:`shared_by_workers`)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

# The datasets library caches a local folder's tables under the folder's name: a concurrent or earlier
# test session (another checkout's code, another schema) could hand its table to this one. Each
# session gets its own cache, its subprocesses too.
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="repo2env-tests-datasets-")
atexit.register(shutil.rmtree, os.environ["HF_DATASETS_CACHE"], True)

#: The image namespace of the run (``REPO2ENV_IMAGE_NAMESPACE``, default ``repo2env``): what the
#: demos shared by the workers are built in.
RUN_NAMESPACE = os.environ.get("REPO2ENV_IMAGE_NAMESPACE", "").strip().lower() or "repo2env"
#: The xdist worker this process is (``gw0``, ...), or None when the session runs alone.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if XDIST_WORKER:
    os.environ["REPO2ENV_IMAGE_NAMESPACE"] = f"{RUN_NAMESPACE}-{XDIST_WORKER}"


def image_namespace_of(tag: str) -> str:
    """The image namespace of an env or task image's tag (``ci-42/repo2env/task:x`` -> ``ci-42/repo2env``)."""
    return tag.rsplit("/", 1)[0]


@contextlib.contextmanager
def exclusive(tmp_path_factory, name: str) -> Iterator[Path]:
    """Held by one worker of the run at a time (an flock in the run's temp folder, which every
    worker shares; only this session when it runs alone): yields that folder."""
    root = tmp_path_factory.getbasetemp().parent if XDIST_WORKER else tmp_path_factory.getbasetemp()
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield root


@contextlib.contextmanager
def run_namespace() -> Iterator[None]:
    """The run's image namespace instead of this worker's, for images every worker reads."""
    own = os.environ["REPO2ENV_IMAGE_NAMESPACE"] if "REPO2ENV_IMAGE_NAMESPACE" in os.environ else None
    os.environ["REPO2ENV_IMAGE_NAMESPACE"] = RUN_NAMESPACE
    try:
        yield
    finally:
        if own is None:
            del os.environ["REPO2ENV_IMAGE_NAMESPACE"]
        else:
            os.environ["REPO2ENV_IMAGE_NAMESPACE"] = own


def shared_by_workers(tmp_path_factory, name: str, make, *, lock: str | None = None) -> Path:
    """A folder ``make(folder)`` fills once per run: alone, in this session's temp folder; under
    xdist, by the first worker to ask (holding ``lock``, default ``name``, so that fixtures building
    the same image tags never build at once), in the run's image namespace, and the other workers
    wait for it and get the same folder. A ``make`` that fails leaves it to the next worker to try."""
    if not XDIST_WORKER:
        folder = tmp_path_factory.mktemp(name)
        make(folder)
        return folder
    with exclusive(tmp_path_factory, lock or name) as root:
        folder, done = root / name, root / f"{name}.done"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            with run_namespace():
                make(folder)
            done.touch()
        return folder


#: The session fixtures that take minutes to make and that few tests use.
COSTLY_SHARED_FIXTURES = ("validated_js_demo", "demo_run")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist, the tests that need a costly shared fixture go first (each worker collects the same
    order; worksteal hands out the front first), so that it is made at the start of the run while the
    other workers run the rest, not at the end with the others idle."""
    if XDIST_WORKER:
        items.sort(key=lambda item: not set(COSTLY_SHARED_FIXTURES) & set(getattr(item, "fixturenames", ())))


@pytest.fixture(scope="session")
def docker_client():
    """A client for the local engine with the base image present; skips only outside CI.

    In CI (``CI=true``) a missing engine or image is a failure, never a skip: .ci/run starts the
    engine and bootstraps the image, so their absence means the set-up is broken.
    """
    from repo2env.errors import DockerUnavailableError
    from repo2env.runtime.backends.docker import DockerBackend, connect_docker
    from repo2env.runtime.bootstrap import find_base_image

    try:
        client = connect_docker(timeout=5)
    except DockerUnavailableError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Docker is required in CI: {exc}")
        pytest.skip(f"no Docker engine: {exc.message}")
    # Five seconds to find out that no engine answers; then the patience a loaded engine needs (an
    # image removal under a busy build can take longer than that).
    client.api.timeout = 120
    if find_base_image(DockerBackend(client), "3.11") is None:
        message = "base image missing: run 'repo2env runtime bootstrap'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return client


@pytest.fixture
def docker_runtime(docker_client):
    """A DockerBackend on the session's engine."""
    from repo2env.runtime.backends.docker import DockerBackend

    return DockerBackend(docker_client)


@pytest.fixture(scope="module")
def node_grader(docker_client, tmp_path_factory):
    """A Grader on the session's engine, for a module's JavaScript tasks."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.verify.grader import Grader

    return Grader(DockerBackend(docker_client), tmp_path_factory.mktemp("node-grades"), timeout_s=240)


@pytest.fixture(scope="session")
def podman_backend(docker_client):
    """The podman backend with the base image (moved from Docker: built once); skips only outside CI,
    and only when podman is not installed here (``make test`` and .ci/run install it)."""
    from repo2env.errors import BackendUnavailableError
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.backends.podman import PodmanBackend
    from repo2env.runtime.bootstrap import ensure_base_image

    try:
        backend = PodmanBackend()
    except BackendUnavailableError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"podman is required in CI ('make podman' installs it): {exc}")
        pytest.skip(f"podman cannot run here: {exc.message} ({exc.hint})")
    ensure_base_image(backend, "3.11", try_pull=False, others=(DockerBackend(docker_client),))
    return backend


#: Every backend the suite runs the shared contracts on.
BACKEND_NAMES = ("docker", "podman")


@pytest.fixture(params=BACKEND_NAMES)
def any_backend(request):
    """Each backend in turn (a test taking it runs once per backend)."""
    if request.param == "docker":
        return request.getfixturevalue("docker_runtime")
    return request.getfixturevalue("podman_backend")


@pytest.fixture(scope="session")
def demo_repo(tmp_path_factory):
    """The embedded demo repository (textkit), built once per session; a :class:`DemoRepo`.

    Treat it as read-only: clone or export it before checking out, patching or running tests.
    """
    from repo2env.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def js_demo_repo(tmp_path_factory):
    """The embedded JavaScript demo repository (fmtkit), built once per session; a :class:`DemoRepo`.

    Treat it as read-only, like :func:`demo_repo`.
    """
    from repo2env.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("js-demo"), "javascript")


def mine_and_build(docker_client, demo, folder: Path) -> None:
    """A demo repository mined into ``folder`` and built (env + task images), every task of it."""
    from repo2env.mine.git import GitSource
    from repo2env.mine.miner import mine
    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.build import BuildOptions

    mine(GitSource(demo.path, issues_path=demo.issues_path), folder)
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client), options=BuildOptions(jobs=2))
    assert summary.failed == 0, summary.failures


def mine_and_build_one(docker_client, repo: Path, name: str, tasks_dir: Path):
    """A repository the test built, whose history has one PR and no issues, mined as ``name`` into
    ``tasks_dir`` and built: its one task, built (the build's error otherwise)."""
    from repo2env.jsonl import read_tasks
    from repo2env.mine.git import GitSource
    from repo2env.mine.miner import MineOptions, mine
    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.backends.docker import DockerBackend

    mined = mine(GitSource(repo, repo=name), tasks_dir, MineOptions(allow_no_issue=True))
    assert len(mined.new_tasks) == 1, mined.funnel.rejections
    summary = build_tasks_dir(tasks_dir, runtime=DockerBackend(docker_client))
    (task,) = read_tasks(tasks_dir / "tasks.jsonl")
    assert summary.ok == 1, task.env_spec.error
    return task


#: The demo's recorded rows, verdicts, tests and rewards (tests/test_demo_expected.py says how it is kept).
DEMO_EXPECTED = Path(__file__).resolve().parent / "data" / "demo_expected.json"


def demo_expected() -> dict:
    """tests/data/demo_expected.json, read."""
    return json.loads(DEMO_EXPECTED.read_text())


def copy_tasks_folder(source: Path, folder: Path) -> None:
    """What validating a built tasks folder again needs of it, copied (the built one stays as built)."""
    for name in ("tasks.jsonl", "source.json", "funnel.json"):
        shutil.copy(source / name, folder / name)


@pytest.fixture(scope="session")
def built_demo(docker_client, demo_repo, tmp_path_factory):
    """The demo mined and built (env + task images) once per run: (tasks folder, {pull: Task})."""
    from repo2env.jsonl import read_tasks

    # The lock demo_run's build of the same tags takes too.
    folder = shared_by_workers(tmp_path_factory, "built-demo", lambda into: mine_and_build(docker_client, demo_repo, into),
                               lock="textkit-images")
    return folder, {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")}


@pytest.fixture(scope="session")
def built_js_demo(docker_client, js_demo_repo, tmp_path_factory):
    """fmtkit mined and built (env + task images) once per run: (tasks folder, {pull: Task})."""
    from repo2env.jsonl import read_tasks

    folder = shared_by_workers(tmp_path_factory, "built-js-demo",
                               lambda into: mine_and_build(docker_client, js_demo_repo, into))
    return folder, {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")}


@pytest.fixture(scope="session")
def validated_js_demo(docker_client, built_js_demo, tmp_path_factory):
    """The built fmtkit tasks validated (default policy) once per run, in a copy of their folder:
    (tasks folder, {pull: Task})."""
    from repo2env.jsonl import read_tasks
    from repo2env.pipeline.stages import validate_dir
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.validate.acceptance import load_acceptance_policy

    def validate(folder: Path) -> None:
        copy_tasks_folder(built_js_demo[0], folder)
        validate_dir(folder, DockerBackend(docker_client), load_acceptance_policy("default"), jobs=2)

    folder = shared_by_workers(tmp_path_factory, "validated-js-demo", validate)
    return folder, {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")}


@pytest.fixture(scope="session")
def accepted_js_task(built_js_demo, tmp_path_factory):
    """A built fmtkit (mocha) task, pull 10, accepted with the demo's ground truth as its FAIL_TO_PASS
    and PASS_TO_PASS (standing for a validation, which :func:`validated_js_demo` runs at a cost), for
    the exports: (a folder whose tasks.jsonl holds it alone, the task). Read-only."""
    from repo2env.demo import JS_DEMO_PULLS
    from repo2env.jsonl import write_jsonl
    from repo2env.models import RolloutResult, ValidationReport

    _, tasks = built_js_demo
    (pull,) = [pull for pull in JS_DEMO_PULLS if pull.number == 10]
    validation = ValidationReport(verdict="accepted", reasons=[], policy="default", reward_mean=0.5,
                                  rollouts=[RolloutResult(kind="gold", reward=1.0), RolloutResult(kind="null", reward=0.0)])
    task = tasks[10].model_copy(update={"FAIL_TO_PASS": list(pull.fail_to_pass), "PASS_TO_PASS": list(pull.pass_to_pass),
                                        "validation": validation})
    folder = tmp_path_factory.mktemp("accepted-js")
    write_jsonl(folder / "tasks.jsonl", [task])
    return folder, task


@pytest.fixture(scope="session")
def podman_demo(built_demo, podman_backend, docker_client, tmp_path_factory):
    """The built demo's env and task images moved to podman (``docker save | podman load``: the
    same image ids, so the tasks' recorded digests hold there): the podman backend, ready to run them."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.transfer import transfer_images

    _, tasks = built_demo
    wanted = sorted({ref for task in tasks.values() for ref in (task.env_spec.env_image, task.env_spec.image)})
    # One worker at a time: the others find the images there, with the same ids.
    with exclusive(tmp_path_factory, "podman-demo"):
        missing = [ref for ref in wanted if (podman_backend.images.get(ref) or None) is None
                   or podman_backend.images.get(ref).id != DockerBackend(docker_client).images.get(ref).id]
        if missing:
            transfer_images(DockerBackend(docker_client), podman_backend, missing)
    return podman_backend


@pytest.fixture(params=BACKEND_NAMES)
def demo_backend(request, built_demo):
    """Each backend in turn, with the built demo's images on it."""
    if request.param == "docker":
        return request.getfixturevalue("docker_runtime")
    return request.getfixturevalue("podman_demo")


@pytest.fixture(scope="session")
def demo_run(docker_client, tmp_path_factory):
    """``repo2env demo run --out generated/demo`` (what ``make demo`` runs, relative folder and all),
    once per run in a fresh folder: (the folder it ran in, the finished process). Treat the demo's
    output as read-only (another worker may be reading it): resume in a copy."""
    import sys

    command = [sys.executable, "-m", "repo2env", "demo", "run", "--out", "generated/demo"]

    def run(folder: Path) -> None:
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=3600)
        (folder / "process.json").write_text(json.dumps({"returncode": done.returncode, "stdout": done.stdout,
                                                         "stderr": done.stderr}))

    # The demo builds the same image tags as built_demo: never both at once.
    folder = shared_by_workers(tmp_path_factory, "demo-run", run, lock="textkit-images")
    process = json.loads((folder / "process.json").read_text())
    return folder, subprocess.CompletedProcess(command, **process)


@pytest.fixture(scope="session")
def graded_demo(built_demo, demo_repo):
    """Built demo tasks with FAIL_TO_PASS / PASS_TO_PASS set from the demo's declared ground truth
    (what validation derives), ready for the grader: {pull number: Task}."""
    truth = {pull.number: pull for pull in demo_repo.pulls}
    _, tasks = built_demo
    return {number: task.model_copy(update={"FAIL_TO_PASS": list(truth[number].fail_to_pass),
                                            "PASS_TO_PASS": list(truth[number].pass_to_pass)})
            for number, task in tasks.items()}


@pytest.fixture(scope="session")
def grader(docker_client, tmp_path_factory):
    """A Grader on the session's engine, logging under a temp folder."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.verify.grader import Grader

    return Grader(DockerBackend(docker_client), tmp_path_factory.mktemp("grades"), timeout_s=120)


def quick_policy():
    """The default policy, lighter on reruns of the reference rollouts so the suite stays quick; the
    F2P/P2P derivation keeps its three shuffled runs under different hash seeds."""
    from repo2env.validate.acceptance import load_acceptance_policy

    return load_acceptance_policy("default").model_copy(update={"gold_runs": 1, "partial_limit": 2,
                                                                "near_miss_limit": 2, "stub_limit": 2})


@pytest.fixture(scope="session")
def validated(built_demo, docker_client, tmp_path_factory):
    """The built demo validated once per run (quick policy): (tasks folder, {pull: record}).
    Treat it as read-only: copy the folder before validating again in it."""
    from repo2env.pipeline.stages import validate_dir
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.validate.run import read_records

    def validate(folder: Path) -> None:
        copy_tasks_folder(built_demo[0], folder)
        validate_dir(folder, DockerBackend(docker_client), quick_policy(), jobs=2)

    folder = shared_by_workers(tmp_path_factory, "validated", validate)
    records = {int(record.instance_id.rsplit("-", 1)[1]): record for record in read_records(folder / "validation.jsonl")}
    return folder, records


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory):
    """The package built as a wheel (once a session) and unpacked: (its file names, the folder to
    put on PYTHONPATH), for tests that package data loads without the source tree."""
    import shutil
    import subprocess
    import sys
    import zipfile

    root = tmp_path_factory.mktemp("wheel")
    project = root / "project"  # a copy: building writes build/ and egg-info next to the sources
    shutil.copytree(Path(__file__).resolve().parents[1], project, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "generated", "build", "*.egg-info", "__pycache__", ".pytest_cache", "tests"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(root), str(project)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = next(root.glob("repo2env_rl-*.whl"))
    unpacked = root / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    return set(zipfile.ZipFile(wheel).namelist()), unpacked


@contextlib.contextmanager
def running_registry(folder: Path) -> Iterator[str]:
    """A registry (the distribution registry's binary, Debian's docker-registry) serving plain HTTP
    on 127.0.0.1, which dockerd trusts without insecure-registries and the podman backend reaches
    without TLS, storing under ``folder``; yields its address (host:port). Skips (fails in CI) where
    the binary is missing: ``make registry``."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        message = "no registry binary: 'apt-get install docker-registry' (make registry)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = folder / "registry.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'store'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    server = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"the registry did not start: {server.stderr.read1().decode() if server.poll() is not None else ''}")
        yield address
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def local_registry(tmp_path):
    """A registry of the test's own (see :func:`running_registry`): its address."""
    with running_registry(tmp_path) as address:
        yield address


@pytest.fixture(scope="session")
def session_registry(tmp_path_factory):
    """One local registry for the session (see :func:`running_registry`)."""
    with running_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


@pytest.fixture(scope="session")
def published_demo(validated, tmp_path_factory):
    """The validated demo published to a folder once a session (rows, Harbor task folders, card,
    manifest): (folder, {instance_id: row}), rows in dataset order. Read-only."""
    from repo2env.envs.catalog import TaskCatalog
    from repo2env.publish.dataset import PublishOptions, publish_to_folder

    folder, _ = validated
    target = tmp_path_factory.mktemp("published") / "demo-envs"
    publish_to_folder([folder], target, PublishOptions(name="demo-envs"))
    catalog = TaskCatalog.from_published(target)
    return target, {task_id: catalog.row(task_id) for task_id in catalog.task_ids}
