"""The Docker sandbox, on a real engine with the real base image."""

from __future__ import annotations

import time

import pytest

from repo2env.runtime.docker_backend import SANDBOX_LABEL
from repo2env.runtime.sandbox import SandboxLimits

pytestmark = pytest.mark.docker

BASE = "repo2env/base:py3.11"


def _sandbox_containers(client, test_label: str) -> list:
    return client.containers.list(all=True, filters={"label": [SANDBOX_LABEL, f"repo2env.test={test_label}"]})


def test_sandbox_runs_a_command_as_an_unprivileged_user_without_network(docker_runtime, docker_client):
    with docker_runtime.start_image(BASE, labels={"repo2env.test": "basics"}) as sandbox:
        result = sandbox.exec("echo hello; id -u; id -un; exit 3")
        assert result.exit_code == 3
        assert result.output.split() == ["hello", "1000", "agent"]
        assert not result.timed_out

        interfaces = sandbox.exec("ls /sys/class/net").output.split()
        assert interfaces == ["lo"], "a sandbox must have no network interface but loopback"
        dns = sandbox.exec("python -c \"import socket; socket.getaddrinfo('pypi.org', 443)\"")
        assert dns.exit_code != 0

        capabilities = sandbox.exec("grep CapEff /proc/self/status").output.split()
        assert capabilities[-1] == "0000000000000000"
        assert sandbox.exec("sudo true || su -c true").exit_code != 0
        assert _sandbox_containers(docker_client, "basics"), "the sandbox should exist while open"
    assert _sandbox_containers(docker_client, "basics") == [], "close() must remove the container"


def test_no_container_outlives_an_exception(docker_runtime, docker_client):
    with pytest.raises(RuntimeError):
        with docker_runtime.start_image(BASE, labels={"repo2env.test": "exception"}) as sandbox:
            assert sandbox.exec("true").exit_code == 0
            raise RuntimeError("agent crashed")
    assert _sandbox_containers(docker_client, "exception") == []


def test_timeout_kills_the_command_and_its_children(docker_runtime):
    with docker_runtime.start_image(BASE) as sandbox:
        started = time.monotonic()
        result = sandbox.exec("sleep 60 & sleep 60; echo never", timeout=1.0)
        assert result.timed_out
        assert "never" not in result.output
        assert time.monotonic() - started < 10
        leftovers = sandbox.exec("pgrep -u agent -x sleep || true").output.strip()
        assert leftovers == "", f"children of a timed-out command survived: {leftovers}"
        assert sandbox.exec("echo alive").output.strip() == "alive"


def test_output_is_capped(docker_runtime):
    limits = SandboxLimits(output_cap_bytes=10_000)
    with docker_runtime.start_image(BASE, limits=limits) as sandbox:
        result = sandbox.exec("head -c 3000000 /dev/zero | tr '\\0' x")
        assert result.exit_code == 0
        assert result.truncated
        assert len(result.output) == 10_000


def test_files_round_trip_and_belong_to_the_agent(docker_runtime):
    with docker_runtime.start_image(BASE) as sandbox:
        sandbox.write_file("/testbed/notes.txt", "héllo\nworld\n")
        assert sandbox.read_file("/testbed/notes.txt") == "héllo\nworld\n"
        assert sandbox.exec("stat -c %U /testbed/notes.txt").output.strip() == "agent"
        with pytest.raises(FileNotFoundError):
            sandbox.read_file("/testbed/missing.txt")


def test_limits_apply_to_pids(docker_runtime):
    with docker_runtime.start_image(BASE, limits=SandboxLimits(pids=64)) as sandbox:
        result = sandbox.exec("for i in $(seq 200); do sleep 5 & done; wait", timeout=3)
        assert "fork" in result.output.lower() or "resource" in result.output.lower()
        assert sandbox.exec("echo still-here").output.strip() == "still-here"


def test_base_image_reaches_the_package_index_through_the_host_ca_bundle(docker_runtime):
    """Builds (not sandboxes) get the network; pip must trust the host's CA bundle."""
    with docker_runtime.start_image(BASE, limits=SandboxLimits(network=True)) as sandbox:
        result = sandbox.exec("python -m pip download --no-deps -q -d /tmp/wheels six==1.16.0", timeout=120)
        assert result.exit_code == 0, result.output[-2000:]
