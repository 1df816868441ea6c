"""The schemas every stage passes to the next: one source of truth.

``Task`` is a superset of a SWE-bench instance: the SWE-bench fields keep SWE-bench's names and
meaning, so :meth:`Task.to_swebench_row` rows load in SWE-bench tooling, and repo2env's own fields
(``env_spec``, ``validation``, ``aux_patch`` ...) ride along. Rows are validated when read: a bad row
raises :class:`~repo2env.errors.TaskFormatError` naming the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from repo2env import defaults
from repo2env.errors import TaskFormatError
from repo2env.outcomes import TestStatus  # noqa: F401 - one of the schemas, defined where the sandbox can import it

#: Bumped whenever a stored field changes meaning or a required field is added.
SCHEMA_VERSION = 1

INSTANCE_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+__[A-Za-z0-9_.-]+-\d+$")
SHA_PATTERN = re.compile(r"^[0-9a-f]{40}$")
REPO_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,38}/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}")
"""A repository as ``owner/name`` (the one definition; use with ``fullmatch``). A little wider than
GitHub's rules, so local clones named ``my_org/x`` pass; never ``.``/``..`` as a name."""


#: How pytest is started: as a module, so the repository's own conftest and rootdir apply.
PYTEST_MODULE_CMD = "python -m pytest"
#: The test command when a task sets none (the caller appends test ids); ``-rA`` reports every
#: outcome in the output. The one definition: spec inference, derivation and grading start from it.
DEFAULT_TEST_CMD = f"{PYTEST_MODULE_CMD} -rA"


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class FileCallees(_Schema):
    """The names a test file's top level declares tests and describe blocks with (``it`` or
    ``test``, ``describe``; a local alias where the file renames them); '' where the file shows none.
    Read from a patch's hunks by a runner's ``test_callees``, or by the build from the whole file
    (:attr:`EnvSpec.test_callees`)."""

    test: str = ""
    describe: str = ""


