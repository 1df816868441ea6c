"""API calls per PR in GitHub mode, against the local fake GitHub server (tests/fake_github.py).

Target (issue: mining): at most 0.1 API calls per PR scanned. The repository is the same synthetic
history as mine_local.py, served over HTTP (REST + GraphQL) with its code cloned from the server.
Optional: REPO2ENV_BENCH_PULLS (default 5000).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from fake_github import FakeGitHub, rest_issue, rest_pull  # noqa: E402
from results import Figure, record  # noqa: E402
from synthetic_history import REPO, build_history  # noqa: E402

from repo2env.mine.github import GitHubSource  # noqa: E402
from repo2env.mine.miner import mine  # noqa: E402


def rest_payload(simple: dict) -> dict:
    """The generator's plain issue/PR dicts as GitHub REST objects."""
    issues = [rest_issue(REPO, item["number"], title=item["title"], body=item["body"], created_at=item["created_at"])
              for item in simple["issues"] if "pull_request" not in item]
    pulls = [rest_pull(REPO, item["number"], title=item["title"], body=item["body"], created_at=item["created_at"],
                       head_sha=item["head_sha"], base_sha=item["head_sha"], merged_at=item["merged_at"],
                       merge_commit_sha=item["merge_commit_sha"], closed_at=item["merged_at"] or item["created_at"])
             for item in simple["pulls"]]
    issues += [rest_issue(REPO, pull["number"], title=pull["title"], body=pull["body"], created_at=pull["created_at"],
                          is_pull_request=True, pull_merged_at=pull["merged_at"]) for pull in pulls]
    return {"repository": REPO, "issues": issues, "pulls": pulls, "comments": []}


def main() -> None:
    count = int(os.environ.get("REPO2ENV_BENCH_PULLS", "5000"))
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-gh-") as scratch:
        scratch_path = Path(scratch)
        repo, simple = build_history(scratch_path / "repo", pulls=count)
        figures = []
        with FakeGitHub(rest_payload(simple), tokens={"bench-token"}, git_path=repo) as server:
            for run in ("first run", "second run"):
                source = GitHubSource(REPO, token="bench-token", api_url=server.url, workdir=scratch_path / "gh")
                started = time.perf_counter()
                result = mine(source, scratch_path / f"out-{run[0]}")
                elapsed = time.perf_counter() - started
                scanned = result.funnel.counts["scanned"]
                print(f"mine_github ({run}, {source.mode}): {scanned} PRs scanned, {result.funnel.counts['kept']} kept "
                      f"in {elapsed:.1f} s; {source.api_calls} API calls ({source.api_calls_charged} charged) = "
                      f"{source.api_calls / max(scanned, 1):.3f} calls/PR (target <= 0.1)")
                figures += [Figure(f"API calls per PR scanned, {run} ({source.mode})",
                                   round(source.api_calls / max(scanned, 1), 4), "calls/PR", "<= 0.1"),
                            Figure(f"API calls charged, {run}", source.api_calls_charged, "calls")]
        record("mine_github", figures)


if __name__ == "__main__":
    main()
