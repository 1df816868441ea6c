"""Implementations of the :class:`~repo2env.runtime.sandbox.Runtime` protocol, one module each
(:mod:`repo2env.runtime.backends.docker` is the first). A new backend is a new module here that
passes ``tests/test_runtime_contract.py``."""