class EnvSpec(_Schema):
    """How to build and test a repository at one commit; inferred, then overridable per repo."""

    python: str = Field("3.11", description="Python X.Y of the base image (for other languages: the base's system "
                        "Python, which the sandbox's tools run under).")
    python_reason: str | None = Field(None, description="Why this Python: the evidence inference used, or 'override'.")
    base: str | None = Field(
        None, description="The base image's flavour when it is not the Python one of `python` (repo2env/base:<base>, "
        "e.g. 'node18' for a JavaScript task).")
    node: str | None = Field(None, description="Node.js major of the base image (JavaScript tasks).")
    node_reason: str | None = Field(None, description="Why this Node: the evidence inference used.")
    package_manager: str | None = Field(
        None, description="What installs a JavaScript project's dependencies: npm, yarn (classic), yarn-berry or pnpm.")
    dependency_pin: str | None = Field(
        None, description="How the dependencies were held at the base commit when `date_pin` does not say it alone: "
        "'lockfile <file>' (the lock file at the commit), 'before <ISO time>' (npm --before) or 'none (<why>)'.")
    test_runner: str | None = Field(
        None, description="The test runner when it is not pytest (jest, vitest, mocha, ava, tape, node).")
    package_dir: str | None = Field(
        None, description="The workspace package (folder) whose tests the task runs, for a monorepo; '' or None: "
        "the root.")
    added_dependencies: dict[str, str] = Field(
        default_factory=dict, description="Packages the task's PR adds to what the install reads, or whose range it "
        "changes: JavaScript, name -> the PR's range in a package.json of the install, installed into node_modules "
        "(package.json and the lock file left as the base commit has them); Python, canonical name -> the PR's "
        "requirement from its requirement files, dependencies, test extras or groups, installed over the base "
        "commit's install (date-pinned with uv where the install has it). After the base commit's dependencies, since "
        "neither the reference solution nor a fix that adds the same dependency could load them in a sandbox without "
        "network.")
    test_env: dict[str, str] = Field(
        default_factory=dict, description="Variables the project's test script sets for its runner's first call "
        "(TZ=Pacific/Auckland npm run test-tz, cross-env NODE_ENV=test): every run of the task's tests exports them, "
        "with test_cmd's options (JavaScript tasks).")
    system_packages: list[str] = Field(default_factory=list, description="Debian packages for the env layer.")
    install: list[str] = Field(default_factory=list, description="Shell commands run in the env layer, in order.")
    test_cmd: str = Field(DEFAULT_TEST_CMD, description="Test runner; test ids are appended.")
    date_pin: str | None = Field(None, description="ISO date: dependencies resolved as of this day.")
    image: str | None = Field(None, description="Image tag built for this spec.")
    image_digest: str | None = Field(None, description="Image id (sha256) once built.")
    pushed_image: str | None = Field(
        None, description="Where 'repo2env publish --push-images' pushed the task image: REGISTRY/NAME@sha256:DIGEST "
                          "(pullable anywhere that reaches the registry; 'repo2env pull' uses it).")
    snapshot_commit: str | None = Field(
        None, description="The commit of /testbed in the task image (a one-commit snapshot of base_commit's "
                          "files): what the agent's diff is taken against, by the sandboxes and Harbor tasks alike.")
    rung: str | None = Field(None, description="Which retry rung of the install ladder succeeded.")
    env_image: str | None = Field(None, description="The shared env image (dependencies) under the task image.")
    deps_fingerprint: str | None = Field(None, description="Hash of the dependency-defining files at the commit.")
    warmup: str | None = Field(
        None, description="Command run once at build time, with network, as the agent in /testbed (caches land "
                          "in the task image), e.g. the test collection of a suite that downloads data.")
    needs_network: bool | None = Field(
        None, description="True when the warm-up fetched files (some tests need the network on first use); "
                          "None when there was no warm-up.")
    override_hash: str | None = Field(
        None, description="Hash of the per-repo override the build used (None: none); a changed one rebuilds.")
    status: Literal["pending", "env_ok", "env_failed"] = Field("pending", description="Outcome of 'repo2env build'.")
    error: str | None = Field(None, description="Why the build failed (status env_failed).")
    log_path: str | None = Field(None, description="Build log of the last attempt.")
    dockerfiles: dict[str, str] = Field(default_factory=dict, description="The Dockerfile of each layer as built "
                                        "(base: its tag; env; task), published with the dataset.")
    pytest_version: str | None = Field(None, description="The pytest the task image runs (read by the build): "
                                       "derivation and grading leave out the options an older pytest lacks.")
    test_callees: dict[str, FileCallees] = Field(
        default_factory=dict, description="JavaScript tasks whose runner's test functions are imported (vitest, ava, "
        "tape, node --test): per hidden test file, the names its top level declares tests and describe blocks with, "
        "read by the build from the whole file as a grading restores it (the image's snapshot with the test patch "
        "applied), not only from the patch's hunks: the grader's canaries are declared with them.")

    @property
    def runnable_image(self) -> str | None:
        """The image a harness runs the task in: the pushed reference (registry, name and digest,
        pinned) when the image was pushed, else the local tag ``repo2env build`` made."""
        return self.pushed_image or self.image

    @field_validator("python")
    @classmethod
    def _python_is_x_y(cls, value: str) -> str:
        if not re.fullmatch(r"[23]\.\d{1,2}", value):
            raise ValueError(f"python must look like '3.11', got {value!r}")
        return value

    def spec_hash(self) -> str:
        """A short hash of everything that decides the env image's content (not its tag or id)."""
        keyed = self.model_dump(include={"python", "system_packages", "install", "date_pin", "deps_fingerprint"})
        # Fields only other languages set count when set, so that a Python spec's hash (and the
        # env images built under it) stays what it was before they existed.
        keyed.update({name: value for name, value in self.model_dump(include={"base", "node", "package_manager"}).items()
                      if value is not None})
        if self.added_dependencies:
            keyed["added_dependencies"] = self.added_dependencies
        return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]

    def base_flavour(self) -> str:
        """The base image's flavour: ``base``, else ``py<python>`` (``repo2env/base:py3.11``)."""
        return self.base or f"py{self.python}"


class ExecResult(_Schema):
    """A command run in a sandbox."""

    exit_code: int
    output: str = ""
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    stalled: bool = False  #: stopped before its timeout: no output for its idle timeout once output began


