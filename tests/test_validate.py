"""Validation on the demo, for real: the verdicts match what the demo was built to contain."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import demo_expected, quick_policy  # noqa: I001 (tests/ is on sys.path)

from repo2env.errors import InputError
from repo2env.jsonl import read_tasks, write_jsonl
from repo2env.models import GradeResult, RolloutResult
from repo2env.pipeline.stages import validate_dir
from repo2env.validate.acceptance import AcceptancePolicy, judge, load_acceptance_policy
from repo2env.validate.run import read_records

QUICK = quick_policy()


@pytest.mark.docker
def test_demo_verdicts_match_what_the_demo_contains(validated, demo_repo):
    _, records = validated
    for pull in demo_repo.pulls:
        if pull.expected_bucket != "kept":
            continue
        record = records[pull.number]
        # Stubs of the changed functions (return None, return []) earn reward exactly where the
        # demo's tests leave a trivial answer right.
        assert record.reasons == (["stub_passes"] if pull.stub_earns else []), (pull.number, record.rewards)
        assert (max(record.rewards["stub"]) > 0) == pull.stub_earns
        assert set(record.FAIL_TO_PASS) == set(pull.fail_to_pass), pull.number
        assert set(record.PASS_TO_PASS) == set(pull.pass_to_pass), pull.number
        assert set(record.flaky_tests) == set(pull.flaky), "the flaky test is caught and excluded"
        assert record.leak_flagged == pull.leaks_fix, "the leaking issue is flagged"
        assert record.rewards["gold"] == [1.0] and record.rewards["null"] == [0.0]
        if pull.partial_fixes:
            assert record.partial_credit, f"PR {pull.number} was built with partial fixes"
        assert record.distinct_rewards >= 2
        # Gradings at once (grading_jobs above 1) add up their tests' time beyond the wall time.
        assert 0 < record.tests_s < record.wall_s * 4


@pytest.mark.docker
def test_outputs_and_resume(validated, docker_client):
    from repo2env.runtime.backends.docker import DockerBackend

    folder, records = validated
    lines = (folder / "validation.jsonl").read_text().splitlines()
    assert len(lines) == len(records)
    summary = (folder / "summary.md").read_text()
    assert "| mined |" in summary and "| accepted |" in summary and "repo2env-demo/textkit" in summary
    assert (folder / "validation.png").read_bytes().startswith(b"\x89PNG")
    tasks = read_tasks(folder / "tasks.jsonl")
    assert all(task.validation and task.FAIL_TO_PASS for task in tasks)
    assert {task.validation.verdict for task in tasks} == {"accepted", "rejected"}
    assert "| stubs fail |" in summary and "stub_passes" in summary
    again = validate_dir(folder, DockerBackend(docker_client), QUICK)
    assert again.records == [] and again.skipped == len(records)
    assert len(read_records(folder / "validation.jsonl")) == len(records)


@pytest.mark.docker
def test_strict_policy_rejects_flaky_and_leaky_tasks(validated, docker_client, demo_repo, tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend

    folder, _ = validated
    flaky = next(p.number for p in demo_repo.pulls if p.flaky)
    leaky = next(p.number for p in demo_repo.pulls if p.leaks_fix)
    tasks = [task for task in read_tasks(folder / "tasks.jsonl") if task.pull_number in (flaky, leaky)]
    write_jsonl(tmp_path / "tasks.jsonl", tasks)
    strict = load_acceptance_policy("strict").model_copy(update={
        "reruns": 3, "hash_seeds": [0, 1, 2], "gold_runs": 1, "null_runs": 1, "partial_limit": 2, "near_miss_limit": 2})
    summary = validate_dir(tmp_path, DockerBackend(docker_client), strict)
    reasons = {int(r.instance_id.rsplit("-", 1)[1]): r.reasons for r in summary.records}
    assert "f2p_flaky" in reasons[flaky]
    assert "leaky_statement" in reasons[leaky]


@pytest.mark.docker
def test_tests_that_already_pass_give_no_f2p(validated, docker_client, tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend

    folder, _ = validated
    task = read_tasks(folder / "tasks.jsonl")[0]
    passing = ("diff --git a/tests/test_always.py b/tests/test_always.py\nnew file mode 100644\n--- /dev/null\n"
               "+++ b/tests/test_always.py\n@@ -0,0 +1,2 @@\n+def test_always():\n+    assert True\n")
    broken = task.model_copy(update={"test_patch": passing, "FAIL_TO_PASS": [], "PASS_TO_PASS": [], "validation": None})
    unbuilt = task.model_copy(update={"instance_id": task.instance_id[:-2] + "-999", "pull_number": 999,
                                      "env_spec": task.env_spec.model_copy(update={"status": "env_failed",
                                                                                   "error": "install failed"})})
    write_jsonl(tmp_path / "tasks.jsonl", [broken, unbuilt])
    summary = validate_dir(tmp_path, DockerBackend(docker_client), QUICK)
    reasons = {record.instance_id: record.reasons for record in summary.records}
    assert reasons[broken.instance_id] == ["no_f2p"]
    assert reasons[unbuilt.instance_id] == ["env_failed"]
    assert "| built | 1 |" in (tmp_path / "summary.md").read_text()


def rollout(kind: str, reward: float, error: str | None = None) -> RolloutResult:
    grade = GradeResult(instance_id="a__b-1", reward=reward, error=error)
    return RolloutResult(kind=kind, reward=reward, resolved=reward == 1.0, grade=grade)


@pytest.mark.parametrize(("rollouts", "flaky", "expected"), [
    ([rollout("gold", 1.0), rollout("gold", 1.0), rollout("null", 0.0)], {}, []),
    ([rollout("gold", 0.5), rollout("gold", 0.5), rollout("null", 0.0)], {}, ["gold_fails"]),
    ([rollout("gold", 1.0), rollout("gold", 0.5), rollout("null", 0.0)], {}, ["gold_flaky"]),
    ([rollout("gold", 1.0), rollout("null", 0.5)], {}, ["null_passes"]),
    ([rollout("gold", 1.0), rollout("null", 0.0)], {"t2": 0.3, "t3": 0.3}, ["f2p_flaky"]),
    ([rollout("gold", 1.0)], {}, ["missing_null_rollouts"]),
    ([rollout("gold", 1.0, "boom"), rollout("null", 0.0)], {}, ["grading_error"]),
    ([rollout("gold", 1.0), rollout("null", 0.0), rollout("stub", 0.0), rollout("stub", 0.67)], {}, ["stub_passes"]),
    ([rollout("gold", 1.0), rollout("null", 0.0), rollout("stub", 0.0)], {}, []),
])
def test_judge_reasons(rollouts, flaky, expected):
    report = judge(AcceptancePolicy(), fail_to_pass=["t1"], flaky=flaky, rollouts=rollouts, leak_score=0.0)
    assert report.reasons == expected
    assert report.verdict == ("accepted" if not expected else "rejected")


def _graded(kind: str, tests: dict[str, str], **grade) -> RolloutResult:
    from repo2env.verify.reward import score

    parts = score(tests, F2P, P2P)
    result = GradeResult(instance_id="a__b-1", reward=parts.reward, f2p_rate=parts.f2p_rate, p2p_rate=parts.p2p_rate,
                         resolved=parts.resolved, tests=tests, **grade)
    return RolloutResult(kind=kind, reward=result.reward, resolved=result.resolved, grade=result)


F2P = ["t.py::test_imports", "t.py::test_has_name", "t.py::test_behaviour"]
P2P = ["t.py::test_old"]
ALL_PASS = {test: "passed" for test in [*F2P, *P2P]}
STUBBED = {**ALL_PASS, "t.py::test_behaviour": "failed"}


def test_f2p_tests_every_stub_passes_gate_the_reward_instead_of_earning_it():
    """A test module importing a name the fix adds fails whole before it: a stub that defines the
    name passes most of FAIL_TO_PASS. Those tests move to PASS_TO_PASS; every rollout is scored again."""
    from repo2env.models import Task
    from repo2env.validate.run import _rescored, name_only_tests

    stubs = [_graded("stub", STUBBED), _graded("stub", STUBBED)]
    assert [stub.reward for stub in stubs] == [0.666667, 0.666667]
    assert name_only_tests(F2P, stubs) == {"t.py::test_imports", "t.py::test_has_name"}
    # One stub style is not enough evidence, nor is a stub grading that errored or was tampered with.
    assert name_only_tests(F2P, stubs[:1]) == set()
    assert name_only_tests(F2P, [*stubs, _graded("stub", ALL_PASS, error="boom")]) == set()
    assert name_only_tests(F2P, [*stubs, _graded("stub", ALL_PASS, tampered=True)]) == set()
    # A stub style that fails a test keeps it in FAIL_TO_PASS.
    assert name_only_tests(F2P, [*stubs, _graded("stub", {**STUBBED, "t.py::test_has_name": "failed"})]) == {
        "t.py::test_imports"}

    moved = Task(instance_id="a__b-1", repo="a/b", pull_number=1, base_commit="0" * 40, patch="", test_patch="",
                 problem_statement="x",
                 created_at="2024-01-01T00:00:00Z", FAIL_TO_PASS=["t.py::test_behaviour"],
                 PASS_TO_PASS=[*P2P, "t.py::test_imports", "t.py::test_has_name"])
    assert _rescored(stubs[0], moved).reward == 0.0 and _rescored(stubs[0], moved).grade.f2p_rate == 0.0
    gold = _rescored(_graded("gold", ALL_PASS), moved)
    assert (gold.reward, gold.resolved, gold.grade.reward) == (1.0, True, 1.0)
    # A gate that fails costs (the P2P rate), it no longer earns: the behaviour test alone does.
    broken = _rescored(_graded("partial", {**ALL_PASS, "t.py::test_imports": "failed"}), moved)
    assert (broken.reward, broken.grade.f2p_rate, broken.grade.p2p_rate) == (0.666667, 1.0, 0.666667)
    wrong = _rescored(_graded("partial", STUBBED), moved)
    assert (wrong.reward, wrong.grade.p2p_rate) == (0.0, 1.0)
    # A tampered grading keeps its zero whatever its outcomes say.
    forged = _graded("policy", ALL_PASS, tampered=True).model_copy(update={"reward": 0.0})
    assert _rescored(forged, moved).reward == 0.0


def test_unfixed_code_that_stops_pytest_scores_zero_and_is_no_grading_error():
    """The suite's conftest.py imports a name only the fix adds: before the fix pytest stops with a
    usage error and writes no report. For the null rollout that is its 0, not a broken grading; for
    gold, or with pytest never started (no status), it stays one."""
    from repo2env.verify.junit import NO_JUNIT

    def with_exit(kind: str, status: int | None, **grade) -> RolloutResult:
        result = GradeResult(instance_id="a__b-1", error=NO_JUNIT, pytest_exit=status, **grade)
        return RolloutResult(kind=kind, reward=0.0, grade=result)

    def reasons(*rollouts: RolloutResult) -> list[str]:
        return judge(AcceptancePolicy(), fail_to_pass=["t1"], flaky={}, rollouts=list(rollouts), leak_score=0.0).reasons

    gold = rollout("gold", 1.0)
    for status in (2, 3, 4):
        assert reasons(gold, with_exit("null", status)) == []
    assert reasons(gold, with_exit("null", None)) == ["grading_error"]
    assert reasons(gold, with_exit("null", 124)) == ["grading_error"]
    assert reasons(gold, with_exit("null", 4, tampered=True)) == ["grading_error"]
    assert reasons(gold, rollout("null", 0.0, "the live outcome stream could not be read")) == ["grading_error"]
    assert "grading_error" in reasons(with_exit("gold", 4), rollout("null", 0.0))


def test_judge_learnable_band_and_statistics():
    strict = AcceptancePolicy(require_learnable=True, policy_k=4, require_partial_credit=True)
    base = [rollout("gold", 1.0), rollout("null", 0.0), rollout("partial", 0.5)]
    mixed = judge(strict, fail_to_pass=["t"], flaky={}, leak_score=0.0,
                  rollouts=base + [rollout("policy", 1.0), rollout("policy", 0.0)])
    assert mixed.verdict == "accepted" and mixed.partial_credit and mixed.distinct_rewards == 3
    always = judge(strict, fail_to_pass=["t"], flaky={}, leak_score=0.0,
                   rollouts=base + [rollout("policy", 1.0), rollout("policy", 1.0)])
    assert always.reasons == ["not_learnable"]
    no_partial = judge(strict, fail_to_pass=["t"], flaky={}, leak_score=0.0,
                       rollouts=[rollout("gold", 1.0), rollout("null", 0.0), rollout("policy", 1.0), rollout("policy", 0.0)])
    assert no_partial.reasons == ["no_partial_credit"]
    assert judge(AcceptancePolicy(), fail_to_pass=[], flaky={}, rollouts=[], leak_score=0.0).reasons == ["no_f2p"]


def test_stub_threshold_is_the_null_rollout_or_a_number():
    evidence = [rollout("gold", 1.0), rollout("null", 0.0), rollout("stub", 0.5)]
    verdict = lambda policy: judge(policy, fail_to_pass=["t"], flaky={}, rollouts=evidence, leak_score=0.0).reasons  # noqa: E731
    assert verdict(AcceptancePolicy()) == ["stub_passes"]
    assert verdict(AcceptancePolicy(max_stub_reward=0.5)) == []
    assert verdict(AcceptancePolicy(max_stub_reward=0.4)) == ["stub_passes"]
    # A lenient null floor moves the default threshold with the null rollout's own reward.
    lenient = AcceptancePolicy(null_floor=0.5)
    assert judge(lenient, fail_to_pass=["t"], flaky={}, leak_score=0.0,
                 rollouts=[rollout("gold", 1.0), rollout("null", 0.5), rollout("stub", 0.5)]).reasons == []
    assert load_acceptance_policy("default").max_stub_reward == "null"


def test_policy_files_load_and_errors_name_the_field(tmp_path):
    assert load_acceptance_policy("default").required_rollouts == ["gold", "null"]
    assert load_acceptance_policy("strict").require_learnable
    bad = tmp_path / "bad.yaml"
    bad.write_text("reruns: 0\nsurprise: 1\n")
    with pytest.raises(InputError, match=r"field 'reruns'.*field 'surprise'"):
        load_acceptance_policy(bad)
    with pytest.raises(InputError, match="no acceptance policy"):
        load_acceptance_policy("lenient")
    assert json.loads(AcceptancePolicy().model_dump_json())["name"] == "default"


@pytest.mark.docker
def test_policy_rollouts_through_the_cli_make_a_task_learnable(validated, tmp_path):
    """`repo2env validate --policy URL --model M -k 4` against a scripted OpenAI-compatible server."""
    import subprocess
    import sys

    from scripted_llm import ScriptedLLM, gold_script, nothing_script

    folder, _ = validated
    task = read_tasks(folder / "tasks.jsonl")[0]
    write_jsonl(tmp_path / "tasks.jsonl", [task.model_copy(update={"validation": None})])
    policy = tmp_path / "learnable.yaml"
    policy.write_text("name: learnable\ngold_runs: 1\npartial_limit: 1\nnear_miss_limit: 1\nstub_limit: 0\n"
                      "required_rollouts: [gold, \"null\", policy]\nrequire_learnable: true\n")
    scripts = {"gold": gold_script(task), "nothing": nothing_script()}
    with ScriptedLLM(scripts, schedule=["gold", "nothing", "gold", "nothing"]) as server:
        result = subprocess.run([sys.executable, "-m", "repo2env", "validate", "--from", str(tmp_path),
                                 "--policy-file", str(policy), "--policy", server.url, "--model", "scripted",
                                 "-k", "4"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    record = read_records(tmp_path / "validation.jsonl")[0]
    assert record.rewards["policy"] == [1.0, 0.0, 1.0, 0.0]
    assert record.policy_pass_rate == 0.5 and record.verdict == "accepted"
    assert (tmp_path / "validation.png").stat().st_size > 0


def test_policies_ship_as_package_data_and_load_from_an_installed_wheel(installed_wheel, tmp_path):
    """A wheel carries validators/*.yaml, and the package finds them without the source tree."""
    import subprocess
    import sys

    names, unpacked = installed_wheel
    assert {f"repo2env/validators/{name}.yaml" for name in ("default", "light", "strict")} <= names
    probe = ("from repo2env.validate.acceptance import load_acceptance_policy; import repo2env; "
             "print(repo2env.__file__); print(load_acceptance_policy('strict').name)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                            env={"PYTHONPATH": str(unpacked), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert result.returncode == 0, result.stderr
    where, name = result.stdout.split()
    assert where.startswith(str(unpacked)) and name == "strict"


@pytest.mark.docker
def test_validation_starts_no_sandbox_that_runs_nothing(built_demo, tmp_path, docker_client):
    """The sandbox the grader keeps warm after gold's gradings serves the first variant, and none is
    started after the plan's last grading: every sandbox a validation starts runs a command (two a
    task were started and removed unused before). The rewards stay the demo's own."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.validate.run import validate_task

    started: list[str] = []
    used: set[str] = set()

    class Counting(DockerBackend):
        def start_image(self, image, **kwargs):
            sandbox = super().start_image(image, **kwargs)
            started.append(sandbox.id)
            run = sandbox.exec

            def exec_(*args, **kw):
                used.add(sandbox.id)
                return run(*args, **kw)

            sandbox.exec = exec_
            return sandbox

    _, tasks = built_demo
    policy = QUICK.model_copy(update={"grading_jobs": 2})
    _, record = validate_task(tasks[6], Counting(docker_client), policy, logs_dir=tmp_path)
    gradings = [run for run in (tmp_path / "grades" / tasks[6].instance_id).iterdir() if run.is_dir()]
    assert record.verdict == "accepted" and len(gradings) >= 6, (record.reasons, record.error)
    assert len(started) == len(gradings) + 2, "a sandbox per grading and per derivation state, none more"
    assert used == set(started), f"{len(set(started) - used)} of {len(started)} sandboxes ran nothing"
    rewards = demo_expected()["tasks"][tasks[6].instance_id]["rewards"]
    assert {(rollout.kind, rollout.name, rollout.reward) for rollout in record.rollouts} \
        <= {(kind, name, reward) for kind, named in rewards.items() for name, reward in named.items()}


@pytest.mark.docker
def test_the_light_policy_finds_what_default_finds_on_the_demo(built_demo, docker_client, tmp_path):
    """validators/light.yaml (two runs a state, one gold grading, two of each variant kind) gives the
    demo's recorded verdicts, reasons, FAIL_TO_PASS, PASS_TO_PASS and flaky tests (PR 18's flaky test
    is still caught, the stubs of PRs 8, 10 and 18 still earn), on less evidence."""
    from conftest import copy_tasks_folder

    from repo2env.runtime.backends.docker import DockerBackend

    copy_tasks_folder(built_demo[0], tmp_path)
    light = load_acceptance_policy("light")
    validate_dir(tmp_path, DockerBackend(docker_client), light, jobs=2)
    expected = demo_expected()["tasks"]
    records = {record.instance_id: record for record in read_records(tmp_path / "validation.jsonl")}
    assert set(records) == set(expected)
    for name, want in expected.items():
        got = records[name]
        assert (got.verdict, got.reasons) == (want["verdict"], want["reasons"]), name
        assert (set(got.FAIL_TO_PASS), set(got.PASS_TO_PASS)) == (set(want["FAIL_TO_PASS"]), set(want["PASS_TO_PASS"]))
        assert set(got.flaky_tests) == set(want["flaky_tests"]), name
        kinds = [rollout.kind for rollout in got.rollouts]
        assert kinds.count("gold") == light.gold_runs == 1 and kinds.count("stub") <= light.stub_limit == 2, kinds


@pytest.mark.docker
def test_force_with_a_task_revalidates_that_task_only(validated, docker_client, tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend

    source, _ = validated
    for name in ("tasks.jsonl", "source.json", "funnel.json", "validation.jsonl"):
        shutil.copy(source / name, tmp_path / name)
    before = {record.instance_id: record for record in read_records(tmp_path / "validation.jsonl")}
    target = sorted(before)[0]
    summary = validate_dir(tmp_path, DockerBackend(docker_client), QUICK, force=True, instance_ids=frozenset({target}))
    assert [record.instance_id for record in summary.records] == [target]
    after = {record.instance_id: record for record in read_records(tmp_path / "validation.jsonl")}
    assert set(after) == set(before), "the other tasks' records stay"
    assert all(after[name] == before[name] for name in before if name != target)
    assert after[target].wall_s != before[target].wall_s, "the target was validated again"


class _ScriptedSandbox:
    """A sandbox whose `git apply` fails when ``refuse_apply``; every other command succeeds, silent."""

    def __init__(self, refuse_apply: bool) -> None:
        self.refuse_apply, self.closed, self.commands = refuse_apply, False, []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.closed = True

    def write_file(self, path: str, content: str) -> None:
        pass

    def read_file(self, path: str) -> str:
        return f"contents of {path}"

    def exec(self, command, **_):
        from repo2env.models import ExecResult

        self.commands.append(command)
        failed = self.refuse_apply and command.startswith("git apply")
        return ExecResult(exit_code=1 if failed else 0, output="error: patch failed" if failed else "")


@pytest.mark.parametrize("refuse_in", [None, "before", "after"])
def test_derivation_reads_the_test_patch_once_and_prepares_both_states_alike(monkeypatch, refuse_in):
    from repo2env.models import Task
    from repo2env.validate import derive

    task = Task(instance_id="acme__w-2", repo="acme/w", pull_number=2, base_commit="0" * 40,
                patch="diff --git a/w.py b/w.py\n--- a/w.py\n+++ b/w.py\n@@ -1 +1 @@\n-a\n+b\n",
                test_patch="diff --git a/tests/test_w.py b/tests/test_w.py\n--- a/tests/test_w.py\n"
                           "+++ b/tests/test_w.py\n@@ -1 +1 @@\n-a\n+b\n", problem_statement="w",
                created_at="2024-01-01T00:00:00Z")
    started = []

    class Runtime:
        def start(self, task, *, limits):
            started.append(_ScriptedSandbox(refuse_apply=len(started) == ("before", "after").index(refuse_in)
                                            if refuse_in else False))
            return started[-1]

    parsed = []
    real_parse = derive.parse
    monkeypatch.setattr(derive, "parse", lambda text: parsed.append(text) or real_parse(text))
    derivation = derive.derive_tests(task, Runtime(), runs=1)
    assert parsed.count(task.test_patch) == 1 and len(started) == 2 and all(sandbox.closed for sandbox in started)
    assert derivation.files_before == {"w.py": "contents of /testbed/w.py"}
    if refuse_in:
        assert derivation.error == "a patch does not apply: error: patch failed"
        applied_after = [command.count("git apply") for command in started[1].commands]
        assert applied_after == ([2] if refuse_in == "after" else []), "the fixed state gets both patches, once"
    else:
        assert derivation.files_after == {"w.py": "contents of /testbed/w.py"}
        assert set(derivation.test_sources) == {"tests/test_w.py"}
        assert derivation.error and derivation.error.startswith("no test collected after the fix")


def test_auto_grading_width_takes_the_cores_idle_now(monkeypatch):
    from repo2env.validate import run

    auto = AcceptancePolicy(grading_jobs="auto")
    monkeypatch.setattr(run.os, "cpu_count", lambda: 2)
    # A lone validation: its previous task and its image build are over, both cores are idle now.
    assert run.grading_width(auto, idle=1.9) == 2
    # Others keep the machine busy (a CI run's other workers, another task's gradings): one at a time.
    assert run.grading_width(auto, idle=0.2) == 1
    assert run.grading_width(auto, own=2, idle=0.0) == 1, "gradings of this process that run now are load too"
    assert run.grading_width(auto, idle=2.0) == 2, "never more than the cores"
    monkeypatch.setattr(run.os, "cpu_count", lambda: 16)
    assert run.grading_width(auto, idle=16.0) == run.MAX_AUTO_GRADING_JOBS
    assert run.grading_width(AcceptancePolicy(grading_jobs=3), idle=0.0) == 3, "a number is taken as given"


def test_the_default_policy_grades_auto_and_the_width_can_be_overridden():
    from repo2env.pipeline.compose import acceptance_policy

    assert load_acceptance_policy("default").grading_jobs == "auto" == AcceptancePolicy().grading_jobs
    assert acceptance_policy("default", grading_jobs="2").grading_jobs == 2
    assert acceptance_policy("strict", grading_jobs="auto", whole_suite=True).whole_suite_p2p
    for bad in ("0", "-1", "many"):
        with pytest.raises(InputError, match="--grading-jobs"):
            acceptance_policy("default", grading_jobs=bad)


def test_without_proc_stat_auto_uses_the_load_less_this_process_own(monkeypatch, tmp_path):
    from repo2env.validate import run

    monkeypatch.setattr(run, "IDLE_CORES", run.IdleCores(tmp_path / "no-such-stat"))
    monkeypatch.setattr(run.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(run.os, "getloadavg", lambda: (1.3, 0.0, 0.0))
    auto = AcceptancePolicy(grading_jobs="auto")
    assert run.grading_width(auto, own=1) == 2, "its own gradings of the minute before are not someone else's"
    assert run.grading_width(auto, own=0) == 1


def test_idle_cores_are_read_from_the_kernels_counters(monkeypatch, tmp_path):
    import time

    from repo2env.validate import run

    monkeypatch.setattr(run.os, "cpu_count", lambda: 2)
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\n")
    idle = run.IdleCores(stat, min_interval_s=0.01)
    assert idle.measure() is None, "no tick passed: no figure"
    # 400 ticks since: 100 busy, 250 idle, 50 waiting on I/O (nobody computing either).
    stat.write_text("cpu  200 0 100 1050 50 0 0 0 0 0\n")
    time.sleep(0.02)
    assert idle.measure() == 2 * 300 / 400
    # Minutes later (a build, a long validation): that stretch is not now; a fresh sample decides.
    stale = run.IdleCores(stat, min_interval_s=0.01, max_age_s=0.05)
    stale.measure()
    stat.write_text("cpu  1000 0 100 1050 50 0 0 0 0 0\n")  # a busy stretch since that look...
    time.sleep(0.1)
    reads = []
    real_read = stale._read
    monkeypatch.setattr(stale, "_read", lambda: reads.append(1) or real_read())
    assert stale.measure() is None, "...then no tick in the fresh sample: no figure, not the busy stretch's"
    assert len(reads) == 2
    assert run.IdleCores(tmp_path / "none").measure() is None
    assert run.IdleCores("/proc/stat", min_interval_s=0.05).measure() is not None, "this machine's kernel says"


def test_the_look_at_idle_cores_starts_after_this_processs_last_gradings(monkeypatch):
    """A task that took less than the look's reach (zustand 38: 4 s of derivation on both cores)
    must not make the next one grade one at a time: the next look starts after those gradings
    ended, not at the previous look, which they kept busy."""
    import time

    from repo2env.validate import run

    monkeypatch.setattr(run.os, "cpu_count", lambda: 2)
    idle = run.IdleCores("unused", min_interval_s=0.01, max_age_s=60)
    # (idle ticks, all ticks) as the kernel counts them: the first task's look (both cores busy for
    # its 400 ticks), then, after its gradings (both cores busy again), a fresh look over 100 ticks
    # of which 90 idle.
    counters = iter([(100, 200), (100, 600), (100, 1000), (190, 1100)])
    monkeypatch.setattr(idle, "_read", lambda: (time.monotonic(), *next(counters)))
    monkeypatch.setattr(run, "IDLE_CORES", idle)
    own = run.OwnGradings()
    monkeypatch.setattr(run, "OWN_GRADINGS", own)
    auto = run.AcceptancePolicy(grading_jobs="auto")
    assert own.last_change() is None
    assert run.grading_width(auto) == 1, "the first task's look: both cores busy"
    with own.using(1):
        time.sleep(0.02)  # the first task's gradings
    assert own.last_change() is not None and own.last_change() <= time.monotonic()
    assert run.grading_width(auto) == 2, "a fresh look after them (1.8 cores idle), not one back over them"


def test_own_gradings_are_the_most_in_use_over_the_last_window():
    from repo2env.validate import run

    clock = {"now": 1000.0}
    own = run.OwnGradings(window_s=60, clock=lambda: clock["now"])
    assert own.recent() == 0
    with own.using(2):
        clock["now"] += 5
        with own.using(1):  # another task validated at once (validate -j 2)
            assert own.recent() == 3
        clock["now"] += 5
        assert own.recent() == 3, "the load average still holds the other task's gradings"
    clock["now"] += 30
    assert own.recent() == 3
    clock["now"] += 60
    assert own.recent() == 0, "a minute later nothing of it is left in the window"


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("before, runs_each", [
    (["passed", "failed", "failed"], 1),  # passed before the fix once: never FAIL_TO_PASS, the reruns are spared
    (["failed", "failed", "failed"], 3),  # a FAIL_TO_PASS candidate: every rerun confirms it
    (["failed", "passed", "failed"], 3),  # a candidate after one run, flaky after three
])
def test_derivation_reruns_only_while_a_test_can_still_be_fail_to_pass(parallel, before, runs_each):
    from repo2env.validate.derive import Derivation, _classify, _run_states

    script = {"before": before, "after": ["passed"] * 3}
    ran = []

    def run_state(name, sandbox, record, count, first=0):
        durations = []
        for run in range(first, count):
            ran.append((name, run))
            record.setdefault("tests/test_w.py::test_w", []).append(script[name][run])
            durations.append(1.0)
        return durations

    derivation = Derivation()
    _run_states(derivation, run_state, [("before", None, derivation.before, 3), ("after", None, derivation.after, 3)],
                parallel=parallel)
    assert sorted(ran) == sorted((name, run) for name in ("before", "after") for run in range(runs_each))
    assert derivation.test_seconds == 2 * runs_each and derivation.one_run_s == 1.0
    _classify(derivation, ["tests/test_w.py::test_w"])
    assert derivation.fail_to_pass == (["tests/test_w.py::test_w"] if "passed" not in before else [])
    assert bool(derivation.flaky) == (runs_each == 3 and "passed" in before)
