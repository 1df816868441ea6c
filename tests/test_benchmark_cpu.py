"""The benchmarks' CPU accounting (benchmarks/cpu_use.py): where a stretch of validation spent the
machine's CPU, read from the kernel, the engine's cgroup and getrusage."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def cpu_use():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import cpu_use

        yield cpu_use
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_work_in_this_process_shows_as_busy_and_as_its_own(cpu_use):
    start = cpu_use.CpuUse.now()
    ends = time.process_time() + 0.3
    while time.process_time() < ends:
        pass
    spent = cpu_use.CpuUse.now().since(start)
    assert spent.own_s >= 0.25
    assert spent.busy_s is not None and spent.busy_s >= 0.2, "the kernel counts it too (/proc/stat)"


def test_shares_split_the_busy_time_and_say_nothing_without_the_sandboxes_figure(cpu_use):
    use = cpu_use.CpuUse(busy_s=10.0, sandboxes_s=4.0, own_s=1.0)
    assert use.shares() == pytest.approx({"sandboxes": 0.4, "own": 0.1, "rest": 0.5})
    assert cpu_use.CpuUse(busy_s=10.0, sandboxes_s=None, own_s=1.0).shares() is None
    assert cpu_use.CpuUse(busy_s=0.0, sandboxes_s=0.0, own_s=0.0).shares() is None
    both = use.plus(cpu_use.CpuUse(busy_s=2.0, sandboxes_s=None, own_s=0.5))
    assert both.sandboxes_s is None and both.own_s == 1.5, "an unknown part stays unknown"
    assert cpu_use.CpuUse.from_dict(use.as_dict()) == use


@pytest.mark.docker
def test_a_container_s_work_is_charged_to_the_sandboxes(cpu_use, docker_client):
    """Where the engine's parent cgroup is readable (cgroup v1, or v2 with the cgroupfs driver), a
    container's CPU shows there; elsewhere the figure is None and the benchmark says so."""
    start = cpu_use.CpuUse.now()
    if start.sandboxes_s is None:
        pytest.skip("the engine's parent cgroup is not readable here")
    image = next(tag for found in docker_client.images.list("repo2env/base") for tag in found.tags)
    docker_client.containers.run(image, ["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"],
                                 remove=True, network_mode="none")
    spent = cpu_use.CpuUse.now().since(start)
    assert spent.sandboxes_s >= 0.1
