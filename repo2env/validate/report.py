"""Validation's human-readable outputs: ``summary.md`` (the funnel, per repo), the rewards figure
and the task-quality figure (PNG)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from repo2env.languages.test_ids import short_name
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
    ("specified", {"underspecified_interface", "underspecified_statement"}),
    ("adequate", {"inadequate_tests"}),
)
KIND_ORDER = ("gold", "null", "partial", "near_miss", "stub", "policy")


def funnel_counts(records: list[ValidationReport], mined: int) -> list[tuple[str, int]]:
    """mined -> built -> F2P found -> gold ok -> null ok -> stubs fail -> stable -> specified ->
    adequate -> accepted."""
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
        lines += ["| task | verdict | F2P | P2P | flaky (flip rate) | rewards by kind | partial credit | leak | quality "
                  "| wall s | in tests |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for record in sorted(mine, key=lambda r: r.instance_id):
            rewards = "; ".join(f"{kind}: {', '.join(f'{value:.2f}' for value in record.rewards[kind])}"
                                for kind in KIND_ORDER if kind in record.rewards)
            flaky = ", ".join(f"{short_name(test)} ({rate:.2f})" for test, rate in record.flaky_tests.items())
            verdict = record.verdict + (f" ({', '.join(record.reasons)})" if record.reasons else "")
            share = record.tests_s / record.wall_s if record.wall_s else 0.0
            lines.append(f"| {record.instance_id} | {verdict} | {len(record.FAIL_TO_PASS)} | {len(record.PASS_TO_PASS)} | "
                         f"{flaky or '-'} | {rewards or '-'} | {'yes' if record.partial_credit else 'no'} | "
                         f"{'flagged ' if record.leak_flagged else ''}{record.leak_score:.2f} | "
                         f"{quality_cell(record)} | {record.wall_s:.1f} | {share:.0%} |")
        lines.append("")
    lines += quality_summary(records)
    path.write_text("\n".join(lines) + "\n")


def quality_cell(record: ValidationReport) -> str:
    """One task's quality in a table cell: interface, adequacy, specification (docs/quality.md)."""
    quality = record.quality
    if quality is None:
        return "-"
    parts = []
    if quality.interface:
        parts.append(f"interface {len(quality.interface)} ({quality.interface_action})")
    if quality.adequacy is not None:
        parts.append(f"adequacy {quality.adequacy:.2f}")
    if quality.specification is not None:
        parts.append(f"spec {quality.specification:.2f}")
    if quality.pass_at_k:
        parts.append(f"pass@1 {quality.pass_at_k.get(1, 0.0):.2f}")
    return "; ".join(parts) or "-"


def quality_summary(records: list[ValidationReport]) -> list[str]:
    """Markdown lines: how many tasks needed an Interface section and what became of them, and the
    distributions of adequacy and specification (quartiles), over the records that have a quality block."""
    measured = [record for record in records if record.quality is not None]
    if not measured:
        return []
    actions = Counter(record.quality.interface_action for record in measured)
    lines = ["## Task quality", "",
             f"{len(measured)} tasks measured (docs/quality.md). Interface the hidden tests need and the issue "
             f"never names: {sum(count for action, count in actions.items() if action != 'none')} tasks "
             f"({actions.get('instruction', 0)} with an Interface section in the instruction, "
             f"{actions.get('rejected', 0)} rejected, {actions.get('ignored', 0)} left as they are).", "",
             "| measure | tasks | min | 25% | median | 75% | max |", "|---|---|---|---|---|---|---|"]
    for label, values in (("adequacy", [r.quality.adequacy for r in measured if r.quality.adequacy is not None]),
                          ("specification", [r.quality.specification for r in measured]),
                          ("mutant survival", [r.quality.mutant_survival for r in measured
                                               if r.quality.mutant_survival is not None]),
                          ("untested hunk share", [r.quality.untested_hunk_share for r in measured
                                                   if r.quality.untested_hunk_share is not None]),
                          ("string-only test share", [r.quality.string_only_share for r in measured
                                                      if r.quality.string_only_share is not None]),
                          ("pass@1", [r.quality.pass_at_k[1] for r in measured if 1 in r.quality.pass_at_k])):
        values = [value for value in values if value is not None]
        if values:
            lines.append(f"| {label} | {len(values)} | " + " | ".join(f"{value:.2f}" for value in _quartiles(values))
                         + " |")
    return lines + [""]


def _quartiles(values: list[float]) -> tuple[float, float, float, float, float]:
    ordered = sorted(values)

    def at(share: float) -> float:
        position = share * (len(ordered) - 1)
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return ordered[0], at(0.25), at(0.5), at(0.75), ordered[-1]


def write_quality_figure(path: Path, records: list[ValidationReport]) -> bool:
    """Distributions of the quality block (adequacy, specification, the interface policy's actions,
    pass@1 when a policy ran) over the records that have one; False (no file) when none has."""
    measured = [record.quality for record in records if record.quality is not None]
    if not measured:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pass_at_1 = [quality.pass_at_k[1] for quality in measured if 1 in quality.pass_at_k]
    panels = 3 + bool(pass_at_1)
    figure, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.8), squeeze=False)
    bins = [i / 10 for i in range(11)]
    for axis, label, values in (
            (axes[0][0], "adequacy", [q.adequacy for q in measured if q.adequacy is not None]),
            (axes[0][1], "specification", [q.specification for q in measured if q.specification is not None])):
        axis.hist(values, bins=bins, edgecolor="black")
        axis.set_xlabel(f"{label} per task")
        axis.set_ylabel("tasks")
        axis.set_title(f"{label.capitalize()} (n={len(values)})")
    actions = Counter(quality.interface_action for quality in measured)
    names = ["none", "instruction", "rejected", "ignored"]
    axes[0][2].bar(names, [actions.get(name, 0) for name in names], edgecolor="black")
    axes[0][2].set_ylabel("tasks")
    axes[0][2].set_title("Interface the tests need")
    if pass_at_1:
        axes[0][3].hist(pass_at_1, bins=bins, edgecolor="black")
        axes[0][3].set_xlabel("pass@1 per task")
        axes[0][3].set_title(f"Policy pass@1 (n={len(pass_at_1)})")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


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
