"""Loads spread over Ray nodes (``LoadSpec.nodes``): merge error, client scaling, launch overhead, side by side.

Runs on a local 2-node Ray cluster (``ray.cluster_utils.Cluster``, 1 CPU per node) on this machine.

(1) merge error: the same load (same spec, same seed, same total concurrency) from one client in this
    process vs split over 2 Ray nodes, against a simulator that is not client-bound (a few thousand SSE
    events per second). Output throughput, median/p99 TTFT and median ITL of both; the relative
    difference of their means and each mode's own spread over the repeats (noise), so a difference
    inside the spread is noise and one beyond it is bias. Target: |difference| <= 2 %.
(2) client scaling: many short streams from a fast simulator (the client side is the bottleneck): SSE
    events per second consumed with 1 shard (1 node) vs 2 shards (2 nodes), and SSE events per client
    CPU-second per shard (the shard's own ``cpu_s``). All on one 2-core machine: the simulator and
    both shards share two cores, so 2 nodes cannot double the rate here; the per-CPU-second figure says
    whether each shard lost efficiency.
(3) Ray launch overhead: start-to-healthy of the simulator through ``RayRunner`` vs ``SimulatorRunner``
    (the same server launched locally), alternating.

Run: ``python benchmarks/bench_ray.py [--repeats 3] [--parts 1,2,3]`` (about 7 minutes with ``--repeats 5``).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import ray
from ray.cluster_utils import Cluster

from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.simulator import Simulator

SIM = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "1")
OBJECT_STORE = 80 * 2**20
MERGE_TARGET = 0.02
FIGURES = {
    "output_throughput": "out tok/s",
    "median_ttft_ms": "TTFT p50 ms",
    "p99_ttft_ms": "TTFT p99 ms",
    "median_itl_ms": "ITL p50 ms",
}


@contextmanager
def two_node_cluster() -> Iterator[Cluster]:
    # A declared GPU per node: RayRunner places a server (the simulator too) where its GPUs would be.
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "num_gpus": 1, "include_dashboard": False, "object_store_memory": OBJECT_STORE})
    try:
        cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=OBJECT_STORE)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


@contextmanager
def simulator(*flags: str) -> Iterator[Simulator]:
    sim = Simulator([*SIM, *flags]).start()
    try:
        yield sim
    finally:
        sim.stop()


def _rel(a: float, b: float) -> float:
    return (b - a) / a if a else float("nan")


def merge_error(repeats: int) -> None:
    """(1) one client vs two Ray nodes, same load, alternating order."""
    # Output lengths drawn in [32, 64] (seeded: the same for both modes), so that requests do not finish
    # in lockstep: with equal lengths, a start offset of a few ms between the shards regroups the
    # server's batches and moves TTFT for reasons of the workload, not of the merge.
    spec = LoadSpec(requests=512, concurrency=32, input_len=256, output_len=64, range_ratio=0.5, seed=42,
                    warmup=2, sample_server_metrics=False)
    kept: dict[str, list[dict[str, float]]] = {"1 client": [], "2 nodes": []}
    # 20 ms decode steps, no per-request cost: 32 streams x 50 tok/s = 1,600 events/s, far below a client.
    with simulator("--sim-decode-step-ms", "20", "--sim-decode-step-per-req-ms", "0",
                   "--sim-prefill-tok-s", "1000000") as sim:
        for k in range(repeats):
            order = ["1 client", "2 nodes"] if k % 2 == 0 else ["2 nodes", "1 client"]
            for mode in order:
                gc.collect()  # the one client runs in this process: no collection of earlier runs' garbage in it
                result = run_load(sim.url, spec.replace(nodes=2) if mode == "2 nodes" else spec)
                if result.failed or result.completed != spec.requests:
                    raise SystemExit(f"(1) {mode}: {result.errors} {result.failure_examples()}")
                kept[mode].append({key: float(getattr(result, key)) for key in FIGURES})
                ends = [s["end_s"] for s in result.workload.get("nodes", [])]
                if ends:
                    kept[mode][-1]["tail"] = (max(ends) - min(ends)) / result.duration
                del result  # keep figures only: this process is the one client of the next run
    print(f"(1) merge error: {spec.shape()}, seed {spec.seed}; simulator decode step 20 ms; {repeats} repeats, "
          "alternating order")
    print(f"    {'mode':<9}" + "".join(f"{label:>26}" for label in FIGURES.values()))
    means: dict[str, dict[str, float]] = {}
    spreads: dict[str, dict[str, float]] = {}
    for mode, results in kept.items():
        means[mode], spreads[mode] = {}, {}
        cells = []
        for key in FIGURES:
            values = [r[key] for r in results]
            mean = statistics.fmean(values)
            means[mode][key] = mean
            spreads[mode][key] = (max(values) - min(values)) / mean if mean else 0.0
            cells.append(f"{mean:,.2f} (spread {spreads[mode][key]:.1%})")
        print(f"    {mode:<9}" + "".join(f"{c:>26}" for c in cells))
    diffs = {key: _rel(means["1 client"][key], means["2 nodes"][key]) for key in FIGURES}
    print(f"    {'2 vs 1':<9}" + "".join(f"{d:>+26.2%}" for d in diffs.values()))
    for mode, results in kept.items():
        print(f"    {mode} per run: " + "; ".join(" ".join(f"{r[key]:,.2f}" for key in FIGURES) for r in results))
    tails = [r["tail"] for r in kept["2 nodes"]]
    print(f"    2 nodes: the shards' last requests ended {statistics.fmean(tails):.1%} of the run apart (mean): each "
          "shard has its own 16 slots, the single client shares 32, so the shard that drew shorter answers "
          "idles at the end (a property of a static split; processes=2 has it too)")
    # A difference beyond the target but inside both modes' own run-to-run spread is not told from noise.
    over = {key: d for key, d in diffs.items() if abs(d) > MERGE_TARGET}
    noise = {key for key, d in over.items() if abs(d) < min(spreads["1 client"][key], spreads["2 nodes"][key])}
    verdict = "ok" if not over else "; ".join(
        f"{FIGURES[key]} {d:+.2%} {'inside the run-to-run spread (noise)' if key in noise else 'MISSED (bias)'}"
        for key, d in over.items())
    print(f"    target |difference| <= {MERGE_TARGET:.0%}: {verdict}")


def client_scaling(repeats: int, nodes: list[str]) -> None:
    """(2) SSE events consumed per second and per client CPU-second: 1 shard vs 2 shards."""
    from pytest_sglang.loadgen.ray.nodes import run_nodes  # ray is imported above already

    spec = LoadSpec(requests=3072, concurrency=256, input_len=16, output_len=64, seed=7, warmup=1,
                    sample_server_metrics=False)
    rows: dict[str, list[tuple[float, list[float], float, float, float]]] = {"here": [], "1 node": [], "2 nodes": []}
    # 0.2 ms decode steps at any batch: 256 streams ask for up to ~1,000,000 events/s; the simulator then
    # emits as fast as its one event loop can (~35,000 events/s here with one client taking ~65 % of a core).
    with simulator("--sim-decode-step-ms", "0.2", "--sim-decode-step-per-req-ms", "0",
                   "--sim-prefill-tok-s", "10000000", "--max-running-requests", "512") as sim:
        server = psutil.Process(sim.proc.pid) if sim.proc else None
        for k in range(repeats):
            order = ["here", "1 node", "2 nodes"] if k % 2 == 0 else ["2 nodes", "1 node", "here"]
            for mode in order:
                server_cpu0, machine0 = _cpu(server), _idle_total()
                if mode == "here":  # the reference: one client in this process, no Ray
                    cpu0 = time.process_time()
                    here = run_load(sim.url, spec)
                    duration, cpu = here.duration, time.process_time() - cpu0
                    done, events = here.completed, here.total_output_tokens + here.completed
                    per_shard, client_cpu = [events / cpu], cpu
                else:
                    ids = nodes[:1] if mode == "1 node" else nodes
                    result, duration = run_nodes(sim.url, spec, None, ids)
                    metrics = result.collector.metrics(duration)
                    done = metrics["completed"]
                    events = metrics["total_output_tokens"] + metrics["completed"]  # one per token + [DONE]
                    per_shard = [events / len(ids) / max(s["cpu_s"], 1e-9) for s in result.workload["nodes"]]
                    client_cpu = sum(s["cpu_s"] for s in result.workload["nodes"])
                server_cpu, busy = _cpu(server) - server_cpu0, _busy(machine0, _idle_total())
                if done != spec.requests:
                    raise SystemExit(f"(2) {mode}: {done} of {spec.requests} completed")
                rows[mode].append((events / duration, per_shard, client_cpu / duration, server_cpu / duration, busy))
    print(f"(2) client scaling: {spec.shape()}; simulator decode step 0.2 ms; {repeats} repeats; "
          f"{os.cpu_count()} cores shared by the simulator and the shards")
    print(f"    {'mode':<8} {'events/s (runs)':>44} {'events per client CPU-s, per shard':>36} "
          f"{'client CPU':>11} {'server CPU':>11} {'machine busy':>13}")
    best: dict[str, float] = {}
    for mode, runs in rows.items():
        rates = [r[0] for r in runs]
        best[mode] = max(rates)
        shards = [statistics.fmean(col) for col in zip(*(r[1] for r in runs), strict=True)]
        print(f"    {mode:<8} {' / '.join(f'{x:,.0f}' for x in rates):>44} "
              f"{' / '.join(f'{x:,.0f}' for x in shards):>36} "
              f"{statistics.fmean(r[2] for r in runs):>10.0%} {statistics.fmean(r[3] for r in runs):>10.0%} "
              f"{statistics.fmean(r[4] for r in runs):>12.0%}")
    print(f"    2 nodes / 1 node, best events/s: {best['2 nodes'] / best['1 node']:.2f}x; 1 node / here: "
          f"{best['1 node'] / best['here']:.2f}x (here = run_load in this process, no Ray; client/server "
          "CPU = CPU-seconds per second of the shards together / of the simulator; machine busy = share of all "
          "cores, other processes included)")


def _cpu(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    times = proc.cpu_times()
    return float(times.user + times.system)


def _idle_total() -> tuple[float, float]:
    """(idle, total) CPU seconds of the whole machine so far."""
    times = psutil.cpu_times()
    return times.idle, sum(times)


def _busy(before: tuple[float, float], after: tuple[float, float]) -> float:
    idle, total = after[0] - before[0], after[1] - before[1]
    return 1 - idle / total if total else 0.0


def launch_overhead(repeats: int, cluster: Cluster) -> None:
    """(3) start-to-healthy of the simulator: through RayRunner on a node vs SimulatorRunner here."""
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.ray import RayRunner, connect
    from pytest_sglang.server.runner import SimulatorRunner
    from pytest_sglang.sockets import free_port

    ray_cluster = connect(cluster.address, timeout_s=60)
    times: dict[str, list[float]] = {"local": [], "Ray": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = LaunchConfig(runner="simulator", args=SIM, startup_timeout_s=120, log_dir=Path(tmp))

        def local(k: int) -> tuple[str, Callable[[], object]]:
            proc = SimulatorRunner().start(config, free_port(), Path(tmp) / f"local-{k}.log")
            return proc.url, proc.stop

        ray_runner = RayRunner(ray_cluster, SimulatorRunner())

        def on_ray(k: int) -> tuple[str, Callable[[], object]]:
            proc = ray_runner.start(config, 0, Path(tmp) / f"ray-{k}.log")
            return proc.url, proc.stop

        runners: dict[str, Callable[[int], tuple[str, Callable[[], object]]]] = {"local": local, "Ray": on_ray}
        try:
            for k in range(repeats):
                for mode in (["local", "Ray"] if k % 2 == 0 else ["Ray", "local"]):
                    started = time.perf_counter()
                    url, stop = runners[mode](k)
                    try:
                        _wait_healthy(url, started + 120)
                        times[mode].append(time.perf_counter() - started)
                    finally:
                        stop()
        finally:
            ray_runner.close()
    print(f"(3) launch overhead, simulator start to GET /health 200 ({config.runner}, time scale 1), "
          f"{repeats} repeats alternating:")
    for mode, values in times.items():
        print(f"    {mode:<6} median {statistics.median(values):.2f} s  runs " + " / ".join(f"{v:.2f}" for v in values))
    print(f"    Ray - local: {statistics.median(times['Ray']) - statistics.median(times['local']):+.2f} s")


def _wait_healthy(url: str, deadline: float) -> None:
    with httpx.Client(timeout=2) as client:
        while time.perf_counter() < deadline:
            try:
                if client.get(url + "/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
    raise SystemExit(f"{url} not healthy in time")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", default="1,2,3", help="which parts to run (default 1,2,3)")
    args = ap.parse_args()
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with two_node_cluster() as cluster:
        mine = ray.get_runtime_context().get_node_id()
        nodes = sorted((str(n["NodeID"]) for n in ray.nodes() if n["Alive"]), key=lambda n: n == mine)
        print(f"bench_ray: Ray {ray.__version__}, 2 local nodes (1 CPU, 1 declared GPU each), "
              f"load average before {load0}")
        parts = set(args.parts.split(","))
        if "1" in parts:
            merge_error(args.repeats)
        if "2" in parts:
            client_scaling(args.repeats, nodes)
        if "3" in parts:
            launch_overhead(args.repeats, cluster)
    print("load average after " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
