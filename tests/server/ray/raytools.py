"""Helpers of the Ray placement tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from ray.cluster_utils import Cluster

from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.ray import RayCluster, RayNode
from pytest_sglang.server.runner import LAUNCH_ENV, marked_processes

#: The simulator's tiny profile at 1/20 of its simulated durations (as tests/server/simlaunch.py).
FAST = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05")
#: The custom resource that names each node: ask for a sliver of it to land there.
NODE_A, NODE_B = "node_a", "node_b"
OBJECT_STORE = 80 * 2**20  # Ray's floor is 75 MiB; the default (30 % of RAM) is wasted here


@dataclass(frozen=True)
class TwoNodes:
    cluster: RayCluster
    ray_cluster: Cluster
    address: str
    started_in_s: float

    def node(self, resource: str) -> RayNode:
        return next(n for n in self.cluster.alive_nodes() if resource in dict(n.custom))


def sim_config(tmp_path: Path, *args: str, timeout: float = 60.0) -> LaunchConfig:
    return LaunchConfig(runner="simulator", args=(*FAST, *args), startup_timeout_s=timeout, log_dir=tmp_path)


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s`` (polling with a deadline, not a sleep)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.05)


def launched(launch_id: str) -> list[psutil.Process]:
    """The live (non-zombie) processes of one launch, found by its environment marker."""
    out = []
    for proc, _ in marked_processes(LAUNCH_ENV, launch_id):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.Error:
            continue
    return out
