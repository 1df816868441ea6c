"""textkit's history: who opened which issue and PR, what each commit changes, and the ground truth.

Issue and PR numbers share one sequence, as on GitHub, in creation order. :data:`TIMELINE` is the
order in which :mod:`repo2env.demo.builder` replays commits, branches and landings on ``main``;
its dates only move forward. Each PR's :class:`~repo2env.demo.spec.DemoPull` states what a correct
pipeline must conclude about it, and ``tests/test_demo.py`` checks every claim against the real
repository by running textkit's tests.
"""

from __future__ import annotations

from repo2env.demo import library
from repo2env.demo.spec import (
    CommentSpec,
    CommitSpec,
    DemoHistory,
    DemoPull,
    Edit,
    IssueSpec,
    LandPull,
    MainCommit,
    OpenPull,
    PartialFix,
    Person,
    PullSpec,
    Step,
    Write,
    file_text,
    partial_fix,
)

DEMO_REPO = "repo2env-demo/textkit"

MAINTAINER = Person("Linus Maintainer", "maint@example.com", "linus-maint", 9100001, "OWNER")
ADA = Person("Ada Lovelace", "ada@example.com", "ada-l", 9100002, "CONTRIBUTOR")
GRACE = Person("Grace Hopper", "grace@example.com", "grace-h", 9100003, "CONTRIBUTOR")
ALAN = Person("Alan Turing", "alan@example.com", "alan-t", 9100004, "CONTRIBUTOR")
KATHERINE = Person("Katherine Johnson", "katherine@example.com", "katherine-j", 9100005, "NONE")
EDSGER = Person("Edsger Dijkstra", "edsger@example.com", "edsger-d", 9100006, "FIRST_TIME_CONTRIBUTOR")

SLUG = "src/textkit/slug.py"
DURATION = "src/textkit/duration.py"
SIZES = "src/textkit/sizes.py"
WRAP = "src/textkit/wrap.py"
TAGS = "src/textkit/tags.py"
TABLE = "src/textkit/table.py"
INIT = "src/textkit/__init__.py"
CONFTEST = "tests/conftest.py"


def head_sha_placeholder(number: int) -> str:
    """The token the builder replaces, in issue texts, with the head commit SHA of PR ``number``."""
    return f"<head-sha-of-pull-{number}>"


def _ids(test_file: str, *names: str) -> tuple[str, ...]:
    return tuple(f"tests/{test_file}::{name}" for name in names)


def _partial_fix(name: str, edits: tuple[Edit, ...], passes: tuple[str, ...]) -> PartialFix:
    # Partial fixes only touch files no earlier PR changed, so their base text is the first commit's.
    return partial_fix(name, library.INITIAL_FILES, edits, passes)


# --- the first commits -------------------------------------------------------------------------

INITIAL_COMMIT = CommitSpec(
    message="Initial commit: textkit 0.1.0",
    author=MAINTAINER,
    date="2024-01-08T09:00:00Z",
    changes=tuple(Write(path, content) for path, content in library.INITIAL_FILES.items()),
)

USAGE_DOCS_COMMIT = CommitSpec(
    message="Add usage documentation",
    author=MAINTAINER,
    date="2024-01-08T11:30:00Z",
    changes=(Write("docs/usage.md", library.USAGE_DOCS),),
)

# --- #1 issue, #2 PR: slugify separators (merge commit, changelog entry, two partial fixes) -------

ISSUE_1 = IssueSpec(
    number=1,
    title="slugify leaves repeated and trailing separators",
    body=(
        "`slugify(\"Hello,  World!\")` returns `'hello---world-'`. I expected `'hello-world'`: one "
        "separator between words and none at either end."
    ),
    author=KATHERINE,
    created_at="2024-01-09T10:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-01-09T12:00:00Z",
            "The regex replaces each unsafe character on its own. Matching runs of them and stripping "
            "the separator from both ends should do it; mind `max_length` cutting right after a "
            "separator too.",
        ),
        CommentSpec(KATHERINE, "2024-01-10T17:00:00Z", "Works for me on main now, thanks!"),
    ),
)

_SLUG_COLLAPSE = Edit(
    SLUG,
    '_UNSAFE = re.compile(r"[^a-z0-9]")\n',
    '# One separator per run of unsafe characters, however long the run.\n_UNSAFE = re.compile(r"[^a-z0-9]+")\n',
)
_SLUG_STRIP = Edit(
    SLUG,
    "    slug = _UNSAFE.sub(separator, ascii_text.lower())\n",
    "    slug = _UNSAFE.sub(separator, ascii_text.lower()).strip(separator)\n",
)
_SLUG_F2P = _ids(
    "test_slug.py",
    "test_collapses_repeated_separators",
    "test_strips_separators_from_both_ends",
    "test_collapses_custom_separator",
    "test_truncation_does_not_end_with_a_separator",
)

