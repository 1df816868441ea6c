"""A synthetic repository with thousands of merged PRs, written in one `git fast-import` stream.

Shared by the mining benchmarks. The mix is meant to look like a real project's history: merge
commits and squashes, most PRs linking an issue, most changing tests, some docs-only, some never
merged. Returns the repository path and an issues.json payload in GitHub's REST shape.
"""

from __future__ import annotations

import json
import random
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = "bench-org/widgets"
_START = datetime(2020, 1, 1, tzinfo=UTC)


def build_history(dest: Path, pulls: int = 5000, seed: int = 7, modules: int = 100,
                  maintenance: float = 0.0) -> tuple[Path, dict]:
    """Create ``dest`` (a git repository) with ``pulls`` PRs; returns (path, issues.json payload).

    ``maintenance``: the share of merged PRs merged into a ``stable`` branch instead, which is
    merged into main every 25 such PRs (and at the end), as projects with maintenance branches do.
    """
    rng = random.Random(seed)
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(dest)], check=True)
    files: dict[str, str] = {f"src/widgets/mod_{i}.py": f"VALUE_{i} = {i}\n" for i in range(modules)}
    files.update({f"tests/test_mod_{i}.py": f"from widgets.mod_{i} import VALUE_{i}\n" for i in range(modules)})
    files["docs/index.md"] = "# widgets\n"
    files["pyproject.toml"] = '[project]\nname = "widgets"\nversion = "1.4.0"\n'
    stream: list[bytes] = []
    marks = iter(range(1, 10**9))
    clock = [_START]
    issues, pull_objects = [], []

    def when() -> str:
        clock[0] += timedelta(minutes=rng.randint(5, 90))
        return f"{int(clock[0].timestamp())} +0000"

    def iso() -> str:
        return clock[0].strftime("%Y-%m-%dT%H:%M:%SZ")

    def commit(ref: str, message: str, changes: dict[str, str], parent: int | None, merge: int | None = None) -> int:
        mark = next(marks)
        stream.append(f"commit {ref}\nmark :{mark}\n".encode())
        stamp = when()
        stream.append(f"author Dev <dev@example.com> {stamp}\ncommitter Dev <dev@example.com> {stamp}\n".encode())
        encoded = message.encode()
        stream.append(f"data {len(encoded)}\n".encode() + encoded + b"\n")
        if parent is not None:
            stream.append(f"from :{parent}\n".encode())
        if merge is not None:
            stream.append(f"merge :{merge}\n".encode())
        for path, content in changes.items():
            data = content.encode()
            stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        return mark

    main = commit("refs/heads/main", "Initial import", dict(files), None)
    stable, on_stable = main, 0
    number = 0
    for index in range(pulls):
        number += 1
        issue_number = None
        if rng.random() < 0.7:
            issue_number = number
            issues.append(_issue(issue_number, iso()))
            number += 1
        module = rng.randrange(modules)
        kind = rng.random()
        changes: dict[str, str] = {}
        if kind < 0.08:
            changes["docs/index.md"] = files["docs/index.md"] + f"- note {number}\n"
        else:
            source = f"src/widgets/mod_{module}.py"
            changes[source] = files[source] + f"\ndef fix_{number}(value):\n    return value + {number}\n"
            if kind > 0.25:
                test = f"tests/test_mod_{module}.py"
                changes[test] = files[test] + f"\ndef test_fix_{number}():\n    assert True\n"
        title = f"Fix widget {index}"
        body = f"Fixes #{issue_number}" if issue_number else "Small cleanup."
        style = rng.random()
        to_stable = maintenance > 0 and style >= 0.05 and rng.random() < maintenance
        branch = commit(f"refs/pull/{number}/head", f"{title}\n\n{body}", changes, stable if to_stable else main)
        created = iso()
        if style < 0.05:  # never merged: main does not get its change
            pull_objects.append(_pull(number, title, body, created, None) | {"head_mark": branch})
            continue
        if to_stable:
            stable = commit("refs/heads/stable", f"Merge pull request #{number} from dev/fix-{number}\n\n{title}",
                            changes, stable, merge=branch)
            files.update(changes)
            pull_objects.append(_pull(number, title, body, created, iso()) | {"head_mark": branch, "merge_mark": stable})
            on_stable += 1
            if on_stable % 25 == 0:
                main = commit("refs/heads/main", "Merge branch 'stable'", {}, main, merge=stable)
            continue
        if style < 0.55:
            main = commit("refs/heads/main", f"Merge pull request #{number} from dev/fix-{number}\n\n{title}",
                          changes, main, merge=branch)
        else:
            main = commit("refs/heads/main", f"{title} (#{number})\n\n{body}", changes, main)
        files.update(changes)
        pull_objects.append(_pull(number, title, body, created, iso()) | {"head_mark": branch, "merge_mark": main})
    if on_stable % 25:
        main = commit("refs/heads/main", "Merge branch 'stable'", {}, main, merge=stable)
    payload = "".join(chunk.decode() for chunk in stream)
    marks_file = dest / ".git" / "bench-marks"
    subprocess.run(["git", "-C", str(dest), "fast-import", "--quiet", f"--export-marks={marks_file}"],
                   input=payload.encode(), check=True)
    shas = dict(line.split() for line in marks_file.read_text().splitlines())
    for pull in pull_objects:
        pull["head_sha"] = shas[f":{pull.pop('head_mark')}"]
        merge_mark = pull.pop("merge_mark", None)
        pull["merge_commit_sha"] = shas[f":{merge_mark}"] if merge_mark else None
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "-f", "main"], check=True)
    all_issues = issues + [_issue_view_of_pull(pull) for pull in pull_objects]
    return dest, {"repository": REPO, "issues": all_issues, "pulls": pull_objects, "comments": []}


def _issue(number: int, created_at: str) -> dict:
    return {"number": number, "title": f"Widget {number} misbehaves", "body": f"Steps to reproduce #{number}...",
            "created_at": created_at, "state": "closed", "comments": 0}


def _pull(number: int, title: str, body: str, created_at: str, merged_at: str | None) -> dict:
    return {"number": number, "title": title, "body": body, "created_at": created_at, "merged_at": merged_at,
            "state": "closed"}


def _issue_view_of_pull(pull: dict) -> dict:
    return {"number": pull["number"], "title": pull["title"], "body": pull["body"], "created_at": pull["created_at"],
            "state": "closed", "comments": 0, "pull_request": {"merged_at": pull["merged_at"]}}


def write_issues(payload: dict, path: Path) -> Path:
    """Write the payload as issues.json."""
    path.write_text(json.dumps(payload))
    return path
