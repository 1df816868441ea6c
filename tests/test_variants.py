"""Variants of a gold patch: partial fixes and near misses, checked with ``git apply`` at the base."""

from __future__ import annotations

import ast
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from repo2env.languages.python.variants import (
    MUTATION_KINDS,
    STUB_BODIES,
    Variant,
    dropped_hunk,
    hunk_drops,
    near_misses,
    partial_fixes,
    stubs,
)
from repo2env.mine.split import hunks, split_diff

PRICING_BEFORE = '''"""Prices, taxes and discounts."""

from __future__ import annotations

TAX_RATE = 0.2
CURRENCY = "EUR"


def discount(amount: float, percent: int) -> float:
    """Return ``amount`` reduced by ``percent`` per cent."""
    if percent < 0:
        raise ValueError(f"not a discount: {percent}")
    return amount - amount * percent / 100


def with_tax(amount: float) -> float:
    """Return ``amount`` with tax added."""
    return amount * (1 + TAX_RATE)


def net(amount: float) -> float:
    """Return ``amount`` without its tax."""
    return amount / (1 + TAX_RATE)


def is_free(amount: float) -> bool:
    """Whether there is nothing to pay."""
    return amount == 0


def total(amounts: list[float]) -> float:
    """The sum of ``amounts``."""
    return sum(amounts)


def average(amounts: list[float]) -> float:
    """The mean of ``amounts``."""
    return sum(amounts) / len(amounts)


def label(amount: float) -> str:
    """The price tag for ``amount``."""
    return f"{amount:.2f} {CURRENCY}"
'''

STOCK_BEFORE = '''"""Stock levels."""

from __future__ import annotations

LOW_STOCK = 5


def available(stock: dict[str, int], item: str) -> int:
    """How many of ``item`` are in stock."""
    return stock.get(item, 0)


def restock(stock: dict[str, int], item: str, count: int) -> None:
    """Add ``count`` of ``item`` to ``stock``."""
    stock[item] = stock.get(item, 0) + count


def is_low(stock: dict[str, int], item: str) -> bool:
    """Whether ``item`` needs a re-order."""
    return available(stock, item) < LOW_STOCK


def reserve(stock: dict[str, int], item: str, wanted: int) -> bool:
    """Take ``wanted`` of ``item`` out of ``stock``; say whether there were enough."""
    if available(stock, item) > wanted:
        stock[item] -= wanted
        return True
    return False
'''


def edited(text: str, *replacements: tuple[str, str]) -> str:
    """``text`` with each ``(old, new)`` applied; ``old`` must occur exactly once."""
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


# Three hunks: a comparison and a return rewritten, a return turned into an if, an early return added.
PRICING_AFTER = edited(
    PRICING_BEFORE,
    ("    if percent < 0:\n", "    if percent < 0 or percent > 100:\n"),
    ("    return amount - amount * percent / 100\n", "    return round(amount - amount * percent / 100, 2)\n"),
    ("    return amount == 0\n", "    if amount <= 0:\n        return True\n    return False\n"),
    ('    """The price tag for ``amount``."""\n', '    """The price tag for ``amount``."""\n    if amount == 0:\n        return "free"\n'),
)
# Two hunks: a negative count clamped; an unknown item rejected and a comparison made inclusive.
STOCK_AFTER = edited(
    STOCK_BEFORE,
    ("    return stock.get(item, 0)\n", "    return max(stock.get(item, 0), 0)\n"),
    (
        "    if available(stock, item) > wanted:\n",
        "    if item not in stock:\n        raise KeyError(item)\n    if available(stock, item) >= wanted:\n",
    ),
)
FIX = {"shop/pricing.py": PRICING_AFTER, "shop/stock.py": STOCK_AFTER}
BASE = {"shop/__init__.py": "", "shop/pricing.py": PRICING_BEFORE, "shop/stock.py": STOCK_BEFORE}


def git(cwd: Path, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git with no user or system configuration."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "core.autocrlf=false", *args],
        cwd=cwd, input=stdin, capture_output=True, text=True, env=env, check=False,
    )
    assert not check or result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result


