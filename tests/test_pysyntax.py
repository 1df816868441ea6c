"""Host-side parsing from many threads at once (CPython gh-106905 on 3.11.7)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from repo2env import pysyntax

# Deep nesting makes the AST converter recurse far, the window in which another thread's
# conversion corrupted the shared depth counter.
DEEP = "x = " + "(" * 60 + "1" + ")" * 60 + "\n" + "def f():\n    return [[[[[[1]]]]]]\n" * 50


def test_parses_from_many_threads_agree():
    with ThreadPoolExecutor(max_workers=8) as pool:
        trees = list(pool.map(lambda _: len(pysyntax.parse(DEEP).body), range(400)))
    assert set(trees) == {51}
