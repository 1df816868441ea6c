"""The mining stage: a Source's PRs -> Task candidates, with a funnel that accounts for every PR.

Cheap checks (merged, dates, linked issues) run per PR as they stream in; survivors are gathered
in batches whose base commits and diffs come from one git process each (see
:mod:`repo2env.mine.history`). Tasks are appended to ``tasks.jsonl`` as they are kept, so an
interrupted run keeps its work and a re-run skips every id already there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from repo2env import defaults
from repo2env.errors import PatchError
from repo2env.jsonl import append_jsonl, drop_torn_tail, read_task_ids, write_json, write_repository_record
from repo2env.languages import LanguageProfile
from repo2env.languages.choice import ProfileChoice, choose_profile
from repo2env.mine.history import GitHistory
from repo2env.mine.leaks import strip_leaks
from repo2env.mine.linking import pr_closing_refs
from repo2env.mine.source import Issue, PullRequest, Source
from repo2env.mine.split import SplitDiff, split_files
from repo2env.mine.versions import major_minor
from repo2env.models import Funnel, FunnelRun, RepositoryRecord, Task
from repo2env.patches import parse

STAGE = "mine"
#: Written next to tasks.jsonl: the repository and where its clone lives.
_BATCH = 256

#: Funnel steps, in order; each PR that is not kept is counted under exactly one rejection reason.
FUNNEL_STEPS = ("scanned", "selected", "merged", "linked_issue", "diff_ok", "has_source_change", "has_test_change",
                "within_limits", "applies", "kept")


@dataclass(frozen=True)
class MineOptions:
    """What to keep. Defaults follow SWE-bench's collection rules."""

    allow_no_issue: bool = False
    since: datetime | None = None
    until: datetime | None = None
    pull_numbers: frozenset[int] = frozenset()
    limit: int | None = None
    max_files: int = defaults.MINE_MAX_FILES
    max_changed_lines: int = defaults.MINE_MAX_CHANGED_LINES
    apply_workers: int = 4


@dataclass
class MineResult:
    """Where the stage wrote, and its funnel."""

    tasks_path: Path
    funnel_path: Path
    funnel: Funnel
    new_tasks: list[Task] = field(default_factory=list)
    torn_bytes: int = 0
    """Bytes of a torn last line (an earlier run killed mid-write) cut off tasks.jsonl on resume."""


ProgressCallback = Callable[[int, int], None]  # (scanned, kept)


def default_out_dir(root: Path, repo: str) -> Path:
    """``generated/owner__name``."""
    return root / repo.replace("/", "__")


def mine(source: Source, out_dir: Path, options: MineOptions = MineOptions(), *,
         progress: ProgressCallback | None = None) -> MineResult:
    """Mine ``source`` into ``out_dir/tasks.jsonl`` and ``out_dir/funnel.json``."""
    tasks_path, funnel_path = out_dir / "tasks.jsonl", out_dir / "funnel.json"
    torn_bytes = drop_torn_tail(tasks_path)
    existing = read_task_ids(tasks_path)
    funnel = Funnel(repo=source.repo, source=type(source).__name__, counts={step: 0 for step in FUNNEL_STEPS},
                    started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    previous_runs=_previous_runs(funnel_path))
    # A local-history source has read the graph already; reading it twice costs as much as mining.
    history = getattr(source, "history", None) or GitHistory(source.clone_path())
    result = MineResult(tasks_path=tasks_path, funnel_path=funnel_path, funnel=funnel, torn_bytes=torn_bytes)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks_path.touch()  # no qualifying PR is a result too: an empty tasks.jsonl
    # Later stages (build) need the code: say where the clone is.
    write_repository_record(out_dir, RepositoryRecord(repo=source.repo, clone_path=str(history.path.resolve()),
                                                      source=type(source).__name__))
    batch: list[tuple[PullRequest, list[Issue]]] = []
    # Git works on the next batch's diffs (one process, the other core) while Python splits and
    # checks the previous one.
    git_worker = ThreadPoolExecutor(max_workers=1)
    in_flight: Future | None = None

    def collect() -> None:
        nonlocal in_flight
        if in_flight is None:
            return
        located, in_flight = in_flight.result(), None
        kept = _finish_batch(located, history, funnel, options, source.repo)
        room = None if options.limit is None else max(0, options.limit - len(result.new_tasks))
        if room is not None and len(kept) > room:
            funnel.count("over_limit", len(kept) - room)
            kept = kept[:room]
        funnel.count("kept", len(kept))
        append_jsonl(tasks_path, kept)
        result.new_tasks.extend(kept)

    def submit() -> None:
        nonlocal in_flight
        collect()
        in_flight = git_worker.submit(_locate_and_diff, list(batch), history)
        batch.clear()

    try:
        for pull in source.pulls():
            if options.limit is not None and len(result.new_tasks) >= options.limit:
                break
            funnel.count("scanned")
            candidate = _screen(pull, source, funnel, options, existing)
            if candidate is not None:
                batch.append(candidate)
                if len(batch) >= _BATCH:
                    submit()
            if progress:
                progress(funnel.counts["scanned"], funnel.counts.get("kept", 0))
        submit()
        collect()
    finally:
        git_worker.shutdown(wait=True, cancel_futures=True)
        funnel.totals = _totals(funnel, existing | {task.instance_id for task in result.new_tasks})
        write_json(funnel_path, funnel)
    if progress:
        progress(funnel.counts["scanned"], funnel.counts["kept"])
    return result