class GradeResult(_Schema):
    """The hidden verifier's verdict on one patch for one task."""

    instance_id: str
    mode: Literal["graded", "binary", "f2p"] = "graded"
    reward: float = 0.0
    f2p_rate: float = 0.0
    p2p_rate: float = 0.0
    resolved: bool = False
    tests: dict[str, TestStatus] = Field(default_factory=dict)
    patch_applied: bool = True
    filtered_paths: list[str] = Field(default_factory=list, description="Test files the grader dropped from the patch.")
    error: str | None = None
    failures: dict[str, str] = Field(
        default_factory=dict, description="For each of the task's tests that did not pass (at most 20), the first line "
        "of why: its failure, error or skip message, or that the report does not hold it.")
    tampered: bool = Field(False, description="The run's outcomes were forged: a canary lied or the channels disagreed.")
    pytest_exit: int | None = None
    log_dir: str | None = None
    duration_s: float = 0.0
    tests_duration_s: float = Field(0.0, description="Wall time of the grading script in the sandbox (tests included).")
    stopped_early: bool = Field(False, description="Only FAIL_TO_PASS ran (Grader.grade's stop_early): their outcomes "
                                "decided the reward, so PASS_TO_PASS did not run: `tests` holds F2P tests only, "
                                "and p2p_rate is not measured.")


RolloutKind = Literal["gold", "null", "partial", "near_miss", "stub", "policy"]


class RolloutResult(_Schema):
    """One reference or policy rollout, graded."""

    kind: RolloutKind
    name: str = ""
    reward: float
    resolved: bool = False
    grade: GradeResult | None = None


InterfaceKind = Literal["function", "method", "class", "name", "keyword", "module", "cli_option"]


class InterfaceName(_Schema):
    """A name the hidden tests use that the gold patch introduces and the issue text never names:
    an agent would have to guess it, so the instruction's Interface section gives it (or the task
    is rejected, as the policy says)."""

    kind: InterfaceKind
    name: str = Field(description="As the code spells it: module.function, module.Class.method, "
                                  "module.function(keyword), module.NAME, a module, an option's spellings.")
    signature: str = Field("", description="Parameters and plain type annotations; a default value shows as "
                                           "'...'; never a body or a test's content.")
    path: str = Field("", description="The file that holds it after the fix.")
    tests: list[str] = Field(default_factory=list, description="The FAIL_TO_PASS tests that use it.")


class QualityReport(_Schema):
    """Whether a task is fair: a policy can solve it from its instruction, and its tests judge the fix.

    Measured from what validation already has: the gold patch, the hidden tests, the problem
    statement and the reference rollouts (docs/quality.md). Three parts:

    - the interface the hidden tests need (names the fix introduces that the issue never names),
      and what the policy did with it;
    - test adequacy: near misses and stubs that still earn the full reward, FAIL_TO_PASS tests
      that only compare strings the issue never says, hunks of the gold patch that no test needs
      (the gold patch minus that hunk still earns the full reward); ``adequacy`` sums them up;
    - specification signals of the issue text; ``specification`` sums them up.

    With policy rollouts, ``pass_at_k`` (the unbiased estimator) says how often a model solves it.
    """

    interface: list[InterfaceName] = Field(default_factory=list)
    interface_action: Literal["none", "instruction", "rejected", "ignored"] = Field(
        "none", description="What the policy did with the interface: none needed, written into the instruction "
                            "(Task.interface), the task rejected (underspecified_interface), or left as it is.")
    interface_leak: float = Field(0.0, ge=0.0, le=1.0, description="How much of the fix beyond the signatures "
                                  "the Interface section reveals (0: nothing; the section is withheld otherwise).")
    mutants: int = Field(0, description="Near-miss and stub rollouts graded cleanly.")
    surviving_mutants: list[str] = Field(default_factory=list,
                                         description="Those of them that earned the full reward, by name.")
    asserting_tests: int = Field(0, description="FAIL_TO_PASS tests whose assertions were read.")
    string_only_tests: list[str] = Field(
        default_factory=list, description="FAIL_TO_PASS tests whose every assertion is an exact error message or "
                                          "a prose string that the issue text does not contain.")
    hunks: int = Field(0, description="Hunks of the gold patch.")
    hunk_drops: int = Field(0, description="Hunks whose 'gold patch minus this hunk' rollout was graded.")
    untested_hunks: list[int] = Field(default_factory=list,
                                      description="1-based hunks whose removal still earns the full reward.")
    adequacy: float | None = Field(None, description="Mean of the parts measured: 1 - share of surviving mutants, "
                                   "1 - share of string-only tests, 1 - share of untested hunks (None: none measured).")
    statement_words: int = 0
    reproduction: bool = Field(False, description="The issue shows how to reproduce: code, steps or a traceback.")
    expected_actual: bool = Field(False, description="The issue says what should happen and what does.")
    traceback: bool = Field(False, description="The issue holds a traceback or an error line.")
    behaviour: int = Field(0, description="What the tests check that an issue could name: the names the tests "
                                          "use that the fix defines or changes, the files it changes, the "
                                          "messages the tests assert.")
    named_behaviour: list[str] = Field(default_factory=list, description="Those of them the issue text names.")
    specification: float | None = Field(None, description="Share of four checks the issue text meets: long "
                                        "enough, reproduces, expected vs actual, names what the tests check.")
    pass_at_k: dict[int, float] = Field(default_factory=dict,
                                        description="k -> unbiased pass@k of the policy rollouts (reward 1.0 solves).")

    @property
    def mutant_survival(self) -> float | None:
        """The share of near misses and stubs that earned the full reward (None: none graded)."""
        return len(self.surviving_mutants) / self.mutants if self.mutants else None

    @property
    def string_only_share(self) -> float | None:
        return len(self.string_only_tests) / self.asserting_tests if self.asserting_tests else None

    @property
    def untested_hunk_share(self) -> float | None:
        return len(self.untested_hunks) / self.hunk_drops if self.hunk_drops else None


