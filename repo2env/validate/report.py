"""Validation's human-readable outputs: ``summary.md`` (the funnel, per repo) and a PNG figure."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from repo2env.models import ValidationReport
from repo2env.validate.acceptance import AcceptancePolicy

#: The funnel's steps after mining, and the rejection reasons that stop a task at each.
FUNNEL = (
    ("built", {"env_failed"}),
    ("F2P found", {"no_f2p", "grading_error"}),
    ("gold ok", {"gold_fails", "gold_flaky"}),
    ("null ok", {"null_passes"}),
    ("stubs fail", {"stub_passes"}),
    ("stable", {"f2p_flaky"}),
)
KIND_ORDER = ("gold", "null", "partial", "near_miss", "stub", "policy")


def funnel_counts(records: list[ValidationReport], mined: int) -> list[tuple[str, int]]:
    """mined -> built -> F2P found -> gold ok -> null ok -> stubs fail -> stable -> accepted."""
    rows = [("mined", mined)]
    remaining = list(records)
    for step, stops in FUNNEL:
        remaining = [record for record in remaining if not set(record.reasons) & stops]
        rows.append((step, len(remaining)))
    rows.append(("accepted", sum(record.verdict == "accepted" for record in records)))
    return rows


def write_summary(path: Path, records: list[ValidationReport], *, policy: AcceptancePolicy, funnel_path: Path,
                  total_tasks: int) -> None:
    """The funnel with counts and reasons per repo, and a table of every task."""
    mined_by_repo: dict[str, int] = {}
    if funnel_path.is_file():
        funnel = json.loads(funnel_path.read_text())
        mined_by_repo[funnel.get("repo", "")] = funnel.get("counts", {}).get("kept", 0) + funnel.get("counts", {}).get(
            "already_mined", 0)
    lines = [f"# Validation summary ({policy.name} policy)", "",
             f"{len(records)} of {total_tasks} tasks validated; "
             f"{sum(r.verdict == 'accepted' for r in records)} accepted.", ""]
    for repo in sorted({record.repo for record in records}):
        mine = [record for record in records if record.repo == repo]
        mined = max(mined_by_repo.get(repo, 0), len(mine))
        lines += [f"## {repo}", "", "| step | tasks |", "|---|---|"]
        lines += [f"| {step} | {count} |" for step, count in funnel_counts(mine, mined)]
        reasons = Counter(reason for record in mine for reason in record.reasons)
        lines += ["", "Rejections: " + (", ".join(f"{reason} ({count})" for reason, count in reasons.most_common())
                                        or "none"), ""]
        lines += ["| task | verdict | F2P | P2P | flaky (flip rate) | rewards by kind | partial credit | leak | wall s | in tests |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for record in sorted(mine, key=lambda r: r.instance_id):
            rewards = "; ".join(f"{kind}: {', '.join(f'{value:.2f}' for value in record.rewards[kind])}"
                                for kind in KIND_ORDER if kind in record.rewards)
            flaky = ", ".join(f"{test.split('::')[-1]} ({rate:.2f})" for test, rate in record.flaky_tests.items())
            verdict = record.verdict + (f" ({', '.join(record.reasons)})" if record.reasons else "")
            share = record.tests_s / record.wall_s if record.wall_s else 0.0
            lines.append(f"| {record.instance_id} | {verdict} | {len(record.FAIL_TO_PASS)} | {len(record.PASS_TO_PASS)} | "
                         f"{flaky or '-'} | {rewards or '-'} | {'yes' if record.partial_credit else 'no'} | "
                         f"{'flagged ' if record.leak_flagged else ''}{record.leak_score:.2f} | {record.wall_s:.1f} | "
                         f"{share:.0%} |")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


def write_figure(path: Path, records: list[ValidationReport]) -> None:
    """Reward distributions by rollout kind (and the policy pass-rate histogram when a policy ran)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_kind = {kind: [value for record in records for value in record.rewards.get(kind, [])] for kind in KIND_ORDER}
    kinds = [kind for kind in KIND_ORDER if by_kind[kind]]
    pass_rates = [record.policy_pass_rate for record in records if record.policy_pass_rate is not None]
    columns = 2 if pass_rates else 1
    figure, axes = plt.subplots(1, columns, figsize=(6.5 * columns, 4.2), squeeze=False)
    axis = axes[0][0]
    jitter = random.Random(0)
    for position, kind in enumerate(kinds):
        values = by_kind[kind]
        axis.scatter([position + jitter.uniform(-0.18, 0.18) for _ in values], values, s=18, alpha=0.6)
        axis.hlines(sum(values) / len(values), position - 0.3, position + 0.3, colors="black", linewidth=1.5)
    axis.set_xticks(range(len(kinds)), [f"{kind}\n(n={len(by_kind[kind])})" for kind in kinds])
    axis.set_ylim(-0.05, 1.05)
    axis.set_ylabel("reward")
    axis.set_title(f"Rewards by rollout kind ({len(records)} tasks; bar = mean)")
    if pass_rates:
        histogram = axes[0][1]
        histogram.hist(pass_rates, bins=[i / 10 for i in range(11)], edgecolor="black")
        histogram.set_xlabel("policy pass rate per task")
        histogram.set_ylabel("tasks")
        histogram.set_title("Policy pass rates (learnable: strictly between 0 and 1)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