PULL_2 = PullSpec(
    truth=DemoPull(
        number=2,
        title="Collapse repeated separators in slugify",
        merge_style="merge",
        linked_issues=(1,),
        expected_bucket="kept",
        fail_to_pass=_SLUG_F2P,
        pass_to_pass=_ids(
            "test_slug.py",
            "test_lowercases_words",
            "test_drops_accents",
            "test_custom_separator",
            "test_max_length",
        ),
        partial_fixes=(
            _partial_fix("collapse-runs-only", (_SLUG_COLLAPSE,), (_SLUG_F2P[0], _SLUG_F2P[2])),
            _partial_fix("strip-ends-only", (_SLUG_STRIP,), (_SLUG_F2P[1],)),
        ),
    ),
    author=ADA,
    branch="slugify-separators",
    body=(
        "Fixes #1.\n\n`slugify` now emits one separator per run of unsafe characters and never starts "
        "or ends a slug with one, also after `max_length` cuts it."
    ),
    created_at="2024-01-10T09:00:00Z",
    closed_at="2024-01-10T16:00:00Z",
    merger=MAINTAINER,
    comments=(CommentSpec(MAINTAINER, "2024-01-10T15:50:00Z", "LGTM, thanks for the changelog entry."),),
    commits=(
        CommitSpec(
            message=(
                "Collapse runs of separators in slugify\n\n"
                'A title like "Hello,  World!" gave "hello---world-". Match runs of unsafe\n'
                "characters and strip the separator from both ends.\n\nFixes #1"
            ),
            author=ADA,
            date="2024-01-10T08:00:00Z",
            changes=(
                _SLUG_COLLAPSE,
                _SLUG_STRIP,
                Edit(
                    "tests/test_slug.py",
                    'def test_max_length():\n    assert slugify("abcdef", max_length=3) == "abc"\n',
                    file_text("""
def test_max_length():
    assert slugify("abcdef", max_length=3) == "abc"


def test_collapses_repeated_separators():
    assert slugify("Hello,  World") == "hello-world"


def test_strips_separators_from_both_ends():
    assert slugify("  Hello World!  ") == "hello-world"


def test_collapses_custom_separator():
    assert slugify("a  b", separator="_") == "a_b"
"""),
                ),
            ),
        ),
        CommitSpec(
            message="Do not end a truncated slug with a separator",
            author=ADA,
            date="2024-01-10T08:40:00Z",
            changes=(
                Edit(
                    SLUG,
                    "        slug = slug[:max_length]\n",
                    "        # Cutting can leave the slug ending on a separator.\n"
                    "        slug = slug[:max_length].rstrip(separator)\n",
                ),
                Edit(
                    "tests/test_slug.py",
                    '    assert slugify("a  b", separator="_") == "a_b"\n',
                    file_text("""
    assert slugify("a  b", separator="_") == "a_b"


def test_truncation_does_not_end_with_a_separator():
    assert slugify("Hello World", max_length=6) == "hello"
"""),
                ),
                Edit(
                    "CHANGELOG.md",
                    "## Unreleased\n\n",
                    "## Unreleased\n\n### Fixed\n\n"
                    "- `slugify` collapses runs of separators and strips them from both ends (#1).\n\n",
                ),
            ),
        ),
    ),
)

# --- #3 issue, #4 PR: strict durations (squashed, two partial fixes) ------------------------------

ISSUE_3 = IssueSpec(
    number=3,
    title="parse_duration is case-sensitive and accepts garbage",
    body=(
        '`parse_duration("1H30M")` raises `ValueError` although `"1h30m"` works, and '
        '`parse_duration("1h30x")` returns 3600 instead of complaining. `"1.5h"` even gives '
        "18000, five hours."
    ),
    author=ALAN,
    created_at="2024-01-11T10:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-01-11T11:00:00Z",
            "`findall` skips whatever it cannot read. Checking the whole text against the grammar first "
            "would catch the garbage, and the units could be lower-cased before matching.",
        ),
        CommentSpec(ALAN, "2024-01-13T10:00:00Z", "Confirmed fixed on main."),
    ),
)

_DURATION_LOWERCASE = Edit(
    DURATION, "    parts = _PART.findall(text)\n", "    parts = _PART.findall(text.lower())\n"
)
_DURATION_GRAMMAR = Edit(
    DURATION,
    '_PART = re.compile(r"(\\d+)\\s*([dhms])")\n',
    '_PART = re.compile(r"(\\d+)\\s*([dhms])")\n_DURATION = re.compile(r"\\s*(?:\\d+\\s*[dhms]\\s*)+", re.IGNORECASE)\n',
)
_DURATION_F2P = _ids(
    "test_duration.py",
    "test_units_are_case_insensitive",
    "test_rejects_unknown_units",
    "test_rejects_fractions",
)

PULL_4 = PullSpec(
    truth=DemoPull(
        number=4,
        title="Make parse_duration case-insensitive and strict",
        merge_style="squash",
        linked_issues=(3,),
        expected_bucket="kept",
        fail_to_pass=_DURATION_F2P,
        pass_to_pass=_ids(
            "test_duration.py",
            "test_parses_single_units[45s-45]",
            "test_parses_single_units[2m-120]",
            "test_parses_single_units[3h-10800]",
            "test_parses_single_units[1d-86400]",
            "test_parses_compound_durations",
            "test_parses_zero",
            "test_rejects_text_without_numbers",
            "test_formats_compound_durations",
            "test_formats_zero",
            "test_round_trip",
        ),
        partial_fixes=(
            _partial_fix("lowercase-only", (_DURATION_LOWERCASE,), _DURATION_F2P[:1]),
            _partial_fix(
                "grammar-check-only",
                (
                    _DURATION_GRAMMAR,
                    Edit(
                        DURATION,
                        "    parts = _PART.findall(text)\n"
                        "    if not parts:\n"
                        '        raise ValueError(f"not a duration: {text!r}")\n',
                        "    if not _DURATION.fullmatch(text):\n"
                        '        raise ValueError(f"not a duration: {text!r}")\n'
                        "    parts = _PART.findall(text)\n",
                    ),
                ),
                _DURATION_F2P[1:],
            ),
        ),
    ),
    author=GRACE,
    branch="strict-durations",
    body="closes #3\n\nUnits are matched case-insensitively and text that is not a duration is rejected.",
    created_at="2024-01-12T10:30:00Z",
    closed_at="2024-01-13T09:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Accept upper-case duration units",
            author=GRACE,
            date="2024-01-12T09:00:00Z",
            changes=(
                _DURATION_LOWERCASE,
                Edit(
                    "tests/test_duration.py",
                    "        assert parse_duration(format_duration(seconds)) == seconds\n",
                    file_text("""
        assert parse_duration(format_duration(seconds)) == seconds


def test_units_are_case_insensitive():
    assert parse_duration("1H30M") == 5400
"""),
                ),
            ),
        ),
        CommitSpec(
            message=(
                "Reject malformed durations\n\n"
                'findall skipped what it could not read, so "1h30x" parsed as one hour.\n\ncloses #3'
            ),
            author=GRACE,
            date="2024-01-12T10:15:00Z",
            changes=(
                _DURATION_GRAMMAR,
                Edit(
                    DURATION,
                    "    parts = _PART.findall(text.lower())\n"
                    "    if not parts:\n"
                    '        raise ValueError(f"not a duration: {text!r}")\n',
                    '    # findall alone skips what it cannot read: "1h30x" used to parse as one hour.\n'
                    "    if not _DURATION.fullmatch(text):\n"
                    '        raise ValueError(f"not a duration: {text!r}")\n'
                    "    parts = _PART.findall(text.lower())\n",
                ),
                Edit(
                    "tests/test_duration.py",
                    '    assert parse_duration("1H30M") == 5400\n',
                    file_text("""
    assert parse_duration("1H30M") == 5400


def test_rejects_unknown_units():
    with pytest.raises(ValueError):
        parse_duration("1h30x")


def test_rejects_fractions():
    with pytest.raises(ValueError):
        parse_duration("1.5h")
"""),
                ),
            ),
        ),
    ),
)

