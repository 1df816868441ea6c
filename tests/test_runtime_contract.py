"""The contract of :mod:`repo2env.runtime.sandbox`: what every backend must do, whatever it runs on.

The stages (grader, derivation, validation, the agent's tools, RepoEnv, the build's checks) rely on
exactly this. Each test runs once per backend of :data:`BACKENDS`; a new backend adds its entry (a
backend of :mod:`repo2env.runtime.backends` whose engine has the base image: Python, git and a
writable /testbed owned by the unprivileged ``agent`` user) and must pass unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import os
import subprocess
import tarfile
import threading
import time

import pytest

from repo2env.errors import InputError, Repo2EnvError, SandboxStoppedError
from repo2env.models import EnvSpec, Task
from repo2env.runtime.backend import Backend
from repo2env.runtime.ownership import (
    OWNER_HOST_LABEL,
    OWNER_PID_LABEL,
    OWNER_STARTED_LABEL,
    host_id,
    process_start_time,
    reap_orphans,
)
from repo2env.runtime.sandbox import Runtime, Sandbox, SandboxLimits

pytestmark = pytest.mark.docker

BASE = "repo2env/base:py3.11"
#: Backends under contract: each backend with and without the persistent command channel
#: RepoEnv's tool calls use (SandboxLimits.persistent_channel): the same contract, faster.
BACKENDS = ("docker", "docker-channel", "podman", "podman-channel")


@pytest.fixture(params=BACKENDS)
def runtime(request) -> Runtime:
    name, _, channel = request.param.partition("-")
    limits = SandboxLimits(persistent_channel=bool(channel))
    if name == "docker":
        from repo2env.runtime.backends.docker import DockerBackend

        return DockerBackend(request.getfixturevalue("docker_client"), limits=limits)
    if name == "podman":
        backend = copy.copy(request.getfixturevalue("podman_backend"))
        backend.limits = limits
        return backend
    raise AssertionError(f"unknown backend {request.param}")


def _start(runtime: Runtime, **changes) -> Sandbox:
    return runtime.start_image(BASE, limits=dataclasses.replace(runtime.limits, **changes),
                               labels={"repo2env.test": "contract"})


@pytest.fixture
def sandbox(runtime):
    with _start(runtime) as sandbox:
        yield sandbox


def _tar(*members: tuple[str, int, int, bytes | None]) -> bytes:
    """A tar of (name, uid, mode, content) members; content None makes a folder."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, uid, mode, content in members:
            info = tarfile.TarInfo(name)
            info.uid = info.gid = uid
            info.mode = mode
            info.mtime = int(time.time())
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return archive.getvalue()


def test_a_sandbox_is_the_protocol(sandbox):
    assert isinstance(sandbox, Sandbox)
    assert sandbox.alive and sandbox.id
    assert sandbox.limits.user == "agent"


def test_exec_a_shell_string_or_an_argv_with_exit_codes(sandbox):
    result = sandbox.exec("echo hello; echo oops >&2; exit 3")
    assert (result.exit_code, result.output, result.timed_out, result.truncated) == (3, "hello\noops\n", False, False)
    assert result.duration_s >= 0
    # One stream in the order it was written, however stdout and stderr alternate.
    alternating = sandbox.exec("for i in $(seq 40); do echo out$i; echo err$i >&2; done")
    assert alternating.output == "".join(f"out{i}\nerr{i}\n" for i in range(1, 41))
    argv = sandbox.exec(["python3", "-c", "import sys; print(sys.argv[1:])", "two words", "$HOME", "'q'"])
    assert (argv.exit_code, argv.output) == (0, "['two words', '$HOME', \"'q'\"]\n")
    assert sandbox.exec(["no-such-program"]).exit_code == 127
    assert sandbox.exec("printf 'caf\\303\\251 \\377\\n'").output == "café \ufffd\n", "UTF-8, bad bytes replaced"