class ValidationReport(_Schema):
    """What validation found for one task: its verdict with the evidence and what it cost.

    One model for ``Task.validation`` and for a line of ``validation.jsonl`` (see :meth:`record`).
    Every field has a default, so a task not yet validated holds a ``pending`` report, and lines
    and published rows written before a field existed still read.

    ``rollouts`` is the one store of rewards; :attr:`rewards` (by kind) and
    :attr:`policy_pass_rate` are views of it, so the two can never disagree. Lines written before
    the merge carried ``rewards`` by kind (and ``policy_pass_rate``) instead of rollouts: they read
    back as unnamed rollouts of those kinds and rewards.
    """

    instance_id: str = ""
    repo: str = ""
    verdict: Literal["accepted", "rejected", "pending"] = "pending"
    reasons: list[str] = Field(default_factory=list)
    policy: str | None = None
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    rollouts: list[RolloutResult] = Field(default_factory=list)
    flaky_tests: dict[str, float] = Field(default_factory=dict, description="test id -> flip rate")
    reward_mean: float | None = None
    reward_spread: float | None = None
    distinct_rewards: int | None = None
    partial_credit: bool | None = None
    leak_score: float = 0.0
    leak_flagged: bool = False
    quality: QualityReport | None = Field(None, description="Whether the task is fair to a policy and its tests "
                                          "judge the fix (docs/quality.md); None: not measured.")
    declared_differences: dict[str, list[str]] = Field(
        default_factory=dict, description="For imported tasks: how the derived test lists differ from the declared "
        "ones (f2p_passes_before, f2p_flaky, f2p_missing, p2p_flaky, p2p_failing, f2p_not_declared).")
    gold_differences: dict[str, str] = Field(
        default_factory=dict, description="FAIL_TO_PASS / PASS_TO_PASS tests that passed in every after-run of "
        "derivation but not when the gold patch was graded, each with the first line of its failure: the grading "
        "does not run the tests as derivation does (the class is visible without opening logs).")
    canary_free_modules: list[str] = Field(
        default_factory=list, description="Test modules whose tests count their own module's tests (gold passed only "
        "without canaries there): gradings place no canaries in them, so forgery there is not detected.")
    grading_timeout_s: float | None = Field(
        None, description="Seconds the hidden tests may run when this task is graded: set from the gold patch's "
        "gradings with a wide margin (a run cut short earns nothing); None: the grader's default.")
    wall_s: float = 0.0
    tests_s: float = Field(0.0, description="Time inside test runs (derivation and gradings).")
    phases: dict[str, float] = Field(default_factory=dict, description="Wall seconds by phase: derive, gold (until "
                                     "the last gold grading ended), variants (the rest of the plan: null, "
                                     "partial fixes, near misses, stubs), policy.")
    one_run_s: float | None = Field(None, description="One run of the task's tests in a started sandbox (the median "
                                    "of derivation's runs after the fix): the unit validation's cost is measured in.")
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _rewards_as_rollouts(cls, data: Any) -> Any:
        # The old validation.jsonl line and the published `validation` column carry rewards by kind
        # (and the pass rate derived from them): turn them into the rollouts they summarise.
        if isinstance(data, dict) and ("rewards" in data or "policy_pass_rate" in data):
            data = dict(data)
            rewards = data.pop("rewards", None) or {}
            data.pop("policy_pass_rate", None)
            if rewards and not data.get("rollouts"):
                data["rollouts"] = [{"kind": kind, "reward": reward} for kind, values in rewards.items()
                                    for reward in values]
        return data

    @property
    def rewards(self) -> dict[str, list[float]]:
        """Rewards by rollout kind, in rollout order."""
        rewards: dict[str, list[float]] = {}
        for rollout in self.rollouts:
            rewards.setdefault(rollout.kind, []).append(rollout.reward)
        return rewards

    @property
    def policy_pass_rate(self) -> float | None:
        """The share of policy rollouts that solved the task (None without policy rollouts)."""
        policy = self.rewards.get("policy")
        return sum(reward == 1.0 for reward in policy) / len(policy) if policy else None

    def record(self) -> ValidationReport:
        """The report as a line of validation.jsonl: every rollout without its grade details (the
        per-test outcomes and log paths stay in tasks.jsonl and the logs folder), so the line stays
        small while its rewards keep the names of the rollouts that earned them."""
        return self.model_copy(update={"rollouts": [rollout.model_copy(update={"grade": None})
                                                    for rollout in self.rollouts]})


