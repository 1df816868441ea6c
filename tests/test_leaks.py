"""Stripping what gives the fix away from issue text, and scoring how much the original gave away."""

from __future__ import annotations

import time

import pytest

from repo2env.mine.leaks import CODE_MARKER, COMMIT_MARKER, LINK_MARKER, LeakResult, strip_leaks

REPO = "owner/name"
PULL = 12
FIX_SHA = "3f9a1c2e7b5d4a6f8e0c1b2a3d4e5f60718293a4"
MERGE_SHA = "9b8a7c6d5e4f30211f2e3d4c5b6a798081726354"

# Context lines of a diff start with a space, blank ones included, hence the explicit lines.
GOLD_PATCH = "".join(
    line + "\n"
    for line in (
        "diff --git a/src/pkg/core.py b/src/pkg/core.py",
        "index 1111111..2222222 100644",
        "--- a/src/pkg/core.py",
        "+++ b/src/pkg/core.py",
        "@@ -8,7 +8,12 @@ CACHE = {}",
        " ",
        " def lookup(value):",
        "+    if value is None:",
        '+        raise ValueError("value must not be None")',
        "     normalized = value.strip().lower()",
        "-    return compute(normalized)",
        "+    return CACHE.setdefault(normalized, compute(normalized))",
        "+",
        "+",
        "+import os",
        " ",
        " ",
        " def compute(key):",
    )
)


def clean(text: str, *, pull_number: int = PULL, shas: tuple[str, ...] = (FIX_SHA, MERGE_SHA)) -> LeakResult:
    return strip_leaks(text, gold_patch=GOLD_PATCH, repo=REPO, pull_number=pull_number, commit_shas=shas)


LEAKING_ISSUE = f"""\
`lookup(None)` crashes with an AttributeError.

Fixed by https://github.com/owner/name/commit/{FIX_SHA}, see #12.

The fixed function:

```python
def lookup(value):
    if value is None:
        raise ValueError("value must not be None")
    normalized = value.strip().lower()
    return CACHE.setdefault(normalized, compute(normalized))
```

Thanks!
"""

INNOCENT_ISSUE = """\
`lookup(None)` crashes instead of raising a clear error. Reproducer:

```python
from pkg.core import lookup

lookup(None)
```

```
Traceback (most recent call last):
  File "repro.py", line 3, in <module>
    lookup(None)
  File "src/pkg/core.py", line 10, in lookup
    normalized = value.strip().lower()
AttributeError: 'NoneType' object has no attribute 'strip'
```

Seen on commit deadbeef of my fork, version 2.3 (#123). Related: #7.
"""


def test_leaking_issue_is_cleaned_and_scores_high() -> None:
    result = clean(LEAKING_ISSUE)

    assert result.leak_score == 1.0
    assert result.text == (
        "`lookup(None)` crashes with an AttributeError.\n\n"
        f"Fixed by {LINK_MARKER}, see {LINK_MARKER}.\n\n"
        "The fixed function:\n\n"
        f"{CODE_MARKER}\n\n"
        "Thanks!\n"
    )
    assert result.removed == (
        "code block (3/5 lines from the fix)",
        f"link to commit {FIX_SHA[:7]}",
        "reference to PR #12",
    )


def test_code_alone_scores_its_share_of_the_fix() -> None:
    # Without the links only the code speaks: the block holds all 3 telling added lines.
    # ("import os" is trivial and the blank lines do not count.)
    code_only = LEAKING_ISSUE.replace(f"Fixed by https://github.com/owner/name/commit/{FIX_SHA}, see #12.", "")
    result = clean(code_only)
    assert result.leak_score == 1.0
    assert CODE_MARKER in result.text and "CACHE.setdefault" not in result.text

    one_line = "Maybe `raise ValueError(\"value must not be None\")` when the value is missing?"
    result = clean(one_line)
    assert result.leak_score == pytest.approx(1 / 3)
    assert result.text == one_line and result.removed == ()


def test_innocent_issue_keeps_its_reproducer_and_scores_zero() -> None:
    result = clean(INNOCENT_ISSUE)
    assert result.text == INNOCENT_ISSUE
    assert result.removed == ()
    assert result.leak_score == 0.0


def test_diff_block_is_judged_by_its_added_lines() -> None:
    text = """Suggested patch:

```diff
--- a/src/pkg/core.py
+++ b/src/pkg/core.py
@@ -9,4 +9,6 @@ def lookup(value):
 def lookup(value):
+    if value is None:
+        raise ValueError("value must not be None")
     normalized = value.strip().lower()
     return compute(normalized)
```
"""
    result = clean(text, pull_number=999, shas=())
    assert result.text == f"Suggested patch:\n\n{CODE_MARKER}\n"
    assert result.removed == ("code block (2/2 lines from the fix)",)
    assert result.leak_score == pytest.approx(2 / 3)


def test_block_with_few_fix_lines_stays() -> None:
    text = (
        "~~~\n"
        "value = read_input()\n"
        "if value is None:\n"
        "    print('nothing to look up')\n"
        "result = lookup(value)\n"
        "~~~\n"
    )
    result = clean(text)
    # 1 of 4 non-trivial lines is from the fix: under half.
    assert result.text == text
    assert result.removed == ()