def test_user_workdir_env_and_stdin(sandbox):
    assert sandbox.exec("id -un; pwd; echo $HOME").output.split() == ["agent", "/testbed", "/home/agent"]
    assert sandbox.exec("id -u", user="root").output.strip() == "0"
    assert sandbox.exec("pwd", workdir="/tmp").output.strip() == "/tmp"
    assert sandbox.exec("printf '%s|%s' \"$GREETING\" \"$HOME\"", env={"GREETING": "a b'c"}).output == "a b'c|/home/agent"
    payload = "line one\nsecond, ünïcode\n".encode() + bytes(range(1, 9))
    result = sandbox.exec("wc -c; id -un", stdin=payload)
    assert result.output.split() == [str(len(payload)), "agent"]
    big = bytes(range(256)) * 1200  # larger than one argument or one pipe buffer
    assert sandbox.exec(["sha256sum"], stdin=big).output.split()[0] == hashlib.sha256(big).hexdigest()
    assert sandbox.exec("cat; echo end").output == "end\n", "no stdin given: the command reads end of input"
    assert "stdin" not in sandbox.exec("ls -A /tmp").output, "stdin leaves no file behind"


def _no_agent_sleep_left(sandbox) -> bool:
    """Whether no ``sleep`` of the agent is left. Killed at once, but a killed process stays listed
    until the container's init reaps it, which a loaded machine may delay a moment; one that escaped
    the kill would be listed for its 60 s."""
    deadline = time.monotonic() + 5
    while (left := sandbox.exec("pgrep -u agent -x sleep || echo none").output.strip()) != "none" \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    return left == "none"


def test_a_timeout_kills_the_whole_group_and_the_sandbox_goes_on(sandbox):
    began = time.monotonic()
    result = sandbox.exec("echo started; sleep 60 & sleep 60; echo never", timeout=1.0)
    assert result.timed_out and result.exit_code in (124, 137)
    assert result.output == "started\n"
    assert time.monotonic() - began < 10
    assert _no_agent_sleep_left(sandbox)
    stubborn = sandbox.exec("trap '' TERM; sleep 60", timeout=1.0)
    assert stubborn.timed_out and stubborn.exit_code in (124, 137)
    assert sandbox.exec("echo alive").output == "alive\n"


def test_an_idle_timeout_stops_a_command_whose_output_stopped_and_only_then(sandbox):
    """Once a command's output began, none for ``idle_timeout`` stops it (``stalled``, the agent's
    processes killed), long before its timeout; a command silent before its first output, or one
    that keeps writing, runs on."""
    began = time.monotonic()
    result = sandbox.exec("echo started; sleep 60; echo never", timeout=120, idle_timeout=2)
    assert result.stalled and not result.timed_out and result.exit_code == 137
    assert result.output == "started\n"
    assert time.monotonic() - began < 30
    assert _no_agent_sleep_left(sandbox), "the stalled command's processes are gone"
    late = sandbox.exec("sleep 3; echo late", timeout=60, idle_timeout=1)
    assert (late.stalled, late.exit_code, late.output) == (False, 0, "late\n"), "the idle clock starts at the first output"
    steady = sandbox.exec("for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done", timeout=60, idle_timeout=2)
    assert (steady.stalled, steady.exit_code, steady.output.split()) == (False, 0, list("123456"))


def test_output_is_capped_at_the_limit(runtime):
    with _start(runtime, output_cap_bytes=10_000) as sandbox:
        result = sandbox.exec("head -c 3000000 /dev/zero | tr '\\0' x; echo done >&2")
        assert result.exit_code == 0 and result.truncated
        assert result.output == "x" * 10_000, "the first cap bytes are kept"
        assert not sandbox.exec("head -c 10000 /dev/zero").truncated


