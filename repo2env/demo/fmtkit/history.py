"""fmtkit's history: who opened which issue and PR, what each commit changes, and the ground truth.

The JavaScript/TypeScript demo, told like textkit's (:mod:`repo2env.demo.history`): issue and PR
numbers share one sequence in creation order, :data:`TIMELINE` is the order in which things
happen on ``main``, and each PR's :class:`~repo2env.demo.spec.DemoPull` says what a correct
pipeline must conclude about it. Test ids are ``<test file>::<describe titles and test title
joined by " > ">``; ``tests/test_demo_js.py`` checks every claim by running fmtkit's mocha suite
in a Node.js container.
"""

from __future__ import annotations

from repo2env.demo.fmtkit import library
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

JS_DEMO_REPO = "repo2env-demo/fmtkit"

MAINTAINER = Person("Margaret Hamilton", "margaret@example.com", "margaret-h", 9200001, "OWNER")
BARBARA = Person("Barbara Liskov", "barbara@example.com", "barbara-l", 9200002, "CONTRIBUTOR")
KEN = Person("Ken Thompson", "ken@example.com", "ken-t", 9200003, "CONTRIBUTOR")
FRANCES = Person("Frances Allen", "frances@example.com", "frances-a", 9200004, "CONTRIBUTOR")
DENNIS = Person("Dennis Ritchie", "dennis@example.com", "dennis-r", 9200005, "NONE")
RADIA = Person("Radia Perlman", "radia@example.com", "radia-p", 9200006, "FIRST_TIME_CONTRIBUTOR")

ORDINAL = "lib/ordinal.js"
LIST = "lib/list.js"
BYTES = "lib/bytes.js"
DURATION = "lib/duration.js"
PLURAL = "lib/plural.js"
NUMBER = "lib/number.js"
LIB_INDEX = "lib/index.js"
FIXTURES = "test/fixtures.js"


def head_sha_placeholder(number: int) -> str:
    """The token the builder replaces, in issue texts, with the head commit SHA of PR ``number``."""
    return f"<head-sha-of-pull-{number}>"


def _ids(test_file: str, describe: str, *titles: str) -> tuple[str, ...]:
    """``test/<test_file>::<describe> > <title>`` for each title (``describe`` may nest: ``a > b``)."""
    return tuple(f"test/{test_file}::{describe} > {title}" for title in titles)


def _partial_fix(name: str, edits: tuple[Edit, ...], passes: tuple[str, ...]) -> PartialFix:
    # Partial fixes only touch files no earlier PR changed, so their base text is the first commit's.
    return partial_fix(name, library.INITIAL_FILES, edits, passes)


def _lock_version(old: str, new: str) -> tuple[Edit, Edit]:
    """The two edits ``npm version`` makes to package-lock.json: the root's and the package's."""
    return (
        Edit("package-lock.json", f'{{\n  "name": "fmtkit",\n  "version": "{old}",', f'{{\n  "name": "fmtkit",\n  "version": "{new}",'),
        Edit(
            "package-lock.json",
            f'      "name": "fmtkit",\n      "version": "{old}",',
            f'      "name": "fmtkit",\n      "version": "{new}",',
        ),
    )


# --- the first commits -------------------------------------------------------------------------

INITIAL_COMMIT = CommitSpec(
    message="Initial commit: fmtkit 0.1.0",
    author=MAINTAINER,
    date="2024-03-04T09:00:00Z",
    changes=tuple(Write(path, content) for path, content in library.INITIAL_FILES.items()),
)

API_DOCS_COMMIT = CommitSpec(
    message="Add API documentation",
    author=MAINTAINER,
    date="2024-03-04T11:30:00Z",
    changes=(Write("docs/api.md", library.API_DOCS),),
)

# --- #1 issue, #2 PR: ordinal teens (merge commit, changelog entry, two partial fixes) ------------

ISSUE_1 = IssueSpec(
    number=1,
    title="ordinal(11) returns 11st",
    body=(
        "`ordinal(11)` gives `'11st'`, `ordinal(12)` `'12nd'` and `ordinal(113)` `'113rd'`; they should all "
        "end in `th`. It also happily returns `'1.5th'` for `ordinal(1.5)` and `'3rd'` for the string `'3'`."
    ),
    author=DENNIS,
    created_at="2024-03-05T10:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-03-05T12:00:00Z",
            "The suffix only looks at the last digit. The teens need a look at the last two, and a "
            "`Number.isInteger` check would turn the other two cases into a `TypeError`.",
        ),
        CommentSpec(DENNIS, "2024-03-06T17:00:00Z", "Works for me on main now, thanks!"),
    ),
)

_ORDINAL_TEENS = Edit(
    ORDINAL,
    'function suffixOf(n) {\n  return SUFFIXES.get(n % 10) || "th";\n',
    file_text("""
function suffixOf(n) {
  // 11, 12 and 13 take "th" whatever their last digit, and so do 111, 212 ...
  if ([11, 12, 13].includes(n % 100)) {
    return "th";
  }
  return SUFFIXES.get(n % 10) || "th";
"""),
)
_ORDINAL_INTEGERS = Edit(
    ORDINAL,
    "function ordinal(n) {\n",
    file_text("""
function ordinal(n) {
  if (!Number.isInteger(n)) {
    throw new TypeError(`ordinal expects an integer, got ${n}`);
  }
"""),
)
_ORDINAL_F2P = _ids(
    "ordinal.test.js",
    "ordinal",
    "uses th for 11, 12 and 13",
    "uses th for 111, 112 and 113",
    "rejects numbers that are not integers",
    "rejects numeric strings",
)

