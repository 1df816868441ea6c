"""Acceptance policies (``validators/*.yaml``) and the verdict they give on a task's evidence.

The verdict is a pure function of the evidence (derived tests, graded rollouts), so it can be
re-computed under another policy without running anything again.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from repo2env.models import QualityReport, RolloutKind, RolloutResult, ValidationReport
from repo2env.settings import find_settings_file, read_yaml_file, validate_settings
from repo2env.verify.junit import NO_JUNIT


class AcceptancePolicy(BaseModel):
    """What validation runs and what it demands of a task. Loaded from ``validators/<name>.yaml``."""

    model_config = ConfigDict(extra="forbid")

    name: str = "default"
    description: str = ""
    reruns: int = Field(3, ge=1, description="Runs of every test per state (before/after the fix).")
    hash_seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1,
                                  description="PYTHONHASHSEED per run, cycled; run order is shuffled per run.")
    whole_suite_p2p: bool = Field(False, description="PASS_TO_PASS from the whole suite.")
    gold_runs: int = Field(2, ge=1, description="Gradings of the gold patch; each must score 1.0.")
    null_runs: int = Field(1, ge=1, description="Gradings of the empty patch; each must score <= null_floor.")
    null_floor: float = Field(0.0, ge=0.0, le=1.0)
    partial_limit: int = Field(4, ge=0, description="Proper subsets of the gold hunks to grade.")
    hunk_drop_limit: int = Field(8, ge=0, description="Gradings of the gold patch minus one of its hunks, to find "
                                 "hunks no test needs (partial fixes that are exactly that are reused); 0 grades none.")
    near_miss_limit: int = Field(4, ge=0, description="libcst mutations of the gold patch to grade.")
    stub_limit: int = Field(5, ge=0, le=5, description="Stub styles to grade (none, list, zero, str, raise: the "
                            "gold-changed functions reduced to one statement); 0 grades none.")
    max_stub_reward: float | Literal["null"] = Field(
        "null", description='Reject (stub_passes) when a stub scores above this; "null": above the best null rollout.')
    required_rollouts: list[RolloutKind] = Field(default_factory=lambda: ["gold", "null"])
    require_partial_credit: bool = Field(False, description="Reject unless some variant scores strictly in (0, 1).")
    max_flaky_fraction: float = Field(0.5, ge=0.0, le=1.0,
                                      description="Reject when more of the would-be F2P tests than this are flaky.")
    interface: Literal["instruction", "reject", "ignore"] = Field(
        "instruction", description="When the FAIL_TO_PASS tests use names the fix introduces and the issue never "
        "names: list them (names and signatures) in the instruction's Interface section, reject the task "
        "(underspecified_interface), or neither. A section the leak check withholds rejects the task too.")
    min_adequacy: float = Field(0.5, ge=0.0, le=1.0, description="Reject (inadequate_tests) when the tests' "
                                "adequacy (docs/quality.md) is below this; 0 rejects none.")
    min_specification: float = Field(0.0, ge=0.0, le=1.0, description="Reject (underspecified_statement) when "
                                     "the issue text meets fewer of the four specification checks; 0 rejects none.")
    leak_threshold: float = Field(0.5, ge=0.0, le=1.0, description="Flag tasks with leak_score at or above this.")
    reject_leaky: bool = False
    policy_k: int = Field(0, ge=0, description="Policy rollouts per task when a policy endpoint is given.")
    learnable_band: tuple[float, float] = (0.0, 1.0)
    require_learnable: bool = Field(False, description="With a policy: pass rate strictly inside the band.")
    timeout_s: float = Field(600.0, gt=0)
    stop_early: bool = Field(True, description="Grade the rollouts expected to fail (null, proper subsets of the "
                             "gold hunks, stubs) FAIL_TO_PASS first and stop when those outcomes decide the reward "
                             "(no F2P test passes: 0); gold, the gold patch minus one hunk and near misses are "
                             "always graded in full.")
    grading_jobs: int | Literal["auto"] = Field(
        "auto", description="Gradings (and derivation's two states) run at once; auto: the cores nobody used in "
                            "the last moments (/proc/stat), at least 1, at most 4 and the machine's cores. A number "
                            "sets the width outright.")


    @field_validator("grading_jobs")
    @classmethod
    def _at_least_one(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("grading_jobs must be at least 1, or auto")
        return value


def load_acceptance_policy(name_or_path: str | Path) -> AcceptancePolicy:
    """A policy by name (``default``, ``strict``: validators/ shipped with the package) or by path
    to a YAML file."""
    path = find_settings_file("validators", name_or_path, what="acceptance policy")
    return validate_settings(AcceptancePolicy, read_yaml_file(path, what="acceptance policy"), where=str(path))


#: pytest's statuses for a session it stopped itself: interrupted (collection errors), internal
#: error, usage error (a conftest.py that does not import).
_PYTEST_STOPPED = (2, 3, 4)


def _grading_failed(rollout: RolloutResult) -> bool:
    """Whether the rollout's grading failed, so its reward says nothing. The unfixed code stopping
    pytest before any report (the test suite's conftest.py imports a name only the fix adds) is the
    null rollout's answer, 0, not a failure of the grading."""
    grade = rollout.grade
    if grade is None or grade.error is None:
        return False
    return not (rollout.kind == "null" and grade.error == NO_JUNIT and grade.pytest_exit in _PYTEST_STOPPED
                and not grade.tampered)


def quality_reasons(policy: AcceptancePolicy, quality: QualityReport) -> list[str]:
    """What ``policy`` rejects a task for on its quality block alone."""
    reasons = []
    # The section is withheld (and the leak recorded) when no rendering passed the leak check.
    withheld = quality.interface_leak > 0
    if quality.interface and (policy.interface == "reject" or (policy.interface == "instruction" and withheld)):
        reasons.append("underspecified_interface")
    if quality.adequacy is not None and quality.adequacy < policy.min_adequacy:
        reasons.append("inadequate_tests")
    if quality.specification is not None and quality.specification < policy.min_specification:
        reasons.append("underspecified_statement")
    return reasons


def judge(policy: AcceptancePolicy, *, fail_to_pass: list[str], flaky: dict[str, float],
          rollouts: list[RolloutResult], leak_score: float, derive_error: str | None = None,
          env_ok: bool = True, quality: QualityReport | None = None) -> ValidationReport:
    """The verdict and its statistics, from the evidence (``quality``: the task's quality block)."""
    reasons: list[str] = []
    by_kind: dict[str, list[float]] = {}
    for rollout in rollouts:
        by_kind.setdefault(rollout.kind, []).append(rollout.reward)
    if not env_ok:
        reasons.append("env_failed")
    elif derive_error:
        reasons.append("grading_error")
    else:
        would_be_f2p = len(fail_to_pass) + len(flaky)
        if not fail_to_pass:
            reasons.append("no_f2p")
        elif would_be_f2p and len(flaky) / would_be_f2p > policy.max_flaky_fraction:
            reasons.append("f2p_flaky")
        gold = by_kind.get("gold", [])
        if any(rollout.kind in ("gold", "null") and _grading_failed(rollout) for rollout in rollouts):
            reasons.append("grading_error")
        if gold and fail_to_pass:
            if all(reward < 1.0 for reward in gold):
                reasons.append("gold_fails")
            elif any(reward < 1.0 for reward in gold):
                reasons.append("gold_flaky")
        if any(reward > policy.null_floor for reward in by_kind.get("null", [])):
            reasons.append("null_passes")
        stub_ceiling = (max(by_kind.get("null", []), default=policy.null_floor)
                        if policy.max_stub_reward == "null" else policy.max_stub_reward)
        if any(reward > stub_ceiling for reward in by_kind.get("stub", [])):
            reasons.append("stub_passes")
        for kind in policy.required_rollouts if fail_to_pass else ():  # without F2P nothing was rolled out
            if kind not in by_kind and not (kind == "policy" and policy.policy_k == 0):
                reasons.append(f"missing_{kind}_rollouts")
        if quality is not None and fail_to_pass:
            reasons += quality_reasons(policy, quality)
    variants = by_kind.get("partial", []) + by_kind.get("near_miss", [])
    partial_credit = any(0.0 < reward < 1.0 for reward in variants)
    if policy.require_partial_credit and not partial_credit and not reasons:
        reasons.append("no_partial_credit")
    leak_flagged = leak_score >= policy.leak_threshold
    if leak_flagged and policy.reject_leaky:
        reasons.append("leaky_statement")
    policy_rewards = by_kind.get("policy", [])
    if policy_rewards and policy.require_learnable:
        pass_rate = sum(reward == 1.0 for reward in policy_rewards) / len(policy_rewards)
        low, high = policy.learnable_band
        if not (low < pass_rate < high and max(policy_rewards) > min(policy_rewards)):
            reasons.append("not_learnable")
    rewards = [rollout.reward for rollout in rollouts]
    return ValidationReport(
        verdict="rejected" if reasons else "accepted",
        reasons=list(dict.fromkeys(reasons)),
        policy=policy.name,
        rollouts=rollouts,
        flaky_tests=flaky,
        reward_mean=round(statistics.fmean(rewards), 4) if rewards else None,
        reward_spread=round(statistics.pstdev(rewards), 4) if len(rewards) > 1 else 0.0 if rewards else None,
        distinct_rewards=len({round(reward, 6) for reward in rewards}) if rewards else None,
        partial_credit=partial_credit,
        leak_flagged=leak_flagged,
        quality=quality,
    )