@dataclass(frozen=True)
class Gold:
    """A fix made in a real repository whose worktree stays at the base commit."""

    repo: Path
    patch: str
    before: dict[str, str]
    after: dict[str, str]

    def check(self, patch: str) -> None:
        """Fail unless ``git apply --check`` accepts ``patch`` at the base commit."""
        result = git(self.repo, "apply", "--check", "-", stdin=patch, check=False)
        assert result.returncode == 0, f"{result.stderr}\n{patch}"

    def applied(self, patch: str) -> dict[str, str | None]:
        """The gold paths' contents after ``git apply`` of ``patch`` at the base (``None``: absent)."""
        git(self.repo, "apply", "-", stdin=patch)
        try:
            return {path: self.read(path) for path in sorted(set(self.before) | set(self.after))}
        finally:
            git(self.repo, "reset", "--hard", "-q")
            git(self.repo, "clean", "-fdq")

    def read(self, path: str) -> str | None:
        file = self.repo / path
        # Bytes, decoded: no newline translation hides a missing or changed line end.
        return file.read_bytes().decode("utf-8") if file.exists() else None


def write_files(root: Path, files: Mapping[str, str | None]) -> None:
    for name, content in files.items():
        path = root / name
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as handle:
            handle.write(content)


def make_gold(root: Path, base: Mapping[str, str], fix: Mapping[str, str | None]) -> Gold:
    """Commit ``base``, make ``fix`` (``None`` deletes a file), take ``git diff`` as gold, undo it."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "--initial-branch=main")
    write_files(repo, base)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    write_files(repo, fix)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached").stdout
    git(repo, "reset", "--hard", "-q")
    before = {path: base[path] for path in fix if path in base}
    after = {path: text for path, text in fix.items() if text is not None}
    return Gold(repo=repo, patch=patch, before=before, after=after)


@pytest.fixture
def shop(tmp_path: Path) -> Gold:
    return make_gold(tmp_path, BASE, FIX)


def hunk_bodies(patch: str) -> list[str]:
    """Each hunk of ``patch`` as its file's ``+++`` line plus its lines: what a subset must keep."""
    bodies = []
    for piece in hunks(patch):
        lines = piece.splitlines(keepends=True)
        target = next(line for line in lines if line.startswith("+++ "))
        at = next(index for index, line in enumerate(lines) if line.startswith("@@ "))
        bodies.append(target + "".join(lines[at + 1 :]))
    return bodies


def without_index_lines(patch: str) -> str:
    return "".join(line for line in patch.splitlines(keepends=True) if not line.startswith("index "))


# --- partial fixes -------------------------------------------------------------------------


def test_the_shop_fix_has_five_hunks(shop: Gold) -> None:
    assert len(hunks(shop.patch)) == 5


def test_partial_fixes_are_every_proper_subset_of_the_hunks_and_apply(shop: Gold) -> None:
    variants = partial_fixes(shop.patch, limit=100)

    assert len(variants) == 2**5 - 2
    assert all(variant.kind == "partial" and variant.description for variant in variants)
    assert len({variant.name for variant in variants}) == len(variants)
    assert [variant.name for variant in variants[:10]] == [f"hunks-{n}of5" for n in range(1, 6)] + [
        f"all-but-{n}of5" for n in range(1, 6)
    ]
    gold_bodies = hunk_bodies(shop.patch)
    subsets = set()
    for variant in variants:
        shop.check(variant.patch)
        bodies = hunk_bodies(variant.patch)
        assert 0 < len(bodies) < len(gold_bodies)
        assert set(bodies) <= set(gold_bodies)
        subsets.add(frozenset(bodies))
    assert len(subsets) == len(variants)


def test_partial_fixes_number_combined_hunks_as_git_diff_does(shop: Gold) -> None:
    # Applying a partial fix and diffing again gives the very same hunks, headers included: the
    # new-side starts of a file's later hunks are shifted by its earlier hunks only.
    for variant in partial_fixes(shop.patch, limit=100):
        git(shop.repo, "apply", "-", stdin=variant.patch)
        rediffed = git(shop.repo, "diff").stdout
        git(shop.repo, "reset", "--hard", "-q")
        assert without_index_lines(rediffed) == without_index_lines(variant.patch), variant.name