PULL_2 = PullSpec(
    truth=DemoPull(
        number=2,
        title="Use th for the teens in ordinal",
        merge_style="merge",
        linked_issues=(1,),
        expected_bucket="kept",
        fail_to_pass=_ORDINAL_F2P,
        pass_to_pass=_ids(
            "ordinal.test.js",
            "ordinal",
            "uses st, nd and rd after 1, 2 and 3",
            "uses th after other digits",
            "handles larger numbers",
            "keeps the sign of negative numbers",
        ),
        partial_fixes=(
            _partial_fix("teens-only", (_ORDINAL_TEENS,), _ORDINAL_F2P[:2]),
            _partial_fix("integer-check-only", (_ORDINAL_INTEGERS,), _ORDINAL_F2P[2:]),
        ),
    ),
    author=BARBARA,
    branch="ordinal-teens",
    body=(
        "Fixes #1.\n\n`ordinal` now looks at the last two digits, so 11, 12, 13 (and 111, 212 ...) end in "
        "`th`, and it throws a `TypeError` for anything that is not an integer."
    ),
    created_at="2024-03-06T09:00:00Z",
    closed_at="2024-03-06T16:00:00Z",
    merger=MAINTAINER,
    comments=(CommentSpec(MAINTAINER, "2024-03-06T15:50:00Z", "LGTM, thanks for the changelog entry."),),
    commits=(
        CommitSpec(
            message=(
                "Use th for 11, 12 and 13 in ordinal\n\n"
                "Only the last digit chose the suffix, so 11 became 11st. Look at the last two.\n\nFixes #1"
            ),
            author=BARBARA,
            date="2024-03-06T08:00:00Z",
            changes=(
                _ORDINAL_TEENS,
                Edit(
                    "test/ordinal.test.js",
                    '    assert.equal(ordinal(-1), "-1st");\n  });\n',
                    file_text("""
    assert.equal(ordinal(-1), "-1st");
  });

  it("uses th for 11, 12 and 13", () => {
    assert.equal(ordinal(11), "11th");
    assert.equal(ordinal(12), "12th");
    assert.equal(ordinal(13), "13th");
  });

  it("uses th for 111, 112 and 113", () => {
    assert.equal(ordinal(111), "111th");
    assert.equal(ordinal(112), "112th");
    assert.equal(ordinal(-113), "-113th");
  });
"""),
                ),
            ),
        ),
        CommitSpec(
            message="Reject numbers that are not integers in ordinal",
            author=BARBARA,
            date="2024-03-06T08:40:00Z",
            changes=(
                _ORDINAL_INTEGERS,
                Edit(
                    "test/ordinal.test.js",
                    '    assert.equal(ordinal(-113), "-113th");\n  });\n',
                    file_text("""
    assert.equal(ordinal(-113), "-113th");
  });

  it("rejects numbers that are not integers", () => {
    assert.throws(() => ordinal(1.5), { name: "TypeError", message: /expects an integer/ });
    assert.throws(() => ordinal(Number.NaN), { name: "TypeError", message: /expects an integer/ });
  });

  it("rejects numeric strings", () => {
    assert.throws(() => ordinal("3"), { name: "TypeError", message: /expects an integer/ });
  });
"""),
                ),
                Edit(
                    "CHANGELOG.md",
                    "## Unreleased\n\n",
                    "## Unreleased\n\n### Fixed\n\n"
                    "- `ordinal` ends 11, 12 and 13 in `th` and rejects what is not an integer (#1).\n\n",
                ),
            ),
        ),
    ),
)

# --- #3 issue, #4 PR: formatList pairs and iterables (squashed, two partial fixes) ----------------

ISSUE_3 = IssueSpec(
    number=3,
    title="formatList puts a comma between two items and crashes on a Set",
    body=(
        '`formatList(["tea", "coffee"])` returns `"tea, and coffee"`: with two items there should be no '
        'comma. And `formatList(new Set(["tea", "coffee", "juice"]))` throws '
        "`TypeError: items.slice is not a function`, although the types say any iterable is fine."
    ),
    author=KEN,
    created_at="2024-03-07T10:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-03-07T11:00:00Z",
            "Both are real. Copying the iterable into an array first fixes the Set, and two items need a "
            "case of their own.",
        ),
        CommentSpec(KEN, "2024-03-09T10:00:00Z", "Confirmed fixed on main."),
    ),
)

_LIST_ITERABLES = Edit(
    LIST,
    file_text("""
 * @param {unknown[]} items
 * @param {{conjunction?: string}} [options]
 * @returns {string}
 */
function formatList(items, { conjunction = "and" } = {}) {
"""),
    file_text("""
 * @param {Iterable<unknown>} iterable
 * @param {{conjunction?: string}} [options]
 * @returns {string}
 */
function formatList(iterable, { conjunction = "and" } = {}) {
  // Sets, generators and Map keys have neither length nor slice: copy them first.
  const items = Array.from(iterable);
"""),
)
_LIST_PAIRS = Edit(
    LIST,
    "\n  const head = items.slice(0, -1).join(\", \");\n",
    file_text("""

  if (items.length === 2) {
    // Two items take no comma: "tea and coffee".
    return `${items[0]} ${conjunction} ${items[1]}`;
  }
  const head = items.slice(0, -1).join(", ");
"""),
)
_LIST_F2P = _ids(
    "list.test.js",
    "formatList",
    "joins two items without a comma",
    "joins two items with a custom conjunction",
    "accepts a Set",
    "accepts any iterable",
)