def test_files_read_write_and_archives(sandbox):
    sandbox.write_file("/testbed/notes.txt", "héllo\nworld\n")
    assert sandbox.read_file("/testbed/notes.txt") == "héllo\nworld\n"
    assert sandbox.exec("stat -c %U:%a /testbed/notes.txt").output.strip() == "agent:644"
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("/testbed/missing.txt")
    with pytest.raises(FileNotFoundError):
        sandbox.write_file("/testbed/no/such/folder/x.txt", "x")

    sandbox.put_archive("/tmp", _tar(("inputs", 0, 0o755, None), ("inputs/grade.sh", 0, 0o644, b"echo graded\n"),
                                     ("private", 1000, 0o700, None), ("private/secret", 1000, 0o600, b"s3cret")))
    listing = sandbox.exec("stat -c '%n %U %a' /tmp/inputs /tmp/inputs/grade.sh /tmp/private /tmp/private/secret")
    assert listing.output.splitlines() == ["/tmp/inputs root 755", "/tmp/inputs/grade.sh root 644",
                                           "/tmp/private agent 700", "/tmp/private/secret agent 600"]
    assert sandbox.exec("echo forged > /tmp/inputs/grade.sh").exit_code != 0, "root's files stay root's"
    assert sandbox.exec(["/bin/sh", "/tmp/inputs/grade.sh"]).output == "graded\n"
    assert sandbox.exec("cat /tmp/private/secret").output == "s3cret"
    with pytest.raises(FileNotFoundError):
        sandbox.put_archive("/no/such/folder", _tar(("x", 0, 0o644, b"x")))
    # A tar writer pads to 10 KiB records: here the zeros after the end of the archive reach past
    # 32 KiB (podman 4.3's cp fails on that padding unless the backend trims it).
    padded = _tar(("padded.txt", 1000, 0o644, b"p" * 30_000))
    assert len(padded) == 40_960 and not padded[31_744:].strip(b"\0"), "the archive ends at 31 KiB, zeros after"
    sandbox.put_archive("/tmp", padded)
    assert sandbox.exec("wc -c < /tmp/padded.txt").output.strip() == "30000"


def test_diff_shows_every_kind_of_change_against_the_snapshot(sandbox):
    made = sandbox.exec("git init -q . && printf 'one\\n' > kept.txt && printf 'bye\\n' > gone.txt && git add -A && "
                        "git -c user.name=t -c user.email=t@example.com commit -qm snapshot", workdir="/testbed")
    assert made.exit_code == 0, made.output
    assert sandbox.diff() == ""
    assert sandbox.exec("printf 'two\\n' >> kept.txt && rm gone.txt && printf 'new\\n' > added.txt && "
                        "printf '\\000\\001\\002' > blob.bin && printf 'caf\\351\\n' > latin1.txt").exit_code == 0
    diff = sandbox.diff()
    assert "+two" in diff and "deleted file mode" in diff and "+new" in diff
    assert "GIT binary patch" in diff, "binary files are carried"
    assert "caf\udce9" in diff, "bytes that are not UTF-8 survive as surrogate escapes"
    # The diff applies to the snapshot and gives the same tree back.
    path = "/tmp/agent.diff"
    sandbox.put_archive("/tmp", _tar(("agent.diff", 1000, 0o644, diff.encode("utf-8", "surrogateescape"))))
    restored = sandbox.exec(f"git stash -q -u && git apply {path} && git add -A && git diff --cached --stat HEAD | tail -1")
    assert restored.exit_code == 0 and "5 files changed" in restored.output, restored.output


def test_two_diffs_of_one_sandbox_at_once_both_succeed(sandbox):
    """A group's early grading and the trainer's get_reward may ask one sandbox's diff at once
    (CI: 'index.lock: File exists'). A clean filter that pauses 3 s holds git's index lock while
    the second diff starts: both come back, the same."""
    made = sandbox.exec("git init -q . && printf 'one\\n' > kept.txt && git add -A && "
                        "git -c user.name=t -c user.email=t@example.com commit -qm snapshot && "
                        "git config filter.slow.clean 'touch /tmp/cleaning; sleep 3; cat' && "
                        "echo 'slow.txt filter=slow' > .gitattributes && echo changed > slow.txt", workdir="/testbed")
    assert made.exit_code == 0, made.output
    diffs: dict[str, object] = {}

    def first() -> None:
        try:
            diffs["first"] = sandbox.diff()
        except Exception as exc:  # noqa: BLE001 - compared below
            diffs["first"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    began = time.monotonic()
    while sandbox.exec("test -e /tmp/cleaning").exit_code != 0:
        assert time.monotonic() - began < 60, "the first diff never reached git add"
        time.sleep(0.1)
    second = sandbox.diff()  # the first one's git add holds the index lock now
    thread.join()
    assert diffs["first"] == second and "+changed" in second


def test_concurrent_commands_in_one_sandbox(sandbox):
    results = {}

    def slow() -> None:
        results["slow"] = sandbox.exec("sleep 5; echo slow")

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.3)
    began = time.monotonic()
    quick = sandbox.exec("echo quick")
    assert quick.output == "quick\n" and time.monotonic() - began < 3, "a command does not wait for another"
    thread.join()
    assert results["slow"].output == "slow\n"


