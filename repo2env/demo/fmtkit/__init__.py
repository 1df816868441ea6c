"""fmtkit: the JavaScript/TypeScript demo repository (a small Node.js formatting library).

:data:`~repo2env.demo.fmtkit.history.HISTORY` is its story; ``build_demo(dest, "javascript")``
builds it.
"""
