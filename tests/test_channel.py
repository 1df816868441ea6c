"""The persistent command channel of a Docker sandbox (``SandboxLimits(persistent_channel=True)``), on
a real container: commands really go through it, in the same environment as a docker exec, faster;
the keepalive counts its commands as activity but not its idle server; a killed or confused server
costs one command, then commands go on (through a new channel, or docker exec after repeated kills).

What a channel must do like any sandbox (exit codes, timeouts, caps, user, files...) is proven by
tests/test_runtime_contract.py's ``docker-channel`` backend."""

from __future__ import annotations

import statistics
import time

import pytest

from repo2env.runtime.channel import SERVER_MARKER
from repo2env.runtime.sandbox import SandboxLimits

pytestmark = pytest.mark.docker

BASE = "repo2env/base:py3.11"
#: Prints what ran the command: the channel's server has SERVER_MARKER on its command line.
PARENT = "tr '\\0' ' ' < /proc/$PPID/cmdline"


def _start(runtime, **limits):
    return runtime.start_image(BASE, limits=SandboxLimits(persistent_channel=True, **limits),
                               labels={"repo2env.test": "channel"})


@pytest.fixture
def sandbox(docker_runtime):
    with _start(docker_runtime) as sandbox:
        yield sandbox


def test_commands_go_through_the_channel_in_the_same_environment_as_an_exec(docker_runtime, sandbox):
    assert SERVER_MARKER in sandbox.exec(PARENT).output
    assert SERVER_MARKER not in sandbox.exec(PARENT, user="root").output, "another user's command uses docker exec"
    assert SERVER_MARKER not in sandbox._exec(PARENT, timeout=10, errors="replace", through_channel=False).output
    probe = "env | grep -v -e ^HOSTNAME= -e ^PWD= | sort; umask; ulimit -a; id; pwd; cat /proc/self/oom_score_adj"
    with docker_runtime.start_image(BASE) as plain:
        assert SERVER_MARKER not in plain.exec(PARENT).output
        assert sandbox.exec(probe).output == plain.exec(probe).output
        assert sandbox.exec(probe, workdir="/tmp", env={"A": "1"}).output == plain.exec(probe, workdir="/tmp", env={"A": "1"}).output


def test_the_channel_is_faster_than_an_exec(sandbox):
    through_channel, through_exec = [], []
    for _ in range(15):
        began = time.perf_counter()
        sandbox.exec("true")
        through_channel.append(time.perf_counter() - began)
        began = time.perf_counter()
        sandbox._exec("true", timeout=10, errors="replace", through_channel=False)
        through_exec.append(time.perf_counter() - began)
    channel_p50, exec_p50 = statistics.median(through_channel), statistics.median(through_exec)
    print(f"command p50: channel {channel_p50 * 1000:.1f} ms, docker exec {exec_p50 * 1000:.1f} ms")
    assert channel_p50 < exec_p50 / 2


def test_a_killed_or_confused_server_costs_one_command(sandbox):
    killed = sandbox.exec("echo before; kill -9 $PPID; sleep 1; echo after")
    assert killed.exit_code == 137 and "channel broke" in killed.output
    again = sandbox.exec(f"id -un; {PARENT}")
    assert again.exit_code == 0 and again.output.startswith("agent\n") and SERVER_MARKER in again.output
    # Bytes written into the server's answer stream from inside (the agent's own user may do that).
    garbage = sandbox.exec("printf 'garbage\\n' > /proc/$PPID/fd/1; echo hidden")
    assert garbage.exit_code == 137 and "hidden" not in garbage.output
    # A stray answer written by a process the command left behind, between two commands.
    sandbox.exec("(sleep 0.5; printf '{\"id\": null}\\n' > /proc/$PPID/fd/1) >/dev/null 2>&1 &")
    time.sleep(1.5)
    assert sandbox.exec("echo fine").output == "fine\n", "a channel found dirty before sending is replaced"
    # An agent that keeps killing its channel ends up on docker exec, which still works.
    for _ in range(3):
        sandbox.exec("kill -9 $PPID")
    fallback = sandbox.exec(f"id -un; {PARENT}")
    assert fallback.exit_code == 0 and fallback.output.startswith("agent\n") and SERVER_MARKER not in fallback.output


def test_timeouts_hold_when_the_command_leaves_the_group(sandbox):
    began = time.monotonic()
    escaped = sandbox.exec("setsid sleep 60 & sleep 60", timeout=1)
    assert escaped.timed_out and time.monotonic() - began < 8
    assert sandbox.exec("pgrep -x sleep || echo none").output.strip() == "none"


def test_the_idle_server_is_not_activity_but_its_commands_are(docker_runtime):
    from repo2env.errors import SandboxStoppedError

    with _start(docker_runtime, idle_timeout_s=1) as sandbox:
        assert sandbox.exec("sleep 11; echo done", timeout=30).output == "done\n"
        for _ in range(4):  # short commands, closer together than the keepalive looks
            time.sleep(3)
            assert sandbox.exec("true").exit_code == 0
        began = time.monotonic()
        while sandbox.alive and time.monotonic() - began < 30:
            time.sleep(0.5)
        assert not sandbox.alive and time.monotonic() - began < 20, "the open channel kept the sandbox alive"
        with pytest.raises(SandboxStoppedError, match="without a command"):
            sandbox.exec("true")


def test_grading_never_uses_a_channel(tmp_path):
    """Asked for one, the grader still runs the hidden tests through the engine: a channel's server
    would run as the agent, beside the tests' code (the probes in test_hacks.py check the sandbox)."""
    from repo2env.verify.grader import Grader

    grader = Grader(None, tmp_path, limits=SandboxLimits(persistent_channel=True, output_cap_bytes=123))
    assert not grader.limits.persistent_channel and grader.limits.output_cap_bytes == 123