class Task(_Schema):
    """One environment: a merged PR turned into an instruction, a snapshot and a hidden verifier."""

    schema_version: int = SCHEMA_VERSION
    instance_id: str = Field(description="owner__name-PR, as in SWE-bench.")
    repo: str = Field(description="owner/name.")
    language: str = Field(
        "python", pattern=r"^[a-z][a-z0-9_+#-]*$",
        description="The language profile that mined the task and builds, tests and grades it "
        "(repo2env.languages: 'python', 'javascript'); rows written before tasks had one are Python.")
    pull_number: int
    issue_numbers: list[int] = Field(default_factory=list)
    base_commit: str = Field(description="Commit on the base branch at which both patches apply.")
    merge_commit: str | None = None
    patch: str = Field(description="The gold change to non-test files (the reference solution).")
    test_patch: str = Field(description="The PR's change to test files: the hidden verifier.")
    aux_patch: str = Field("", description="Changelog / docs changes, needed by neither agent nor verifier.")
    problem_statement: str
    hints_text: str = ""
    leak_score: float = Field(0.0, ge=0.0, le=1.0, description="How much of the fix the issue text gave away.")
    interface: str = Field(
        "", description="The instruction's Interface section: names and signatures the hidden tests use that the "
        "fix introduces and the issue never names (as SWE-bench Pro's interface); set by validation, '' for none.")
    created_at: str = Field(description="ISO 8601 time the PR was created.")
    version: str = Field("", description="The project's X.Y version at base_commit, as SWE-bench groups tasks.")
    scm_version: str = Field(
        "", description="The full version at base_commit as setuptools-scm/hatch-vcs compute it from the whole "
        "history (git describe: '8.1.4.dev12+g1a2b3c4d'), '' without tags. The snapshot has no tags, so builds "
        "pass it on (SETUPTOOLS_SCM_PRETEND_VERSION).")
    environment_setup_commit: str | None = None
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    declared_FAIL_TO_PASS: list[str] | None = Field(
        None, description="The lists an imported dataset gave (SWE-bench rows); validate re-derives FAIL_TO_PASS / "
        "PASS_TO_PASS and reports how they differ.")
    declared_PASS_TO_PASS: list[str] | None = None
    env_spec: EnvSpec | None = None
    validation: ValidationReport | None = None

    @field_validator("instance_id")
    @classmethod
    def _instance_id_shape(cls, value: str) -> str:
        if not INSTANCE_ID_PATTERN.match(value):
            raise ValueError(f"expected 'owner__name-PR', got {value!r}")
        return value

    @field_validator("repo")
    @classmethod
    def _repo_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", value):
            raise ValueError(f"expected 'owner/name', got {value!r}")
        return value

    @field_validator("base_commit")
    @classmethod
    def _base_commit_is_sha(cls, value: str) -> str:
        if not SHA_PATTERN.match(value):
            raise ValueError(f"expected a 40-hex commit SHA, got {value!r}")
        return value

    @field_validator("created_at")
    @classmethod
    def _created_at_is_iso(cls, value: str) -> str:
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"expected an ISO 8601 time, got {value!r}") from exc
        return value

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _lists_may_be_json_strings(cls, value: Any) -> Any:
        # SWE-bench's published datasets store these two lists as JSON strings.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError("expected a list of test ids or a JSON string of one") from exc
        return value

    @staticmethod
    def make_instance_id(repo: str, pull_number: int) -> str:
        """``owner/name`` + 12 -> ``owner__name-12``."""
        return f"{repo.replace('/', '__')}-{pull_number}"

    @classmethod
    def from_row(cls, row: dict[str, Any], *, where: str = "row") -> Task:
        """Validate a dict (a JSONL line, a dataset row); errors name the field and ``where``."""
        try:
            return cls.model_validate(row)
        except ValidationError as exc:
            raise TaskFormatError(f"{where}: {_describe_validation_error(exc)}") from None

    @classmethod
    def from_json_line(cls, line: str, *, where: str = "line") -> Task:
        """Parse one JSONL line."""
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskFormatError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise TaskFormatError(f"{where}: expected a JSON object, got {type(row).__name__}")
        return cls.from_row(row, where=where)

    def to_json_line(self) -> str:
        """One JSONL line (no trailing newline), the inverse of :meth:`from_json_line`."""
        return self.model_dump_json()

    def test_command(self) -> str:
        """The command the task's tests run with (test ids are appended): its EnvSpec's, else
        :data:`DEFAULT_TEST_CMD` (a task not built yet, or an imported row without one)."""
        return self.env_spec.test_cmd if self.env_spec and self.env_spec.test_cmd else DEFAULT_TEST_CMD

    def to_swebench_row(self, *, json_lists: bool = False) -> dict[str, Any]:
        """The SWE-bench instance fields, and the image a SWE-bench-style harness runs the task in
        (:attr:`EnvSpec.runnable_image`; None before the build) under both names such harnesses
        read, ``image_name`` and ``docker_image``; F2P/P2P as JSON strings when ``json_lists``."""
        image = self.env_spec.runnable_image if self.env_spec else None
        row: dict[str, Any] = {
            "repo": self.repo,
            "instance_id": self.instance_id,
            "base_commit": self.base_commit,
            "patch": self.patch,
            "test_patch": self.test_patch,
            "problem_statement": self.problem_statement,
            "hints_text": self.hints_text,
            "created_at": self.created_at,
            "version": self.version,
            "environment_setup_commit": self.environment_setup_commit or self.base_commit,
            "FAIL_TO_PASS": list(self.FAIL_TO_PASS),
            "PASS_TO_PASS": list(self.PASS_TO_PASS),
            "image_name": image,
            "docker_image": image,
        }
        if json_lists:
            row["FAIL_TO_PASS"] = json.dumps(row["FAIL_TO_PASS"])
            row["PASS_TO_PASS"] = json.dumps(row["PASS_TO_PASS"])
        return row