@pytest.mark.parametrize(
    ("text", "expected", "removed"),
    [
        ("See https://github.com/owner/name/pull/12.", f"See {LINK_MARKER}.", "link to PR #12"),
        ("See https://github.com/Owner/Name/pull/12/files#diff-1", f"See {LINK_MARKER}", "link to PR #12"),
        ("(http://www.github.com/owner/name/pull/12)", f"({LINK_MARKER})", "link to PR #12"),
        ("the [fix](https://github.com/owner/name/pull/12 \"PR\") works", f"the {LINK_MARKER} works", "link to PR #12"),
        ("https://ghe.corp/owner/name/pulls/12", LINK_MARKER, "link to PR #12"),
        ("done in owner/name#12!", f"done in {LINK_MARKER}!", "reference to PR #12"),
        ("PR #12 fixes it", f"PR {LINK_MARKER} fixes it", "reference to PR #12"),
        (
            f"on my fork: https://github.com/someone/name/commit/{FIX_SHA[:10]}",
            f"on my fork: {LINK_MARKER}",
            f"link to commit {FIX_SHA[:7]}",
        ),
        (f"fixed in {FIX_SHA[:7]}.", f"fixed in {COMMIT_MARKER}.", f"commit sha {FIX_SHA[:7]}"),
        (f"merged as {MERGE_SHA.upper()}", f"merged as {COMMIT_MARKER}", f"commit sha {MERGE_SHA[:7]}"),
    ],
)
def test_links_to_the_fix_are_removed(text: str, expected: str, removed: str) -> None:
    result = clean(text)
    assert result.text == expected
    assert result.removed == (removed,)
    assert result.leak_score == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "See https://github.com/owner/name/pull/13 and https://github.com/owner/name/issues/12",
        "See https://github.com/other/name/pull/12",
        "See other/name#12 and #123 and #1 and issue#12 and &#12; and page.html#12 and ##12",
        "See myowner/name#12, ab/owner/name#12 and owner/name#123",
        "Broken since https://github.com/owner/name/commit/1234abcd",
        "deadbeef, cafebabe and 0xdeadbeef1234 are not commits; neither is abcdef1 here",
        "sha256:" + "ab" * 32,
    ],
)
def test_what_does_not_point_at_the_fix_stays(text: str) -> None:
    result = clean(text)
    assert result.text == text
    assert result.removed == ()
    assert result.leak_score == 0.0


def test_crlf_issue_keeps_its_line_ends() -> None:
    text = (
        "Fails since #12 was opened.\r\n\r\n```python\r\n"
        "    if value is None:\r\n"
        "        raise ValueError(\"value must not be None\")\r\n"
        "```\r\nThanks\r\n"
    )
    result = clean(text)
    assert result.text == f"Fails since {LINK_MARKER} was opened.\r\n\r\n{CODE_MARKER}\r\nThanks\r\n"
    assert result.removed == ("code block (2/2 lines from the fix)", "reference to PR #12")


def test_any_full_sha_goes_but_only_fix_commits_score() -> None:
    other = "0123456789abcdef0123456789abcdef01234567"
    result = clean(f"Regressed in {other} and https://github.com/owner/name/commit/{other}.")
    assert result.text == f"Regressed in {COMMIT_MARKER} and {LINK_MARKER}."
    assert result.removed == ("link to commit 0123456", "commit sha 0123456")
    assert result.leak_score == 0.0


def test_short_commit_abbreviations_never_match_words() -> None:
    # An abbreviation under 7 characters would turn ordinary hex words into "commits".
    result = clean("the deadbeef value", shas=("dead",))
    assert result.text == "the deadbeef value"


def test_strip_leaks_is_fast() -> None:
    paragraph = (
        "When I call `lookup()` with a value read from the config file, the cache grows without "
        "bound and eventually the process runs out of memory; see the traceback below. #45\n"
    )
    traceback = "```\n" + "".join(f'  File "src/pkg/mod{i}.py", line {i}, in f{i}\n' for i in range(20)) + "```\n"
    issue = paragraph * 6 + traceback + paragraph * 7
    assert 3000 <= len(issue) < 3100
    # Distinct patches, so the per-patch cache cannot make the loop look faster than mining is.
    patches = [
        "diff --git a/m.py b/m.py\nindex 1111111..2222222 100644\n--- a/m.py\n+++ b/m.py\n"
        "@@ -1,50 +1,50 @@\n"
        + "".join(f"-    old_value_{j} = compute({j})\n+    new_value_{j} = compute({j}, n={n})\n" for j in range(50))
        for n in range(1000)
    ]
    started = time.perf_counter()
    for patch in patches:
        strip_leaks(issue, gold_patch=patch, repo=REPO, pull_number=PULL, commit_shas=(FIX_SHA, MERGE_SHA))
    # About 0.5 ms a call here; the bound is loose for slow CI machines.
    assert time.perf_counter() - started < 3.0
