"""Local history as a :class:`~repo2env.mine.source.Source`: offline, no token.

PRs are recognised the way GitHub writes them into history, anywhere in the branch's history (not
only its first-parent line, so merges into a maintenance branch merged later count): merge
commits ``Merge pull request #N from user/branch`` or ``Title (#N)`` (head = second parent),
squash commits ``Title (#N)``, and ``refs/pull/N/head`` refs, whose head may also have been merged
under another subject, fast-forwarded, or rebased onto the branch. A ref that never landed is an
unmerged PR, with the reason history gives. Issue and PR texts come from an ``issues.json`` in
GitHub's REST shape when one is given (the demo ships one).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from repo2env.errors import InputError, SourceError
from repo2env.mine.clone import MIRROR_REFSPECS, clone_or_fetch, without_credentials
from repo2env.mine.graph import CommitInfo
from repo2env.mine.history import GitHistory
from repo2env.mine.source import Comment, Issue, PullRequest

_MERGE_SUBJECT = re.compile(r"^Merge pull request #(\d+) from (\S+)")
# GitHub writes "Title (#N)"; hand-edited titles drop the space ("Title(#N)").
_SQUASH_SUBJECT = re.compile(r"^(.*\S)\s*\(#(\d+)\)\s*$")
#: How far back the commits of a fast-forwarded or rebased PR are followed.
_MAX_OWN_COMMITS = 100
_REMOTE_NAME = re.compile(r"[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


def looks_like_url(spec: str) -> bool:
    """Whether ``--repo`` names a URL to clone (as opposed to a path or owner/name)."""
    return "://" in spec or spec.startswith("git@")


class GitSource:
    """Merged PRs read from a local clone, or from a mirror of a URL in ``workdir/clone`` (fetched again
    on every run)."""

    def __init__(self, location: str | Path, *, issues_path: Path | None = None, workdir: Path | None = None,
                 repo: str | None = None, branch: str | None = None) -> None:
        location = str(location)
        if looks_like_url(location):
            if workdir is None:
                raise InputError("a workdir is needed to clone a URL")
            self.path = clone_or_fetch(location, workdir / "clone", name=without_credentials(location), mirror=True,
                                       refspecs=MIRROR_REFSPECS, hint="check the URL and your access to it")
        else:
            self.path = Path(location).expanduser()
            if not self.path.exists():
                raise SourceError(f"no such path: {self.path}", hint="pass an existing clone, a URL or owner/name")
        self.history = GitHistory(self.path, branch=branch)
        self.issues_data = _load_issues(issues_path) if issues_path else None
        self.repo = repo or self._repo_name()
        self._issues, self._pull_objects, self._comments = self._index_issues()
        self._merge_children: dict[str, str] | None = None
        self._copies: dict[tuple[str, str, str], str] | None = None
        self._elsewhere: _Elsewhere | None = None
        self._shadowed: dict[int, int] = {}  # PR -> the PR whose landing already holds its head

    def clone_path(self) -> Path:
        """The local repository (read-only use)."""
        return self.path

    # --- naming --------------------------------------------------------------------------------

    def _repo_name(self) -> str:
        if self.issues_data and isinstance(self.issues_data.get("repository"), str):
            return self.issues_data["repository"]
        try:
            url = self.history.repo.remotes.origin.url
            match = _REMOTE_NAME.search(url)
            if match and not Path(url).exists():
                return f"{match.group(1)}/{match.group(2)}"
        except (AttributeError, IndexError, ValueError):
            pass
        name = re.sub(r"[^A-Za-z0-9_.-]", "-", self.path.resolve().name.removesuffix(".git")) or "repo"
        return f"local/{name}"

    # --- issues.json ---------------------------------------------------------------------------

    def _index_issues(self) -> tuple[dict[int, dict], dict[int, dict], dict[int, list[Comment]]]:
        if not self.issues_data:
            return {}, {}, {}
        issues = {int(item["number"]): item for item in self.issues_data.get("issues", [])}
        pulls = {int(item["number"]): item for item in self.issues_data.get("pulls", [])}
        comments: dict[int, list[Comment]] = {}
        for item in self.issues_data.get("comments", []):
            number = int(str(item.get("issue_url", "")).rstrip("/").rsplit("/", 1)[-1])
            comments.setdefault(number, []).append(
                Comment(author=(item.get("user") or {}).get("login", ""), body=item.get("body") or "",
                        created_at=item.get("created_at", ""))
            )
        return issues, pulls, comments

    def issue(self, number: int) -> Issue | None:
        """The issue from issues.json, or None (no file, or no such issue)."""
        item = self._issues.get(number)
        if item is None:
            return None
        comments = tuple(sorted(self._comments.get(number, []), key=lambda comment: comment.created_at))
        return Issue(
            number=number,
            title=item.get("title") or "",
            body=item.get("body") or "",
            created_at=item.get("created_at", ""),
            is_pull_request="pull_request" in item or number in self._pull_objects,
            comments=comments,
        )

    # --- pulls ---------------------------------------------------------------------------------

    def pulls(self) -> Iterator[PullRequest]:
        """Merged PRs found anywhere in the branch's history, newest landing first, then the
        ``refs/pull`` heads that never landed, each with the reason it counts as unmerged."""
        history = self.history
        refs = self._pull_refs()
        landings = self._landings_by_subject(refs)
        explained = set(landings)
        claimed = {sha: landing.number for landing in landings.values() for sha in (landing.commit, landing.head)}
        # Newest PR first: of two PRs with the same head (one re-opened as the other), the later landed.
        for number, head in sorted(refs.items(), reverse=True):
            if number in explained:
                continue
            landing = self._landing_of_head(number, head, landings)
            if landing is None:
                brought_by = history.landed_by(head)
                if head in claimed:
                    # Its head is another PR's merge commit (a PR opened from a branch that already
                    # held that merge): what it brought landed as that PR.
                    self._shadowed[number] = claimed[head]
                elif brought_by in claimed and brought_by != head:
                    # Its branch was carried on in another PR, whose merge brought its head
                    # (marshmallow-code/marshmallow 625, continued and merged as 816).
                    self._shadowed[number] = claimed[brought_by]
                continue
            owner = claimed.get(landing.commit) or claimed.get(landing.head)
            if owner is not None:
                self._shadowed[number] = owner
                continue
            landings[number] = landing
            claimed.setdefault(landing.commit, number)
            claimed.setdefault(landing.head, number)
        order = {sha: index for index, sha in enumerate(history.commits)}  # newest first
        for landing in sorted(landings.values(), key=lambda landing: (order[landing.commit], -landing.number)):
            yield self._merged_pull(landing)
        for number, head in sorted(refs.items(), reverse=True):
            if number in landings:
                continue
            commit = history.commits.get(head)
            yield self._pull(number, title=commit.subject if commit else "", body="", merged=False, merged_at=None,
                             merge_commit=None, head_sha=head, squashed=False,
                             commit_messages=(commit.message,) if commit else (),
                             first_commit_at=commit.author_date if commit else "",
                             unmerged_reason=self._unmerged_reason(number, head))

    def _landings_by_subject(self, refs: dict[int, str]) -> dict[int, _Landing]:
        """PR number -> the commit whose subject says it landed the PR, over every commit reachable
        from the branch (PRs merged into a maintenance branch that was merged later count too).

        A subject can lie: merges of a fork's own PR #N, old tracker tickets written ``(#N)``, a
        cherry-pick of a squash. Where ``refs/pull/N/head`` is known, a merge must have that head
        in its history and a squash must be no older than it; of what remains, a merge verified
        by its head beats one on the branch's first-parent line, which beats the rest, and among
        equals the newest wins.
        """
        history = self.history
        reachable = history.reachable()
        best: dict[int, tuple[tuple[bool, bool], _Landing]] = {}
        for sha, commit in history.commits.items():
            if sha not in reachable:
                continue
            landing = _landing_from_subject(commit)
            if landing is None:
                continue
            number, on_mainline = landing.number, history.on_mainline(sha)
            ref_head = refs.get(number)
            if ref_head is None:
                # With refs/pull/* present, a side commit ending in "(#N)" for an N that is no PR
                # is a commit inside some branch citing an issue, not a squash landing.
                if refs and landing.kind == "squash" and not on_mainline:
                    continue
                verified = False
            else:
                verified = self._head_agrees(landing, ref_head)
                if verified is None:
                    continue
            rank = (verified, on_mainline)
            if number not in best or rank > best[number][0]:
                best[number] = (rank, landing)
        return {number: landing for number, (_, landing) in best.items()}

    def _head_agrees(self, landing: _Landing, ref_head: str) -> bool | None:
        """True when ``refs/pull/N/head`` proves the landing (a merge of that head), False when it
        cannot tell (a squash no older than the head, a head missing from the clone), None when it
        contradicts it."""
        history = self.history
        if ref_head not in history.commits:
            return False
        if landing.kind == "merge":
            # GitHub merges the head the ref names (a maintainer's local merge may add commits
            # on top); a merged head that is not the ref's is another PR with the same number.
            return True if landing.head == ref_head or history.is_ancestor(ref_head, landing.head) else None
        landed, opened = _parse_time(history.commits[landing.commit].commit_date), _parse_time(
            history.commits[ref_head].commit_date)
        return None if landed and opened and landed < opened else False

    def _landing_of_head(self, number: int, head: str, landings: dict[int, _Landing]) -> _Landing | None:
        """How a PR whose head no subject names landed: its head merged by another merge commit
        ("Merge branch ..."), fast-forwarded onto the branch, or its commits rebased onto it
        (matched by author, author date and subject, which GitHub's rebase merge keeps)."""
        history = self.history
        commit = history.commits.get(head)
        if commit is None:
            return None
        if head in history.reachable():
            merge = self._merges_by_parent().get(head)
            if merge is not None:
                return _Landing(number, merge, head, "merge", "", "")
            if len(commit.parents) >= 2 and history.on_mainline(head) and head not in {
                    landing.commit for landing in landings.values()}:
                # A merge made locally ("Merge branch '3.0.x'"), pushed as the PR's head, then
                # fast-forwarded onto the branch: the merge itself is the landing.
                title, _, body = commit.message.partition("\n")
                return _Landing(number, head, commit.parents[1], "merge", title, body.strip())
            landed_by_others = {landing.commit for landing in landings.values()}
            own = []
            current: CommitInfo | None = commit
            # A fast-forward leaves no trace of where the PR started: take the run of its author's
            # single-parent commits that ends at its head and that no other PR claims.
            while current is not None and len(current.parents) == 1 and current.author_email == commit.author_email \
                    and len(own) < _MAX_OWN_COMMITS and not (own and current.sha in landed_by_others):
                own.append(current)
                current = history.commits.get(current.parents[0])
            if not own:
                return None
            return _Landing(number, head, head, "rebase", "", "", tuple(reversed(own)))
        copy = self._rebased_copies().get(_copy_key(commit))
        if copy is None:
            return None
        own = []
        current = commit
        while current is not None and current.sha not in history.reachable() and len(own) < _MAX_OWN_COMMITS:
            if len(current.parents) == 1:  # a rebase drops the PR's merges from the base branch
                own.append(current)
            current = history.commits.get(current.parents[0]) if current.parents else None
        return _Landing(number, copy, head, "rebase", "", "", tuple(reversed(own)))

    def _merges_by_parent(self) -> dict[str, str]:
        """A commit -> the oldest merge reachable from the branch that has it as a non-first parent."""
        if self._merge_children is None:
            reachable = self.history.reachable()
            children: dict[str, str] = {}
            for sha, commit in self.history.commits.items():  # newest first: the oldest merge stays
                if len(commit.parents) > 1 and sha in reachable:
                    for parent in commit.parents[1:]:
                        children[parent] = sha
            self._merge_children = children
        return self._merge_children

    def _rebased_copies(self) -> dict[tuple[str, str, str], str]:
        """(author email, author date, subject) -> a single-parent commit reachable from the branch."""
        if self._copies is None:
            reachable = self.history.reachable()
            copies: dict[tuple[str, str, str], str] = {}
            for sha, commit in self.history.commits.items():
                if sha in reachable and len(commit.parents) == 1:
                    copies.setdefault(_copy_key(commit), sha)
            self._copies = copies
        return self._copies

    def _unmerged_reason(self, number: int, head: str) -> str:
        """Why PR ``number`` counts as unmerged: what GitHub recorded, or what history shows."""
        history, branch = self.history, self.history.branch
        recorded = self._pull_objects.get(number)
        if recorded is not None and not recorded.get("merged_at"):
            return "closed without merge (issues.json)" if recorded.get("state") == "closed" else "still open (issues.json)"
        if head not in history.commits:
            return f"refs/pull/{number}/head names {head[:12]}, which is not in the clone"
        if number in self._shadowed:
            return f"its head {head[:12]} landed as part of PR #{self._shadowed[number]}"
        if head in history.reachable():
            brought_by = history.landed_by(head)
            by = f" (brought there by {brought_by[:12]}, {history.commits[brought_by].subject[:80]!r})" if brought_by else ""
            return (f"head {head[:12]} is in {branch}'s history{by}, but no merge, squash or fast-forward of it can be "
                    "told apart")
        elsewhere = self._other_branches()
        merged_into = elsewhere.landings.get(number) or elsewhere.merges.get(head)
        if merged_into:
            return f"merged into {merged_into} only, never into {branch} (mine it with --branch {merged_into})"
        if head in elsewhere.heads:
            return (f"head {head[:12]} is on branch {elsewhere.heads[head]} (the PR's own branch?), which no merge "
                    f"brought into {branch}")
        said = f"GitHub says merged at {recorded['merged_at']}, but: " if recorded is not None else ""
        return (f"{said}head {head[:12]} is not in {branch}'s history, no merge or squash commit in it names #{number}, "
                f"and none copies the head commit (a rebase): closed without merge, or landed in another form")

    def _other_branches(self) -> _Elsewhere:
        """Commits and subject landings reachable from other local branches but not from the mined one."""
        if self._elsewhere is None:
            history = self.history
            heads = history.branch_tips()
            reachable = history.reachable()
            where: dict[str, str] = {}
            landed: dict[int, str] = {}
            merged: dict[str, str] = {}
            for name, tip in heads.items():
                if name == history.branch:
                    continue
                for sha in history.reachable_from([tip], excluding=reachable):
                    where.setdefault(sha, name)
                    commit = history.commits[sha]
                    for parent in commit.parents[1:]:
                        merged.setdefault(parent, name)
                    landing = _landing_from_subject(commit)
                    if landing is not None:
                        landed.setdefault(landing.number, name)
            self._elsewhere = _Elsewhere(where, landed, merged)
        return self._elsewhere

    def _merged_pull(self, landing: _Landing) -> PullRequest:
        history = self.history
        commit = history.commits[landing.commit]
        title, body = landing.title, landing.body
        if landing.kind == "merge":
            base = history.merge_base(commit.parents[0], landing.head)
            branch_commits = history.commits_between(base, landing.head) if base else []
        elif landing.kind == "squash":
            branch_commits = [commit]
        else:
            branch_commits = list(landing.own_commits)
        if not title and branch_commits:
            # No PR text in history (a rebase, a fast-forward, a "Merge branch" merge): the PR's
            # commit messages, as GitHub's own squash message lists them.
            title, _, rest = branch_commits[0].message.partition("\n")
            body = body or "\n\n".join(part for part in [rest.strip(), *(c.message for c in branch_commits[1:])] if part)
        messages = tuple(c.message for c in branch_commits)
        first_commit_at = min((c.author_date for c in branch_commits), default=commit.author_date)
        return self._pull(landing.number, title=title.strip(), body=body.strip(), merged=True,
                          merged_at=commit.author_date, merge_commit=landing.commit, head_sha=landing.head,
                          squashed=landing.kind == "squash", commit_messages=messages, first_commit_at=first_commit_at)

    def _pull(self, number: int, *, title: str, body: str, merged: bool, merged_at: str | None,
              merge_commit: str | None, head_sha: str, squashed: bool, commit_messages: tuple[str, ...],
              first_commit_at: str, unmerged_reason: str = "") -> PullRequest:
        recorded = self._pull_objects.get(number)
        if recorded:  # GitHub's own record beats what history implies
            title = recorded.get("title") or title
            body = recorded.get("body") or ""
            created_at = recorded.get("created_at") or first_commit_at
        else:
            created_at = first_commit_at
        return PullRequest(
            number=number, title=title, body=body, created_at=created_at, merged=merged, merged_at=merged_at,
            merge_commit=merge_commit, head_sha=head_sha, base_ref=self.history.branch, squashed=squashed,
            commit_messages=commit_messages, first_commit_at=first_commit_at, unmerged_reason=unmerged_reason,
        )

    def _pull_refs(self) -> dict[int, str]:
        result = subprocess.run(
            ["git", "-C", str(self.path), "for-each-ref", "--format=%(refname) %(objectname)", "refs/pull/"],
            capture_output=True, text=True,
        )
        refs = {}
        for line in result.stdout.splitlines():
            name, _, sha = line.partition(" ")
            parts = name.split("/")
            if len(parts) == 4 and parts[3] == "head" and parts[2].isdigit():
                refs[int(parts[2])] = sha
        return refs


@dataclass(frozen=True, slots=True)
class _Landing:
    """How PR ``number`` reached the branch: ``commit`` put it there; ``head`` is its last commit.

    ``kind`` is ``merge`` (``commit`` is a merge, ``head`` its PR-side parent), ``squash``
    (``commit`` is the PR as one commit) or ``rebase`` (``commit`` is the last of
    ``own_commits`` replayed onto the branch; a fast-forward is a rebase onto itself).
    """

    number: int
    commit: str
    head: str
    kind: str
    title: str
    body: str
    own_commits: tuple[CommitInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class _Elsewhere:
    """What other local branches hold that the mined one does not: commit -> branch, PR number ->
    branch whose history has a subject landing it, merged commit -> branch whose merge took it in."""

    heads: dict[str, str]
    landings: dict[int, str]
    merges: dict[str, str]


def _landing_from_subject(commit: CommitInfo) -> _Landing | None:
    """The PR a commit's subject says it landed: ``Merge pull request #N from ...`` or a two-parent
    ``Title (#N)`` (a merge whose head is the second parent), or a one-parent ``Title (#N)`` or
    ``Merge pull request #N`` (a squash: the commit's own diff is the PR's)."""
    subject = commit.subject
    rest = commit.message.split("\n", 1)[1].strip() if "\n" in commit.message else ""
    if len(commit.parents) >= 2:
        merge = _MERGE_SUBJECT.match(subject)
        if merge:
            title, _, body = rest.partition("\n")  # GitHub puts the PR title under the subject
            return _Landing(int(merge.group(1)), commit.sha, commit.parents[1], "merge", title, body)
        titled = _SQUASH_SUBJECT.match(subject)
        if titled:
            return _Landing(int(titled.group(2)), commit.sha, commit.parents[1], "merge", titled.group(1), rest)
        return None
    if not commit.parents:
        return None
    squash = _SQUASH_SUBJECT.match(subject)
    if squash:
        return _Landing(int(squash.group(2)), commit.sha, commit.sha, "squash", squash.group(1), rest)
    # A one-parent "Merge pull request #N from ..." (a merge rewritten into one commit, as a
    # history rewrite or a rebase of the branch it sits on leaves it): its own diff is the PR's.
    merge = _MERGE_SUBJECT.match(subject)
    if merge:
        title, _, body = rest.partition("\n")
        return _Landing(int(merge.group(1)), commit.sha, commit.sha, "squash", title, body)
    return None


def _copy_key(commit: CommitInfo) -> tuple[str, str, str]:
    return commit.author_email, commit.author_date, commit.subject


def _parse_time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


def _load_issues(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no issues file at {path}")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(payload, list):  # a bare list of issue objects, as GET /issues returns
        payload = {"issues": payload}
    if not isinstance(payload, dict) or not isinstance(payload.get("issues", []), list):
        raise InputError(f"{path}: expected GitHub issue objects (a list, or an object with an 'issues' list)")
    return payload