class Rejection(_Schema):
    """Why one PR or task left the funnel."""

    pull_number: int
    stage: str
    reason: str
    detail: str = ""


class RepositoryRecord(_Schema):
    """Where a tasks folder's repository lives: written by ``mine`` (``source.json``), read by the
    stages that need the code (``build``)."""

    repo: str = Field(description="owner/name.")
    clone_path: str = Field(description="A local clone (bare or not) with the full history.")
    source: str = Field("", description="The mining source kind (GitSource, GitHubSource).")


class FunnelRun(BaseModel):
    """One earlier run of a stage into the same folder: its own counts and rejections."""

    model_config = ConfigDict(extra="forbid")

    started_at: str = ""
    counts: dict[str, int] = Field(default_factory=dict)
    rejections: list[Rejection] = Field(default_factory=list)


class Funnel(BaseModel):
    """How many items reached each step of a stage, and why the others were dropped.

    ``counts`` and ``rejections`` are this run's; a re-run into the same folder keeps the earlier
    runs in ``previous_runs`` and sums everything up in ``totals``.
    """

    # Mutated in place once per PR: no re-validation on assignment (it would be quadratic).
    model_config = ConfigDict(extra="forbid")

    repo: str
    source: str = ""
    started_at: str = ""
    counts: dict[str, int] = Field(default_factory=dict)
    rejections: list[Rejection] = Field(default_factory=list)
    languages: dict[str, int] = Field(
        default_factory=dict, description="This run's changes by the language of the code they change (a PR whose "
        "fix changes two languages counts for both), so a repository in a language no profile covers shows it.")
    previous_runs: list[FunnelRun] = Field(default_factory=list, description="Earlier runs, oldest first.")
    totals: dict[str, int] = Field(
        default_factory=dict, description="Over all runs: 'kept' (tasks written), and per 'rejected:<reason>' the "
        "PRs whose latest rejection it is and that no run kept.")

    def count(self, step: str, by: int = 1) -> None:
        """Add ``by`` to ``step``'s count."""
        self.counts[step] = self.counts.get(step, 0) + by

    def reject(self, pull_number: int, stage: str, reason: str, detail: str = "") -> None:
        """Record a rejection and count it under ``rejected:<reason>``."""
        self.rejections.append(Rejection(pull_number=pull_number, stage=stage, reason=reason, detail=detail))
        self.count(f"rejected:{reason}")

    def reasons(self) -> dict[str, int]:
        """Rejection reason -> how many."""
        tally: dict[str, int] = {}
        for rejection in self.rejections:
            tally[rejection.reason] = tally.get(rejection.reason, 0) + 1
        return tally