def test_partial_fixes_of_a_single_hunk_patch_are_none(tmp_path: Path) -> None:
    gold = make_gold(tmp_path, BASE, {"shop/stock.py": edited(STOCK_BEFORE, ("< LOW_STOCK", "<= LOW_STOCK"))})

    assert len(hunks(gold.patch)) == 1
    assert partial_fixes(gold.patch) == []
    assert partial_fixes("") == []


def test_partial_fixes_of_two_hunks_are_the_two_single_hunks(tmp_path: Path) -> None:
    gold = make_gold(tmp_path, BASE, {"shop/stock.py": STOCK_AFTER})

    variants = partial_fixes(gold.patch)

    assert [variant.name for variant in variants] == ["hunks-1of2", "hunks-2of2"]
    assert [hunk_bodies(variant.patch) for variant in variants] == [[body] for body in hunk_bodies(gold.patch)]


def test_partial_fixes_keep_hunks_of_new_deleted_and_non_python_files(tmp_path: Path) -> None:
    base = {**BASE, "shop/legacy.py": "OLD = True\n", "README.md": "# Shop\n"}
    fix = {**FIX, "shop/legacy.py": None, "shop/coupons.py": "CODES = {}\n", "README.md": "# Shop\n\nNow taxed.\n"}
    gold = make_gold(tmp_path, base, fix)

    variants = partial_fixes(gold.patch, limit=300)

    assert len(variants) == 2**8 - 2
    for variant in variants[:20]:
        gold.check(variant.patch)
    singles = [variant.patch for variant in variants[:8]]
    assert sum("new file mode 100644\n" in patch for patch in singles) == 1
    assert sum("deleted file mode 100644\n" in patch for patch in singles) == 1
    assert sum("+++ b/README.md\n" in patch for patch in singles) == 1


def test_partial_fixes_respect_the_limit_and_are_deterministic(shop: Gold) -> None:
    everything = partial_fixes(shop.patch, limit=100)

    assert partial_fixes(shop.patch, limit=0) == []
    assert partial_fixes(shop.patch) == everything[:6]
    assert partial_fixes(shop.patch, limit=13) == everything[:13]
    assert partial_fixes(shop.patch, limit=13) == partial_fixes(shop.patch, limit=13, seed=0)
    # Past singles and "all but one", the seed picks which other subsets come first.
    by_seed = {tuple(v.name for v in partial_fixes(shop.patch, limit=14, seed=seed)) for seed in range(8)}
    assert len(by_seed) > 1
    assert all(names[:10] == tuple(v.name for v in everything[:10]) for names in by_seed)


def test_hunk_drops_are_the_gold_patch_minus_each_hunk_and_apply(shop: Gold) -> None:
    drops = hunk_drops(shop.patch, limit=100)
    gold_bodies = hunk_bodies(shop.patch)

    assert sorted(variant.name for variant in drops) == sorted(f"all-but-{n}of5" for n in range(1, 6))
    for variant in drops:
        shop.check(variant.patch)
        number, count = dropped_hunk(variant.name)
        assert count == 5
        assert hunk_bodies(variant.patch) == [body for index, body in enumerate(gold_bodies) if index != number - 1]
    # They are the partial fixes of the same names, and a smaller limit gives a prefix.
    partials = {variant.name: variant.patch for variant in partial_fixes(shop.patch, limit=100)}
    assert all(partials[variant.name] == variant.patch for variant in drops)
    assert hunk_drops(shop.patch, limit=2) == drops[:2]
    assert hunk_drops(shop.patch, limit=0) == []


def test_hunk_drops_skip_what_partial_fixes_already_grade(tmp_path: Path) -> None:
    gold = make_gold(tmp_path, BASE, {"shop/stock.py": STOCK_AFTER})
    partials = partial_fixes(gold.patch)

    # With two hunks the gold patch minus one hunk is the other hunk alone.
    assert sorted(variant.name for variant in hunk_drops(gold.patch)) == ["hunks-1of2", "hunks-2of2"]
    assert hunk_drops(gold.patch, skip={variant.name for variant in partials}) == []
    assert [dropped_hunk(variant.name) for variant in partials] == [(2, 2), (1, 2)]
    (tmp_path / "single").mkdir()
    single = make_gold(tmp_path / "single", BASE,
                       {"shop/stock.py": edited(STOCK_BEFORE, ("< LOW_STOCK", "<= LOW_STOCK"))})
    assert hunk_drops(single.patch) == []


