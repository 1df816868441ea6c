"""The verifier's pure parts: what of a patch is accepted, JUnit reading, reward arithmetic."""

from __future__ import annotations

import pytest

from repo2env.models import TestStatus
from repo2env.verify.filtering import filter_patch, is_protected_path
from repo2env.verify.grader import _TRAILER, _parse_trailer
from repo2env.verify.junit import junit_key, outcomes_for, parse_junit
from repo2env.verify.reward import REWARD_MODES, decided_by_fail_to_pass, score


def file_diff(path: str, added: str = "x = 1") -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1 @@\n+{added}\n")


@pytest.mark.parametrize(("path", "protected"), [
    ("src/pkg/core.py", False), ("pkg/utils/testing_helpers.py", False), ("src/_pytest/main.py", False),
    ("pyproject.toml", False), ("README.md", False),
    ("tests/test_core.py", True), ("tests/data/fixture.json", True), ("test_core.py", True),
    ("conftest.py", True), ("src/conftest.py", True), ("pytest.ini", True), ("tox.ini", True), ("setup.cfg", True),
    ("sitecustomize.py", True), ("src/usercustomize.py", True), ("src/hack.pth", True),
    ("pkg/__pycache__/core.cpython-311.pyc", True), (".git/config", True), ("../escape.py", True),
    ("pytest.toml", True), (".pytest.toml", True), ("PYTEST.INI", True), ("src/Conftest.py", True),
    ("src/X-1.0.DIST-INFO/entry_points.txt", True), ("Y.EGG-INFO/entry_points.txt", True),
    ("src/y-1.0.egg/EGG-INFO/entry_points.txt", True), ("src/sitecustomize/__init__.py", True),
    ("usercustomize.cpython-311-x86_64-linux-gnu.so", True), ("src/pkg/hack.PTH", True),
    ("src/pkg/sitecustom.py", False), ("docs/eggs.md", False),
])
def test_protected_paths(path, protected):
    assert is_protected_path(path) is protected


def test_filter_keeps_source_and_reports_dropped_paths():
    patch = file_diff("src/pkg/core.py") + file_diff("tests/test_core.py") + file_diff("conftest.py")
    filtered = filter_patch(patch)
    assert filtered.kept_paths == ("src/pkg/core.py",)
    assert set(filtered.dropped_paths) == {"tests/test_core.py", "conftest.py"}
    assert filtered.patch == file_diff("src/pkg/core.py")
    assert filtered.suspicious == ()


def binary_diff(path: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\n"
            "literal 5\nMcmZ?wP|#rp00C+O=l}o!\n\nliteral 0\nHcmV?d00001\n\n")


def test_binary_patches_of_importable_files_are_dropped():
    filtered = filter_patch(binary_diff("src/pkg/core.py") + binary_diff("src/pkg/ext.abi3.so")
                            + binary_diff("docs/logo.png"))
    assert set(filtered.dropped_paths) == {"src/pkg/core.py", "src/pkg/ext.abi3.so"}
    assert filtered.kept_paths == ("docs/logo.png",)


def test_config_search_runs_from_the_tests_common_folder_to_the_root():
    from repo2env.verify.spec import config_search_dirs

    assert config_search_dirs(["tests/unit/test_a.py::x", "tests/unit/test_b.py::y"]) == [
        "/testbed/tests/unit", "/testbed/tests", "/testbed"]
    assert config_search_dirs(["tests/a/t.py::x", "tests/b/t.py::y"]) == ["/testbed/tests", "/testbed"]
    assert config_search_dirs(["test_top.py::x", "tests/t.py::y"]) == ["/testbed"]
    # A parameter holding "/" or "::" is no folder.
    assert config_search_dirs(["tests/unit/t.py::x[a/b::c]"]) == ["/testbed/tests/unit", "/testbed/tests", "/testbed"]


def test_a_rename_into_a_test_path_is_dropped_whole():
    patch = ("diff --git a/src/pkg/core.py b/tests/core.py\nsimilarity index 100%\nrename from src/pkg/core.py\n"
             "rename to tests/core.py\n")
    filtered = filter_patch(patch)
    assert filtered.patch == "" and "tests/core.py" in filtered.dropped_paths


@pytest.mark.parametrize("line", [
    "import _pytest.runner", "def pytest_runtest_makereport(item, call):", "atexit.register(rewrite)",
    "os._exit(0)", "open('/tmp/junit.xml', 'w')", "sys.modules['pytest'].main = None",
])
def test_runner_tampering_is_flagged(line):
    assert filter_patch(file_diff("src/pkg/core.py", line)).suspicious


