"""Reward arithmetic: from per-test outcomes to the reward GRPO sees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from repo2env.outcomes import TestStatus

RewardMode = Literal["graded", "binary", "f2p"]
REWARD_MODES: tuple[RewardMode, ...] = ("graded", "binary", "f2p")


@dataclass(frozen=True)
class Score:
    """A reward and its parts."""

    reward: float
    f2p_rate: float
    p2p_rate: float
    resolved: bool


def score(outcomes: Mapping[str, TestStatus], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str],
          mode: RewardMode = "graded") -> Score:
    """``graded`` = f2p_rate x p2p_rate (partial fixes earn partial credit, breaking old tests costs);
    ``binary`` = 1 when every test passes; ``f2p`` = f2p_rate. No F2P test means nothing to earn: 0."""
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    passed = lambda test_id: outcomes.get(test_id) == TestStatus.PASSED  # noqa: E731
    f2p_rate = sum(map(passed, fail_to_pass)) / len(fail_to_pass) if fail_to_pass else 0.0
    p2p_rate = sum(map(passed, pass_to_pass)) / len(pass_to_pass) if pass_to_pass else 1.0
    resolved = bool(fail_to_pass) and f2p_rate == 1.0 and p2p_rate == 1.0
    reward = {"graded": f2p_rate * p2p_rate, "binary": float(resolved), "f2p": f2p_rate}[mode]
    return Score(reward=round(reward, 6), f2p_rate=round(f2p_rate, 6), p2p_rate=round(p2p_rate, 6), resolved=resolved)


def decided_by_fail_to_pass(f2p_rate: float, mode: RewardMode = "graded") -> bool:
    """Whether the FAIL_TO_PASS outcomes alone make the reward 0 (and nothing resolved), whatever
    PASS_TO_PASS does: no F2P test passed, or, in ``binary`` mode, not every one. Only a reward of 0
    is ever decided this way (not ``f2p`` mode's partial rates): a reward above 0 must come from a
    grading of every test together."""
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    return f2p_rate < 1.0 if mode == "binary" else f2p_rate == 0.0
