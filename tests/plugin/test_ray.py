"""--sglang-ray end to end: pytest runs (pytester, real subprocesses) placing simulator fleets on Ray.

A local Ray (``auto``) for the fleet suite and its cleanup paths; a 2-node ``ray.cluster_utils`` cluster
(module-scoped, nodes told apart by a custom resource) for a fleet spread over both nodes, a PD pair
across them, a worker killed by Ray and load shards on both nodes. tests/conftest.py runs every Ray
test of the suite on one xdist worker, so counting Ray's processes here is not disturbed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import ray
from plugin_helpers import SIM_LAUNCH, owned_by, wait_for
from ray.cluster_utils import Cluster

from pytest_sglang.server.ray import connect, driver_log
from pytest_sglang.server.ray.cluster import RayCluster
from tests.conftest import SimFactory

RAY_OWNER_ENV = "PYTEST_SGLANG_RAY_OWNER"
OBJECT_STORE = 80 * 2**20  # Ray's floor is 75 MiB; the default (30 % of RAM) is wasted here
NODE_A, NODE_B = "node_a", "node_b"


def _on_ray() -> list[psutil.Process]:
    """Servers started by a node actor of this plugin (tagged by the actor; its pid is their owner)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if RAY_OWNER_ENV in proc.environ() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _ray_processes() -> set[int]:
    """Pids of Ray's own daemons on this machine (GCS, raylets)."""
    found = set()
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) or proc.info["name"] or ""
        except psutil.Error:
            continue
        if "gcs_server" in text or "raylet" in text:
            found.add(proc.pid)
    return found


FLEET_SUITE = """
import pytest

from pytest_sglang.fleet.handle import SGLangFleet
from pytest_sglang.server.ray import RayProcess


def test_every_worker_runs_on_ray(sglang_server):
    assert isinstance(sglang_server, SGLangFleet)
    assert [w.role for w in sglang_server.workers] == ["regular", "regular"]
    for worker in sglang_server.workers:
        assert isinstance(worker.process, RayProcess), worker.process
        assert worker.server.health() == 200
    print("NODES", sorted(w.process.seat.info.node_id for w in sglang_server.workers))


@pytest.mark.sglang_fleet(requests=24, concurrency=4, input_len=32, output_len=8, min_healthy=2)
def test_the_gateway_spreads_the_load():
    pass


@pytest.mark.sglang_throughput(requests=24, concurrency=4, input_len=32, output_len=8, min_output_tok_s=1)
def test_throughput_through_the_gateway():
    pass
"""


def test_a_fleet_on_a_local_ray_passes_and_leaves_nothing(pytester: pytest.Pytester) -> None:
    before = _ray_processes()
    pytester.makepyfile(FLEET_SUITE)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray",
                                           "auto", "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["sglang: ray=auto: launched servers placed on Ray (strategy PACK*",
                                 "*worker 0 (on Ray)*SGLang ready*"])
    # The run's local Ray stopped with it: no new GCS or raylet, no simulator of the run.
    wait_for(lambda: not (_ray_processes() - before), 30, "the run's Ray processes to end")
    assert "RAY_ADDRESS" not in os.environ


AB_ON_RAY = """
import os, threading, time
from pathlib import Path

import psutil


def test_ab(sglang_ab):
    counter = Path(os.environ["LAUNCH_COUNTER"])
    seen, on_ray, stop = set(), set(), threading.Event()

    def watch():  # each launch's simulator, while it runs: does it carry the Ray node actor's mark?
        while not stop.is_set():
            for pid in map(int, counter.read_text().split() if counter.exists() else []):
                if pid not in seen:
                    try:
                        env = psutil.Process(pid).environ()
                    except psutil.Error:
                        continue
                    seen.add(pid)
                    if "PYTEST_SGLANG_RAY_OWNER" in env:
                        on_ray.add(pid)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        sglang_ab(requests=16, concurrency=8, input_len=16, output_len=32, warmup=0)
    finally:
        stop.set()
        watcher.join()
        print("LAUNCHES", len(counter.read_text().split()), "SEEN", len(seen), "ON_RAY", len(on_ray))
"""