PULL_4 = PullSpec(
    truth=DemoPull(
        number=4,
        title="Format pairs and any iterable in formatList",
        merge_style="squash",
        linked_issues=(3,),
        expected_bucket="kept",
        fail_to_pass=_LIST_F2P,
        pass_to_pass=_ids(
            "list.test.js",
            "formatList",
            "returns an empty string for no items",
            "returns a single item as is",
            "joins three items with a serial comma",
            "uses a custom conjunction",
            "converts items to strings",
        ),
        partial_fixes=(
            _partial_fix("pairs-only", (_LIST_PAIRS,), _LIST_F2P[:2]),
            _partial_fix("iterables-only", (_LIST_ITERABLES,), _LIST_F2P[2:]),
        ),
    ),
    author=FRANCES,
    branch="list-pairs-and-iterables",
    body="closes #3\n\nTwo items are joined without a comma, and any iterable is accepted, as the types promise.",
    created_at="2024-03-08T10:30:00Z",
    closed_at="2024-03-09T09:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Join two items without a comma in formatList",
            author=FRANCES,
            date="2024-03-08T09:00:00Z",
            changes=(
                _LIST_PAIRS,
                Edit(
                    "test/list.test.js",
                    '    assert.equal(formatList([1, 2, 3]), "1, 2, and 3");\n  });\n',
                    file_text("""
    assert.equal(formatList([1, 2, 3]), "1, 2, and 3");
  });

  it("joins two items without a comma", () => {
    assert.equal(formatList(["tea", "coffee"]), "tea and coffee");
  });

  it("joins two items with a custom conjunction", () => {
    assert.equal(formatList(["tea", "coffee"], { conjunction: "or" }), "tea or coffee");
  });
"""),
                ),
            ),
        ),
        CommitSpec(
            message=(
                "Accept any iterable in formatList\n\n"
                "A Set has no slice, so formatList threw although index.d.ts takes an Iterable.\n\ncloses #3"
            ),
            author=FRANCES,
            date="2024-03-08T10:15:00Z",
            changes=(
                _LIST_ITERABLES,
                Edit(
                    "test/list.test.js",
                    '    assert.equal(formatList(["tea", "coffee"], { conjunction: "or" }), "tea or coffee");\n  });\n',
                    file_text("""
    assert.equal(formatList(["tea", "coffee"], { conjunction: "or" }), "tea or coffee");
  });

  it("accepts a Set", () => {
    assert.equal(formatList(new Set([...DRINKS, "tea"])), "tea, coffee, and juice");
  });

  it("accepts any iterable", () => {
    function* drinks() {
      yield* DRINKS;
    }
    assert.equal(formatList(drinks()), "tea, coffee, and juice");
    assert.equal(formatList(new Map([[1, "one"], [2, "two"], [3, "three"]]).keys()), "1, 2, and 3");
  });
"""),
                ),
            ),
        ),
    ),
)

# --- #5 issue, #6 PR: byte rounding; the issue's text gives the fix away --------------------------

#: The lines PR #6 adds to lib/bytes.js; issue #5 quotes them verbatim.
BYTES_ROUNDING_FIX = (
    '    // Round as the result is printed: 999.95 kB must become "1.0 MB", not "1000.0 kB".\n'
    "    if (Math.abs(Number(size.toFixed(decimals))) < base || unit === units[units.length - 1]) {\n"
)

ISSUE_5 = IssueSpec(
    number=5,
    title="formatBytes prints 1000.0 kB instead of 1.0 MB",
    body=(
        '`formatBytes(999_950)` returns `"1000.0 kB"`; it should be `"1.0 MB"`. Binary units too: '
        '`formatBytes(1024 ** 2 - 1, { binary: true })` gives `"1024.0 KiB"`.\n\n'
        "The loop compares the unrounded size with the base, but the size is printed with `toFixed`. "
        "Rounding first fixes it; this is what I run locally:\n\n"
        f"```js\n{BYTES_ROUNDING_FIX}```\n\n"
        f"Commit on my fork: https://github.com/{JS_DEMO_REPO}/commit/{head_sha_placeholder(6)}"
    ),
    author=FRANCES,
    created_at="2024-03-11T09:00:00Z",
    comments=(CommentSpec(MAINTAINER, "2024-03-12T10:05:00Z", "Merged, thanks!"),),
)

PULL_6 = PullSpec(
    truth=DemoPull(
        number=6,
        title="Round before choosing the unit in formatBytes",
        merge_style="merge",
        linked_issues=(5,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "bytes.test.js",
            "bytes > formatBytes",
            "rounds up to the next unit",
            "rounds up binary units",
            "rounds up to gigabytes",
        ),
        pass_to_pass=(
            *_ids(
                "bytes.test.js",
                "bytes > formatBytes",
                "formats bytes",
                "formats decimal units",
                "formats binary units",
                "honours decimals",
            ),
            *_ids("bytes.test.js", "bytes > parseBytes", "parses sizes", "rejects unknown units"),
        ),
        leaks_fix=True,
    ),
    author=FRANCES,
    branch="bytes-rounding",
    body="Resolved #5\n\nThe size is rounded as it will be printed before it is compared with the unit's base.",
    created_at="2024-03-11T11:20:00Z",
    closed_at="2024-03-12T10:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message='Round before choosing the byte unit\n\n999950 bytes printed as "1000.0 kB".\n\nResolved #5',
            author=FRANCES,
            date="2024-03-11T11:00:00Z",
            changes=(
                Edit(BYTES, "    if (Math.abs(size) < base || unit === units[units.length - 1]) {\n", BYTES_ROUNDING_FIX),
                Edit(
                    "test/bytes.test.js",
                    '      assert.equal(formatBytes(1_234_567, { decimals: 2 }), "1.23 MB");\n    });\n',
                    file_text("""
      assert.equal(formatBytes(1_234_567, { decimals: 2 }), "1.23 MB");
    });

    it("rounds up to the next unit", () => {
      assert.equal(formatBytes(999_950), "1.0 MB");
    });

    it("rounds up binary units", () => {
      assert.equal(formatBytes(1024 ** 2 - 1, { binary: true }), "1.0 MiB");
    });

    it("rounds up to gigabytes", () => {
      assert.equal(formatBytes(999_999_999), "1.0 GB");
    });
"""),
                ),
            ),
        ),
    ),
)

