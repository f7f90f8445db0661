"""A local 2-node Ray cluster for the tests of loads spread over Ray nodes (``LoadSpec.nodes``).

One cluster per pytest process (session scope; under xdist, one per worker that runs these tests): two
nodes of 1 CPU each, no dashboard, small object stores, so that a worker's cluster stays small. The test
process connects as a Ray driver (:func:`ray_nodes`); a test may disconnect, the next one reconnects.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psutil
import pytest
import ray
from ray.cluster_utils import Cluster

from pytest_sglang.server.ray import driver_log

#: Ray's smallest object store (bytes): the shards send back bounded collectors, a few MB at most.
OBJECT_STORE = 80 * 1024 * 1024
#: The process title Ray gives a shard actor's worker (``ray::<class>`` and ``.<method>`` while busy).
SHARD_TITLE = "ray::_ShardActor"


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two Ray nodes on this machine (1 CPU each), shut down at the end of the session."""
    driver_log.route(tmp_path_factory.mktemp("ray") / driver_log.FILE_NAME)  # Ray's own lines: not in our output
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": OBJECT_STORE})
    try:
        cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def ray_nodes(ray_cluster: Cluster) -> list[str]:
    """This process connected to the cluster; the ids of its two nodes, the driver's own first."""
    if not ray.is_initialized():
        ray.init(address=ray_cluster.address, log_to_driver=False)
    mine = ray.get_runtime_context().get_node_id()
    ids = [str(n["NodeID"]) for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
    assert len(ids) == 2 and mine in ids
    return sorted(ids, key=lambda n: n != mine)


def shard_processes() -> list[psutil.Process]:
    """The shard actors' worker processes alive under this process's cluster (its raylets are our children)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        cmdline = proc.info["cmdline"] or []
        if not cmdline or not cmdline[0].startswith(SHARD_TITLE):
            continue
        try:
            if psutil.Process(proc.info["ppid"]).ppid() == os.getpid():  # worker -> raylet -> us
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found