@pytest.mark.parametrize(("name", "expected"), [
    ("all-but-3of7", (3, 7)), ("hunks-1+2+4of4", (3, 4)), ("hunks-1of2", (2, 2)),
    ("hunks-1of3", None), ("hunks-1+3of5", None), ("flip-compare-1", None), ("all-but-xof3", None),
])
def test_dropped_hunk_reads_the_partial_fix_names(name: str, expected: tuple[int, int] | None) -> None:
    assert dropped_hunk(name) == expected


# --- near misses ---------------------------------------------------------------------------


def check_near_misses(gold: Gold, variants: list[Variant]) -> dict[str, dict[str, str | None]]:
    """Check every variant against the gold fix; return each one's applied files by name."""
    assert len({variant.name for variant in variants}) == len(variants)
    assert len({variant.patch for variant in variants}) == len(variants)
    applied_by_name = {}
    for variant in variants:
        assert variant.kind == "near_miss" and variant.description
        assert variant.name.rsplit("-", 1)[0] in MUTATION_KINDS
        gold.check(variant.patch)
        applied = gold.applied(variant.patch)
        mutated = [path for path, text in applied.items() if text != gold.after.get(path)]
        assert len(mutated) == 1, (variant.name, mutated)
        path = mutated[0]
        text = applied[path]
        assert path.endswith(".py") and text is not None
        tree = ast.dump(ast.parse(text))
        assert tree != ast.dump(ast.parse(gold.after[path])), variant.name
        assert tree != ast.dump(ast.parse(gold.before.get(path, ""))), variant.name
        applied_by_name[variant.name] = applied
    return applied_by_name


def test_near_misses_apply_and_break_the_fix_in_one_place(shop: Gold) -> None:
    variants = near_misses(shop.before, shop.after, limit=100)

    applied = check_near_misses(shop, variants)
    kinds = {variant.name.rsplit("-", 1)[0] for variant in variants}
    assert kinds == set(MUTATION_KINDS)
    pricing = [files["shop/pricing.py"] or "" for files in applied.values()]
    stock = [files["shop/stock.py"] or "" for files in applied.values()]
    # One of each kind, spelled out: a statement undone, a comparison flipped, a return altered.
    assert any("    return amount - amount * percent / 100\n" in text and "percent > 100" in text for text in pricing)
    assert any("if item not in stock:" not in text and ">= wanted" in text for text in stock)
    assert any("percent >= 100" in text for text in pricing)
    assert any("if item in stock:" in text for text in stock)
    assert any('return ""' in text for text in pricing)
    assert any("return False\n    return False" in text for text in pricing)


def test_near_misses_only_mutate_code_the_fix_changed(tmp_path: Path) -> None:
    # Comparisons and returns abound, but the fix only changes two assignments.
    fixed = edited(PRICING_BEFORE, ("TAX_RATE = 0.2", "TAX_RATE = 0.25"), ('CURRENCY = "EUR"', 'CURRENCY = "USD"'))
    gold = make_gold(tmp_path, BASE, {"shop/pricing.py": fixed})

    variants = near_misses(gold.before, gold.after, limit=100)

    assert [variant.name for variant in variants] == ["undo-statement-1", "undo-statement-2"]
    check_near_misses(gold, variants)


def test_undo_puts_back_a_statement_the_fix_removed(tmp_path: Path) -> None:
    before = "def clean(text):\n    text = text.strip()\n    text = text[:-1]\n    return text.lower()\n"
    after = "def clean(text):\n    text = text.strip()\n    return text.casefold()\n"
    gold = make_gold(tmp_path, {"clean.py": before}, {"clean.py": after})

    variants = near_misses(gold.before, gold.after, limit=100)

    applied = check_near_misses(gold, variants)
    restored = "def clean(text):\n    text = text.strip()\n    text = text[:-1]\n    return text.casefold()\n"
    assert restored in [files["clean.py"] for files in applied.values()]