# --- #7 issue, #8 PR: strict durations, tested in TypeScript -------------------------------------

ISSUE_7 = IssueSpec(
    number=7,
    title="parseDuration is case-sensitive and accepts garbage",
    body=(
        '`parseDuration("1H30M")` throws although `"1h30m"` works, and `parseDuration("1h30x")` returns '
        '3600000 instead of complaining. `"1.5h"` even gives 18000000, five hours.'
    ),
    author=KEN,
    created_at="2024-03-13T08:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-03-13T10:00:00Z",
            "`matchAll` skips whatever it cannot read. Checking the whole text against the grammar first "
            "would catch the garbage; the units can be lower-cased before matching.",
        ),
    ),
)

PULL_8 = PullSpec(
    truth=DemoPull(
        number=8,
        title="Make parseDuration case-insensitive and strict",
        merge_style="merge",
        linked_issues=(7,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "duration.test.ts",
            "duration > parseDuration",
            "ignores the case of units",
            "rejects unknown units",
            "rejects fractions",
        ),
        pass_to_pass=(
            *_ids(
                "duration.test.ts",
                "duration > parseDuration",
                "parses 45s",
                "parses 2m",
                "parses 3h",
                "parses 1d",
                "parses 250ms",
                "parses compound durations",
                "rejects text without numbers",
            ),
            *_ids(
                "duration.test.ts",
                "duration > formatDuration",
                "formats compound durations",
                "formats milliseconds",
                "round-trips through parseDuration",
            ),
        ),
    ),
    author=KEN,
    branch="strict-durations",
    body=(
        'Units are matched in any case, and text that is not a duration is rejected: `"1h30x"` and '
        '`"1.5h"` used to parse.\n\nfix repo2env-demo/fmtkit#7'
    ),
    created_at="2024-03-14T10:00:00Z",
    closed_at="2024-03-15T09:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Accept upper-case duration units",
            author=KEN,
            date="2024-03-14T09:00:00Z",
            changes=(
                Edit(
                    DURATION,
                    "  const parts = [...text.matchAll(PART)];\n",
                    "  const parts = [...text.toLowerCase().matchAll(PART)];\n",
                ),
                Edit(
                    "test/duration.test.ts",
                    '      assert.throws(() => parseDuration("soon"), /not a duration/);\n    });\n',
                    file_text("""
      assert.throws(() => parseDuration("soon"), /not a duration/);
    });

    it("ignores the case of units", () => {
      assert.equal(parseDuration("1H30M"), 5_400_000);
      assert.equal(parseDuration("250MS"), 250);
    });
"""),
                ),
            ),
        ),
        CommitSpec(
            message=(
                "Reject malformed durations\n\n"
                'matchAll skipped what it could not read, so "1h30x" parsed as one hour.\n\n'
                "fix repo2env-demo/fmtkit#7"
            ),
            author=KEN,
            date="2024-03-14T09:30:00Z",
            changes=(
                Edit(
                    DURATION,
                    "const PART = /(\\d+)\\s*(ms|[dhms])/g;\n",
                    "const PART = /(\\d+)\\s*(ms|[dhms])/g;\nconst DURATION = /^\\s*(?:\\d+\\s*(?:ms|[dhms])\\s*)+$/i;\n",
                ),
                Edit(
                    DURATION,
                    file_text("""
  const parts = [...text.toLowerCase().matchAll(PART)];
  if (parts.length === 0) {
    throw new Error(`not a duration: ${JSON.stringify(text)}`);
  }
"""),
                    file_text("""
  // matchAll alone skips what it cannot read: "1h30x" used to parse as one hour.
  if (!DURATION.test(text)) {
    throw new Error(`not a duration: ${JSON.stringify(text)}`);
  }
  const parts = [...text.toLowerCase().matchAll(PART)];
"""),
                ),
                Edit(
                    "test/duration.test.ts",
                    '      assert.equal(parseDuration("250MS"), 250);\n    });\n',
                    file_text("""
      assert.equal(parseDuration("250MS"), 250);
    });

    it("rejects unknown units", () => {
      assert.throws(() => parseDuration("1h30x"), /not a duration/);
    });

    it("rejects fractions", () => {
      assert.throws(() => parseDuration("1.5h"), /not a duration/);
    });
"""),
                ),
            ),
        ),
    ),
)

# --- #9 issue, #10 PR: plurals; edits the shared test/fixtures.js; branched before #8 landed ------

ISSUE_9 = IssueSpec(
    number=9,
    title="pluralize gives boxs and citys",
    body=(
        '`pluralize("box")` returns `"boxs"` and `pluralize("city")` `"citys"`. Words ending in s, x, z, '
        "ch or sh take `es`, and a consonant followed by y becomes `ies`."
    ),
    author=KEN,
    created_at="2024-03-14T12:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-03-14T13:00:00Z",
            "Agreed. A shared table of nouns in test/fixtures.js would keep the tests short.",
        ),
        CommentSpec(KEN, "2024-03-15T12:00:00Z", "Thanks, that was quick."),
    ),
)

