"""Environment throughput for training: RepoEnv under a scripted policy, N environments at once.

Targets (issue: feeding GRPO): with the warm pool, reset p50 within 1.5x the engine's exec floor (a
reset should cost one command, not a container start); tool-call p50 <= 10 ms.

Per N in (1, 2, 4, 8): N threads, each owning one RepoEnv, run a group of episodes on one demo task
each (as GRPO's num_generations rollouts of one prompt do: reset, three tool calls, the gold patch
applied, get_reward); printed: reset
latency p50/p95, tool-call latency p50/p95 (and the p50 of the first call after reset, of the later
calls and per tool), grading latency p50, completed episodes per minute. The
engine's floors (container create+start, ``docker exec true``) are measured in the same run.
Last, the wait for a finished group's rewards (4 episodes), one grading at a time vs. the group's
gradings started together (``grading_jobs=2``).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo_tasks import built_demo_tasks  # noqa: E402
from results import Figure, record  # noqa: E402

from repo2env.envs import RepoEnv, RepoEnvConfig  # noqa: E402
from repo2env.envs.repo_env import release_shared_sandboxes  # noqa: E402
from repo2env.pipeline.stages import validate_dir  # noqa: E402
from repo2env.runtime.backend import Backend  # noqa: E402
from repo2env.runtime.backends import open_backend  # noqa: E402
from repo2env.runtime.sandbox import SandboxLimits  # noqa: E402
from repo2env.validate.acceptance import load_acceptance_policy  # noqa: E402

EPISODES_PER_ENV = 3
#: Seconds the scripted policy waits before each tool call, as a model generating its next call would
#: (REPO2ENV_BENCH_THINK_S; default 0: every call right after the last, and the first right after reset).
THINK_S = float(os.environ.get("REPO2ENV_BENCH_THINK_S", "0"))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def engine_floors(runtime: Backend, image: str) -> tuple[float, float, float]:
    """Container create+start, ``docker exec true`` and ``true`` through a sandbox's persistent
    command channel (what a tool call costs at least), each a median. The first two go through the
    Docker engine's own client; on another backend, through a sandbox without the channel (one
    engine call per command: the nearest to a bare engine the backend protocol has)."""
    starts, execs, channel = [], [], []
    for _ in range(5):
        began = time.perf_counter()
        if runtime.name == "docker":
            container = runtime.client.containers.run(image, ["sleep", "60"], detach=True, network_mode="none")
            starts.append(time.perf_counter() - began)
            for _ in range(4):
                began = time.perf_counter()
                runtime.client.api.exec_start(runtime.client.api.exec_create(container.id, ["true"]))
                execs.append(time.perf_counter() - began)
            container.remove(force=True)
            continue
        with runtime.start_image(image, limits=SandboxLimits(persistent_channel=False)) as sandbox:
            starts.append(time.perf_counter() - began)
            for _ in range(4):
                began = time.perf_counter()
                sandbox.exec("true")
                execs.append(time.perf_counter() - began)
    with runtime.start_image(image, limits=SandboxLimits(persistent_channel=True)) as sandbox:
        for _ in range(20):
            began = time.perf_counter()
            sandbox.exec("true")
            channel.append(time.perf_counter() - began)
    return statistics.median(starts), statistics.median(execs), statistics.median(channel)


def run(n: int, tasks, logs: Path, *, channel: bool = True) -> dict[str, float]:
    # grading_jobs=1: these N environments run unsynchronised episodes (no group boundary), so an
    # early grading of a neighbour still at work would be wasted; group_rewards measures that part.
    config = RepoEnvConfig(logs_dir=logs, warm_sandboxes=n, command_channel=channel, grading_jobs=1)
    resets, tools, grades, done = [], [], [], []
    lock = threading.Lock()

    def worker(index: int) -> None:
        env = RepoEnv(config)
        for _ in range(EPISODES_PER_ENV):
            task = tasks[index % len(tasks)]
            began = time.perf_counter()
            env.reset(**task.model_dump())
            reset_s = time.perf_counter() - began
            calls = []
            for tool, call in (("bash", lambda: env.bash("ls")), ("read", lambda: env.read_file("README.md", 1, 5)),
                               ("write", lambda patch=task.patch: env.write_file("fix.diff", patch))):
                time.sleep(THINK_S)
                began = time.perf_counter()
                call()
                calls.append((tool, time.perf_counter() - began))
            env.bash("git apply fix.diff && rm fix.diff")
            began = time.perf_counter()
            reward = env.get_reward()
            grade_s = time.perf_counter() - began
            with lock:
                resets.append(reset_s)
                tools.extend(calls)
                grades.append(grade_s)
                done.append(reward)
        env._close()

    began = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(index,)) for index in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    release_shared_sandboxes()  # this N's spares go now, not beside the next N's episodes
    seconds = [spent for _, spent in tools]
    # Where the time goes: the first call after reset (what a cold channel or the pool's housekeeping
    # would slow) against the later ones, and per tool (a write carries the patch on stdin).
    first = [spent for index, (_, spent) in enumerate(tools) if index % 3 == 0]
    later = [spent for index, (_, spent) in enumerate(tools) if index % 3]
    per_tool = {name: statistics.median(spent for tool, spent in tools if tool == name) for name in ("bash", "read", "write")}
    return {"reset_p50": statistics.median(resets), "reset_p95": percentile(resets, 0.95),
            "tool_p50": statistics.median(seconds), "tool_p95": percentile(seconds, 0.95),
            "tool_first_p50": statistics.median(first), "tool_later_p50": statistics.median(later),
            **{f"{name}_p50": value for name, value in per_tool.items()}, "grade_p50": statistics.median(grades),
            "episodes_per_min": len(done) / wall * 60, "gold_rewards_ok": sum(reward == 1.0 for reward in done) / len(done)}


def group_rewards(tasks, logs: Path, *, jobs: int, size: int = 4) -> tuple[float, list[float]]:
    """How long the trainer waits for a finished group's rewards, asked one after another as TRL
    does: (seconds, rewards), ``size`` gold episodes of one task, ``grading_jobs=jobs``."""
    config = RepoEnvConfig(logs_dir=logs, warm_sandboxes=size, grading_jobs=jobs)
    envs = [RepoEnv(config) for _ in range(size)]
    for env in envs:
        env.reset(**tasks[0].model_dump())
        env.write_file("fix.diff", tasks[0].patch)
        env.bash("git apply fix.diff && rm fix.diff")
    began = time.perf_counter()
    rewards = [env.get_reward() for env in envs]
    waited = time.perf_counter() - began
    for env in envs:
        env._close()
    release_shared_sandboxes()
    return waited, rewards


def main() -> None:
    runtime = open_backend()  # REPO2ENV_BACKEND, else docker
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-train-") as scratch:
        root = Path(scratch)
        _, tasks_dir, _ = built_demo_tasks(root, runtime)
        policy = load_acceptance_policy("default").model_copy(update={"gold_runs": 1, "partial_limit": 0,
                                                                      "near_miss_limit": 0})
        validate_dir(tasks_dir, runtime, policy, jobs=2)
        from repo2env.jsonl import read_tasks

        tasks = [task for task in read_tasks(tasks_dir / "tasks.jsonl")
                 if task.validation and task.validation.verdict == "accepted"]
        start_s, exec_s, channel_s = engine_floors(runtime, tasks[0].env_spec.image)
        recorded = [Figure("container create+start (engine floor)", round(start_s * 1000), "ms"),
                    Figure(f"{runtime.name} exec true (engine floor)", round(exec_s * 1000), "ms"),
                    Figure("true through the command channel", round(channel_s * 1000, 1), "ms")]
        reset_target = f"<= {1.5 * exec_s * 1000:.1f}"  # 1.5x the exec floor of this run
        print(f"engine floors: container create+start p50 {start_s * 1000:.0f} ms, exec of `true` p50 "
              f"{exec_s * 1000:.0f} ms, `true` through the command channel p50 {channel_s * 1000:.1f} ms")
        # REPO2ENV_BENCH_NO_CHANNEL=1 adds, per N, a run with one docker exec per tool call (the
        # comparison under the same machine load).
        modes = (True, False) if os.environ.get("REPO2ENV_BENCH_NO_CHANNEL") == "1" else (True,)
        for n, channel in ((n, channel) for n in (1, 2, 4, 8) for channel in modes):
            load_before = os.getloadavg()[0]
            figures = run(n, tasks, root / f"logs-{n}-{channel}", channel=channel)
            print(f"N={n}{'' if channel else ' (docker exec per tool call)'}: reset p50 {figures['reset_p50'] * 1000:.0f} ms / p95 {figures['reset_p95'] * 1000:.0f} ms "
                  f"({figures['reset_p50'] / exec_s:.1f}x the exec floor; target <= 1.5x), tool call p50 "
                  f"{figures['tool_p50'] * 1000:.1f} ms / p95 {figures['tool_p95'] * 1000:.1f} ms (target p50 <= 10 ms; "
                  f"first call after reset p50 {figures['tool_first_p50'] * 1000:.1f} ms, later calls "
                  f"{figures['tool_later_p50'] * 1000:.1f} ms; bash ls {figures['bash_p50'] * 1000:.1f} ms, read_file "
                  f"{figures['read_p50'] * 1000:.1f} ms, write_file {figures['write_p50'] * 1000:.1f} ms), grading p50 {figures['grade_p50']:.2f} s, "
                  f"{figures['episodes_per_min']:.1f} episodes/min, gold episodes scoring 1.0: "
                  f"{figures['gold_rewards_ok']:.0%}; machine load (1-min average) {load_before:.1f} before, "
                  f"{os.getloadavg()[0]:.1f} after on {os.cpu_count()} cores")
            sys.stdout.flush()
            how = "" if channel else " (docker exec per tool call)"
            recorded += [Figure(f"tool call p50, N={n}{how}", round(figures["tool_p50"] * 1000, 1), "ms", "<= 10"),
                         Figure(f"tool call p95, N={n}{how}", round(figures["tool_p95"] * 1000, 1), "ms"),
                         Figure(f"reset p50, N={n}{how}", round(figures["reset_p50"] * 1000), "ms", reset_target),
                         Figure(f"grading p50, N={n}{how}", round(figures["grade_p50"], 2), "s"),
                         Figure(f"episodes per minute, N={n}{how}", round(figures["episodes_per_min"], 1), "/min"),
                         Figure(f"gold episodes scoring 1.0, N={n}{how}", round(figures["gold_rewards_ok"] * 100), "%",
                                "== 100")]
        waits = {}
        for jobs in (1, 2):
            waits[jobs], rewards = group_rewards(tasks, root / f"group-{jobs}", jobs=jobs)
            print(f"group of 4 finished episodes, rewards asked in turn with grading_jobs={jobs}: the trainer waits "
                  f"{waits[jobs]:.2f} s (rewards {rewards})")
        print(f"grading the group at once: the trainer waits {waits[2] / waits[1]:.0%} of the one-by-one time")
        recorded += [Figure("a group's rewards (4 episodes), one grading at a time", round(waits[1], 2), "s"),
                     Figure("a group's rewards (4 episodes), grading_jobs=2", round(waits[2], 2), "s")]
        record("train_env", recorded, note=f"think {THINK_S} s" if THINK_S else "")


if __name__ == "__main__":
    main()