# --- #5 issue, #6 PR: size rounding; the issue's text gives the fix away --------------------------

#: The lines PR #6 adds to sizes.py; issue #5 quotes them verbatim.
SIZE_ROUNDING_FIX = (
    '        # Round as the result is printed: 999.95 KB must become "1.0 MB", not "1000.0 KB".\n'
    "        if abs(round(size, 1)) < base or unit == units[-1]:\n"
)

ISSUE_5 = IssueSpec(
    number=5,
    title="format_size prints 1000.0 KB instead of 1.0 MB",
    body=(
        '`format_size(999_950)` returns `"1000.0 KB"`; it should be `"1.0 MB"`. Binary units too: '
        '`format_size(1024**2 - 1, binary=True)` gives `"1024.0 KiB"`.\n\n'
        "The loop compares the unrounded size with the base, but the size is printed rounded to one "
        "decimal. Rounding first fixes it; this is what I run locally:\n\n"
        f"```python\n{SIZE_ROUNDING_FIX}```\n\n"
        f"Commit on my fork: https://github.com/{DEMO_REPO}/commit/{head_sha_placeholder(6)}"
    ),
    author=GRACE,
    created_at="2024-01-15T09:00:00Z",
    comments=(CommentSpec(MAINTAINER, "2024-01-16T10:05:00Z", "Merged, thanks!"),),
)

PULL_6 = PullSpec(
    truth=DemoPull(
        number=6,
        title="Round before choosing the unit in format_size",
        merge_style="merge",
        linked_issues=(5,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "test_sizes.py",
            "test_rounds_up_to_the_next_unit",
            "test_rounds_up_binary_units",
            "test_rounds_up_to_gigabytes",
        ),
        pass_to_pass=_ids(
            "test_sizes.py",
            "test_formats_bytes",
            "test_formats_decimal_units",
            "test_formats_binary_units",
            "test_parses_sizes",
            "test_rejects_unknown_units",
        ),
        leaks_fix=True,
    ),
    author=GRACE,
    branch="size-rounding",
    body="Resolved #5\n\nThe size is rounded to one decimal before it is compared with the unit base.",
    created_at="2024-01-15T11:20:00Z",
    closed_at="2024-01-16T10:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message='Round before choosing the size unit\n\n999950 bytes printed as "1000.0 KB".\n\nResolved #5',
            author=GRACE,
            date="2024-01-15T11:00:00Z",
            changes=(
                Edit(SIZES, "        if abs(size) < base or unit == units[-1]:\n", SIZE_ROUNDING_FIX),
                Edit(
                    "tests/test_sizes.py",
                    '        parse_size("12 parsecs")\n',
                    file_text("""
        parse_size("12 parsecs")


def test_rounds_up_to_the_next_unit():
    assert format_size(999_950) == "1.0 MB"


def test_rounds_up_binary_units():
    assert format_size(1024**2 - 1, binary=True) == "1.0 MiB"


def test_rounds_up_to_gigabytes():
    assert format_size(999_999_999) == "1.0 GB"
"""),
                ),
            ),
        ),
    ),
)

# --- #7 issue, #8 PR: truncate width; adds the first tests/test_wrap.py ---------------------------

ISSUE_7 = IssueSpec(
    number=7,
    title="truncate returns text longer than width",
    body=(
        "`truncate(\"hello world\", 2)` returns `'hello worl...'`, longer than the text itself. I "
        "expected at most 2 characters. Also `truncate(\"hello world\", 9)` gives `'hello ...'`, with "
        "a space before the dots."
    ),
    author=KATHERINE,
    created_at="2024-01-17T08:00:00Z",
    comments=(
        CommentSpec(
            ALAN,
            "2024-01-17T10:00:00Z",
            "wrap.py has no tests at all; I'll add some along with a fix for this.",
        ),
    ),
)