PULL_10 = PullSpec(
    truth=DemoPull(
        number=10,
        title="Pluralize sibilants and consonant-y nouns",
        merge_style="merge",
        linked_issues=(9,),
        expected_bucket="kept",
        fail_to_pass=_ids(
            "plural.test.js",
            "pluralize",
            "adds es after s, x, z, ch and sh",
            "turns a consonant and y into ies",
            "pluralizes the nouns of the shared table",
        ),
        pass_to_pass=_ids(
            "plural.test.js",
            "pluralize",
            "returns the word for one",
            "adds s for other counts",
            "knows irregular plurals",
            "uses the plural it is given",
            "keeps y after a vowel",
        ),
    ),
    author=BARBARA,
    branch="plural-rules",
    body=(
        f"Closes https://github.com/{JS_DEMO_REPO}/issues/9\n\n"
        "`pluralize` adds `es` after sibilants and turns a consonant and `y` into `ies`; a shared "
        "table of nouns in test/fixtures.js checks them all.\n\n"
        "See #7 for a similar report about parseDuration; related to #3."
    ),
    created_at="2024-03-14T15:00:00Z",
    closed_at="2024-03-15T11:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message=f"Pluralize sibilants and consonant-y nouns\n\nCloses https://github.com/{JS_DEMO_REPO}/issues/9",
            author=BARBARA,
            date="2024-03-14T14:00:00Z",
            changes=(
                Edit(
                    PLURAL,
                    "  return `${word}s`;\n",
                    file_text("""
  // "box" -> "boxes", "church" -> "churches"; "city" -> "cities", but "day" -> "days".
  if (/(?:s|x|z|ch|sh)$/i.test(word)) {
    return `${word}es`;
  }
  if (/[^aeiou]y$/i.test(word)) {
    return `${word.slice(0, -1)}ies`;
  }
  return `${word}s`;
"""),
                ),
                Edit(
                    "test/plural.test.js",
                    '    assert.equal(pluralize("octopus", 2, "octopodes"), "octopodes");\n  });\n',
                    file_text("""
    assert.equal(pluralize("octopus", 2, "octopodes"), "octopodes");
  });

  it("adds es after s, x, z, ch and sh", () => {
    assert.equal(pluralize("bus"), "buses");
    assert.equal(pluralize("box"), "boxes");
    assert.equal(pluralize("buzz"), "buzzes");
    assert.equal(pluralize("church"), "churches");
    assert.equal(pluralize("dish"), "dishes");
  });

  it("turns a consonant and y into ies", () => {
    assert.equal(pluralize("city"), "cities");
    assert.equal(pluralize("party", 3), "parties");
  });

  it("keeps y after a vowel", () => {
    assert.equal(pluralize("day"), "days");
    assert.equal(pluralize("key"), "keys");
  });
"""),
                ),
            ),
        ),
        CommitSpec(
            message="Add a shared table of nouns to the test fixtures",
            author=BARBARA,
            date="2024-03-14T14:30:00Z",
            changes=(
                Edit(
                    FIXTURES,
                    "module.exports = { DRINKS };\n",
                    file_text("""
/** Nouns and their plurals, regular and irregular. */
const NOUNS = [
  ["file", "files"],
  ["box", "boxes"],
  ["city", "cities"],
  ["day", "days"],
  ["person", "people"],
];

module.exports = { DRINKS, NOUNS };
"""),
                ),
                Edit(
                    "test/plural.test.js",
                    'const { pluralize } = require("../lib/plural");\n',
                    'const { pluralize } = require("../lib/plural");\nconst { NOUNS } = require("./fixtures");\n',
                ),
                Edit(
                    "test/plural.test.js",
                    '    assert.equal(pluralize("key"), "keys");\n  });\n',
                    file_text("""
    assert.equal(pluralize("key"), "keys");
  });

  it("pluralizes the nouns of the shared table", () => {
    for (const [singular, plural] of NOUNS) {
      assert.equal(pluralize(singular), plural, singular);
    }
  });
"""),
                ),
            ),
        ),
    ),
)

RELEASE_0_2_0 = CommitSpec(
    message="Release 0.2.0",
    author=MAINTAINER,
    date="2024-03-15T15:00:00Z",
    changes=(
        Edit("package.json", '  "version": "0.1.0",\n', '  "version": "0.2.0",\n'),
        *_lock_version("0.1.0", "0.2.0"),
        Edit(
            "CHANGELOG.md",
            "## Unreleased\n\n### Fixed\n\n",
            "## Unreleased\n\n## 0.2.0 - 2024-03-15\n\n### Fixed\n\n"
            "- `formatList` joins two items without a comma and accepts any iterable (#3).\n"
            "- `formatBytes` rounds before choosing the unit (#5).\n"
            "- `parseDuration` accepts upper-case units and rejects malformed durations (#7).\n"
            "- `pluralize` adds `es` after sibilants and turns a consonant and `y` into `ies` (#9).\n",
        ),
    ),
)

# --- #11 issue, #12 PR: a source fix without any test change ------------------------------------

ISSUE_11 = IssueSpec(
    number=11,
    title="formatNumber crashes on BigInt",
    body=(
        "index.d.ts says `formatNumber` takes `number | bigint`, but `formatNumber(12345678901234567890n)` "
        "throws `TypeError: value.toFixed is not a function`."
    ),
    author=DENNIS,
    created_at="2024-03-18T09:00:00Z",
)

