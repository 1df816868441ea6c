"""The Debian packages an install needs (compilers for C and Rust extensions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from repo2env.languages.python.spec.files import RepoFiles, _Project, _read_project, _valid_requirement

if TYPE_CHECKING:
    pass


_C_BUILD_REQUIRES = ("cython", "pybind11", "scikit-build", "scikit-build-core", "meson-python", "cffi", "numpy")
_RUST_BUILD_REQUIRES = ("setuptools-rust", "maturin")


#: What building a C extension needs on the base images: a compiler, and the headers of the
#: Debian Python the bootstrapped images run (``Python.h``; pulled python images have their own).
COMPILER_PACKAGES = ("build-essential", "python3-dev")


def infer_system_packages(files: RepoFiles) -> list[str]:
    """Debian packages the env layer needs to build the project itself: :data:`COMPILER_PACKAGES`
    for C/C++/Cython extensions, plus ``cargo`` for Rust ones. Dependencies come as wheels."""
    return _infer_system_packages(_read_project(files))


def _infer_system_packages(project: _Project) -> list[str]:
    build_system = project.pyproject.get("build-system", {})
    build_requires = {canonicalize_name(Requirement(text).name) for item in build_system.get("requires", []) or []
                      if (text := _valid_requirement(str(item))) is not None}
    backend = str(build_system.get("build-backend", ""))
    rust = bool(build_requires & set(_RUST_BUILD_REQUIRES)) or backend.startswith("maturin")
    compiled = (
        rust
        or bool(build_requires & set(_C_BUILD_REQUIRES))
        or "ext_modules" in project.setup_keywords
        or "Extension(" in project.setup_py
        or "cythonize" in project.setup_py
        or any(path.endswith(".pyx") for path in project.listing)
    )
    return (list(COMPILER_PACKAGES) if compiled else []) + (["cargo"] if rust else [])