def test_an_a_b_run_places_every_launch_on_ray(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _ray_processes()
    counter = pytester.path / "launches.txt"
    monkeypatch.setenv("LAUNCH_COUNTER", str(counter))
    pytester.makepyfile(test_ab_on_ray=AB_ON_RAY)
    result = pytester.runpytest_subprocess(
        "-s", "-rs", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray", "auto",
        f"--sglang-launch={SIM_LAUNCH} --sim-decode-step-ms 1000 --sim-launch-counter {counter}",
        "--sglang-ab-launches=2", "--junitxml=junit.xml")
    outcomes = result.parseoutcomes()
    assert outcomes.get("error", 0) == 0 and outcomes.get("failed", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["LAUNCHES 4 SEEN 4 ON_RAY 4"])  # A B A B, each one on a Ray node
    root = ET.parse(pytester.path / "junit.xml").getroot()
    found = [json.loads(p.get("value") or "{}") for p in root.iter("property") if p.get("name") == "sglang_outcome"]
    (outcome,) = [o for o in found if o.get("gate") == "ab"]
    assert "placed on Ray (strategy PACK)" in outcome["context"]["A"]
    wait_for(lambda: not (_ray_processes() - before), 30, "the run's Ray processes to end")
    assert not _on_ray()


def test_a_fleet_bigger_than_the_local_ray_is_refused_at_once_with_the_arithmetic(pytester: pytest.Pytester) -> None:
    # The case: one worker more than the local Ray has CPUs (3 on a 2-core machine), 1 CPU per bundle.
    # Ray counts the CPUs it may use (affinity, cgroup quota), as the local Ray of the run will.
    cpus = int(ray._private.utils.get_num_cpus())
    before = _ray_processes()
    pytester.makepyfile("def test_x(sglang_server): pass")
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray", "auto",
                                           "--sglang-workers", str(cpus + 1), "--sglang-startup-timeout", "900",
                                           "--sglang-launch", SIM_LAUNCH)
    took = time.monotonic() - started
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        f"PlacementRefused: Ray cannot place {cpus + 1} bundles of {{CPU 1}} (strategy PACK): PACK may use any nodes, "
        f"but each bundle lies on one node: it needs {{CPU {cpus + 1}}} in all; the cluster has 1 alive node with "
        f"{{CPU {cpus}}} in all, room for {cpus} bundle* Nothing was started.",
        "Fix: start fewer servers at once, *`ray start --head --num-cpus N`*"])
    assert "PlacementTimeout" not in result.stdout.str()
    # Refused before any wait: far below the 900 s deadline (the bound only catches a wait; the figure is ~10 s).
    assert took < 300, took
    assert not _on_ray()
    wait_for(lambda: not (_ray_processes() - before), 30, "the run's Ray processes to end")


def test_ray_with_the_docker_runner_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--sglang-runner", "docker", "--sglang-launch", "--model-path m",
                                           "--sglang-ray", "auto")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sglang-ray='auto': places server processes on Ray nodes, and the docker "
                                 "runner starts containers here. Fix: use --sglang-ray with --sglang-runner process*"])


@pytest.mark.parametrize(("args", "message"), [
    (["--sglang-ray", "http://head:8265"], "*--sglang-ray='http://head:8265': an http(s) address is the "
                                           "dashboard/jobs API, not the cluster. Fix: give --sglang-ray auto*"),
    (["--sglang-ray", "auto", "--sglang-ray-strategy", "spred"], "*--sglang-ray-strategy='spred': not a Ray "
                                                                 "placement strategy*"),
    (["--sglang-load-nodes", "2"], "*--sglang-load-nodes=2: spreads each load over Ray nodes, and no Ray "
                                   "cluster is given. Fix: add --sglang-ray auto*"),
    (["--sglang-ray", "auto", "--sglang-load-nodes", "0"], "*--sglang-load-nodes='0'*"),
])
def test_bad_ray_settings_are_usage_errors_before_anything_starts(pytester: pytest.Pytester, args: list[str],
                                                                  message: str) -> None:
    before = _ray_processes()
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--sglang-simulate", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert not (_ray_processes() - before)  # nothing was started


UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1: refused at once


@pytest.mark.parametrize("where", ["launch", "load shards"])
def test_an_unreachable_ray_address_names_the_option_the_user_wrote(pytester: pytest.Pytester, where: str,
                                                                    sim_factory: SimFactory) -> None:
    if where == "launch":
        pytester.makepyfile("def test_x(sglang_server): pass")
        args = ["--sglang-simulate", "--sglang-launch", SIM_LAUNCH]
    else:  # attached (nothing launched on Ray): a sharded load joins the cluster when it runs
        pytester.makepyfile("""
            import pytest

            @pytest.mark.sglang_throughput(requests=8, concurrency=2, input_len=16, output_len=4, load_nodes=2)
            def test_x():
                pass
        """)
        args = ["--sglang-url", sim_factory().url]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-ray", UNREACHABLE, *args)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*--sglang-ray='{UNREACHABLE}': cannot reach the cluster: nothing answers at "
                                 f"{UNREACHABLE} (*). Fix: start the cluster*or give --sglang-ray auto*"])
    assert "RayOptions" not in result.stdout.str()


def test_a_password_in_the_ray_address_is_never_shown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--sglang-url", "http://127.0.0.1:9", "--sglang-ray",
                                           "ray://admin:hunter2secret@127.0.0.1:9", "--collect-only")
    assert "hunter2secret" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["sglang: ray=ray://admin:***@127.0.0.1:9: nothing launched*"])


def test_ctrl_c_during_a_ray_launch_leaves_nothing(pytester: pytest.Pytester) -> None:
    before = _ray_processes()
    pytester.makepyfile("def test_x(sglang_server): pass")
    # hang-at keeps each worker in its start-up phases, so SIGINT lands while the fleet starts.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray", "auto",
         "--sglang-workers", "2", "--sglang-launch", f"{SIM_LAUNCH} --sim-fault hang-at:weights"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: len(_on_ray()) >= 2, 90, "both workers to start on Ray")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out.decode(errors="replace")[-3000:]
    wait_for(lambda: not _on_ray(), 30, "the run's simulators to end")
    wait_for(lambda: not (_ray_processes() - before), 30, "the run's Ray processes to end")


def test_a_sigkilled_pytest_leaves_nothing_on_its_local_ray(pytester: pytest.Pytester) -> None:
    before = _ray_processes()
    pytester.makepyfile("import pathlib, time\ndef test_x(sglang_server):\n"
                        "    pathlib.Path('serving').touch()\n    time.sleep(120)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray", "auto",
         "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH], cwd=pytester.path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (pytester.path / "serving").exists(), 90, "the fleet to serve the test")
        assert len(_on_ray()) == 2
        proc.kill()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Ray's daemons die with their starter (PR_SET_PDEATHSIG) and the node actors' servers with them.
    wait_for(lambda: not _on_ray(), 60, "the killed run's servers to end")
    wait_for(lambda: not (_ray_processes() - before), 60, "the killed run's Ray processes to end")
    # The gateway ran here, outside Ray (smg blanks its environment; the ledger finds it): whatever of the
    # killed run is still alive is stopped by the next run. What must hold is that nothing of it is left
    # after that run, not which of its processes were still there when the next run began.
    left = {p.pid for p in owned_by(proc.pid)}
    result = pytester.runpytest_subprocess("--sglang-kill")
    wait_for(lambda: not owned_by(proc.pid), 30, "the killed run's leftovers to end")
    # (Other dead runs' leftovers on a shared machine may be stopped too: only this run's are looked at.)
    stopped = {int(line.split()[2]) for line in result.stdout.lines
               if line.startswith("  stopped pid ") and f"(left by pytest pid {proc.pid}," in line}
    assert stopped <= left, (stopped, left)


# ---- a 2-node cluster on this machine ---------------------------------------------------------------


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, RayCluster]]:
    """Two Ray nodes of 2 CPUs each (no GPUs: simulators then ask for CPUs only), told apart by a resource."""
    driver_log.route(tmp_path_factory.mktemp("ray") / driver_log.FILE_NAME)  # Ray's INFO lines: not in our output
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "resources": {NODE_A: 1}, "include_dashboard": False, "object_store_memory": OBJECT_STORE})
    try:
        cluster.add_node(num_cpus=2, resources={NODE_B: 1}, object_store_memory=OBJECT_STORE)
        cluster.wait_for_nodes()
        connected = connect(cluster.address, timeout_s=60)
        try:
            yield cluster, connected
        finally:
            connected.close()
    finally:
        cluster.shutdown()