PULL_8 = PullSpec(
    truth=DemoPull(
        number=8,
        title="Never return more than width characters from truncate",
        merge_style="merge",
        linked_issues=(7,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "test_wrap.py",
            "test_truncate_never_exceeds_width",
            "test_truncate_without_room_for_the_ellipsis",
            "test_truncate_drops_space_before_ellipsis",
        ),
        pass_to_pass=_ids(
            "test_wrap.py",
            "test_wrap_breaks_between_words",
            "test_wrap_keeps_long_words_whole",
            "test_wrap_of_blank_text_is_empty",
            "test_truncate_leaves_short_text_alone",
            "test_truncate_adds_ellipsis",
        ),
        stub_earns=True,  # truncate returning "" (or []) passes test_truncate_never_exceeds_width
    ),
    author=ALAN,
    branch="truncate-width",
    body=(
        '`truncate("hello world", 2)` returned `"hello worl..."`. The result now never exceeds '
        "`width`, and no space is left before the ellipsis. wrap.py had no tests, so this adds "
        "tests/test_wrap.py.\n\nfix repo2env-demo/textkit#7"
    ),
    created_at="2024-01-18T10:00:00Z",
    closed_at="2024-01-19T09:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Add tests for wrap and truncate",
            author=ALAN,
            date="2024-01-18T09:00:00Z",
            changes=(
                Write(
                    "tests/test_wrap.py",
                    file_text("""
from textkit import truncate, wrap


def test_wrap_breaks_between_words():
    assert wrap("the quick brown fox", width=10) == ["the quick", "brown fox"]


def test_wrap_keeps_long_words_whole():
    assert wrap("a supercalifragilistic word", width=8) == ["a", "supercalifragilistic", "word"]


def test_wrap_of_blank_text_is_empty():
    assert wrap("   ") == []


def test_truncate_leaves_short_text_alone():
    assert truncate("hello", 10) == "hello"


def test_truncate_adds_ellipsis():
    assert truncate("hello world", 8) == "hello..."
"""),
                ),
            ),
        ),
        CommitSpec(
            message="Keep truncate within width\n\nfix repo2env-demo/textkit#7",
            author=ALAN,
            date="2024-01-18T09:30:00Z",
            changes=(
                Edit(
                    WRAP,
                    file_text('''
    """Return ``text`` if it fits in ``width`` characters, else its start followed by ``ellipsis``."""
    if len(text) <= width:
        return text
    return text[: width - len(ellipsis)] + ellipsis
'''),
                    file_text('''
    """Return ``text`` if it fits in ``width`` characters, else its start followed by ``ellipsis``.

    The result never exceeds ``width`` characters: when not even the ellipsis fits, the text is
    cut without one.
    """
    if len(text) <= width:
        return text
    if width <= len(ellipsis):
        return text[: max(width, 0)]
    return text[: width - len(ellipsis)].rstrip() + ellipsis
'''),
                ),
                Edit(
                    "tests/test_wrap.py",
                    '    assert truncate("hello world", 8) == "hello..."\n',
                    file_text("""
    assert truncate("hello world", 8) == "hello..."


def test_truncate_never_exceeds_width():
    for width in range(12):
        assert len(truncate("hello world", width)) <= width


def test_truncate_without_room_for_the_ellipsis():
    assert truncate("hello world", 2) == "he"


def test_truncate_drops_space_before_ellipsis():
    assert truncate("hello world", 9) == "hello..."
"""),
                ),
            ),
        ),
    ),
)

# --- #9 issue, #10 PR: tag normalization; edits tests/conftest.py; branched before #8 landed ------

ISSUE_9 = IssueSpec(
    number=9,
    title="parse_tags keeps '#' prefixes and double spaces",
    body=(
        "`parse_tags(\"#Python, text  processing\")` gives `['#python', 'text  processing']`. A tag "
        "typed with a leading `#` or extra spaces is the same tag: I expected "
        "`['python', 'text-processing']`. Because of this, `parse_tags(format_tags(tags))` does not "
        "give `tags` back."
    ),
    author=ALAN,
    created_at="2024-01-18T12:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-01-18T13:00:00Z",
            "Agreed. A shared fixture with a messy tag line would make the tests easy to read.",
        ),
        CommentSpec(ALAN, "2024-01-19T12:00:00Z", "Thanks, that was quick."),
    ),
)

PULL_10 = PullSpec(
    truth=DemoPull(
        number=10,
        title="Normalize '#' prefixes and inner spaces in tags",
        merge_style="merge",
        linked_issues=(9,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "test_tags.py",
            "test_joins_inner_words_with_dashes",
            "test_drops_hash_prefixes",
            "test_format_round_trip",
        ),
        pass_to_pass=_ids(
            "test_tags.py",
            "test_splits_and_strips",
            "test_drops_empty_and_duplicate_tags",
            "test_custom_separator",
            "test_formats_tags",
        ),
        stub_earns=True,  # parse_tags returning [] (or "") passes test_format_round_trip
    ),
    author=ADA,
    branch="tag-normalization",
    body=(
        f"Closes https://github.com/{DEMO_REPO}/issues/9\n\n"
        "`parse_tags` now drops a leading `#` and joins inner words with dashes, so the output of "
        "`format_tags` parses back to the same tags.\n\n"
        "See #7 for a similar report about `truncate`; related to #3."
    ),
    created_at="2024-01-18T15:00:00Z",
    closed_at="2024-01-19T11:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message=(
                "Normalize '#' prefixes and inner spaces in tags\n\n"
                f"Closes https://github.com/{DEMO_REPO}/issues/9"
            ),
            author=ADA,
            date="2024-01-18T14:00:00Z",
            changes=(
                Edit(
                    TAGS,
                    "\n\ndef parse_tags(",
                    file_text("""


def _normalize_tag(raw: str) -> str:
    # "#Text  Processing" and "text processing" are the same tag: "text-processing".
    return "-".join(raw.strip().lstrip("#").lower().split())


def parse_tags("""),
                ),
                Edit(
                    TAGS,
                    "    Empty tags are dropped and duplicates are kept once, in first-seen order.\n",
                    "    A leading ``#`` is dropped and inner whitespace becomes ``-``. Empty tags are dropped\n"
                    "    and duplicates are kept once, in first-seen order.\n",
                ),
                Edit(TAGS, "        tag = raw.strip().lower()\n", "        tag = _normalize_tag(raw)\n"),
                Edit(
                    "tests/test_tags.py",
                    '    assert format_tags(["a", "b"]) == "#a, #b"\n',
                    file_text("""
    assert format_tags(["a", "b"]) == "#a, #b"


def test_joins_inner_words_with_dashes():
    assert parse_tags("Text   Processing") == ["text-processing"]
"""),
                ),
            ),
        ),
        CommitSpec(
            message="Add a shared tag line fixture",
            author=ADA,
            date="2024-01-18T14:30:00Z",
            changes=(
                Edit(
                    CONFTEST,
                    '    return [["name", "born"], ["Ada Lovelace", "1815"], ["Grace Hopper", "1906"]]\n',
                    file_text('''
    return [["name", "born"], ["Ada Lovelace", "1815"], ["Grace Hopper", "1906"]]


@pytest.fixture
def tag_line():
    """A tag line with every quirk users type: '#' prefixes, capitals, doubled spaces, repeats."""
    return "#Python, text  processing, #python, CLI, #Text Processing"
'''),
                ),
                Edit(
                    "tests/test_tags.py",
                    '    assert parse_tags("Text   Processing") == ["text-processing"]\n',
                    file_text("""
    assert parse_tags("Text   Processing") == ["text-processing"]


def test_drops_hash_prefixes(tag_line):
    assert parse_tags(tag_line) == ["python", "text-processing", "cli"]


def test_format_round_trip(tag_line):
    tags = parse_tags(tag_line)
    assert parse_tags(format_tags(tags)) == tags
"""),
                ),
            ),
        ),
    ),
)