PULL_12 = PullSpec(
    truth=DemoPull(
        number=12,
        title="Accept BigInt in formatNumber",
        merge_style="squash",
        linked_issues=(11,),
        expected_bucket="no_test_changes",
    ),
    author=KEN,
    branch="bigint-numbers",
    body="Fixes #11\n\nBigInts have no `toFixed`; their digits are grouped as they are.",
    created_at="2024-03-18T10:10:00Z",
    closed_at="2024-03-18T15:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Group the digits of BigInts in formatNumber\n\nFixes #11",
            author=KEN,
            date="2024-03-18T10:00:00Z",
            changes=(
                Edit(
                    NUMBER,
                    '  const [whole, fraction] = value.toFixed(decimals).split(".");\n',
                    file_text("""
  // BigInts have no toFixed, and no fraction to round.
  const text = typeof value === "bigint" ? value.toString() : value.toFixed(decimals);
  const [whole, fraction] = text.split(".");
"""),
                ),
                Edit(NUMBER, " * @param {number} value\n", " * @param {number | bigint} value\n"),
            ),
        ),
    ),
)

# --- #13 issue, #14 PR: documentation only ------------------------------------------------------

ISSUE_13 = IssueSpec(
    number=13,
    title="API docs show formatBytes(1024) as 1 KiB",
    body='docs/api.md says `formatBytes(1024)` gives `"1 KiB"`, but it gives `"1.0 kB"`: decimal units are the default.',
    author=DENNIS,
    created_at="2024-03-19T09:00:00Z",
)

PULL_14 = PullSpec(
    truth=DemoPull(
        number=14,
        title="Fix the formatBytes examples in the API docs",
        merge_style="merge",
        linked_issues=(13,),
        expected_bucket="no_source_change",
    ),
    author=FRANCES,
    branch="bytes-docs",
    body="closes #13\n\nThe examples now print what formatBytes really returns, and the README links the API docs.",
    created_at="2024-03-19T11:05:00Z",
    closed_at="2024-03-19T14:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Fix the formatBytes examples\n\ncloses #13",
            author=FRANCES,
            date="2024-03-19T11:00:00Z",
            changes=(
                Edit(
                    "docs/api.md",
                    file_text("""
```js
formatBytes(1024);                   // "1 KiB"
formatBytes(1536, { binary: true }); // "1.5 KiB"
"""),
                    file_text("""
```js
formatBytes(1024);                   // "1.0 kB"
formatBytes(1024, { binary: true }); // "1.0 KiB"
formatBytes(1536, { binary: true }); // "1.5 KiB"
formatBytes(500);                    // "500 B"
"""),
                ),
                Edit(
                    "README.md",
                    "## Install\n",
                    "## Documentation\n\nSee [docs/api.md](docs/api.md) for every function and its options.\n\n## Install\n",
                ),
            ),
        ),
    ),
)

# --- #15 issue, #16 PR: randomString, a new export with a new test file and a flaky test ----------

ISSUE_15 = IssueSpec(
    number=15,
    title="A helper for short random strings",
    body=(
        "We make short random ids for test data and temporary file names all over our code base. A "
        "`randomString(length)` next to the formatting helpers would save us a dependency; it does not "
        "need to be cryptographically strong."
    ),
    author=FRANCES,
    created_at="2024-03-20T09:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-03-20T09:30:00Z",
            "Sounds good, as long as the docs say it is not for secrets. Please export it from the ES "
            "module entry and index.d.ts too.",
        ),
    ),
)

RANDOM_MODULE = file_text("""
"use strict";

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

/**
 * A random string of `length` characters drawn from `alphabet` (lower-case letters and digits by
 * default). It uses Math.random: fine for ids and test data, never for secrets.
 *
 * @param {number} [length]
 * @param {{alphabet?: string}} [options]
 * @returns {string}
 */
function randomString(length = 8, { alphabet = ALPHABET } = {}) {
  if (!Number.isInteger(length) || length < 0) {
    throw new RangeError(`length must be a whole number, got ${length}`);
  }
  let result = "";
  for (let index = 0; index < length; index += 1) {
    result += alphabet[Math.floor(Math.random() * alphabet.length)];
  }
  return result;
}

module.exports = { randomString };
""")

