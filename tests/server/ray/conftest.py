"""One small Ray cluster for the Ray placement tests: two nodes of 1 CPU and 2 declared GPUs each.

Module-scoped and used by ``test_ray_cluster.py`` only, so a run starts one cluster (about 4 s and
~1 GB of Ray processes) and stops it before the rest of the session. Under xdist every Ray test runs
on one worker (tests/conftest.py), so only one test cluster exists at a time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from ray.cluster_utils import Cluster
from raytools import NODE_A, NODE_B, OBJECT_STORE, TwoNodes

from pytest_sglang.server.ray import connect, driver_log


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodes]:
    started = time.monotonic()
    driver_log.route(tmp_path_factory.mktemp("ray") / driver_log.FILE_NAME)  # Ray's INFO lines: not in our output
    ray_cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "num_gpus": 2, "resources": {NODE_A: 1}, "include_dashboard": False,
        "object_store_memory": OBJECT_STORE,
        # A lost node is declared dead in ~2 s instead of ~30 s (test_a_lost_node_...).
        "_system_config": {"health_check_period_ms": 500, "health_check_timeout_ms": 500,
                           "health_check_failure_threshold": 3}})
    try:
        ray_cluster.add_node(num_cpus=1, num_gpus=2, resources={NODE_B: 1}, object_store_memory=OBJECT_STORE)
        ray_cluster.wait_for_nodes()
        cluster = connect(ray_cluster.address, timeout_s=60)
        try:
            yield TwoNodes(cluster, ray_cluster, ray_cluster.address, time.monotonic() - started)
        finally:
            cluster.close()
    finally:
        ray_cluster.shutdown()