RELEASE_0_2_0 = CommitSpec(
    message="Release 0.2.0",
    author=MAINTAINER,
    date="2024-01-19T15:00:00Z",
    changes=(
        Edit("pyproject.toml", 'version = "0.1.0"\n', 'version = "0.2.0"\n'),
        Edit(INIT, '__version__ = "0.1.0"\n', '__version__ = "0.2.0"\n'),
        Edit(
            "CHANGELOG.md",
            "## Unreleased\n\n### Fixed\n\n",
            "## Unreleased\n\n## 0.2.0 - 2024-01-19\n\n### Fixed\n\n"
            "- `parse_duration` accepts upper-case units and rejects malformed durations (#3).\n"
            "- `format_size` rounds before choosing the unit (#5).\n"
            "- `truncate` never returns more than `width` characters (#7).\n"
            "- `parse_tags` drops `#` prefixes and joins inner words with dashes (#9).\n",
        ),
    ),
)

# --- #11 issue, #12 PR: a source fix without any test change ------------------------------------

ISSUE_11 = IssueSpec(
    number=11,
    title="render_table crashes on numbers",
    body=(
        '`render_table([["name", "age"], ["Ada", 36]])` raises '
        "`TypeError: object of type 'int' has no len()`."
    ),
    author=KATHERINE,
    created_at="2024-01-22T09:00:00Z",
)

PULL_12 = PullSpec(
    truth=DemoPull(
        number=12,
        title="Accept non-string cells in render_table",
        merge_style="squash",
        linked_issues=(11,),
        expected_bucket="no_test_changes",
    ),
    author=ALAN,
    branch="table-cells",
    body="Fixes #11\n\nNumbers and `None` in rows made `len()` fail; cells are converted to `str` first.",
    created_at="2024-01-22T10:10:00Z",
    closed_at="2024-01-22T15:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Convert table cells to str before measuring them\n\nFixes #11",
            author=ALAN,
            date="2024-01-22T10:00:00Z",
            changes=(
                Edit(
                    TABLE,
                    "def render_table(rows: Sequence[Sequence[str]], header: bool = True) -> str:\n",
                    "def render_table(rows: Sequence[Sequence[object]], header: bool = True) -> str:\n",
                ),
                Edit(
                    TABLE,
                    file_text("""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
"""),
                    file_text("""
    # Rows often hold numbers or None: measure and pad their text, not the objects.
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(cells[0]))]
    lines = []
    for index, row in enumerate(cells):
"""),
                ),
            ),
        ),
    ),
)

# --- #13 issue, #14 PR: documentation only ------------------------------------------------------

ISSUE_13 = IssueSpec(
    number=13,
    title="Usage docs show a duration format parse_duration rejects",
    body='docs/usage.md shows `parse_duration("1:30")` returning 5400, but it raises `ValueError`.',
    author=KATHERINE,
    created_at="2024-01-23T09:00:00Z",
)

PULL_14 = PullSpec(
    truth=DemoPull(
        number=14,
        title="Document the duration formats parse_duration accepts",
        merge_style="merge",
        linked_issues=(13,),
        expected_bucket="no_source_change",
    ),
    author=GRACE,
    branch="duration-docs",
    body="closes #13\n\nReplaces the clock-style example with the formats that really work.",
    created_at="2024-01-23T11:05:00Z",
    closed_at="2024-01-23T14:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Document accepted duration formats\n\ncloses #13",
            author=GRACE,
            date="2024-01-23T11:00:00Z",
            changes=(
                Edit(
                    "docs/usage.md",
                    file_text("""
`parse_duration` turns a human duration into seconds, `format_duration` goes back:

```python
>>> parse_duration("1h30m")
5400
>>> parse_duration("1:30")
5400
"""),
                    file_text("""
`parse_duration` turns a human duration into seconds, `format_duration` goes back. Units are
`d`, `h`, `m` and `s`, in any case, and parts may be separated by spaces. Clock formats such as
`1:30` and fractions such as `1.5h` raise `ValueError`.

```python
>>> parse_duration("1h30m")
5400
>>> parse_duration("2d 4h")
187200
>>> parse_duration("1H30M")
5400
"""),
                ),
                Edit(
                    "README.md",
                    "## Install\n",
                    "## Documentation\n\nSee [docs/usage.md](docs/usage.md) for examples of every function.\n\n## Install\n",
                ),
            ),
        ),
    ),
)

# --- #15 issue, #16 PR: read_table feature with a data file under tests/ --------------------------