def test_junit_keys_follow_pytest_naming():
    assert junit_key("tests/test_a.py::test_y") == ("tests.test_a", "test_y")
    assert junit_key("tests/test_a.py::TestX::test_y[1-a b]") == ("tests.test_a.TestX", "test_y[1-a b]")


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_pass" time="0.01"/>
<testcase classname="tests.test_a" name="test_fail"><failure message="assert 1 == 2">...</failure></testcase>
<testcase classname="tests.test_a" name="test_skip"><skipped message="no">...</skipped></testcase>
<testcase classname="tests.test_a" name="test_xfail"><skipped type="pytest.xfail" message="x"/></testcase>
<testcase classname="tests.test_a.TestK" name="test_teardown"/>
<testcase classname="tests.test_a.TestK" name="test_teardown"><error message="teardown failed"/></testcase>
</testsuite></testsuites>"""


def test_junit_outcomes_fail_closed():
    ids = ["tests/test_a.py::test_pass", "tests/test_a.py::test_fail", "tests/test_a.py::test_skip",
           "tests/test_a.py::test_xfail", "tests/test_a.py::TestK::test_teardown", "tests/test_a.py::test_absent"]
    outcomes, error = outcomes_for(ids, JUNIT)
    assert error is None
    assert [outcomes[test_id] for test_id in ids] == [
        TestStatus.PASSED, TestStatus.FAILED, TestStatus.SKIPPED, TestStatus.SKIPPED, TestStatus.ERROR,
        TestStatus.MISSING]
    for broken in (None, "", "<testsuites><testcase", "not xml at all"):
        outcomes, error = outcomes_for(ids[:1], broken)
        assert outcomes == {ids[0]: TestStatus.MISSING} and error
    assert len(parse_junit(JUNIT)) == 5


def test_rewards_by_mode():
    f2p, p2p = ["a", "b", "c", "d"], ["e", "f"]
    outcomes = {"a": TestStatus.PASSED, "b": TestStatus.PASSED, "c": TestStatus.FAILED, "e": TestStatus.PASSED,
                "f": TestStatus.PASSED}
    assert score(outcomes, f2p, p2p, "graded").reward == 0.5
    assert score(outcomes, f2p, p2p, "f2p").reward == 0.5
    assert score(outcomes, f2p, p2p, "binary").reward == 0.0
    broken_old = {**outcomes, "f": TestStatus.FAILED}
    assert score(broken_old, f2p, p2p, "graded").reward == 0.25, "breaking old tests costs"
    assert score(broken_old, f2p, p2p, "f2p").reward == 0.5
    everything = {test_id: TestStatus.PASSED for test_id in f2p + p2p}
    full = score(everything, f2p, p2p, "binary")
    assert full.reward == 1.0 and full.resolved
    assert score(everything, [], p2p, "graded").reward == 0.0, "no F2P test: nothing to earn"
    with pytest.raises(ValueError):
        score(everything, f2p, p2p, "lenient")


def test_fail_to_pass_outcomes_decide_only_a_reward_of_zero():
    """Grading stops after the F2P tests only when every P2P outcome would give the same reward, 0."""
    f2p, p2p = ["a", "b"], ["e", "f"]
    for mode in REWARD_MODES:
        for f2p_outcomes in ([TestStatus.FAILED] * 2, [TestStatus.PASSED, TestStatus.FAILED], [TestStatus.PASSED] * 2):
            partial = dict(zip(f2p, f2p_outcomes, strict=True))
            rate = score(partial, f2p, p2p, mode).f2p_rate
            rewards = {score({**partial, "e": e, "f": f}, f2p, p2p, mode).reward
                       for e in (TestStatus.PASSED, TestStatus.FAILED) for f in (TestStatus.PASSED, TestStatus.FAILED)}
            if decided_by_fail_to_pass(rate, mode):
                assert rewards == {0.0}, (mode, f2p_outcomes)
            else:
                assert max(rewards) > 0.0, (mode, f2p_outcomes)
    assert decided_by_fail_to_pass(0.0) and not decided_by_fail_to_pass(0.5)
    assert decided_by_fail_to_pass(0.5, "binary") and not decided_by_fail_to_pass(0.5, "f2p")
    with pytest.raises(ValueError):
        decided_by_fail_to_pass(0.0, "lenient")


def test_trailer_is_read_from_the_very_end_only():
    junit = "<testsuites/>"
    honest = f"test output\n{junit}\n{_TRAILER} 000 {len(junit):012d}\n"
    assert _parse_trailer(honest) == (0, junit, "test output\n")
    forged_early = f"\n{_TRAILER} 000 000000000013\n<testsuites/>" + honest.replace("000 ", "001 ", 1)
    assert _parse_trailer(forged_early)[0] == 1, "only the last line counts"
    assert _parse_trailer("output cut short by the cap") is None
    assert _parse_trailer(f"x\n{_TRAILER} 124 -00000000001\n") == (124, None, "x")


# --- canaries and the live outcome stream (issue 10) ----------------------------------------------


def _demo_test_patch() -> str:
    return ('diff --git a/tests/test_slug.py b/tests/test_slug.py\n--- a/tests/test_slug.py\n+++ b/tests/test_slug.py\n'
            '@@ -0,0 +1,5 @@\n+def test_collapses_repeated_separators():\n+    assert slugify("Hello,  World") == "hello-world"\n'
            '+\n+def test_strips_separators_from_both_ends():\n+    assert slugify("  Hello World!  ") == "hello-world"\n')


def _plan(test_patch, f2p, known, rng):
    from repo2env.patches import parse
    from repo2env.verify.canary_maker import canary_modules, plan_canaries

    return plan_canaries(canary_modules(parse(test_patch), f2p, known), known, rng)


def _shape(value) -> tuple:
    """What a forger that reads a value without knowing its meaning can tell about it."""
    import unicodedata

    if isinstance(value, str):
        return ("str", tuple(unicodedata.category(character)[0] + ("u" if character.isupper() else "") for character in value))
    if isinstance(value, (list, tuple, set)):
        return (type(value).__name__, tuple(_shape(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((_shape(key), _shape(item)) for key, item in value.items()))
    if isinstance(value, bool):
        return ("bool",)
    return (type(value).__name__, len(str(value)))


def _asserted(source: str) -> tuple[str, object]:
    """(the compared expression's text, the literal) of the last assertion of a test's definition."""
    import ast
    import textwrap

    function = ast.parse(textwrap.dedent(source)).body[0]
    test = [node for node in ast.walk(function) if isinstance(node, ast.Assert)][-1].test
    return ast.unparse(test.left), ast.literal_eval(test.comparators[0])


def test_canaries_are_the_tasks_own_tests_asserted_against_lookalike_values():
    """Each templated FAIL_TO_PASS test gets MIRRORS copies: the same call, a value of the same type,
    length, character classes and containers, a name of the module's words; with the real test they
    form a group of which at most one may pass; a distinctive value must fail (issue 18.2)."""
    import random

    from repo2env.verify.canary_maker import MIRRORS

    f2p = ["tests/test_slug.py::test_collapses_repeated_separators", "tests/test_slug.py::test_strips_separators_from_both_ends"]
    known = [*f2p, "tests/test_slug.py::test_max_length"]
    real = dict(_asserted(source) for source in (
        'def t():\n    assert slugify("Hello,  World") == "hello-world"\n',
        'def t():\n    assert slugify("  Hello World!  ") == "hello-world"\n'))
    for seed in range(30):
        plan = _plan(_demo_test_patch(), f2p, known, random.Random(seed))
        blocks = {block["name"]: block for block in plan.definitions["tests/test_slug.py"]}
        names = [canary.test_id for canary in plan.canaries]
        assert len(set(names)) == len(names) and not set(names) & set(known)
        groups = [group for group in plan.exclusive if group[0] in f2p]
        assert sorted(group[0] for group in groups) == sorted(f2p) and all(len(group) == 1 + MIRRORS for group in groups)
        for group in groups:
            for canary_id in group[1:]:
                block = blocks[canary_id.rsplit("::", 1)[1]]
                call, value = _asserted(block["source"])
                assert call in real and value != real[call] and _shape(value) == _shape(real[call]), (call, value)
                assert block["near"] == [name.split("::")[-1] for name in f2p], "placed beside the PR's tests"
                must_fail = next(canary.must_fail for canary in plan.canaries if canary.test_id == canary_id)
                assert must_fail == (sum(a != b for a, b in zip(value, real[call], strict=True)) >= 3)
        # The decoy group: a call no test makes, in the tests' style, against 1 + MIRRORS values.
        decoys = [group for group in plan.exclusive if group[0] not in f2p]
        assert len(decoys) == 1 and len(decoys[0]) == 1 + MIRRORS
        calls = {_asserted(blocks[canary_id.rsplit("::", 1)[1]]["source"])[0] for canary_id in decoys[0]}
        assert len(calls) == 1 and not calls & set(real)
        assert len(plan.must_pass) == 1
        for block in blocks.values():
            compile(block["source"], "canary", "exec")


def test_canaries_join_the_class_their_module_tests_live_in():
    import random

    patch = ('diff --git a/tests/test_slug.py b/tests/test_slug.py\n--- a/tests/test_slug.py\n+++ b/tests/test_slug.py\n'
             '@@ -1,2 +1,7 @@\n class TestSlug:\n     pass\n+\n+    @pytest.mark.parametrize("text", ["Hello,  World", "Hello, World"])\n'
             '+    def test_collapses_repeated_separators(self, text):\n+        assert slugify(text) == "hello-world"\n'
             '+        self.assertEqual(slugify("A b"), "a-b")\n')
    f2p = ["tests/test_slug.py::TestSlug::test_collapses_repeated_separators[Hello,  World]",
           "tests/test_slug.py::TestSlug::test_collapses_repeated_separators[Hello, World]"]
    plan = _plan(patch, f2p, f2p, random.Random(1))
    assert all(canary.test_id.startswith("tests/test_slug.py::TestSlug::test_") for canary in plan.canaries)
    groups = {group[0]: group for group in plan.exclusive if group[0] in f2p}
    assert sorted(groups) == sorted(f2p), "each parametrised instance has its mirrors"
    for real, group in groups.items():
        assert all(member.endswith(real[real.index("["):]) for member in group)
    for block in plan.definitions["tests/test_slug.py"]:
        assert block["container"] == ["TestSlug"]
        if not block["generated"]:
            assert block["source"].startswith('    @pytest.mark.parametrize("text", ["Hello,  World", "Hello, World"])\n'
                                              f"    def {block['name']}(self, text):\n")


def test_lookalikes_keep_type_length_character_classes_and_containers():
    import ast
    import random

    from repo2env.verify.canary_maker import lookalike

    rng = random.Random(7)
    for text in ['"Hello, World!"', "'#a, #b'", '["cli", "python"]', "{'Key': (1, 2.5)}", "1536", "b'abc'", "True",
                 '"1.5 KiB"', "r'\\d+x'"]:
        for _ in range(20):
            varied, changed = lookalike(text, own_words=["world", "hello"], vocabulary=["api", "web"], rng=rng)
            assert _shape(ast.literal_eval(varied)) == _shape(ast.literal_eval(text)), (text, varied)
            if text != "True":
                assert len(varied) == len(text) and changed == sum(a != b for a, b in zip(varied, text, strict=True))
    assert lookalike('"a\\nb"', own_words=[], vocabulary=[], rng=rng) == ('"a\\nb"', 0), "escapes are left alone"
    assert lookalike("[]", own_words=["cli"], vocabulary=[], rng=rng) == ('["cli"]', 3), "an empty value gets one word"
    assert lookalike("''", own_words=["cli"], vocabulary=[], rng=rng) == ("'cli'", 3)
    assert lookalike('"hello-world"', own_words=["hello", "world"], vocabulary=[], rng=rng, own_share=1.0)[0] == '"world-hello"'


def _stream(*records) -> str:
    import json

    return "".join(json.dumps(record) + "\n" for record in records)


def _run(test_id, outcome="passed"):
    return [["R", test_id, "setup", "passed", False], ["R", test_id, "call", outcome, False],
            ["R", test_id, "teardown", "passed", False]]


def _verdict(records, junit, *, output="== 1 failed, 2 passed in 0.1s ==", exit_status=1):
    from repo2env.verify.canaries import Canary, CanaryPlan
    from repo2env.verify.tamper import parse_stream, verdict

    plan = CanaryPlan((Canary("t.py::test_fail", "t.py", must_fail=True), Canary("t.py::test_pass", "t.py", must_pass=True)), {})
    return verdict(stream=parse_stream(_stream(*records)), junit=junit, output=output, pytest_exit=exit_status,
                   plan=plan, test_ids=["t.py::test_real"])


HONEST = [["S", 1], *_run("t.py::test_real"), *_run("t.py::test_fail", "failed"), *_run("t.py::test_pass"), ["E", 1]]
HONEST_JUNIT = {"t.py::test_real": TestStatus.PASSED, "t.py::test_fail": TestStatus.FAILED, "t.py::test_pass": TestStatus.PASSED}


def test_an_honest_run_is_not_tampered():
    assert _verdict(HONEST, HONEST_JUNIT) is None


@pytest.mark.parametrize(("records", "junit", "exit_status", "reason"), [
    (HONEST, {**HONEST_JUNIT, "t.py::test_fail": TestStatus.PASSED}, 1, "must fail passed"),
    ([["S", 1], *_run("t.py::test_real", "failed"), *_run("t.py::test_fail", "failed"), *_run("t.py::test_pass"), ["E", 1]],
     HONEST_JUNIT, 1, "report says t.py::test_real passed"),
    ([["S", 1], *_run("t.py::test_real"), *_run("t.py::test_fail", "failed"), *_run("t.py::test_pass", "failed"), ["E", 1]],
     {**HONEST_JUNIT, "t.py::test_pass": TestStatus.FAILED}, 1, "must pass failed"),
    (HONEST, HONEST_JUNIT, 0, "exited with 0"),
    (HONEST[:-1], HONEST_JUNIT, 0, "never finished"),
    ([], HONEST_JUNIT, 1, "no live outcomes"),
])
def test_lies_are_tampering(records, junit, exit_status, reason):
    found = _verdict(records, junit, exit_status=exit_status)
    assert found is not None and all(word in found for word in reason.split()[-2:]), found


def test_a_summary_line_that_counts_more_passes_than_the_stream_is_tampering():
    assert "summary line" in _verdict(HONEST, HONEST_JUNIT, output="== 3 passed in 0.1s ==")
    assert _verdict(HONEST, HONEST_JUNIT, output="no summary at all") is None


def test_a_node_id_that_runs_twice_counts_twice_in_both_channels():
    """Identical parameters give identical node ids (packaging's ``test_specifiers_normalized``
    lists ``1.0dev1`` twice): pytest runs and counts both, and so must the stream's count."""
    twice = [["S", 1], *_run("t.py::test_real"), *_run("t.py::test_real"), *_run("t.py::test_fail", "failed"),
             *_run("t.py::test_pass"), ["E", 1]]
    assert _verdict(twice, HONEST_JUNIT, output="== 1 failed, 3 passed in 0.1s ==") is None
    assert "summary line" in _verdict(twice, HONEST_JUNIT, output="== 1 failed, 4 passed in 0.1s ==")
    # A second run that failed is no second pass (and the report's "passed" for that id is a lie).
    once = [["S", 1], *_run("t.py::test_real"), *_run("t.py::test_real", "failed"), *_run("t.py::test_fail", "failed"),
            *_run("t.py::test_pass"), ["E", 1]]
    assert _verdict(once, HONEST_JUNIT, output="== 2 failed, 3 passed in 0.1s ==") is not None
    assert _verdict(once, {**HONEST_JUNIT, "t.py::test_real": TestStatus.FAILED},
                    output="== 2 failed, 2 passed in 0.1s ==") is None


def test_pytest_3_instance_level_in_streamed_ids_matches_the_canaries_and_junit_spelling():
    from repo2env.verify.tamper import parse_stream, stream_key

    assert stream_key("t.py::T::()::test_a[x::()::y]") == "t.py::T::test_a[x::()::y]"
    assert stream_key("t.py::test_a[()]") == "t.py::test_a[()]"
    stream = parse_stream(_stream(["S", 1], *_run("t.py::T::()::test_a"), ["E", 0]))
    assert stream.status("t.py::T::test_a") == stream.status("t.py::T::()::test_a") == TestStatus.PASSED


def test_old_pytest_usage_error_after_a_clean_session_is_no_tampering_only_with_its_error_line():
    records = [["S", 1], ["C", "t.py"], ["E", 0]]
    junit = {"t.py::test_real": TestStatus.MISSING}
    usage_error = "== 1 error in 0.1s ==\nERROR: not found: /testbed/t.py::test_real\n"
    assert _verdict(records, junit, output=usage_error, exit_status=4) is None
    assert "exited with 4" in _verdict(records, junit, output="== 1 error in 0.1s ==", exit_status=4)
    assert "exited with 3" in _verdict(records, junit, output=usage_error, exit_status=3)


# --- the grading specification (issue 21.2) ----------------------------------------------------------


def _spec_task(**changes):
    from repo2env.models import Task

    fields = dict(instance_id="acme__w-1", repo="acme/w", pull_number=1, base_commit="a" * 40,
                  patch=file_diff("src/w.py", "import atexit"), test_patch=_demo_test_patch(), problem_statement="x",
                  created_at="2024-01-01T00:00:00Z",
                  FAIL_TO_PASS=["tests/test_slug.py::test_collapses_repeated_separators"],
                  PASS_TO_PASS=["tests/test_slug.py::test_collapses_repeated_separators", "tests/test_slug.py::test_x"])
    return Task(**{**fields, **changes})


def test_the_spec_is_derived_once_per_task_and_holds_what_a_grading_reads():
    from repo2env.models import ValidationReport
    from repo2env.verify import spec as specs

    task = _spec_task()
    spec = specs.grading_spec(task)
    assert specs.grading_spec(task.model_copy()) is spec, "a task graded again reads its patches once"
    assert spec.test_ids == ["tests/test_slug.py::test_collapses_repeated_separators", "tests/test_slug.py::test_x"]
    assert spec.gold_paths == ["src/w.py"] and spec.gold_runner_references == ["atexit"]
    assert spec.hidden_test_files == ["tests/test_slug.py"] and spec.timeout_s == specs.DEFAULT_TIMEOUT_S
    assert spec.runner.config_dirs == ["/testbed/tests", "/testbed"]
    assert [config.name for config in spec.runner.config_files][:3] == ["pytest.toml", ".pytest.toml", "pytest.ini"]
    assert spec.runner.session_statuses == [0, 1, 2, 3, 4, 5]
    assert [module.path for module in spec.canary_modules] == ["tests/test_slug.py"]
    measured = task.model_copy(update={"validation": ValidationReport(grading_timeout_s=75.0)})
    assert specs.grading_spec(measured).timeout_s == 75.0, "validation's timeout is the task's"
    assert specs.grading_spec(measured, timeout_s=10).timeout_s == 10
    # The settings grade.sh reads: every name it assigns is there (see read_settings in grade.sh).
    layout = specs.GradingLayout.fresh()
    plan = spec.plan_canaries()
    run_ids = spec.run_ids(plan)
    assert sorted(run_ids) == sorted([*spec.test_ids, *(canary.test_id for canary in plan.canaries)])
    settings = spec.script_settings(run_ids, layout)
    scripts = specs.grading_scripts()
    shell, restore = scripts["grade.sh"] + scripts["run_tests.sh"], scripts["restore.py"]
    for name in ("inputs", "private", "junit", "timeout_s", "test_cmd", "python_path", "plugin", "fifo", "test_ids",
                 "config_dirs", "config_names", "config_sections", "run_options", "report_options", "gold_paths",
                 "runner_pattern", "gold_references"):
        assert name in settings, name
        assert f"${name}" in shell or f"${{{name}" in shell or f'grading["{name}"]' in restore, name
    assert "protected_pattern" not in settings
    assert spec.script_settings(run_ids, layout, host_filtered=False)["protected_pattern"] == spec.protected_pattern
    assert type(spec).model_validate_json(spec.model_dump_json()) == spec, "the spec travels as JSON (tests/spec.json)"


@pytest.mark.parametrize(("version", "config_named", "options", "report"), [
    (None, True, ["-p", "no:cacheprovider", "--rootdir=/testbed", "--junitprefix=", "--continue-on-collection-errors"], ["--override-ini=junit_family=xunit2"]),
    ("8.3.3", True, ["-p", "no:cacheprovider", "--rootdir=/testbed", "--junitprefix=", "--continue-on-collection-errors"], ["--override-ini=junit_family=xunit2"]),
    ("3.5.1", True, ["-p", "no:cacheprovider", "--rootdir=/testbed", "--junitprefix=", "--continue-on-collection-errors"], ["--override-ini=junit_family=xunit2"]),
    ("3.0.7", False, ["-p", "no:cacheprovider", "--junitprefix=", "--continue-on-collection-errors"], ["--override-ini=junit_family=xunit2"]),
    ("2.8.7", False, ["-p", "no:cacheprovider", "--junitprefix="], []),
])
def test_the_spec_follows_the_tasks_pytest(version, config_named, options, report):
    """Old pytest (2016-2018 pins): no option it lacks; the JUnit-format option as one word (pytest
    3's -o swallows the ids after it); no -c below 3.5, which would make the tests' folder its rootdir."""
    from repo2env.models import EnvSpec
    from repo2env.verify import spec as specs

    task = _spec_task(env_spec=EnvSpec(python="3.6", pytest_version=version))
    runner = specs.grading_spec(task).runner
    assert runner.options == options and runner.report_options == report
    assert (runner.config_dirs == ["/testbed/tests", "/testbed"]) is config_named
    assert runner.config_dirs == [] or config_named


# --- reading a run: outcomes only from a run that ended on its own, from the live stream (issue 18.1)


def _script_output(status: int, xml: str | None, test_output: str = "== 1 failed, 2 passed in 0.1s ==\n") -> str:
    from repo2env.verify.trailer import TRAILER

    body = test_output + (xml or "")
    return f"{body}\n{TRAILER} {status:03d} {len(xml.encode()) if xml is not None else -1:012d}\n"


_ALL_PASSED_XML = ('<testsuites><testsuite name="pytest">' + "".join(
    f'<testcase classname="t" name="{name}"/>' for name in ("test_real", "test_fail", "test_pass")) + "</testsuite></testsuites>")
_HONEST_XML = ('<testsuites><testsuite name="pytest"><testcase classname="t" name="test_real"/>'
               '<testcase classname="t" name="test_fail"><failure message="AssertionError: x"/></testcase>'
               '<testcase classname="t" name="test_pass"/></testsuite></testsuites>')


def _read(status, xml, records, **changes):
    from repo2env.verify.canaries import Canary, CanaryPlan
    from repo2env.verify.reading import read_run

    plan = CanaryPlan((Canary("t.py::test_fail", "t.py", must_fail=True), Canary("t.py::test_pass", "t.py", must_pass=True)), {})
    arguments = dict(exit_code=0, truncated=False, timed_out=False, output=_script_output(status, xml),
                     stream_text=_stream(*records) if records is not None else None, test_ids=["t.py::test_real"],
                     run_ids=["t.py::test_real", "t.py::test_fail", "t.py::test_pass"], plan=plan, timeout_s=60)
    return read_run(**{**arguments, **changes})


def test_an_honest_run_is_read_from_the_live_stream():
    reading = _read(1, _HONEST_XML, HONEST)
    assert (reading.tests, reading.error, reading.tampered) == ({"t.py::test_real": TestStatus.PASSED}, None, False)


@pytest.mark.parametrize(("status", "reason"), [
    (124, "timed out after 60 s"), (137, "killed (SIGKILL"), (143, "SIGTERM"), (134, "SIGABRT"), (7, "status 7"),
])
def test_a_run_cut_short_earns_nothing_whatever_it_left(status, reason):
    """Everything passed in every channel, the canaries as they must: still nothing, with the reason."""
    reading = _read(status, _HONEST_XML, HONEST)
    assert reading.tests == {"t.py::test_real": TestStatus.MISSING} and not reading.tampered
    assert reason in reading.error and "earns nothing" in reading.error


def test_a_forged_report_left_by_a_run_cut_short_is_tampering_or_nothing():
    """The report says all passed, the stream stopped early, the process was killed."""
    reading = _read(137, _ALL_PASSED_XML, [["S", 1], *_run("t.py::test_real", "failed")])
    assert reading.tampered and reading.tests == {"t.py::test_real": TestStatus.ERROR}


def test_the_stream_decides_and_the_report_cross_checks():
    # The report lacks a test the stream passed: failed closed, not tampering (an unreadable name).
    lacking = _HONEST_XML.replace('<testcase classname="t" name="test_real"/>', "")
    reading = _read(1, lacking, HONEST)
    assert reading.tests == {"t.py::test_real": TestStatus.MISSING} and "lacks 1 test" in reading.error
    # The stream passed a test the report failed: tampering.
    failed = _HONEST_XML.replace('name="test_real"/>', 'name="test_real"><failure message="no"/></testcase>')
    assert _read(1, failed, HONEST).tampered
    # No report at all, the session finished: nothing counts.
    assert _read(1, None, HONEST).tests == {"t.py::test_real": TestStatus.MISSING}
    # The collector could not be read: nothing counts, no tampering claimed.
    unread = _read(1, _HONEST_XML, None)
    assert unread.tests == {"t.py::test_real": TestStatus.MISSING} and not unread.tampered
    assert "could not be read" in unread.error


def test_pytest_stopping_before_its_session_is_no_report_and_no_tampering():
    from repo2env.verify.junit import NO_JUNIT

    reading = _read(4, None, [["S", 1]])
    assert (reading.error, reading.tampered, reading.test_status) == (NO_JUNIT, False, 4)


def test_the_grading_scripts_own_statuses_say_why_it_stopped():
    reading = _read(0, None, None, exit_code=90, output="error: patch failed\n")
    assert not reading.patch_applied and "does not apply" in reading.error
    reading = _read(0, None, None, exit_code=92, output='REPO2ENV-RUNNER-REFERENCES ["atexit"]\n')
    assert "atexit" in reading.error and reading.patch_applied


def test_of_an_exclusive_group_at_most_one_may_pass():
    from repo2env.verify.canaries import Canary, CanaryPlan
    from repo2env.verify.tamper import parse_stream, verdict

    plan = CanaryPlan((Canary("t.py::test_mirror", "t.py"),), {}, (("t.py::test_real", "t.py::test_mirror"),))
    both = [["S", 1], *_run("t.py::test_real"), *_run("t.py::test_mirror"), ["E", 0]]
    junit = {"t.py::test_real": TestStatus.PASSED, "t.py::test_mirror": TestStatus.PASSED}
    found = verdict(stream=parse_stream(_stream(*both)), junit=junit, output="", pytest_exit=0, plan=plan,
                    test_ids=["t.py::test_real"])
    assert found and "cannot pass together" in found
    one = [["S", 1], *_run("t.py::test_real"), *_run("t.py::test_mirror", "failed"), ["E", 1]]
    assert verdict(stream=parse_stream(_stream(*one)), junit={**junit, "t.py::test_mirror": TestStatus.FAILED},
                   output="", pytest_exit=1, plan=plan, test_ids=["t.py::test_real"]) is None


def test_a_test_that_expects_an_exception_is_mirrored_with_an_unrelated_one():
    """``with pytest.raises(ValueError)`` mirrored by another built-in exception none is a subclass
    of: one call cannot raise both, so of the test and its mirrors at most one may pass (never a
    must-fail: what the unfixed code raises is not known)."""
    import random

    from repo2env.verify.canary_maker import _EXCEPTIONS

    patch = ('diff --git a/tests/test_duration.py b/tests/test_duration.py\n--- a/tests/test_duration.py\n'
             '+++ b/tests/test_duration.py\n@@ -0,0 +1,3 @@\n+def test_rejects_unknown_units():\n'
             '+    with pytest.raises(ValueError):\n+        parse_duration("1h30x")\n')
    f2p = ["tests/test_duration.py::test_rejects_unknown_units"]
    plan = _plan(patch, f2p, f2p, random.Random(2))
    [group] = [group for group in plan.exclusive if group[0] == f2p[0]]
    blocks = {block["name"]: block["source"] for block in plan.definitions["tests/test_duration.py"]}
    for mirror in group[1:]:
        source = blocks[mirror.rsplit("::", 1)[1]]
        expected = source.split("pytest.raises(", 1)[1].split(")", 1)[0]
        assert expected in _EXCEPTIONS and expected != "ValueError" and 'parse_duration("1h30x")' in source
        assert not next(canary for canary in plan.canaries if canary.test_id == mirror).must_fail


@pytest.mark.parametrize("block", ["pytest.raises(ValidationError) as excinfo", "self.assertRaises(ValidationError)",
                                   "raises(ValidationError)"])
def test_an_assertion_below_the_raising_call_of_a_raises_block_is_no_anchor(block):
    """marshmallow 1343 asserts the error's messages inside ``with pytest.raises(...)``, below the
    call that raises: that assertion never runs, so a mirror with another literal would pass as
    gold does and read as tampered. Only an assertion that runs is an anchor; a plain ``with``
    block's assertions still are."""
    import random

    body = ("+    with {block}:\n+        result = load({{'foo': 'x'}})\n"
            "+        assert result.messages == {{'foo': ['Not a valid thing.']}}\n")
    patch = ('diff --git a/tests/test_load.py b/tests/test_load.py\n--- a/tests/test_load.py\n'
             '+++ b/tests/test_load.py\n@@ -0,0 +1,4 @@\n+def test_nested_errors():\n' + body.format(block=block))
    f2p = ["tests/test_load.py::test_nested_errors"]
    plan = _plan(patch, f2p, f2p, random.Random(3))
    sources = [definition["source"] for definition in plan.definitions.get("tests/test_load.py", [])]
    assert not any("result.messages ==" in source for source in sources), sources
    opened = patch.replace(block, "open('x')")
    plan = _plan(opened, f2p, f2p, random.Random(3))
    assert any("result.messages ==" in definition["source"] for definition in plan.definitions["tests/test_load.py"])

@pytest.mark.parametrize(("gold_seconds", "policy_timeout", "expected"), [
    (0.8, 600.0, 60.0),     # a fast task gets the floor: a loaded machine still finishes an honest run
    (12.0, 600.0, 120.0),   # ten times gold's measured time
    (90.0, 600.0, 600.0),   # never more than the policy's own timeout
    (90.0, 300.0, 300.0),
])
def test_validation_sets_each_tasks_timeout_from_golds_time_with_a_wide_margin(gold_seconds, policy_timeout, expected):
    from repo2env.validate.acceptance import load_acceptance_policy
    from repo2env.validate.run import grading_timeout

    policy = load_acceptance_policy("default").model_copy(update={"timeout_s": policy_timeout})
    assert grading_timeout(policy, gold_seconds) == expected


def test_validations_own_variants_get_a_lower_floor_and_factor_than_the_tasks_recorded_timeout():
    from repo2env.validate.acceptance import load_acceptance_policy
    from repo2env.validate.run import VARIANT_TIMEOUT_FACTOR, VARIANT_TIMEOUT_FLOOR_S, grading_timeout

    policy = load_acceptance_policy("default")
    variant = {"floor_s": VARIANT_TIMEOUT_FLOOR_S, "factor": VARIANT_TIMEOUT_FACTOR}
    assert grading_timeout(policy, 0.8, **variant) == 30.0 < grading_timeout(policy, 0.8)
    assert grading_timeout(policy, 12.0, **variant) == 72.0 < grading_timeout(policy, 12.0) == 120.0


def test_validations_own_variants_stop_at_a_stall_well_before_their_timeout():
    """Three times gold's whole run without an outcome (no test of gold took that long), at least
    10 s; none when that is no shorter than the variant's timeout."""
    from repo2env.validate.run import variant_stall

    assert variant_stall(0.8, 30.0) == 10.0
    assert variant_stall(5.4, 54.0) == 16.2
    assert variant_stall(12.0, 30.0) is None
