"""The embedded demos: small libraries with realistic PR histories, one per language.

:func:`build_demo` writes a real git repository (deterministic SHAs) and a GitHub-shaped
``issues.json``. ``python`` (the default) is textkit, whose ground truth is :data:`DEMO_PULLS`;
``javascript`` is fmtkit (JavaScript with an ES module entry, TypeScript typings and a TypeScript
test, mocha), whose ground truth is :data:`JS_DEMO_PULLS`. textkit is the default input of
``make demo`` and the fixture most of repo2env's tests run on.
"""

from repo2env.demo.builder import DEMO_LANGUAGES, DemoRepo, build_demo, demo_history
from repo2env.demo.fmtkit.history import JS_DEMO_PULLS, JS_DEMO_REPO
from repo2env.demo.history import DEMO_PULLS, DEMO_REPO
from repo2env.demo.spec import DemoHistory, DemoPull, PartialFix

__all__ = [
    "DEMO_LANGUAGES",
    "DEMO_PULLS",
    "DEMO_REPO",
    "JS_DEMO_PULLS",
    "JS_DEMO_REPO",
    "DemoHistory",
    "DemoPull",
    "DemoRepo",
    "PartialFix",
    "build_demo",
    "demo_history",
]