ISSUE_15 = IssueSpec(
    number=15,
    title="Read tables from CSV files",
    body=(
        "It would be handy to load a table from a CSV file and print it, something like "
        '`render_table(read_table("people.csv"))`.'
    ),
    author=GRACE,
    created_at="2024-01-24T09:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-01-24T09:30:00Z",
            "Sounds good. The csv module handles quoting for us; a small fixture file under tests/data "
            "would be a good test.",
        ),
    ),
)

PULL_16 = PullSpec(
    truth=DemoPull(
        number=16,
        title="Add read_table to load tables from CSV files",
        merge_style="merge",
        linked_issues=(15,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "test_table.py",
            "test_read_table_reads_csv",
            "test_read_table_skips_blank_lines",
            "test_read_table_custom_delimiter",
            "test_read_table_output_renders",
        ),
        pass_to_pass=_ids(
            "test_table.py", "test_renders_aligned_columns", "test_renders_without_header", "test_empty_table"
        ),
        # The issue names read_table but not its delimiter keyword, which a test passes; the
        # re-export in __init__ and __all__ (hunks 1 and 2) is a convenience no test imports.
        interface=("textkit.table.read_table",),
        untested_hunks=(1, 2),
    ),
    author=ADA,
    branch="read-table",
    body=(
        'Resolves #15\n\nAdds `textkit.read_table(path, delimiter=",")`, which returns the rows of a '
        "CSV file as lists of strings and skips blank lines."
    ),
    created_at="2024-01-25T11:00:00Z",
    closed_at="2024-01-26T09:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Add read_table for CSV files",
            author=ADA,
            date="2024-01-25T10:00:00Z",
            changes=(
                Edit(
                    TABLE,
                    '"""Plain-text tables: rows of cells rendered as aligned columns."""\n',
                    '"""Plain-text tables: rows read from CSV files, rendered as aligned columns."""\n',
                ),
                Edit(
                    TABLE,
                    "from typing import Sequence\n",
                    "import csv\nfrom pathlib import Path\nfrom typing import List, Sequence, Union\n",
                ),
                Edit(
                    TABLE,
                    '    return "\\n".join(lines)\n',
                    file_text('''
    return "\\n".join(lines)


def read_table(path: Union[str, Path], delimiter: str = ",") -> List[List[str]]:
    """Return the rows of the CSV file at ``path`` as lists of strings, skipping blank lines.

    ``delimiter`` is a comma by default; pass a tab for tab-separated files.
    """
    # newline="" lets the csv module read quoted cells that contain line breaks.
    with open(path, newline="", encoding="utf-8") as handle:
        return [row for row in csv.reader(handle, delimiter=delimiter) if row]
'''),
                ),
                Edit(
                    INIT,
                    "from textkit.table import render_table\n",
                    "from textkit.table import read_table, render_table\n",
                ),
                Edit(INIT, '    "parse_tags",\n', '    "parse_tags",\n    "read_table",\n'),
                Edit(
                    "CHANGELOG.md",
                    "## Unreleased\n\n",
                    "## Unreleased\n\n### Added\n\n- `read_table` reads CSV files into rows (#15).\n\n",
                ),
            ),
        ),
        CommitSpec(
            message="Test read_table against a fixture file\n\nResolves #15",
            author=ADA,
            date="2024-01-25T10:45:00Z",
            changes=(
                Write(
                    "tests/data/people.csv",
                    'name,born\nAda Lovelace,1815\n\nGrace Hopper,1906\n"Hopper, Grace",1906\n',
                ),
                Edit(CONFTEST, "import pytest\n", "from pathlib import Path\n\nimport pytest\n"),
                Edit(
                    CONFTEST,
                    '    return "#Python, text  processing, #python, CLI, #Text Processing"\n',
                    file_text('''
    return "#Python, text  processing, #python, CLI, #Text Processing"


@pytest.fixture
def data_dir():
    """The directory of the data files the tests read."""
    return Path(__file__).parent / "data"
'''),
                ),
                Edit(
                    "tests/test_table.py",
                    '    assert table.render_table([]) == ""\n',
                    file_text(r"""
    assert table.render_table([]) == ""


def test_read_table_reads_csv(data_dir):
    rows = table.read_table(data_dir / "people.csv")
    assert rows[0] == ["name", "born"]
    assert rows[1] == ["Ada Lovelace", "1815"]
    assert rows[-1] == ["Hopper, Grace", "1906"]


def test_read_table_skips_blank_lines(data_dir):
    assert len(table.read_table(data_dir / "people.csv")) == 4


def test_read_table_custom_delimiter(tmp_path):
    path = tmp_path / "scores.tsv"
    path.write_text("team\tscore\nred\t3\n", encoding="utf-8")
    assert table.read_table(path, delimiter="\t") == [["team", "score"], ["red", "3"]]


def test_read_table_output_renders(data_dir):
    lines = table.render_table(table.read_table(data_dir / "people.csv")).splitlines()
    assert lines[2] == "Ada Lovelace   1815"
"""),
                ),
            ),
        ),
    ),
)

# --- #17 issue, #18 PR: common_tags, with a hash-seed dependent (flaky) test ---------------------

ISSUE_17 = IssueSpec(
    number=17,
    title="Find the tags shared by several items",
    body=(
        "I keep tag lists for several posts and want the tags they all share, normalized the way "
        "`parse_tags` does it (`#Python` is `python`)."
    ),
    author=KATHERINE,
    created_at="2024-01-29T09:00:00Z",
)

