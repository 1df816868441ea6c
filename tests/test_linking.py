"""Which issues a PR closes: GitHub's closing keywords, same-repository references, no code."""

from __future__ import annotations

import pytest

from repo2env.mine.linking import closing_issue_refs, fenced_code_blocks, pr_closing_refs

REPO = "Owner/Name"

CASES = [
    # every keyword, any case, optional colon
    ("close #1", [1]),
    ("Closes #2", [2]),
    ("closed #3", [3]),
    ("fix #4", [4]),
    ("FIXES #5", [5]),
    ("Fixed #6", [6]),
    ("resolve #7", [7]),
    ("Resolves #8", [8]),
    ("resolved #9", [9]),
    ("Fixes: #10", [10]),
    ("Fixes:#11", [11]),
    ("fixes\t#12", [12]),
    ("This PR fixes #13.", [13]),
    ("(fixes #14)", [14]),
    ("- Closes #15\n- Closes #16", [15, 16]),
    # lists after one keyword
    ("Fixes #1, #2 and #3", [1, 2, 3]),
    ("Fixes #1, #2, and #3", [1, 2, 3]),
    ("closes #4 and owner/name#5", [4, 5]),
    ("Fixes #1, fixes #2", [1, 2]),
    # the same repository in any spelling, never another one
    ("Fixes owner/name#20", [20]),
    ("Fixes OWNER/NAME#21", [21]),
    ("Fixes other/name#22", []),
    ("Fixes other/name#22, #23", [23]),
    ("Fixes owner/name2#24", []),
    # issue URLs
    ("Fixes https://github.com/owner/name/issues/30", [30]),
    ("Fixes http://github.com/owner/name/issues/31", [31]),
    ("Fixes https://www.github.com/owner/name/issues/32", [32]),
    ("Fixes www.github.com/owner/name/issues/33", [33]),
    ("Resolves https://github.example.com/Owner/Name/issues/34", [34]),
    ("Resolves https://ghe.corp:8443/owner/name/issues/35", [35]),
    ("Fixes https://github.com/owner/name/issues/36#issuecomment-99, #37", [36, 37]),
    ("Fixes https://github.com/owner/name/issues/38.", [38]),
    ("Fixes https://github.com/other/name/issues/39", []),
    ("Fixes https://github.com/owner/name/pull/40", []),
    ("Fixes github.com/owner/name/issues/41", []),
    # mentions without a keyword
    ("see #4", []),
    ("related to #5", []),
    ("#6", []),
    ("Fixes a crash, see #7", []),
    ("Fixes the bug.\n#8", []),
    # the keyword must be a whole word
    ("prefixes #3", []),
    ("unfixed #3", []),
    ("bugfixes #3", []),
    ("fixes_ #3", []),
    ("re-fixes #3", []),
    ("enclosed #3", []),
    ("Fixesfoo #3", []),
    ("fixes#3", []),
    # a reference must be whole too
    ("fixes #3a", []),
    ("fixes #0", []),
    ("fixes # 3", []),
    # code and HTML comments are not prose
    ("`fixes #50`", []),
    ("Use `git commit -m 'fixes #51'` then fixes #52", [52]),
    ("```\nFixes #53\n```\nCloses #54", [54]),
    ("~~~python\n# fixes #55\n~~~\n", []),
    ("````md\n```\nfixes #56\n```\n````\nfixes #57", [57]),
    ("```\nunclosed fixes #58", []),
    ("<!-- Fixes #59 -->\nFixes #60", [60]),
    ("<!--\nPlease write: Fixes #61\n-->", []),
    # unique, first-seen order
    ("Fixes #9, closes #2, fixes #9", [9, 2]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_closing_issue_refs(text: str, expected: list[int]) -> None:
    assert closing_issue_refs(text, REPO) == expected


def test_pr_closing_refs_unions_title_body_and_commits_in_order() -> None:
    refs = pr_closing_refs(
        "Fix overflow (fixes #12)",
        "Also resolves #7.\n\nSee #99 for context.\n\n```\nfixes #100\n```",
        ["wip", "Closes #12, #3", ""],
        "owner/name",
    )
    assert refs == [12, 7, 3]


def test_pr_closing_refs_with_nothing_to_link() -> None:
    assert pr_closing_refs("Refactor", "", [], "owner/name") == []
    assert pr_closing_refs("Refactor", "see #1", iter(["related to #2"]), "owner/name") == []


BLOCK_CASES = [
    ("text\n```python\nx = 1\n```\nmore", [("python", "x = 1\n")]),
    ("~~~\na\n~~~~\n", [("", "a\n")]),
    # a shorter fence or another character does not close
    ("````md\n```\ninner\n```\n````", [("md", "```\ninner\n```\n")]),
    ("```\n~~~\n```", [("", "~~~\n")]),
    # a closing fence holds nothing else
    ("```\n``` not a close\n```\n", [("", "``` not a close\n")]),
    # up to three spaces of indent; four make an indented code line, not a fence
    ("   ```\nx\n   ```", [("", "x\n")]),
    ("    ```\nx\n    ```", []),
    # inline code on its own line is no fence
    ("```x``` and text", []),
    # never closed: to the end
    ("a\n```sh\nrm -rf build\n", [("sh", "rm -rf build\n")]),
    # GitHub's API often returns CRLF line ends
    ("```py\r\nx = 1\r\n```\r\nafter", [("py", "x = 1\r\n")]),
    ("no code at all", []),
]


@pytest.mark.parametrize(("text", "expected"), BLOCK_CASES)
def test_fenced_code_blocks(text: str, expected: list[tuple[str, str]]) -> None:
    blocks = fenced_code_blocks(text)
    assert [(block.info, block.body) for block in blocks] == expected
    for block in blocks:
        assert text[block.start :].lstrip(" ")[:3] in ("```", "~~~")
        assert block.end == len(text) or text[block.end] in "\r\n"


def test_fenced_code_block_spans_cover_fence_lines() -> None:
    text = "before\n```\ncode\n```\nafter"
    (block,) = fenced_code_blocks(text)
    assert text[: block.start] == "before\n"
    assert text[block.end :] == "\nafter"