# --- agent episodes: what a policy did on a task (harness runs, policy rollouts, RepoEnv) ---------

#: Where an episode was recorded: a harness behind the capturing proxy, validation's policy
#: rollouts, or a RepoEnv episode of training.
EpisodeSource = Literal["harness", "policy", "repo_env"]
#: Which limit of an :class:`EpisodeBudget` cut an episode off.
CutOff = Literal["turns", "tokens", "wall_time"]
#: What a perturbation did: a tool call that timed out, a command whose output was cut, a model
#: call answered by a transient failure the harness must retry.
PerturbationKind = Literal["tool_timeout", "output_cut", "endpoint_failure"]
#: Where a tool call was recorded: ``sandbox``, where it ran through repo2env's tools (the sandbox
#: bridge of a host-side harness, RepoEnv); ``proxy``, where a harness running its own tools sent
#: its result to the model.
ToolRunSite = Literal["sandbox", "proxy"]
#: Characters of a tool's answer a :class:`ToolRun` keeps (the agent itself gets the whole answer).
TOOL_RUN_OUTPUT_CHARS = 4000


class EpisodeBudget(_Schema):
    """What one episode may use. The capturing proxy refuses the model call past a limit (and says
    so in the trace); the harness is then stopped and its diff graded as it stands."""

    max_turns: int = Field(defaults.EPISODE_MAX_TURNS, ge=1, description="Model calls answered.")
    max_tokens: int = Field(0, ge=0, description=(
        "The episode's length in tokens: the latest call's prompt plus its completion (what a GRPO sample of "
        "the episode holds); 0: no limit."))
    max_wall_s: float = Field(float(defaults.EPISODE_MAX_WALL_S), gt=0, description="Seconds from the episode's start.")


class PerturbationPlan(_Schema):
    """Faults injected into an episode at set rates, decided by ``seed`` (the same seed, episode and
    call give the same fault). They reach the agent only: grading runs in a fresh sandbox."""

    tool_timeout: float = Field(0.0, ge=0, le=1, description="Share of the harness's commands that time out.")
    output_cut: float = Field(0.0, ge=0, le=1, description="Share of the commands whose output is cut short.")
    endpoint_failure: float = Field(0.0, ge=0, le=1, description=(
        "Share of model calls answered by a transient failure (HTTP 503) the harness must retry."))
    seed: int = 0

    @property
    def active(self) -> bool:
        """Whether any fault can happen."""
        return bool(self.tool_timeout or self.output_cut or self.endpoint_failure)


