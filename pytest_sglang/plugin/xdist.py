"""pytest-xdist: what the controller hands to its workers, and how a worker reads it.

The controller resolves the primary server once (``ServerPool``) and passes its URL, key, start
error and load-lock path to every worker through ``node.workerinput`` (pytest-xdist's documented
channel); workers attach and never launch (docs/plugin.md, "xdist").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import pytest

#: What a worker receives from the controller (our keys; xdist adds its own, e.g. ``workerid``).
WorkerInput = Mapping[str, object]


class WorkerNode(Protocol):
    """The part of xdist's ``WorkerController`` that ``pytest_configure_node`` uses."""

    workerinput: dict[str, object]


def worker_input(config: pytest.Config) -> WorkerInput | None:
    """The controller's hand-over in an xdist worker; None in the controller or without xdist."""
    # pytest-xdist sets ``config.workerinput`` on workers only: its documented way to tell them apart.
    found: WorkerInput | None = getattr(config, "workerinput", None)
    return found


def is_worker(config: pytest.Config) -> bool:
    return worker_input(config) is not None


class HandsOver(Protocol):
    """What the controller hands over (``ServerPool``, which imports this module: named here by its shape)."""

    def worker_input_for_nodes(self) -> Mapping[str, object]: ...


class XdistHooks:
    """Registered on the controller only when pytest-xdist is loaded (its hooks exist only then)."""

    def __init__(self, pool: HandsOver) -> None:
        self.pool = pool

    def pytest_configure_node(self, node: WorkerNode) -> None:
        node.workerinput.update(self.pool.worker_input_for_nodes())