def test_limits_network_capabilities_pids_and_memory(runtime, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the user's folder: nothing may appear in it (podman's conmon wrote an `oom` file)
    with _start(runtime, pids=64, memory="256m") as sandbox:
        assert sandbox.exec("ls /sys/class/net").output.split() == ["lo"]
        assert sandbox.exec("grep CapEff /proc/self/status").output.split()[-1] == "0000000000000000"
        assert sandbox.exec("grep NoNewPrivs /proc/self/status").output.split()[-1] == "1"
        quota = sandbox.exec("cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us")
        assert quota.output.split()[0] == "100000", "one CPU: 100 ms of every 100 ms period"
        assert sandbox.exec("ulimit -f").output.strip() == str(runtime.limits.disk_bytes // 512), "RLIMIT_FSIZE"
        assert sandbox.exec("su -c true root </dev/null").exit_code != 0
        forks = sandbox.exec("for i in $(seq 200); do sleep 5 & done; wait", timeout=3)
        assert "fork" in forks.output.lower() or "resource" in forks.output.lower()
        hog = sandbox.exec("python3 -c \"b = bytearray(1024 ** 3); print('allocated')\"", timeout=30)
        assert hog.exit_code != 0 and "allocated" not in hog.output
        assert sandbox.exec("echo still-here", timeout=30).output == "still-here\n"
    assert list(tmp_path.iterdir()) == []


def test_close_is_idempotent_and_final(runtime):
    sandbox = _start(runtime)
    sandbox.close()
    sandbox.close()
    sandbox.close(wait=False)
    assert not sandbox.alive
    with pytest.raises(Repo2EnvError):
        sandbox.exec("true")
    with pytest.raises(Repo2EnvError):
        sandbox.read_file("/testbed/x")
    with pytest.raises(RuntimeError), _start(runtime) as inner:
        assert inner.alive
        raise RuntimeError("a stage failed")
    assert not inner.alive, "leaving the with block closes the sandbox"
    assert not {sandbox.id, inner.id} & _listed(runtime, "contract"), "closed sandboxes are gone from the engine"


def test_start_refuses_a_task_that_is_not_built(runtime):
    task = Task(instance_id="acme__lib-1", repo="acme/lib", pull_number=1, base_commit="0" * 40,
                patch="", test_patch="", problem_statement="", created_at="2024-01-01T00:00:00Z",
                env_spec=EnvSpec(status="env_failed", error="no wheel"))
    with pytest.raises(InputError, match="failed to build"):
        runtime.start(task)


def _listed(runtime: Backend, test_label: str) -> set[str]:
    return {record.id for record in runtime.sandboxes(labels=[f"repo2env.test={test_label}"])}


def test_owners_are_labelled_and_orphans_reaped(runtime):
    """kill -9 skips every cleanup hook: a sandbox whose owner is provably dead (here: a start time
    that is not its pid's) is removed by the next reap; a live owner's stays."""
    # The ghost's owner is a process of this test, alive until the test kills it: on a shared engine,
    # any repo2env process reaps what is provably orphaned, so the ghost must not be one before.
    owner = subprocess.Popen(["sleep", "600"])
    with _start(runtime) as mine:
        record = next(record for record in runtime.sandboxes(labels=["repo2env.test=contract"]) if record.id == mine.id)
        assert record.labels[OWNER_PID_LABEL] == str(os.getpid()) and record.labels[OWNER_HOST_LABEL] == host_id()
        ghost = runtime.start_image(BASE, labels={"repo2env.test": "contract-ghost", OWNER_PID_LABEL: str(owner.pid),
                                                  OWNER_STARTED_LABEL: process_start_time(owner.pid)})
        name = next(record.name for record in runtime.sandboxes(labels=["repo2env.test=contract-ghost"])
                    if record.id == ghost.id)
        assert name not in reap_orphans(runtime, dry_run=True), "a live owner's sandbox is no orphan"
        owner.kill()
        owner.wait()
        assert name in reap_orphans(runtime), "its owner died: the next reap removes it"
        assert ghost.id not in _listed(runtime, "contract-ghost") and not ghost.alive
        assert mine.id in _listed(runtime, "contract") and mine.exec("echo here").output == "here\n"
        ghost.close()


def test_an_idle_sandbox_stops_itself_but_not_under_a_long_command(runtime):
    with _start(runtime, idle_timeout_s=1) as sandbox:
        # Longer than the idle lifetime and two looks of the keepalive: a running command is activity.
        assert sandbox.exec("sleep 11; echo done", timeout=30).output.strip() == "done"
        deadline = time.monotonic() + 20
        while sandbox.alive and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not sandbox.alive, "an idle sandbox ends itself"
        with pytest.raises(SandboxStoppedError, match="without a command"):
            sandbox.exec("true")


@pytest.mark.docker
@pytest.mark.parametrize("recorded, stopped", [
    ("0", True),  # the image's count, read: 30 MiB already there count against a 20 MiB cap
    (None, False),  # no count in the image: walked at the start, the 30 MiB are the baseline
    ("many bytes", False),  # not a number: walked at the start as well
])
def test_the_keepalive_takes_what_the_writable_places_hold_from_the_images_own_count(docker_client, recorded,
                                                                                   stopped):
    """A task image records what its writable places hold (images.baseline_command, last step); the
    keepalive reads it instead of walking them as the sandbox starts. An image whose record says 0
    while 30 MiB lie in /tmp shows that the record is what counts."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.backends.keepalive import BASELINE_PATH

    steps = [f"FROM {BASE}", "USER root", "RUN dd if=/dev/zero of=/tmp/seed bs=1M count=30 2>/dev/null"]
    if recorded is not None:
        steps.append(f"RUN mkdir -p /opt/repo2env && printf '%s' '{recorded}' > {BASELINE_PATH}")
    tag = "repo2env-test/baseline:" + hashlib.sha256("\n".join(steps).encode()).hexdigest()[:12]
    docker_client.images.build(fileobj=io.BytesIO("\n".join(steps).encode()), tag=tag, rm=True)
    runtime = DockerBackend(docker_client)
    limits = dataclasses.replace(runtime.limits, disk_bytes=20 * 2**20)
    with runtime.start_image(tag, limits=limits, labels={"repo2env.test": "contract"}) as sandbox:
        # Longer than two looks of the keepalive, writing nothing: only the baseline decides.
        ran = sandbox.exec("sleep 11; echo survived", timeout=30)
        assert ("survived" not in ran.output) == stopped, ran.output
        assert ("disk cap" in ran.output) == stopped, ran.output


def test_writing_past_the_disk_cap_stops_the_sandbox_cleanly(runtime):
    cap = 20 * 2**20
    with _start(runtime, disk_bytes=cap) as sandbox:
        one_file = sandbox.exec("dd if=/dev/zero of=/testbed/big bs=1M count=30 2>&1; echo status=$?")
        assert "File size limit exceeded" in one_file.output or "status=153" in one_file.output
        assert sandbox.exec("rm -f /testbed/big && echo ok").output.strip() == "ok"
        # Many files under the cap each, more than the cap together: the keepalive stops the sandbox.
        many = sandbox.exec("i=0; while [ $i -lt 10 ]; do dd if=/dev/zero of=/tmp/f$i bs=1M count=15 2>/dev/null;"
                            " i=$((i+1)); done; sleep 30; echo survived", timeout=60)
        assert "survived" not in many.output and many.exit_code != 0
        assert "disk cap" in many.output
        with pytest.raises(SandboxStoppedError, match="disk cap"):
            sandbox.exec("true")