def test_undo_reindents_a_statement_the_fix_nested_deeper(tmp_path: Path) -> None:
    before = "def bump(x):\n    y = x + 1\n    return y\n"
    after = "def bump(x):\n    if x is not None:\n        y = x + 2\n        return y\n    return 0\n"
    gold = make_gold(tmp_path, {"bump.py": before}, {"bump.py": after})

    variants = near_misses(gold.before, gold.after, limit=100)

    applied = check_near_misses(gold, variants)
    reverted = "def bump(x):\n    if x is not None:\n        y = x + 1\n        return y\n    return 0\n"
    assert reverted in [files["bump.py"] for files in applied.values()]
    assert {variant.name.rsplit("-", 1)[0] for variant in variants} == set(MUTATION_KINDS)


def test_undo_reverts_a_statement_the_fix_moved_and_changed(tmp_path: Path) -> None:
    before = 'def parse(text):\n    parts = text.split(",")\n    if not text:\n        raise ValueError(text)\n    return parts\n'
    after = (
        'def parse(text):\n    if not text.strip():\n        raise ValueError(text)\n'
        '    parts = text.strip().split(",")\n    return parts\n'
    )
    gold = make_gold(tmp_path, {"parse.py": before}, {"parse.py": after})

    variants = near_misses(gold.before, gold.after, limit=100)

    texts = [files["parse.py"] or "" for files in check_near_misses(gold, variants).values()]
    assert 'raise ValueError(text)\n    parts = text.split(",")\n    return parts\n' in "".join(texts)
    # Not put back at its old place as well: that would be a dead store, as good as the fix.
    assert all(text.count("parts = ") == 1 for text in texts)


def test_near_misses_of_a_rewritten_file(tmp_path: Path) -> None:
    # Too many statement pairs to compare one by one: each kind is paired in order instead.
    before = "".join(f"def f{i}(x):\n    y = x + {i}\n    if y > {i}:\n        return y\n    return {i}\n\n\n" for i in range(70))
    after = "".join(
        f"def g{i}(value):\n    total = value * {i} - 1\n    if total >= {i + 1}:\n        return total\n    return None\n\n\n"
        for i in range(70)
    )
    gold = make_gold(tmp_path, {"rewritten.py": before}, {"rewritten.py": after})

    variants = near_misses(gold.before, gold.after)

    check_near_misses(gold, variants)
    assert {variant.name.rsplit("-", 1)[0] for variant in variants} == set(MUTATION_KINDS)
    assert len(variants) == 6


def test_near_misses_never_equal_gold_or_the_base(tmp_path: Path) -> None:
    # Undoing the only change gives the base; a comment is no change at all.
    one_change = edited(STOCK_BEFORE, ("stock.get(item, 0) + count", "max(stock.get(item, 0), 0) + count"))
    comment_only = edited(STOCK_BEFORE, ("LOW_STOCK = 5\n", "LOW_STOCK = 5  # re-order below this\n"))

    assert near_misses({"a.py": STOCK_BEFORE}, {"a.py": one_change}) == []
    assert near_misses({"a.py": STOCK_BEFORE}, {"a.py": comment_only}) == []
    assert near_misses({"a.py": STOCK_BEFORE}, {"a.py": STOCK_BEFORE}) == []


def test_near_misses_are_round_robin_limited_and_deterministic(shop: Gold) -> None:
    everything = near_misses(shop.before, shop.after, limit=100)
    by_name = {variant.name: variant for variant in everything}

    assert near_misses(shop.before, shop.after, limit=0) == []
    assert [v.name.rsplit("-", 1)[0] for v in near_misses(shop.before, shop.after, limit=3)] == list(MUTATION_KINDS)
    assert len(near_misses(shop.before, shop.after)) == 6
    assert near_misses(shop.before, shop.after, limit=5, seed=3) == near_misses(shop.before, shop.after, limit=5, seed=3)
    picks = set()
    for seed in range(6):
        variants = near_misses(shop.before, shop.after, limit=4, seed=seed)
        assert len(variants) == 4
        # A name always means the same mutation, whichever the seed or the limit.
        assert all(by_name[variant.name] == variant for variant in variants)
        picks.add(tuple(variant.name for variant in variants))
    assert len(picks) > 1