PULL_18 = PullSpec(
    truth=DemoPull(
        number=18,
        title="Add common_tags to find the tags shared by several groups",
        merge_style="squash",
        linked_issues=(17,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "test_common_tags.py",
            "test_no_groups_share_nothing",
            "test_disjoint_groups_share_nothing",
            "test_tags_are_normalized_before_comparing",
        ),
        flaky=_ids("test_common_tags.py", "test_keeps_the_order_of_the_first_group"),
        stub_earns=True,  # common_tags returning [] passes two of its three stable tests
        interface=("textkit.tags.common_tags",),  # the issue asks for the behaviour, never the name
        untested_hunks=(1,),  # the re-export in __init__: the tests import textkit.tags
    ),
    author=ALAN,
    branch="common-tags",
    body=(
        "Fixes #17\n\nFixes #16 as well, in a way: its example compared tag lists by hand.\n\n"
        "`common_tags(*groups)` returns the normalized tags every group contains."
    ),
    created_at="2024-01-29T13:30:00Z",
    closed_at="2024-01-30T10:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Add common_tags\n\nFixes #17",
            author=ALAN,
            date="2024-01-29T13:00:00Z",
            changes=(
                Edit(
                    TAGS,
                    '    return ", ".join(f"#{tag}" for tag in tags)\n',
                    file_text('''
    return ", ".join(f"#{tag}" for tag in tags)


def common_tags(*groups: Iterable[str]) -> List[str]:
    """Return the tags found in every group, normalized as :func:`parse_tags` does."""
    if not groups:
        return []
    shared = {_normalize_tag(tag) for tag in groups[0]}
    for group in groups[1:]:
        shared &= {_normalize_tag(tag) for tag in group}
    return list(shared)
'''),
                ),
                Edit(
                    INIT,
                    "from textkit.tags import format_tags, parse_tags\n",
                    "from textkit.tags import common_tags, format_tags, parse_tags\n",
                ),
                Edit(INIT, "__all__ = [\n", '__all__ = [\n    "common_tags",\n'),
                Write(
                    "tests/test_common_tags.py",
                    file_text("""
from textkit.tags import common_tags


def test_no_groups_share_nothing():
    assert common_tags() == []


def test_disjoint_groups_share_nothing():
    assert common_tags(["a", "b"], ["c"]) == []


def test_tags_are_normalized_before_comparing():
    assert sorted(common_tags(["#Python", "CLI"], ["python", "cli", "web"])) == ["cli", "python"]


def test_keeps_the_order_of_the_first_group():
    assert common_tags(["web", "api"], ["api", "web"]) == ["web", "api"]
"""),
                ),
            ),
        ),
    ),
)

# --- #19 PR: a tested fix that names no issue (branched before #18 landed) -----------------------

PULL_19 = PullSpec(
    truth=DemoPull(
        number=19,
        title="Round parse_size to the nearest byte",
        merge_style="squash",
        linked_issues=(),
        expected_bucket="no_linked_issue",
        fail_to_pass=_ids(
            "test_sizes.py",
            "test_parse_size_rounds_to_the_nearest_byte",
            "test_parse_size_fractional_kilobytes",
            "test_parse_size_fractional_kibibytes",
        ),
        pass_to_pass=PULL_6.truth.pass_to_pass + PULL_6.truth.fail_to_pass,
    ),
    author=ADA,
    branch="parse-size-rounding",
    body=(
        '`int()` truncated the floating-point product, so `parse_size("8.2 MB")` returned 8199999. '
        "Round to the nearest byte instead."
    ),
    created_at="2024-01-29T15:10:00Z",
    closed_at="2024-01-31T12:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message='Round parse_size to the nearest byte\n\nint() truncated the float product: "8.2 MB" gave 8199999 bytes.',
            author=ADA,
            date="2024-01-29T15:00:00Z",
            changes=(
                Edit(
                    SIZES,
                    "    return int(float(number) * _FACTORS[unit.lower()])\n",
                    "    # int() would truncate: 8.2 MB is 8199999.999999999 bytes in floating point.\n"
                    "    return round(float(number) * _FACTORS[unit.lower()])\n",
                ),
                Edit(
                    "tests/test_sizes.py",
                    '    assert format_size(999_999_999) == "1.0 GB"\n',
                    file_text("""
    assert format_size(999_999_999) == "1.0 GB"


def test_parse_size_rounds_to_the_nearest_byte():
    assert parse_size("8.2 MB") == 8_200_000


def test_parse_size_fractional_kilobytes():
    assert parse_size("1.005 KB") == 1005


def test_parse_size_fractional_kibibytes():
    assert parse_size("1.15 KiB") == 1178
"""),
                ),
            ),
        ),
    ),
)

# --- #20 PR: closed without merging ---------------------------------------------------------------

PULL_20 = PullSpec(
    truth=DemoPull(
        number=20,
        title="Add title_case helper",
        merge_style="unmerged",
        linked_issues=(),
        expected_bucket="not_merged",
    ),
    author=EDSGER,
    branch="title-case",
    body="Adds `textkit.case.title_case`, which upper-cases the first letter of every word.",
    created_at="2024-02-01T10:05:00Z",
    closed_at="2024-02-02T09:00:00Z",
    merger=MAINTAINER,
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-02-02T08:55:00Z",
            "Thank you! Case conversion is out of scope for textkit, so I'm closing this.",
        ),
    ),
    commits=(
        CommitSpec(
            message="Add title_case helper",
            author=EDSGER,
            date="2024-02-01T10:00:00Z",
            changes=(
                Write(
                    "src/textkit/case.py",
                    file_text('''
"""Case conversions."""


def title_case(text: str) -> str:
    """Return ``text`` with the first letter of every word upper-cased."""
    return " ".join(word[:1].upper() + word[1:] for word in text.split(" "))
'''),
                ),
                Write(
                    "tests/test_case.py",
                    file_text("""
from textkit.case import title_case


def test_title_case():
    assert title_case("hello world") == "Hello World"
"""),
                ),
            ),
        ),
    ),
)

# --- #21 issue (stays open), #22 PR: only mentions it, without a closing keyword -------------------