def _previous_runs(funnel_path: Path) -> list[FunnelRun]:
    """The runs an existing funnel.json recorded (itself included), so a re-run loses none of them.
    An unreadable one is moved aside to funnel.json.unreadable rather than overwritten."""
    if not funnel_path.is_file():
        return []
    try:
        earlier = Funnel.model_validate_json(funnel_path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        funnel_path.replace(funnel_path.with_name(funnel_path.name + ".unreadable"))
        return []
    latest = FunnelRun(started_at=earlier.started_at, counts=earlier.counts, rejections=earlier.rejections)
    return [*earlier.previous_runs, latest]


def _totals(funnel: Funnel, written_ids: set[str]) -> dict[str, int]:
    """Tasks written over all runs, and each PR never kept counted once, under its latest rejection."""
    kept_numbers = {int(instance_id.rsplit("-", 1)[1]) for instance_id in written_ids}
    latest: dict[int, str] = {}
    for run in [*funnel.previous_runs, funnel]:
        for rejection in run.rejections:
            latest[rejection.pull_number] = rejection.reason
    totals = {"runs": len(funnel.previous_runs) + 1, "kept": len(written_ids)}
    for number, reason in sorted(latest.items()):
        if number not in kept_numbers:
            totals[f"rejected:{reason}"] = totals.get(f"rejected:{reason}", 0) + 1
    return totals


def _screen(pull: PullRequest, source: Source, funnel: Funnel, options: MineOptions,
            existing: set[str]) -> tuple[PullRequest, list[Issue]] | None:
    """The checks that need no git: selection, merged, already mined, linked issues."""
    if options.pull_numbers and pull.number not in options.pull_numbers:
        funnel.count("not_selected")
        return None
    when = _parse_time(pull.merged_at or pull.created_at)
    if (options.since and when and when < options.since) or (options.until and when and when > options.until):
        funnel.count("not_selected")
        return None
    funnel.count("selected")
    if not pull.merged or not pull.merge_commit:
        detail = pull.unmerged_reason or ("merged, but the source names no merge commit" if pull.merged
                                          else "closed without merge")
        funnel.reject(pull.number, STAGE, "not_merged", detail)
        return None
    funnel.count("merged")
    if Task.make_instance_id(source.repo, pull.number) in existing:
        funnel.count("already_mined")
        return None
    issues, detail = _linked_issues(pull, source)
    if not issues and not options.allow_no_issue:
        funnel.reject(pull.number, STAGE, "no_linked_issue", detail)
        return None
    funnel.count("linked_issue")
    return pull, issues


def _linked_issues(pull: PullRequest, source: Source) -> tuple[list[Issue], str]:
    numbers = list(pull.linked_issues) if pull.linked_issues is not None else pr_closing_refs(
        pull.title, pull.body, pull.commit_messages, source.repo)
    if not numbers:
        return [], "no closing reference (Fixes #N) in title, body or commits"
    opened_before = _parse_time(pull.created_at)
    issues, dropped = [], []
    for number in numbers:
        issue = source.issue(number)
        if issue is None:
            dropped.append(f"#{number} unknown")
        elif issue.is_pull_request:
            dropped.append(f"#{number} is a PR")
        elif opened_before and _parse_time(issue.created_at) and _parse_time(issue.created_at) > opened_before:
            dropped.append(f"#{number} opened after the PR")
        else:
            issues.append(issue)
    return issues, "; ".join(dropped)


Located = tuple[PullRequest, list[Issue], str | None, str | None, str]


def _locate_and_diff(batch: Sequence[tuple[PullRequest, list[Issue]]], history: GitHistory) -> list[Located]:
    """Base commit, head and diff of each PR of a batch (base None: its commits are missing)."""
    located = [(pull, issues, *_base_and_head(pull, history)) for pull, issues in batch]
    present = [(base, head) for _, _, base, head in located if base is not None and head is not None]
    diffs = iter(history.diffs(present))
    return [(pull, issues, base, head, next(diffs) if base is not None and head is not None else "")
            for pull, issues, base, head in located]


def _finish_batch(located: Sequence[Located], history: GitHistory, funnel: Funnel,
                  options: MineOptions, repo: str) -> list[Task]:
    """Splits, limits and apply checks for a located batch; returns the kept tasks."""
    screened: list[tuple[PullRequest, list[Issue], str, SplitDiff, LanguageProfile]] = []
    for pull, issues, base, head, diff in located:
        if base is None or head is None:
            funnel.reject(pull.number, STAGE, "commits_missing", f"merge commit {pull.merge_commit} not in the clone")
            continue
        try:
            files = parse(diff).files
        except PatchError as exc:
            funnel.reject(pull.number, STAGE, "unparseable_diff", exc.message)
            continue
        # The language is the profile's whose code the fix changes; it also says which paths are tests.
        choice = choose_profile([path for file in files if not file.is_binary for path in file.paths],
                                history.files_at(base))
        for language in choice.languages:
            funnel.languages[language] = funnel.languages.get(language, 0) + 1
        parts = split_files(files, choice.rules)
        reason = _diff_rejection(parts, choice, options, funnel)
        if reason or choice.profile is None:
            funnel.reject(pull.number, STAGE, *(reason or ("no_source_change", "no profile takes the change")))
            continue
        screened.append((pull, issues, base, parts, choice.profile))
    checks = history.apply_checks([(base, (parts.patch, parts.test_patch)) for _, _, base, parts, _ in screened],
                                  workers=options.apply_workers)
    applying: dict[str, tuple[LanguageProfile, list[str]]] = {}
    for (_, _, base, _, profile), error in zip(screened, checks, strict=True):
        if not error:
            applying.setdefault(profile.name, (profile, []))[1].append(base)
    versions: dict[tuple[str, str], str] = {}
    described = history.describe([base for _, bases in applying.values() for base in bases])
    for name, (profile, bases) in applying.items():
        versions.update({(name, base): version for base, version in
                         history.versions_at(bases, profile.version_sources).items()})
    kept = []
    for (pull, issues, base, parts, profile), error in zip(screened, checks, strict=True):
        if error:
            funnel.reject(pull.number, STAGE, "patch_does_not_apply", error)
            continue
        funnel.count("applies")
        version = versions[(profile.name, base)] or major_minor(profile.release_version(described[base]))
        task = _make_task(pull, issues, base, parts, repo, language=profile.name, version=version,
                          scm_version=profile.scm_version(described[base]))
        if not task.problem_statement.strip():
            funnel.reject(pull.number, STAGE, "empty_problem_statement",
                          "neither the linked issues nor the PR's title, body or commit messages say anything")
            continue
        kept.append(task)
    return kept


def _base_and_head(pull: PullRequest, history: GitHistory) -> tuple[str | None, str | None]:
    merge = history.commits.get(pull.merge_commit or "")
    if merge is None:
        return None, None
    if len(merge.parents) >= 2:
        head = pull.head_sha if pull.head_sha in history.commits else merge.parents[1]
        return history.merge_base(merge.parents[0], head), head
    # A squash (or a rebase of k commits): the base is before the first of the PR's commits.
    base = merge.parents[0] if merge.parents else None
    rebased = len(pull.commit_messages) if not pull.squashed else 1
    current = merge
    for message in reversed(pull.commit_messages[: max(0, rebased - 1)]):
        parent = history.commits.get(current.parents[0]) if current.parents else None
        if parent is None or not parent.parents or parent.message.strip() != message.strip():
            break
        current, base = parent, parent.parents[0]
    return base, merge.sha


def _diff_rejection(parts: SplitDiff, choice: ProfileChoice, options: MineOptions,
                    funnel: Funnel) -> tuple[str, str] | None:
    """The first reason to drop this diff, counting each step it passes."""
    if parts.binary_files:
        return "binary_diff", ", ".join(parts.binary_files[:5])
    funnel.count("diff_ok")
    if choice.rejection:
        return choice.rejection
    if not parts.source_files:
        return "no_source_change", "only " + ", ".join((parts.aux_files + parts.test_files)[:5])
    if not parts.touches_code:
        return "no_source_change", "the source change touches no code file: " + ", ".join(parts.source_files[:5])
    funnel.count("has_source_change")
    if not parts.test_files:
        return "no_test_changes", ", ".join(parts.source_files[:5])
    if all(choice.rules.is_test_config(path) for path in parts.test_files):
        # A tox.ini/pytest.ini edit alone (a CI matrix, a lint pin) changes no test: every test
        # passes before the fix as after it, and the task could only end as no_f2p.
        return "no_test_changes", "only test configuration: " + ", ".join(parts.test_files[:5])
    if all(choice.rules.is_test_config(path) or choice.rules.is_type_test(path) for path in parts.test_files):
        # Type tests (tsd's *.test-d.ts) are read by a type checker, never run by a test runner:
        # no test of the change can report, before the fix or after.
        return "no_test_changes", "only type tests: " + ", ".join(parts.test_files[:5])
    funnel.count("has_test_change")
    files = len(parts.source_files) + len(parts.test_files)
    lines = parts.added_lines + parts.removed_lines
    if files > options.max_files or lines > options.max_changed_lines:
        return "too_large", f"{files} files, {lines} changed lines"
    funnel.count("within_limits")
    return None


def _make_task(pull: PullRequest, issues: list[Issue], base: str, parts: SplitDiff, repo: str, *, language: str,
               version: str, scm_version: str) -> Task:
    shas = [pull.merge_commit or "", pull.head_sha or ""]
    statement_parts, hints, leak_score = [], [], 0.0
    cutoff = _parse_time(pull.first_commit_at or pull.created_at)
    for issue in issues:
        cleaned = strip_leaks(f"{issue.title}\n{issue.body}".strip(), gold_patch=parts.patch, repo=repo,
                              pull_number=pull.number, commit_shas=shas)
        statement_parts.append(cleaned.text)
        leak_score = max(leak_score, cleaned.leak_score)
        for comment in issue.comments:
            made = _parse_time(comment.created_at)
            if cutoff is None or (made is not None and made < cutoff):
                hint = strip_leaks(comment.body, gold_patch=parts.patch, repo=repo, pull_number=pull.number,
                                   commit_shas=shas)
                hints.append(hint.text)
    if not "".join(statement_parts).strip():
        # --allow-no-issue, or issues with no text left: the PR's own words are the task.
        statement_parts = []
        cleaned = strip_leaks(f"{pull.title}\n{pull.body}".strip(), gold_patch=parts.patch, repo=repo,
                              pull_number=pull.number, commit_shas=shas)
        statement_parts.append(cleaned.text)
        leak_score = cleaned.leak_score
    return Task(
        instance_id=Task.make_instance_id(repo, pull.number),
        repo=repo,
        language=language,
        pull_number=pull.number,
        issue_numbers=[issue.number for issue in issues],
        base_commit=base,
        merge_commit=pull.merge_commit,
        patch=parts.patch,
        test_patch=parts.test_patch,
        aux_patch=parts.aux_patch,
        problem_statement="\n\n".join(statement_parts),
        hints_text="\n\n".join(hints),
        leak_score=round(leak_score, 4),
        created_at=pull.created_at,
        version=version,
        scm_version=scm_version,
        environment_setup_commit=base,
    )


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.now().astimezone().tzinfo)