def test_near_misses_of_new_and_deleted_files(tmp_path: Path) -> None:
    coupons = 'CODES = {"WELCOME": 10}\n\n\ndef rate(code: str) -> int:\n    if code in CODES:\n        return CODES[code]\n    return 0\n'
    base = {**BASE, "shop/legacy.py": "OLD = True\n"}
    gold = make_gold(tmp_path, base, {**FIX, "shop/coupons.py": coupons, "shop/legacy.py": None})

    variants = near_misses(gold.before, gold.after, limit=100)

    applied = check_near_misses(gold, variants)
    assert all("new file mode 100644\n--- /dev/null\n+++ b/shop/coupons.py\n" in v.patch for v in variants)
    assert all("deleted file mode 100644\n--- a/shop/legacy.py\n+++ /dev/null\n" in v.patch for v in variants)
    assert all(files["shop/legacy.py"] is None for files in applied.values())
    in_coupons = {name for name, files in applied.items() if files["shop/coupons.py"] != coupons}
    assert {name.rsplit("-", 1)[0] for name in in_coupons} == set(MUTATION_KINDS)


@pytest.mark.parametrize(
    ("old_end", "new_end"), [("", ""), ("\n", ""), ("", "\n")], ids=["neither", "fix-drops-it", "fix-adds-it"]
)
def test_near_misses_of_files_without_a_final_newline(tmp_path: Path, old_end: str, new_end: str) -> None:
    before = "LIMIT = 2\n\n\ndef over(value: int) -> bool:\n    return value >= LIMIT" + old_end
    after = "LIMIT = 2\n\n\ndef over(value: int) -> bool:\n    return value > LIMIT + 1" + new_end
    gold = make_gold(tmp_path, {"limits.py": before}, {"limits.py": after})

    variants = near_misses(gold.before, gold.after)

    assert {variant.name for variant in variants} == {"undo-statement-1", "flip-compare-1", "alter-return-1"} - (
        {"undo-statement-1"}  # undoing the only statement gives the base back
    )
    for files in check_near_misses(gold, variants).values():
        assert (files["limits.py"] or "").endswith("\n") == bool(new_end)


def test_non_python_files_are_never_mutated(tmp_path: Path) -> None:
    base = {**BASE, "setup.cfg": "[metadata]\nname = shop\nversion = 1 if x < 2 else 3\n", "shop/types.pyi": "X: int\n"}
    fix = {
        **FIX,
        "setup.cfg": "[metadata]\nname = shop\nversion = 1 if x <= 2 else 3\n",
        "shop/types.pyi": "def f(x: int) -> bool:\n    return x < 2\n",
    }
    gold = make_gold(tmp_path, base, fix)

    variants = near_misses(gold.before, gold.after, limit=100)

    applied = check_near_misses(gold, variants)
    assert variants
    assert all(files["setup.cfg"] == fix["setup.cfg"] for files in applied.values())
    assert all(files["shop/types.pyi"] == fix["shop/types.pyi"] for files in applied.values())


# --- stubs ---------------------------------------------------------------------------------


def test_stubs_reduce_every_function_the_fix_changed_and_nothing_else(shop: Gold) -> None:
    variants = stubs(shop.before, shop.after)

    assert [variant.name for variant in variants] == [f"stub-{style}" for style in STUB_BODIES]
    changed = {"shop/pricing.py": ("discount", "is_free", "label"), "shop/stock.py": ("available", "reserve")}
    for variant, body in zip(variants, STUB_BODIES.values(), strict=True):
        assert variant.kind == "stub" and body in variant.description
        shop.check(variant.patch)
        applied = shop.applied(variant.patch)
        for path, names in changed.items():
            module = ast.parse(applied[path] or "")
            functions = {node.name: node for node in module.body if isinstance(node, ast.FunctionDef)}
            for name, function in functions.items():
                code = [statement for statement in function.body
                        if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))]
                if name in names:
                    # The docstring stays, the rest is the stub's one statement.
                    assert ast.get_docstring(function) and [ast.unparse(s) for s in code] == [ast.unparse(ast.parse(body))]
                else:
                    assert ast.unparse(function) in ast.unparse(ast.parse(shop.after[path])), name