PULL_16 = PullSpec(
    truth=DemoPull(
        number=16,
        title="Add randomString for short random ids",
        merge_style="squash",
        linked_issues=(15,),
        expected_bucket="kept",
        fail_to_pass=(
            *_ids(
                "random.test.js",
                "randomString",
                "has the requested length",
                "is eight characters long by default",
                "uses only the given alphabet",
                "returns an empty string for length 0",
                "rejects lengths that are not whole numbers",
            ),
            *_ids("esm.test.mjs", "ES module entry", "calls randomString"),
        ),
        pass_to_pass=_ids(
            "esm.test.mjs",
            "ES module entry",
            "has a named export for every CommonJS export",
            "has the CommonJS module as its default export",
            "formats through its named exports",
        ),
        flaky=_ids("random.test.js", "randomString", "mixes letters and digits"),
        stub_earns=True,  # randomString returning "" passes "returns an empty string for length 0"
    ),
    author=KEN,
    branch="random-string",
    body=(
        'Resolves #15\n\nAdds `randomString(length = 8, { alphabet })`, exported from `require("fmtkit")`, '
        "the ES module entry and index.d.ts. It uses `Math.random`, so it says it is not for secrets."
    ),
    created_at="2024-03-21T11:00:00Z",
    closed_at="2024-03-22T09:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Add randomString\n\nResolves #15",
            author=KEN,
            date="2024-03-21T10:00:00Z",
            changes=(
                Write("lib/random.js", RANDOM_MODULE),
                Edit(
                    LIB_INDEX,
                    'const { pluralize } = require("./plural");\n',
                    'const { pluralize } = require("./plural");\nconst { randomString } = require("./random");\n',
                ),
                Edit(LIB_INDEX, "  pluralize,\n};\n", "  pluralize,\n  randomString,\n};\n"),
                Edit("index.mjs", "  pluralize,\n} = fmtkit;\n", "  pluralize,\n  randomString,\n} = fmtkit;\n"),
                Edit(
                    "index.d.ts",
                    "export interface NumberOptions {\n",
                    file_text("""
export interface RandomOptions {
  /** The characters to draw from; lower-case letters and digits by default. */
  alphabet?: string;
}

export interface NumberOptions {
"""),
                ),
                Edit(
                    "index.d.ts",
                    "export function pluralize(word: string, count?: number, plural?: string): string;\n",
                    "export function pluralize(word: string, count?: number, plural?: string): string;\n"
                    "export function randomString(length?: number, options?: RandomOptions): string;\n",
                ),
                Write(
                    "test/random.test.js",
                    file_text("""
"use strict";

const assert = require("node:assert/strict");
const { randomString } = require("../lib/random");

describe("randomString", () => {
  it("has the requested length", () => {
    assert.equal(randomString(12).length, 12);
  });

  it("is eight characters long by default", () => {
    assert.equal(randomString().length, 8);
  });

  it("uses only the given alphabet", () => {
    assert.match(randomString(50, { alphabet: "ab" }), /^[ab]{50}$/);
  });

  it("returns an empty string for length 0", () => {
    assert.equal(randomString(0), "");
  });

  it("rejects lengths that are not whole numbers", () => {
    assert.throws(() => randomString(-1), RangeError);
    assert.throws(() => randomString(2.5), RangeError);
  });

  it("mixes letters and digits", () => {
    const id = randomString(3);
    assert.match(id, /[a-z]/);
    assert.match(id, /[0-9]/);
  });
});
"""),
                ),
                Edit(
                    "CHANGELOG.md",
                    "## Unreleased\n\n",
                    "## Unreleased\n\n### Added\n\n- `randomString` makes short random ids, not for secrets (#15).\n\n",
                ),
            ),
        ),
        CommitSpec(
            message="Call randomString through the ES module entry",
            author=KEN,
            date="2024-03-21T10:45:00Z",
            changes=(
                Edit(
                    "test/esm.test.mjs",
                    '    assert.equal(fmtkit.formatBytes(1500), "1.5 kB");\n  });\n',
                    file_text("""
    assert.equal(fmtkit.formatBytes(1500), "1.5 kB");
  });

  it("calls randomString", () => {
    assert.match(fmtkit.randomString(6, { alphabet: "xyz" }), /^[xyz]{6}$/);
  });
"""),
                ),
            ),
        ),
    ),
)

# --- #17 issue, #18 PR: its tests pass before the fix too (no FAIL_TO_PASS) -----------------------

ISSUE_17 = IssueSpec(
    number=17,
    title="formatDuration(0) returns an empty string",
    body="Our dashboard shows a blank cell for jobs that took no time: `formatDuration(0)` returns `\"\"`.",
    author=RADIA,
    created_at="2024-03-25T09:00:00Z",
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-03-25T10:00:00Z",
            'On main `formatDuration(0)` gives `"0ms"`. Could you check which version you have?',
        ),
        CommentSpec(
            RADIA,
            "2024-03-25T11:00:00Z",
            "You're right, we vendored a copy from before 0.1.0. A test that pins it would still be nice.",
        ),
    ),
)

PULL_18 = PullSpec(
    truth=DemoPull(
        number=18,
        title="Say 0ms for zero durations",
        merge_style="merge",
        linked_issues=(17,),
        expected_bucket="kept",
        pass_to_pass=(
            *PULL_8.truth.pass_to_pass,
            *PULL_8.truth.fail_to_pass,
            *_ids(
                "duration.test.ts",
                "duration > formatDuration",
                "formats zero",
                "formats less than half a millisecond as zero",
            ),
        ),
    ),
    author=BARBARA,
    branch="zero-duration",
    body=(
        "Fixes #17\n\nFixes #8 as well, in a way: its round trip never tried zero.\n\n"
        '`formatDuration` already said `"0ms"` for zero; this makes it explicit and pins it with tests.'
    ),
    created_at="2024-03-25T13:30:00Z",
    closed_at="2024-03-26T10:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message="Say 0ms for zero durations, explicitly\n\nFixes #17",
            author=BARBARA,
            date="2024-03-25T13:00:00Z",
            changes=(
                Edit(
                    DURATION,
                    "  let rest = Math.round(milliseconds);\n",
                    file_text("""
  let rest = Math.round(milliseconds);
  if (rest === 0) {
    // Zero is a duration too: never an empty string.
    return "0ms";
  }
"""),
                ),
                Edit(
                    "test/duration.test.ts",
                    '      assert.equal(formatDuration(1500), "1s 500ms");\n    });\n',
                    file_text("""
      assert.equal(formatDuration(1500), "1s 500ms");
    });

    it("formats zero", () => {
      assert.equal(formatDuration(0), "0ms");
    });

    it("formats less than half a millisecond as zero", () => {
      assert.equal(formatDuration(0.4), "0ms");
    });
"""),
                ),
            ),
        ),
    ),
)

