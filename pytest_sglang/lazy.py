"""Names a package exports but loads on first use (PEP 562), so importing the package stays cheap.

``__getattr__, __dir__ = lazy.exports(__name__, {"Name": "pytest_sglang.module"})`` in a package's
``__init__``: pytest loads the plugin in every run of every project that installs it, and an optional
extra (Ray) must not be imported until it is used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["exports"]


def exports(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each of ``names`` is imported from its module when first read."""

    def getattr_(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value  # later lookups skip __getattr__
        return value

    def dir_() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return getattr_, dir_