def test_stubs_keep_the_signatures_of_functions_the_fix_adds(tmp_path: Path) -> None:
    # A new module with a method holding a nested function, and a one-line function.
    added = ('class Basket:\n    def __init__(self):\n        self.items = []\n\n'
             '    def total(self, prices):\n        def add(a, b): return a + b\n'
             '        return sum(prices)\n\n\ndef empty(): return not []\n')
    gold = make_gold(tmp_path, BASE, {"shop/basket.py": added, "shop/README.txt": "not code\n"})

    (none, listed, *_, raised) = stubs(gold.before, gold.after)

    text = gold.applied(none.patch)["shop/basket.py"] or ""
    assert text == ("class Basket:\n    def __init__(self):\n        return None\n\n"
                    "    def total(self, prices):\n        return None\n\n\ndef empty():\n    return None\n")
    # __init__ must return None: a value stub keeps it so, and only the raising stub breaks it.
    assert "__init__(self):\n        return None\n" in (gold.applied(listed.patch)["shop/basket.py"] or "")
    assert "total(self, prices):\n        return []\n" in (gold.applied(listed.patch)["shop/basket.py"] or "")
    assert (gold.applied(raised.patch)["shop/basket.py"] or "").count("raise NotImplementedError") == 3
    assert gold.applied(none.patch)["shop/README.txt"] == "not code\n", "the rest of the fix stays"


def test_stubs_without_a_changed_function_are_none(tmp_path: Path) -> None:
    fixed = edited(PRICING_BEFORE, ("TAX_RATE = 0.2", "TAX_RATE = 0.25"))
    gold = make_gold(tmp_path, BASE, {"shop/pricing.py": fixed})

    assert stubs(gold.before, gold.after) == []
    # A function the fix made return [] gives no stub-list: that variant would be the gold patch.
    returns_list = ({"a.py": "def f():\n    return 1\n"}, {"a.py": "def f():\n    return []\n"})
    assert [v.name for v in stubs(*returns_list)] == ["stub-none", "stub-zero", "stub-str", "stub-raise"]
    assert [v.name for v in stubs(*returns_list, limit=2)] == ["stub-none", "stub-zero"]
    assert stubs(gold.before, gold.after, limit=0) == []


# --- the demo ------------------------------------------------------------------------------


def test_variants_of_the_demos_pull_2(tmp_path: Path) -> None:
    from repo2env.demo import build_demo

    demo = build_demo(tmp_path / "demo")
    merges = git(demo.path, "log", "--merges", "--format=%H%x00%s", "main").stdout.splitlines()
    merge = next(sha for sha, subject in (line.split("\0") for line in merges) if subject.startswith("Merge pull request #2 "))
    head = git(demo.path, "rev-parse", f"{merge}^2").stdout.strip()
    base = git(demo.path, "merge-base", f"{merge}^1", head).stdout.strip()
    patch = split_diff(git(demo.path, "diff", base, head, "--", "src/textkit/*.py").stdout).patch
    paths = split_diff(patch).source_files
    worktree = tmp_path / "base"
    git(tmp_path, "clone", "-q", "--no-checkout", str(demo.path), str(worktree))
    git(worktree, "checkout", "-q", "--detach", base)

    before = {path: git(worktree, "show", f"{base}:{path}").stdout for path in paths}
    after = {path: git(worktree, "show", f"{head}:{path}").stdout for path in paths}
    gold = Gold(repo=worktree, patch=patch, before=before, after=after)
    partial = partial_fixes(patch)
    near = near_misses(before, after)

    assert paths == ("src/textkit/slug.py",)
    assert [variant.name for variant in partial] == ["hunks-1of2", "hunks-2of2"]
    for variant in partial:
        gold.check(variant.patch)
    assert [variant.name for variant in near] == ["undo-statement-1", "undo-statement-2", "undo-statement-3"]
    check_near_misses(gold, near)
