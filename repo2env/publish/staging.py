"""Folders written whole for publish and every export: :func:`repo2env.folders.write_folder`,
which lives at the bottom of the package so that mining and the composition layer write their
folders the same way."""

from __future__ import annotations

from repo2env.folders import write_folder

__all__ = ["write_folder"]