def _no_placement_groups_left() -> bool:
    return all(g["state"] == "REMOVED" for g in ray.util.placement_group_table().values())


SPREAD_SUITE = """
import time

import ray

from pytest_sglang.server.ray import NodeLost


def test_the_workers_are_on_two_nodes(sglang_server):
    nodes = {w.process.seat.info.node_id for w in sglang_server.workers}
    roles = sorted(w.role for w in sglang_server.workers)
    print("ROLES", roles, "NODES", len(nodes))
    assert len(nodes) == 2


def test_a_worker_killed_by_ray_is_seen_and_named(sglang_server):
    worker = sglang_server.workers[-1]
    ray.kill(worker.process.seat.actor)  # Ray ends the node actor: its server goes with it
    deadline = time.monotonic() + 30
    while worker.process.exit_status() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    status = worker.process.exit_status()
    assert status is not None, "the killed worker still runs"
    print("EXIT", type(status).__name__, status.describe())
"""


def _run_on(pytester: pytest.Pytester, address: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(SPREAD_SUITE)
    return pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray", address,
                                         "--sglang-ray-strategy", "STRICT_SPREAD", "--sglang-launch", SIM_LAUNCH,
                                         *args)


def test_a_fleet_spreads_over_two_nodes_and_a_worker_killed_by_ray_is_named(
        pytester: pytest.Pytester, two_nodes: tuple[Cluster, RayCluster]) -> None:
    cluster, _ = two_nodes
    result = _run_on(pytester, cluster.address, "--sglang-workers", "2")
    result.assert_outcomes(passed=2)
    # fnmatch reads [...] as a character class: ? stands for the brackets.
    result.stdout.fnmatch_lines(["ROLES ?'regular', 'regular'? NODES 2",
                                 "*EXIT NodeLost the Ray actor that owned the server on node * died (*ray.kill*"])
    wait_for(_no_placement_groups_left, 30, "the run's placement groups to be removed")


def test_a_pd_pair_across_two_nodes(pytester: pytest.Pytester, two_nodes: tuple[Cluster, RayCluster]) -> None:
    cluster, _ = two_nodes
    result = _run_on(pytester, cluster.address, "--sglang-prefill", "1", "--sglang-decode", "1", "-k", "workers_are_on")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["ROLES ?'decode', 'prefill'? NODES 2"])
    wait_for(_no_placement_groups_left, 30, "the run's placement groups to be removed")


def test_load_shards_on_two_nodes_through_the_option(pytester: pytest.Pytester,
                                                    two_nodes: tuple[Cluster, RayCluster]) -> None:
    cluster, _ = two_nodes
    pytester.makepyfile("""
        import pytest

        @pytest.mark.sglang_throughput(requests=40, concurrency=4, input_len=32, output_len=8, min_output_tok_s=1)
        def test_sharded(sglang_gate):
            nodes = sglang_gate.load.workload["nodes"]
            print("SHARDS", len(nodes), len({n["node_id"] for n in nodes}))
    """)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray",
                                           cluster.address, "--sglang-load-nodes", "2", "--sglang-launch", SIM_LAUNCH)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["SHARDS 2 2"])
    # The terminal summary says it too, under the test's checks (not only the JSON's workload.nodes).
    result.stdout.fnmatch_lines(["*sglang gates*", "*test_sharded*PASSED", "    load shards: 2 shards over 2 Ray "
                                 "nodes: * (*), *"])
    wait_for(_no_placement_groups_left, 30, "the run's placement groups to be removed")


