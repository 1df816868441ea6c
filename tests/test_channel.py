"""The persistent command channel into a sandbox, on a real container: commands, timeouts that kill
the whole process group, output caps, latency below a docker exec, and a dead server detected."""

from __future__ import annotations

import statistics
import time

import pytest

from repo2env.runtime.channel import ChannelClosed, CommandChannel

pytestmark = pytest.mark.docker

BASE = "repo2env/base:py3.11"


@pytest.fixture
def sandbox(docker_runtime):
    with docker_runtime.start_image(BASE, labels={"repo2env.test": "channel"}) as sandbox:
        yield sandbox


def _channel(sandbox) -> CommandChannel:
    return CommandChannel(sandbox.client, sandbox.id, user=sandbox.limits.user, workdir="/tmp",
                          environment={"HOME": "/home/agent"})


def test_commands_run_as_the_agent_with_exit_codes_and_output(sandbox):
    channel = _channel(sandbox)
    result = channel.run("echo hello; id -un; pwd; exit 3", timeout=10, workdir="/", output_cap=10_000)
    assert (result.exit_code, result.output.split()) == (3, ["hello", "agent", "/"])
    assert channel.run("printf 'caf\\303\\251\\n'", timeout=10, workdir=None, output_cap=100).output == "café\n"
    assert channel.run(["ls", "/nonexistent"], timeout=10, workdir=None, output_cap=1000).exit_code == 2
    channel.close()


def test_timeout_kills_the_group_and_caps_hold(sandbox):
    channel = _channel(sandbox)
    began = time.monotonic()
    slow = channel.run("sleep 30 & sleep 30; echo never", timeout=1, workdir=None, output_cap=1000)
    assert slow.timed_out and slow.exit_code == 124 and time.monotonic() - began < 10
    assert "sleep 30" not in sandbox.exec("ps -eo args").output, "the whole group was killed"
    big = channel.run("head -c 100000 /dev/zero | tr '\\0' x", timeout=10, workdir=None, output_cap=1000)
    assert big.truncated and len(big.output) < 1100
    channel.close()


def test_the_channel_is_faster_than_an_exec(sandbox):
    channel = _channel(sandbox)
    through_channel, through_exec = [], []
    for _ in range(10):
        began = time.perf_counter()
        channel.run("true", timeout=10, workdir=None, output_cap=100)
        through_channel.append(time.perf_counter() - began)
        began = time.perf_counter()
        sandbox.exec("true")
        through_exec.append(time.perf_counter() - began)
    assert statistics.median(through_channel) < statistics.median(through_exec)
    channel.close()


def test_a_killed_server_is_detected(sandbox):
    channel = _channel(sandbox)
    with pytest.raises(ChannelClosed):
        channel.run("kill -9 $PPID; sleep 1", timeout=5, workdir=None, output_cap=100)
    with pytest.raises(ChannelClosed):
        channel.run("true", timeout=5, workdir=None, output_cap=100)
