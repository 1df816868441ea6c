"""The embedded demo: textkit, a small Python library with a realistic PR history.

:func:`build_demo` writes a real git repository (deterministic SHAs) and a GitHub-shaped
``issues.json``; :data:`DEMO_PULLS` is the ground truth of what each PR should become. It is the
default input of ``make demo`` and the fixture most of repo2env's tests run on.
"""

from repo2env.demo.builder import DemoRepo, build_demo
from repo2env.demo.history import DEMO_PULLS, DEMO_REPO
from repo2env.demo.spec import DemoPull, PartialFix

__all__ = ["DEMO_PULLS", "DEMO_REPO", "DemoPull", "DemoRepo", "PartialFix", "build_demo"]