ISSUE_21 = IssueSpec(
    number=21,
    title="wrap() cannot split very long words",
    body="Long URLs overflow the width: `wrap` puts a word longer than `width` on a line of its own.",
    author=KATHERINE,
    created_at="2024-02-05T09:00:00Z",
    comments=(CommentSpec(GRACE, "2024-02-05T10:00:00Z", "I can take this one."),),
)

PULL_22 = PullSpec(
    truth=DemoPull(
        number=22,
        title="Add break_long_words option to wrap",
        merge_style="merge",
        linked_issues=(),
        expected_bucket="no_linked_issue",
        fail_to_pass=_ids(
            "test_wrap.py",
            "test_wrap_breaks_long_words_when_asked",
            "test_wrap_pieces_share_lines_with_short_words",
        ),
        pass_to_pass=PULL_8.truth.pass_to_pass + PULL_8.truth.fail_to_pass,
    ),
    author=GRACE,
    branch="break-long-words",
    body=(
        "Adds `wrap(text, width, break_long_words=True)`, which cuts words longer than `width` into "
        "pieces.\n\nSee #21; related to #7."
    ),
    created_at="2024-02-05T14:10:00Z",
    closed_at="2024-02-06T10:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Add break_long_words option to wrap",
            author=GRACE,
            date="2024-02-05T14:00:00Z",
            changes=(
                Edit(
                    WRAP,
                    "def wrap(text: str, width: int = 70) -> List[str]:\n",
                    "def wrap(text: str, width: int = 70, break_long_words: bool = False) -> List[str]:\n",
                ),
                Edit(
                    WRAP,
                    "    Lines break between words; a word longer than ``width`` gets a line of its own.\n",
                    "    Lines break between words. A word longer than ``width`` gets a line of its own or, with\n"
                    "    ``break_long_words``, is cut into pieces of ``width`` characters.\n",
                ),
                Edit(
                    WRAP,
                    file_text("""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
"""),
                    file_text("""
    for word in text.split():
        pieces = [word]
        if break_long_words:
            pieces = [word[start : start + width] for start in range(0, len(word), width)]
        for piece in pieces:
            if current and len(current) + 1 + len(piece) > width:
                lines.append(current)
                current = piece
            else:
                current = f"{current} {piece}" if current else piece
"""),
                ),
                Edit(
                    "tests/test_wrap.py",
                    '    assert truncate("hello world", 9) == "hello..."\n',
                    file_text("""
    assert truncate("hello world", 9) == "hello..."


def test_wrap_breaks_long_words_when_asked():
    assert wrap("see https://example.com/a/long/path", width=10, break_long_words=True) == [
        "see",
        "https://ex",
        "ample.com/",
        "a/long/pat",
        "h",
    ]


def test_wrap_pieces_share_lines_with_short_words():
    assert wrap("abcdefgh ij", width=6, break_long_words=True) == ["abcdef", "gh ij"]
"""),
                ),
            ),
        ),
    ),
)

RELEASE_0_3_0 = CommitSpec(
    message="Release 0.3.0",
    author=MAINTAINER,
    date="2024-02-06T15:00:00Z",
    changes=(
        Edit("pyproject.toml", 'version = "0.2.0"\n', 'version = "0.3.0"\n'),
        Edit(INIT, '__version__ = "0.2.0"\n', '__version__ = "0.3.0"\n'),
        Edit(
            "CHANGELOG.md",
            "## Unreleased\n\n### Added\n\n",
            "## Unreleased\n\n## 0.3.0 - 2024-02-06\n\n### Added\n\n"
            "- `common_tags` returns the tags shared by several groups (#17).\n"
            "- `wrap(..., break_long_words=True)` cuts words longer than the width.\n",
        ),
        Edit(
            "CHANGELOG.md",
            "- `read_table` reads CSV files into rows (#15).\n\n",
            "- `read_table` reads CSV files into rows (#15).\n\n### Fixed\n\n"
            "- `render_table` accepts cells that are not strings (#11).\n"
            "- `parse_size` rounds to the nearest byte.\n\n",
        ),
    ),
)

ISSUES: tuple[IssueSpec, ...] = (
    ISSUE_1,
    ISSUE_3,
    ISSUE_5,
    ISSUE_7,
    ISSUE_9,
    ISSUE_11,
    ISSUE_13,
    ISSUE_15,
    ISSUE_17,
    ISSUE_21,
)

PULLS: tuple[PullSpec, ...] = (
    PULL_2,
    PULL_4,
    PULL_6,
    PULL_8,
    PULL_10,
    PULL_12,
    PULL_14,
    PULL_16,
    PULL_18,
    PULL_19,
    PULL_20,
    PULL_22,
)

#: The order in which things happen on ``main``. #10 branches off before #8 lands and #19 before
#: #18 lands, so their base commits are older than the ``main`` they land on.
TIMELINE: tuple[Step, ...] = (
    MainCommit(INITIAL_COMMIT),
    MainCommit(USAGE_DOCS_COMMIT),
    OpenPull(2),
    LandPull(2),
    OpenPull(4),
    LandPull(4),
    OpenPull(6),
    LandPull(6),
    OpenPull(8),
    OpenPull(10),
    LandPull(8),
    LandPull(10),
    MainCommit(RELEASE_0_2_0),
    OpenPull(12),
    LandPull(12),
    OpenPull(14),
    LandPull(14),
    OpenPull(16),
    LandPull(16),
    OpenPull(18),
    OpenPull(19),
    LandPull(18),
    LandPull(19),
    OpenPull(20),
    OpenPull(22),
    LandPull(22),
    MainCommit(RELEASE_0_3_0),
)

HISTORY = DemoHistory(repo=DEMO_REPO, language="python", issues=ISSUES, pulls=PULLS, timeline=TIMELINE)

DEMO_PULLS: tuple[DemoPull, ...] = HISTORY.truth