def test_a_placement_no_node_can_hold_is_refused_naming_the_arithmetic(
        pytester: pytest.Pytester, two_nodes: tuple[Cluster, RayCluster], tmp_path: Path) -> None:
    cluster, _ = two_nodes
    pytester.makepyfile("def test_x(sglang_server): pass")
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray",
                                           cluster.address, "--sglang-workers", "3", "--sglang-ray-strategy",
                                           "STRICT_SPREAD", "--sglang-launch", SIM_LAUNCH)
    result.assert_outcomes(errors=1)
    assert time.monotonic() - started < 60
    assert "STRICT_SPREAD" in result.stdout.str()
    wait_for(_no_placement_groups_left, 30, "the run's placement groups to be removed")


RAYLET_SUITE = """
import os
import signal
import time

import pytest
import ray

from pytest_sglang.server.ray import driver_log


@ray.remote(num_cpus=0, max_restarts=0)
class Victim:
    def pid(self):
        return os.getpid()

    def hang(self):
        time.sleep(120)


def test_a_ray_worker_that_dies(sglang_server):
    victim = Victim.remote()
    pid = ray.get(victim.pid.remote(), timeout=60)
    call = victim.hang.remote()
    os.kill(pid, signal.SIGKILL)  # as a load shard killed on its node (OOM, kill -9)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(call, timeout=60)
    # The raylet's message reaches the driver on its own thread, some time after the error.
    path = driver_log.path()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "(raylet) " not in (path.read_text() if path.exists() else ""):
        time.sleep(0.1)
    print("RAYLET LINES IN", path.name, path.read_text().count("(raylet) "))
"""


def test_ray_s_raylet_messages_go_to_the_run_s_log_not_pytest_s_output(
        pytester: pytest.Pytester, two_nodes: tuple[Cluster, RayCluster]) -> None:
    cluster, _ = two_nodes
    pytester.makepyfile(RAYLET_SUITE)
    logs = pytester.path / "logs"
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray",
                                           cluster.address, "--sglang-launch", SIM_LAUNCH, "--sglang-log-dir",
                                           str(logs))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*RAYLET LINES IN ray-driver.log [1-9]*"])
    assert "(raylet)" not in result.stdout.str() + result.stderr.str()
    assert "A worker died" in (logs / "ray-driver.log").read_text()


RANKS_SUITE = """
import time

import ray


def test_the_ranks_are_on_two_nodes_and_a_dead_rank_is_named(sglang_server):
    ranked = sglang_server.process
    print("RANKS", [(r.node_rank, r.process.seat.info.node_id[:8]) for r in ranked.ranks])
    assert len({r.process.seat.info.node_id for r in ranked.ranks}) == 2
    ray.kill(ranked.ranks[1].process.seat.actor)
    deadline = time.monotonic() + 30
    while ranked.exit_status() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    print("EXIT", ranked.exit_status().describe())
"""


def test_a_two_node_server_puts_a_rank_on_each_node(pytester: pytest.Pytester,
                                                     two_nodes: tuple[Cluster, RayCluster]) -> None:
    cluster, _ = two_nodes
    pytester.makepyfile(RANKS_SUITE)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-ray",
                                           cluster.address, "--sglang-ray-strategy", "STRICT_SPREAD",
                                           "--sglang-launch", f"{SIM_LAUNCH} --nnodes 2 --tp-size 2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["RANKS *", "EXIT rank 1 on node * (node *) the Ray actor that owned the server "
                                            "on node * died (*ray.kill*"])
    wait_for(_no_placement_groups_left, 30, "the run's placement groups to be removed")


def test_a_bad_load_nodes_keyword_is_a_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.sglang_throughput(requests=8, load_nodes=0)
        def test_x():
            pass
    """)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", SIM_LAUNCH)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "load_nodes" in result.stdout.str() + result.stderr.str()


def test_load_nodes_without_a_ray_cluster_names_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.sglang_throughput(requests=8, concurrency=2, input_len=16, output_len=4, load_nodes=2)
        def test_x():
            pass
    """)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", SIM_LAUNCH)
    result.assert_outcomes(errors=1)  # the marker's gate runs in the test's setup
    result.stdout.fnmatch_lines(["*LoadSpec.nodes=2: spreads the load over Ray nodes, and this run has no Ray "
                                 "cluster. Fix: add --sglang-ray auto*"])
