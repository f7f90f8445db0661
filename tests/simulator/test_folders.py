"""The simulator's folders show its design (issue 31): subpackages by concern, each saying what it may import.

``lint-imports`` holds the order in CI (pyproject.toml: the simulator's layers contract); circles and the
folders' docstrings are tests/test_import_circles.py's. Here: no module back in the flat root.
"""

from __future__ import annotations

from pathlib import Path

import pytest_sglang.simulator

PACKAGE = "pytest_sglang.simulator"
ROOT = Path(pytest_sglang.simulator.__file__).parent
FOLDERS = ("disagg", "failures", "front", "front/openai", "images", "launch", "model", "scheduling")
#: What stays in the root: the launcher (__init__), the entry point and the composition root (server), the
#: state the routes share, the resolved configuration, and two leaves every folder may use.
ROOT_MODULES = {"__init__", "__main__", "config", "logs", "server", "state", "tokenizer"}


def test_the_root_holds_the_composition_root_and_its_leaves_only() -> None:
    assert {p.stem for p in ROOT.glob("*.py")} == ROOT_MODULES
    assert {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob("__init__.py") if p.parent != ROOT} == set(FOLDERS)