class ModelCall(_Schema):
    """One chat-completion call of an episode, as the capturing proxy saw it."""

    index: int
    at_s: float = Field(0.0, description="Seconds from the episode's start to the call.")
    request: dict[str, Any] = Field(default_factory=dict, description=(
        "The body the agent sent (messages, tools, sampling parameters), before the proxy's additions; its "
        "tool results as the model got them (with the faults the proxy injected into them)."))
    response: dict[str, Any] | None = Field(None, description=(
        "The chat completion the agent received (a streamed one assembled into one message)."))
    stream: bool = False
    status: int = Field(200, description="The HTTP status the agent received.")
    error: str | None = None
    prompt_token_ids: list[int] | None = Field(None, description="As the upstream tokenised the prompt, when it says.")
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = Field(None, description="One per completion token, when the upstream gives them.")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    upstream_s: float = Field(0.0, description="Seconds the upstream took to answer (the whole stream, if streamed).")
    proxy_s: float = Field(0.0, description="Seconds the proxy added (reading, recording and relaying).")
    perturbation: PerturbationKind | None = None
    refused: CutOff | None = Field(None, description="The budget limit that refused this call (never forwarded).")


class ToolRun(_Schema):
    """One tool call of an episode: run through repo2env's tools (a host-side harness's sandbox
    bridge, RepoEnv), or, for a harness running its own tools in the sandbox, its result as the
    capturing proxy passed it to the model."""

    index: int
    at_s: float = Field(0.0, description="Seconds from the episode's start to the call (to the proxy first seeing its result).")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: str = Field("", description=(
        "What the agent received (at the proxy: what the model was sent), cut to a few KB in the trace."))
    exit_code: int | None = Field(None, description=(
        "The command's exit status; at the proxy unknown (None), but 124 for an injected timeout."))
    duration_s: float = 0.0
    perturbation: PerturbationKind | None = None
    recorded_at: ToolRunSite = "sandbox"
    tool_call_id: str | None = Field(None, description="The model's id of the call, where the proxy recorded it.")


class EpisodeTrace(_Schema):
    """One episode of an agent on a task: what the model was asked and answered (token ids and
    log-probabilities where the server gives them), what ran in the sandbox, how it ended, and the
    hidden verifier's grade. Written as ``trace.json`` next to the grading's logs; ``repo2env export
    trajectories`` turns traces into SFT data, the harness rollouts of GRPO read them."""

    schema_version: int = 1
    episode_id: str
    instance_id: str
    source: EpisodeSource
    agent: str = Field(..., description="mini-swe-agent, opencode, a command, 'policy' or 'repo_env'.")
    model: str = ""
    seed: int | None = Field(None, description="The sampling seed sent with every call, when one was.")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="The tools offered, in OpenAI's function format.")
    messages: list[dict[str, Any]] = Field(default_factory=list, description=(
        "The episode's conversation in OpenAI's chat format, its last answer included."))
    calls: list[ModelCall] = Field(default_factory=list)
    tool_runs: list[ToolRun] = Field(default_factory=list)
    budget: EpisodeBudget | None = None
    cut_off: CutOff | None = None
    perturbations: PerturbationPlan | None = None
    finished: str = Field("", description=(
        "How the agent ended: 'done' (it said so), 'exit N', 'stop', 'max_turns', 'cut off: <limit>', 'error: ...'."))
    started_at: str = ""
    wall_s: float = 0.0
    patch: str = Field("", description="The sandbox's diff when the episode ended: what was graded.")
    reward: float | None = None
    grade: GradeResult | None = None

    @property
    def perturbation_count(self) -> int:
        """Faults injected into this episode (model calls and tool runs)."""
        return sum(call.perturbation is not None for call in self.calls) + \
            sum(run.perturbation is not None for run in self.tool_runs)


def _describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "(row)"
        message = error["msg"]
        if error["type"] == "missing":
            message = "required field is missing"
        elif error["type"] == "extra_forbidden":
            message = "unknown field"
        parts.append(f"field '{field}': {message}")
    return "; ".join(parts)
