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


def test_literals_evaluate_from_many_threads_at_once(monkeypatch):
    """A grading's canaries read literals (canary_maker) while another grading's variants are made:
    ast.literal_eval parses, so it goes through the same lock. (A CI run with two gradings at once
    failed there once; the race is rare and this run does not reproduce it, so every parse records
    whether the lock was held: a caller that parses outside it fails here.)"""
    import ast

    from repo2env.verify.canary_maker import _value

    held = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *args, **kwargs: held.append(pysyntax._LOCK.locked())
                        or real_parse(*args, **kwargs))

    # Long enough for thread switches during the conversion, deep enough to recurse far.
    deep = "[" + ", ".join(["(" * 40 + "{'a': (2, 3)}" + ")" * 40] * 300) + "]"
    with ThreadPoolExecutor(max_workers=8) as pool:
        values = list(pool.map(lambda n: pysyntax.literal_eval(deep) if n % 2 else _value(deep)[1], range(200)))
    assert all(value == [{"a": (2, 3)}] * 300 for value in values)
    assert pysyntax.literal_eval("  -1.5") == -1.5 and _value("not a literal") == ("text", "not a literal")
    assert len(held) >= 201 and all(held), "every literal is parsed under the lock"


def test_libcst_strings_evaluate_under_the_lock(monkeypatch):
    """libcst's ``evaluated_value`` is ``ast.literal_eval`` (a parse): the near-miss mutations and the
    interface's string matching read it through :func:`pysyntax.string_value`, under the lock."""
    import libcst as cst
    import libcst._nodes.expression as expression

    from repo2env.languages.python.variants.mutations import _altered_value

    held = []
    real = expression.literal_eval
    monkeypatch.setattr(expression, "literal_eval", lambda text: held.append(pysyntax._LOCK.locked()) or real(text))
    assert pysyntax.string_value(cst.parse_expression("'a' 'b'")) == "ab"
    assert _altered_value(cst.parse_expression("''")) == "None"
    assert _altered_value(cst.parse_expression("b'x'")) == 'b""'
    assert held and all(held)