# --- #19 PR: a tested fix that only mentions other issues (branched before #18 landed) ------------

PULL_19 = PullSpec(
    truth=DemoPull(
        number=19,
        title="Round parseBytes to the nearest byte",
        merge_style="squash",
        linked_issues=(),
        expected_bucket="no_linked_issue",
        fail_to_pass=_ids(
            "bytes.test.js",
            "bytes > parseBytes",
            "rounds to the nearest byte",
            "rounds fractional kilobytes",
            "rounds fractional kibibytes",
        ),
        pass_to_pass=PULL_6.truth.pass_to_pass + PULL_6.truth.fail_to_pass,
    ),
    author=FRANCES,
    branch="parse-bytes-rounding",
    body=(
        '`Math.trunc` cut the floating-point product, so `parseBytes("8.2 MB")` returned 8199999. This '
        "rounds to the nearest byte: the float trouble behind #5, in the other direction (see #6)."
    ),
    created_at="2024-03-25T15:10:00Z",
    closed_at="2024-03-27T12:00:00Z",
    merger=MAINTAINER,
    commits=(
        CommitSpec(
            message=(
                "Round parseBytes to the nearest byte\n\n"
                'Math.trunc cut the float product: "8.2 MB" gave 8199999 bytes.'
            ),
            author=FRANCES,
            date="2024-03-25T15:00:00Z",
            changes=(
                Edit(
                    BYTES,
                    "  return Math.trunc(Number(match[1]) * factor);\n",
                    "  // Math.trunc would cut: 8.2 MB is 8199999.999999999 bytes in floating point.\n"
                    "  return Math.round(Number(match[1]) * factor);\n",
                ),
                Edit(
                    "test/bytes.test.js",
                    '      assert.throws(() => parseBytes("12 parsecs"), /not a byte size/);\n    });\n',
                    file_text("""
      assert.throws(() => parseBytes("12 parsecs"), /not a byte size/);
    });

    it("rounds to the nearest byte", () => {
      assert.equal(parseBytes("8.2 MB"), 8_200_000);
    });

    it("rounds fractional kilobytes", () => {
      assert.equal(parseBytes("1.005 kB"), 1005);
    });

    it("rounds fractional kibibytes", () => {
      assert.equal(parseBytes("1.15 KiB"), 1178);
    });
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
        title="Add titleCase helper",
        merge_style="unmerged",
        linked_issues=(),
        expected_bucket="not_merged",
    ),
    author=RADIA,
    branch="title-case",
    body="Adds `titleCase`, which upper-cases the first letter of every word.",
    created_at="2024-04-01T10:05:00Z",
    closed_at="2024-04-02T09:00:00Z",
    merger=MAINTAINER,
    comments=(
        CommentSpec(
            MAINTAINER,
            "2024-04-02T08:55:00Z",
            "Thank you! Case conversion is out of scope for fmtkit, so I'm closing this.",
        ),
    ),
    commits=(
        CommitSpec(
            message="Add titleCase helper",
            author=RADIA,
            date="2024-04-01T10:00:00Z",
            changes=(
                Write(
                    "lib/case.js",
                    file_text("""
"use strict";

/** `text` with the first letter of every word upper-cased. */
function titleCase(text) {
  return text.replace(/\\b\\w/g, (letter) => letter.toUpperCase());
}

module.exports = { titleCase };
"""),
                ),
                Write(
                    "test/case.test.js",
                    file_text("""
"use strict";

const assert = require("node:assert/strict");
const { titleCase } = require("../lib/case");

describe("titleCase", () => {
  it("upper-cases every word", () => {
    assert.equal(titleCase("hello world"), "Hello World");
  });
});
"""),
                ),
            ),
        ),
    ),
)

RELEASE_0_3_0 = CommitSpec(
    message="Release 0.3.0",
    author=MAINTAINER,
    date="2024-04-02T15:00:00Z",
    changes=(
        Edit("package.json", '  "version": "0.2.0",\n', '  "version": "0.3.0",\n'),
        *_lock_version("0.2.0", "0.3.0"),
        Edit(
            "CHANGELOG.md",
            "## Unreleased\n\n### Added\n\n",
            "## Unreleased\n\n## 0.3.0 - 2024-04-02\n\n### Added\n\n",
        ),
        Edit(
            "CHANGELOG.md",
            "- `randomString` makes short random ids, not for secrets (#15).\n\n",
            "- `randomString` makes short random ids, not for secrets (#15).\n\n### Fixed\n\n"
            "- `formatNumber` groups the digits of BigInts (#11).\n"
            "- `formatDuration` says `0ms` for zero, explicitly (#17).\n"
            "- `parseBytes` rounds to the nearest byte.\n\n",
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
)

#: The order in which things happen on ``main``. #10 branches off before #8 lands and #19 before
#: #18 lands, so their base commits are older than the ``main`` they land on.
TIMELINE: tuple[Step, ...] = (
    MainCommit(INITIAL_COMMIT),
    MainCommit(API_DOCS_COMMIT),
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
    MainCommit(RELEASE_0_3_0),
)

#: ``id_offset`` keeps fmtkit's fake GitHub ids apart from textkit's.
HISTORY = DemoHistory(
    repo=JS_DEMO_REPO, language="javascript", issues=ISSUES, pulls=PULLS, timeline=TIMELINE, id_offset=50_000
)

JS_DEMO_PULLS: tuple[DemoPull, ...] = HISTORY.truth
