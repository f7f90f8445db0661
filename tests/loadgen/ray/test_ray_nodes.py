"""A load spread over Ray nodes (``LoadSpec.nodes``), against the simulator as a real subprocess.

Speed model as test_simulator_e2e.py: decode step 10 ms at any batch size, so ITL ~ 10 ms.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
import time
from typing import Any

import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from loadgen.ray_cluster import ray_cluster, ray_nodes, shard_processes
from loadgen.sim_model import SHAPE, STEP_S
from pytest_sglang.errors import ConfigError, LoadGenError
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.measure.stats import calculate_metrics
from pytest_sglang.loadgen.ray.nodes import run_nodes
from pytest_sglang.server.ray import driver_log

__all__ = ["ray_cluster", "ray_nodes"]

def test_shards_run_on_both_nodes_and_merge_exactly(sim_url: str, ray_nodes: list[str]) -> None:
    seen: list[tuple[int, int]] = []
    result = run_load(sim_url, LoadSpec(**SHAPE, nodes=2), progress=lambda done, total: seen.append((done, total)))
    assert result.completed == 16 and result.errors == {}, result.failure_examples()
    assert result.total_output_tokens == 16 * 32 and result.total_input_tokens == 16 * 64
    assert sorted(r.index for r in result.records) == list(range(16))
    shards = result.workload["nodes"]
    assert [s["shard"] for s in shards] == [0, 1]
    assert {s["node_id"] for s in shards} == set(ray_nodes)  # each shard saw itself on its own node
    assert len({s["pid"] for s in shards}) == 2 and os.getpid() not in {s["pid"] for s in shards}
    assert all(0 < s["cpu_s"] < result.duration + 1 for s in shards)
    assert result.workload_context()["load shards"].startswith("2 shards over 2 Ray nodes: ")
    # bench_serving metrics recomputed from the merged records agree exactly: nothing lost in the merge.
    # (Their size depends on how busy the machine is, so only the simulator's floor is asserted.)
    again = calculate_metrics(result.records, result.duration)
    for key in ("median_itl_ms", "p99_ttft_ms", "mean_e2e_latency_ms", "output_throughput"):
        assert getattr(result, key) == pytest.approx(again[key], rel=1e-9), key
    assert result.mean_itl_ms > 0 and result.median_e2e_latency_ms >= 31 * STEP_S * 1000  # 32 steps at least
    # One timeline: both shards started at the release.
    assert sorted(r.start for r in result.records)[1] < 0.5
    assert result.duration >= max(r.start + r.e2e for r in result.records) - 1e-9
    assert result.server_view["peak_num_running_reqs"] >= 1  # shard 0 sampled /metrics
    assert seen[-1] == (16, 16)
    assert shard_processes() == []  # nothing outlives the call


def test_shards_send_back_bounded_records(sim_url: str, ray_nodes: list[str]) -> None:
    spec = LoadSpec(requests=60, concurrency=8, input_len=16, output_len=8, max_records=10, nodes=2)
    result = run_load(sim_url, spec)
    assert result.completed == 60 and result.total_output_tokens == 60 * 8  # exact over every request
    assert len(result.records) <= 10 and result.percentile_sample == len(result.records)
    # Percentiles come from the kept records; the mean from every request. A busy client can read a
    # request's tokens in one go (gaps of 0), so the median may be 0, but the gaps must still be there.
    assert all(r.itl for r in result.records) and result.mean_itl_ms > 0
    assert result.median_itl_ms == pytest.approx(calculate_metrics(result.records, result.duration)["median_itl_ms"])


def test_processes_per_node(sim_url: str, ray_nodes: list[str]) -> None:
    # Each node has 1 CPU: half a CPU per shard lets two shards share it.
    result, _ = run_nodes(sim_url, LoadSpec(**SHAPE, processes=2), None, ray_nodes, num_cpus=0.5)
    metrics = result.collector.metrics(1.0)
    assert metrics["completed"] == 16 and metrics["total_output_tokens"] == 16 * 32
    homes = [s["node_id"] for s in result.workload["nodes"]]
    assert homes == [ray_nodes[0], ray_nodes[1], ray_nodes[0], ray_nodes[1]]


def test_a_shard_that_never_arrives_fails_the_run_naming_its_node(sim_url: str, ray_nodes: list[str]) -> None:
    busy, free = ray_nodes[1], ray_nodes[0]

    class Blocker:  # local: pickled by value (Ray workers cannot import the tests)
        @ray.method
        def ready(self) -> bool:
            return True

    # Take the busy node's only CPU: its shard waits to be scheduled and never reaches the barrier.
    blocker = ray.remote(Blocker).options(
        num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(busy, soft=False)).remote()
    try:
        ray.get(blocker.ready.remote())
        started = time.monotonic()
        with pytest.raises(LoadGenError) as info:
            run_nodes(sim_url, LoadSpec(**SHAPE), None, [free, busy], barrier_timeout_s=8.0)
        elapsed = time.monotonic() - started
    finally:
        ray.kill(blocker)
    msg = str(info.value)
    assert msg.startswith(f"the load shards on Ray node {busy} (")
    assert "), shard 1 did not reach the start barrier within 8 s (1 of 2 arrived). Fix: check that the node " in msg
    assert free not in msg
    assert elapsed < 30
    assert shard_processes() == []  # the shard that did arrive was killed too


def test_a_shard_that_dies_fails_the_run_with_its_reason(sim_factory: Any, ray_nodes: list[str]) -> None:
    sim = sim_factory("--sim-decode-step-ms", "400", "--sim-decode-step-per-req-ms", "0")
    started = threading.Event()
    failure: list[BaseException] = []

    def load() -> None:
        spec = LoadSpec(requests=200, concurrency=4, input_len=16, output_len=64, nodes=2, warmup=0)
        try:
            run_load(sim.url, spec, progress=lambda done, total: started.set() if done else None)
        except BaseException as exc:  # handed to the test's thread
            failure.append(exc)

    thread = threading.Thread(target=load)
    thread.start()
    assert started.wait(60), "the load never got going"
    victims = shard_processes()
    assert len(victims) == 2
    os.kill(victims[0].pid, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], LoadGenError), failure
    msg = str(failure[0])
    assert msg.startswith("the load shard on Ray node ")
    assert any(f"Ray node {node} (" in msg for node in ray_nodes)
    assert " died: The actor died unexpectedly before finishing this task." in msg
    # Ray's own lines about it (the raylet's "A worker died ...") are in the driver's log, named here.
    assert msg.endswith(f"Fix: check that node (memory, `ray status`; Ray's own messages: {driver_log.path()}), or "
                        "run with nodes=1.")
    assert shard_processes() == []


def test_more_nodes_than_the_cluster_has(sim_url: str, ray_nodes: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        run_load(sim_url, LoadSpec(**SHAPE, nodes=3))
    msg = str(info.value)
    assert msg.startswith("LoadSpec.nodes=3: the Ray cluster has 2 alive node(s) with a CPU: ")
    assert all(node in msg for node in ray_nodes)
    assert msg.endswith("Fix: use fewer nodes (nodes=1 runs the load here), or connect to a cluster with enough nodes")


def test_unknown_or_repeated_node_ids(sim_url: str, ray_nodes: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"^LoadSpec.nodes=2: Ray node\(s\) feed are not alive; the cluster has 2"):
        run_nodes(sim_url, LoadSpec(**SHAPE), None, [ray_nodes[0], "feed"])
    with pytest.raises(ConfigError, match=r"^LoadSpec.nodes=2: needs distinct Ray node ids"):
        run_nodes(sim_url, LoadSpec(**SHAPE), None, [ray_nodes[0], ray_nodes[0]])


def test_ray_not_initialised(sim_url: str, ray_nodes: list[str]) -> None:
    ray.shutdown()  # the next test's ray_nodes fixture connects again
    with pytest.raises(ConfigError) as info:
        run_load(sim_url, LoadSpec(**SHAPE, nodes=2))
    assert str(info.value) == (
        "LoadSpec.nodes=2: spreads the load over Ray nodes, and this process is not connected to a Ray cluster "
        "(ray.is_initialized() is False). Fix: call ray.init(address='auto') (or ray.init(address=...)) before "
        "the load, or use nodes=1"
    )


def test_ray_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(ConfigError) as info:
        run_load("http://127.0.0.1:9", LoadSpec(**SHAPE, nodes=2))
    assert str(info.value) == ("LoadSpec.nodes=2: spreads the load over Ray nodes, and Ray is not installed. "
                               "Fix: pip install 'pytest-sglang[ray]', or use nodes=1")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"nodes": 0}, "LoadSpec.nodes=0: must be a whole number >= 1. Fix: give nodes as a positive integer"),
        ({"nodes": "2"}, "LoadSpec.nodes='2': must be a whole number >= 1. Fix: give nodes as a positive integer"),
        ({"nodes": True}, "LoadSpec.nodes=True: must be a whole number >= 1. Fix: give nodes as a positive integer"),
        ({"nodes": 2000}, "LoadSpec.nodes=2000: is more than the limit of 1,024. Fix: give at most 1,024 "
                          "(one load shard per node and process)"),
        ({"nodes": 2, "processes": 2, "concurrency": 3},
         "LoadSpec.nodes=2: times processes=2 makes 4 load shards, more than concurrency=3. Fix: use at most "
         "one shard (nodes x processes) per concurrent request"),
        ({"nodes": 2, "dataset": "multiturn", "api": "chat", "concurrency": 4},
         "LoadSpec.nodes=2: must be 1 for dataset multiturn (one timeline: a trace's clock or each session's "
         "turns). Fix: drop nodes=, or use a random-ids/sharegpt/jsonl dataset"),
    ],
)
def test_bad_nodes_values(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(**fields)
    assert str(info.value) == message
