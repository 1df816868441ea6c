"""The backend registry and the image contract every backend passes (docker, podman), on real engines.

The sandbox contract is tests/test_runtime_contract.py; this file is the rest of a backend: its
name, its selection (``--backend``, ``REPO2ENV_BACKEND``, a pipeline spec), its line in ``doctor``,
its images (build, find, list, tag, remove, save, load, import a root filesystem), the move of
images between backends, and a grading of the demo on each backend.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

from repo2env.errors import BackendUnavailableError, InputError, Repo2EnvError
from repo2env.runtime.backend import Backend, BackendSettings, Images
from repo2env.runtime.backends import BACKENDS, backend_name, open_backend, preflight

BASE = "repo2env/base:py3.11"


def repo2env(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repo2env", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


# --- the registry and the selection ---------------------------------------------------------------


def test_names_come_from_the_caller_the_variable_or_the_default(monkeypatch):
    monkeypatch.delenv("REPO2ENV_BACKEND", raising=False)
    assert backend_name() == "docker" and backend_name("podman") == "podman"
    monkeypatch.setenv("REPO2ENV_BACKEND", "Podman ")
    assert backend_name() == "podman" and backend_name("docker") == "docker", "the caller's name wins"
    monkeypatch.setenv("REPO2ENV_BACKEND", "lxc")
    with pytest.raises(InputError, match="REPO2ENV_BACKEND='lxc': no such backend"):
        backend_name()
    with pytest.raises(InputError, match="use one of: docker, podman"):
        open_backend("kubernetes")
    assert set(BACKENDS) == {"docker", "podman"}


def test_a_backend_this_machine_lacks_is_one_line_everywhere(tmp_path):
    """podman missing (here: a binary that does not exist) is a line in doctor and a one-line error
    for every command that selects it, never a traceback."""
    missing = {"REPO2ENV_PODMAN": str(tmp_path / "no-podman"), "REPO2ENV_BACKEND": ""}
    line = preflight("podman", BackendSettings(podman_command=str(tmp_path / "no-podman")))
    assert not line.ok and "podman is not installed" in line.detail and "apt-get install podman" in line.fix
    with pytest.raises(BackendUnavailableError, match="podman is not installed"):
        open_backend("podman", BackendSettings(podman_command=str(tmp_path / "no-podman")))
    for command in (["images", "ls"], ["build", "--from", str(tmp_path)], ["runtime", "bootstrap"]):
        result = repo2env("--backend", "podman", *command, env=missing)
        assert result.returncode == 1, (command, result.stderr)
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("error: podman is not installed"), (command, result.stderr)
    unknown = repo2env("--backend", "lxc", "images", "ls")
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: backend 'lxc': no such backend")
    assert "Traceback" not in unknown.stderr


@pytest.mark.docker
def test_doctor_shows_one_line_per_backend(docker_client, tmp_path):
    """Each backend has its line; only the selected one decides whether the machine is ready."""
    result = repo2env("doctor", "--json", env={"REPO2ENV_PODMAN": str(tmp_path / "no-podman"), "REPO2ENV_BACKEND": ""})
    report = json.loads(result.stdout)
    checks = {check["name"]: check for check in report["checks"]}
    assert report["backend"] == "docker" and report["ready"] and result.returncode == 0
    assert checks["backend docker"]["ok"] and "Docker" in checks["backend docker"]["detail"]
    podman = checks["backend podman"]
    assert not podman["ok"] and "not installed" in podman["detail"] and "apt-get install podman" in podman["fix"]
    selected = repo2env("--backend", "podman", "doctor", "--json", env={"REPO2ENV_PODMAN": str(tmp_path / "no-podman")})
    assert selected.returncode == 1 and json.loads(selected.stdout)["ready"] is False, "a selected backend that is missing"


@pytest.mark.docker
def test_the_engine_gets_a_short_wait_to_answer_and_a_long_one_per_request(docker_client):
    """Once the engine answered, one request may take the settings' request timeout: a 10 s
    socket timeout on every call crashed a real-repository build (an image removal beside npm
    installs) with a ReadTimeout traceback."""
    from repo2env.runtime.backends.docker import DockerBackend

    opened = open_backend("docker", BackendSettings(connect_timeout_s=3.0, request_timeout_s=77.0))
    assert opened.client.api.timeout == 77.0
    assert DockerBackend().client.api.timeout == BackendSettings.request_timeout_s >= 60


@pytest.mark.docker
def test_doctor_on_podman_finds_its_base_image(podman_backend):
    result = repo2env("--backend", "podman", "doctor", "--json")
    report = json.loads(result.stdout)
    checks = {check["name"]: check for check in report["checks"]}
    assert report["backend"] == "podman" and report["ready"], result.stdout
    assert "runtime runc" in checks["backend podman"]["detail"]
    assert checks[f"base image {BASE}"]["ok"]


# --- the image contract -----------------------------------------------------------------------------


def _context(tmp_path, dockerfile: str):
    context = tmp_path / "context"
    context.mkdir(exist_ok=True)
    (context / "Dockerfile").write_text(dockerfile)
    (context / "hello.txt").write_text("hello from the context\n")
    return context


@pytest.mark.docker
def test_images_build_find_list_tag_and_remove(any_backend, tmp_path):
    backend: Backend = any_backend
    assert isinstance(backend.images, Images) and isinstance(backend, Backend)
    tag = f"repo2env-test/{backend.name}-contract:{os.getpid()}"
    other = f"repo2env-test/{backend.name}-contract:{os.getpid()}-again"
    context = _context(tmp_path, f"FROM {BASE}\nARG GREETING\nCOPY hello.txt /opt/hello.txt\n"
                                 "RUN echo \"$GREETING\" > /opt/greeting && test -s /opt/hello.txt\n")
    try:
        outcome = backend.images.build(context, tag, labels={"repo2env.kind": "contract", "repo2env.test": "images"},
                                       build_args={"GREETING": "bonjour"})
        assert outcome.error is None, outcome.log
        image = backend.images.get(tag)
        assert image is not None and image.id.startswith("sha256:") and len(image.id) == 71
        assert tag in image.tags and image.labels["repo2env.kind"] == "contract" and image.size_bytes > 2**20
        assert backend.images.get(image.id).id == image.id, "found by its id too"
        listed = backend.images.list(labels=["repo2env.kind=contract", "repo2env.test=images"])
        assert [found.id for found in listed] == [image.id] and tag in listed[0].tags
        assert not backend.images.list(labels=["repo2env.kind=contract", "repo2env.test=nothing"])
        assert BASE in {tag for found in backend.images.list(repository="repo2env/base") for tag in found.tags}
        backend.images.tag(tag, other)
        assert other in backend.images.get(tag).tags
        assert backend.images.remove(other) and backend.images.get(other) is None
        assert backend.images.get(tag) is not None, "removing one name keeps the image's other names"
        with backend.start_image(tag) as sandbox:
            assert sandbox.exec("cat /opt/greeting /opt/hello.txt").output == "bonjour\nhello from the context\n"
            assert not backend.images.remove(tag), "an image a container uses stays"
        assert backend.images.remove(tag) and backend.images.get(tag) is None
        assert backend.images.remove(tag), "removing what is gone is done"

        failed = backend.images.build(_context(tmp_path, f"FROM {BASE}\nRUN echo broken-on-purpose && exit 3\n"), tag)
        assert failed.error and "broken-on-purpose" in "\n".join(failed.log)
        assert backend.images.get(tag) is None
    finally:
        for name in (tag, other):
            backend.images.remove(name, force=True)


@pytest.mark.docker
def test_images_move_between_backends_with_their_ids(docker_runtime, podman_backend, tmp_path):
    """docker save | podman load, and back: the id (the content) is kept, so a recorded digest holds."""
    from repo2env.runtime.transfer import transfer_images

    tag = f"repo2env-test/moved:{os.getpid()}"
    context = _context(tmp_path, f"FROM {BASE}\nCOPY hello.txt /opt/hello.txt\nLABEL repo2env.test=moved\n")
    try:
        assert docker_runtime.images.build(context, tag).error is None
        built = docker_runtime.images.get(tag)
        assert transfer_images(docker_runtime, podman_backend, [tag]) == [tag]
        moved = podman_backend.images.get(tag)
        assert moved.id == built.id and moved.labels["repo2env.test"] == "moved" and moved.tags == (tag,)
        docker_runtime.images.remove(tag, force=True)
        assert transfer_images(podman_backend, docker_runtime, [tag]) == [tag], "names stay as written (no localhost/)"
        assert docker_runtime.images.get(tag).id == built.id
        with pytest.raises(InputError, match="no image"):
            transfer_images(docker_runtime, podman_backend, ["repo2env-test/never-built:1"])
    finally:
        docker_runtime.images.remove(tag, force=True)
        podman_backend.images.remove(tag, force=True)


@pytest.mark.docker
def test_a_root_filesystem_imports_as_an_image(any_backend, tmp_path):
    """What bootstrap does with debootstrap's tree, here with the base image's own files."""
    tag = f"repo2env-test/{any_backend.name}-rootfs:{os.getpid()}"
    (tmp_path / "rootfs.tar").write_bytes(_rootfs_tar({"etc/os-release": b"ID=repo2env-test\n",
                                                       "opt/marker": b"imported\n"}))
    try:
        any_backend.images.import_rootfs(tmp_path / "rootfs.tar", tag)
        image = any_backend.images.get(tag)
        assert image is not None and tag in image.tags and image.size_bytes < 2**20
    finally:
        any_backend.images.remove(tag, force=True)


@pytest.mark.docker
def test_images_push_to_a_registry_and_pull_back_by_digest(any_backend, local_registry, tmp_path):
    """What publish --push-images and pull do, on each backend: the digest pins the very image."""
    tag = f"repo2env-test/{any_backend.name}-pushed:{os.getpid()}"
    (tmp_path / "rootfs.tar").write_bytes(_rootfs_tar({"etc/pushed": f"{time.time()}\n".encode()}))
    any_backend.images.import_rootfs(tmp_path / "rootfs.tar", tag)
    original = any_backend.images.get(tag)
    target = f"{local_registry}/repo2env-test/pushed:{any_backend.name}"
    pulled_ref = ""
    try:
        any_backend.images.tag(tag, target)
        digest = any_backend.images.push(target)
        assert digest.startswith("sha256:") and len(digest) == 71
        any_backend.images.remove(target)
        any_backend.images.remove(tag)
        pulled_ref = f"{target.rpartition(':')[0]}@{digest}"
        pulled = any_backend.images.pull(pulled_ref)
        assert pulled.id == original.id, "the same content, so a recorded image id holds after a pull"
        with pytest.raises(Repo2EnvError, match="no registry serves"):
            any_backend.images.pull(f"{local_registry}/repo2env-test/never-pushed:1")
    finally:
        for ref in (tag, target):
            any_backend.images.remove(ref, force=True)
        if pulled_ref and any_backend.images.get(original.id) is not None:
            any_backend.images.remove(original.id, force=True)


def _rootfs_tar(files: dict[str, bytes]) -> bytes:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, payload in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(payload), int(time.time())
            tar.addfile(info, io.BytesIO(payload))
    return archive.getvalue()


@pytest.mark.docker
def test_a_sandbox_closed_without_waiting_at_exit_is_still_removed(any_backend):
    """A program's own exit hook (a server's, a trainer's) closing a sandbox with wait=False runs
    after the interpreter's thread pools stopped taking work: the removal happens all the same."""
    program = ("import atexit\n"
               "from repo2env.runtime.backends import open_backend\n"
               f"sandbox = open_backend().start_image({BASE!r}, labels={{'repo2env.test': 'exit-close'}})\n"
               "atexit.register(lambda: sandbox.close(wait=False))\n"
               "print(sandbox.id, flush=True)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "REPO2ENV_BACKEND": any_backend.name})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    started = result.stdout.strip()
    assert started and started not in {record.id for record in any_backend.sandboxes(labels=["repo2env.test=exit-close"])}


# --- the demo on every backend ----------------------------------------------------------------------


@pytest.mark.docker
def test_the_demo_grades_the_same_on_every_backend(graded_demo, demo_backend, tmp_path):
    """The hidden verifier on each backend: gold 1.0, nothing 0.0, a half fix in between, the same."""
    from repo2env.verify.grader import Grader

    task = graded_demo[2]
    with Grader(demo_backend, tmp_path / "grades", timeout_s=120) as grader:
        gold = grader.grade(task, task.patch)
        empty = grader.grade(task, "")
    assert (gold.reward, gold.resolved, gold.error) == (1.0, True, None), gold
    assert empty.reward == 0.0 and not empty.resolved
    assert set(gold.tests.values()) == {"passed"} and set(empty.tests.values()) != {"passed"}
