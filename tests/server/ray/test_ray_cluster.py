"""Servers placed on a real (local, two-node) Ray cluster: start, logs, crashes, lost actors, cleanup.

Every test here shares the module's cluster (conftest ``two_nodes``). Under ``pytest -n`` the suite's
scheduler (tests/conftest.py) gives each test its own scope, so each worker that receives one of these
tests starts its own small cluster; listing ``tests/server/ray`` as a serial scope there keeps it to one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
import ray
from raytools import FAST, NODE_A, NODE_B, OBJECT_STORE, TwoNodes, launched, sim_config, wait_for

from pytest_sglang.server.ray import NodeLost, PlacementRefused, PlacementTimeout, RayOptions, RayRunner
from pytest_sglang.server.ray.node_process import RAY_OWNER_ENV, ray_owner_marker
from pytest_sglang.server.ray.process import RayProcess
from pytest_sglang.server.runner import ProcessRunner, SimulatorRunner


@pytest.fixture
def on_node_b(two_nodes: TwoNodes, tmp_path: Path) -> Iterator[RayProcess]:
    runner = RayRunner(two_nodes.cluster, SimulatorRunner(), RayOptions(ray_resources=((NODE_B, 0.01),)))
    proc = runner.start(sim_config(tmp_path), 0, tmp_path / "sim.log")
    try:
        yield proc
    finally:
        proc.stop(5.0)


def live_groups() -> set[str]:
    return {gid for gid, entry in ray.util.placement_group_table().items() if entry["state"] != "REMOVED"}


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_simulator_on_the_chosen_node_answers_at_the_returned_url(two_nodes: TwoNodes, on_node_b: RayProcess) -> None:
    node_b = two_nodes.node(NODE_B)
    assert on_node_b.node_id == node_b.node_id
    assert on_node_b.url.startswith(f"http://{node_b.address}:")
    wait_for(lambda: healthy(on_node_b.url), what="GET /health -> 200")
    assert on_node_b.describe() == f"node {node_b.address} (node {node_b.node_id[:8]}), pid {on_node_b.pid}, running"


def test_the_node_log_streams_into_the_local_log_file(on_node_b: RayProcess) -> None:
    wait_for(lambda: "The server is fired up and ready to roll!" in on_node_b.log_path.read_text(),
             what="the simulator's startup line in the local log")
    head = on_node_b.log_path.read_text().splitlines()[0]
    assert head.startswith("# pytest-sglang ") and "on Ray node" in head and "pytest_sglang.simulator" in head


def test_a_sigkilled_server_reports_the_signal(on_node_b: RayProcess) -> None:
    wait_for(lambda: healthy(on_node_b.url), what="GET /health -> 200")
    on_node_b.kill(signal.SIGKILL)
    wait_for(lambda: on_node_b.exit_status() is not None, what="exit_status after SIGKILL")
    status = on_node_b.exit_status()
    assert status is not None and status.signal == signal.SIGKILL and status.killed_by() == signal.SIGKILL
    assert "killed by SIGKILL" in on_node_b.describe()


def test_a_killed_actor_takes_its_server_along_and_says_so(on_node_b: RayProcess) -> None:
    assert launched(on_node_b.launch_id)
    ray.kill(on_node_b.seat.actor)
    wait_for(lambda: not launched(on_node_b.launch_id), what="the server dying with its actor")
    wait_for(lambda: on_node_b.exit_status() is not None, what="exit_status after ray.kill")
    status = on_node_b.exit_status()
    assert isinstance(status, NodeLost) and status.kind == "actor-gone"
    assert "the Ray actor that owned the server on node" in status.describe()
    assert "ray.kill" in status.detail  # Ray's own reason, in one line
    assert status.killed_by() is None and "ray status" in (status.fix() or "")


def test_an_actor_killed_behind_ray_s_back_takes_its_server_along(on_node_b: RayProcess) -> None:
    # As the OOM killer would: no raylet cleanup runs, only the server's PR_SET_PDEATHSIG stops it.
    assert on_node_b.pid is not None
    actor = psutil.Process(on_node_b.pid).parent()
    assert actor is not None and actor.name().startswith("ray::NodeProcess")
    actor.kill()
    wait_for(lambda: not launched(on_node_b.launch_id), what="the server dying with its actor's process")
    wait_for(lambda: on_node_b.exit_status() is not None, what="exit_status after the actor process died")
    assert isinstance(on_node_b.exit_status(), NodeLost)


def test_stop_leaves_no_process_actor_or_placement_group(on_node_b: RayProcess) -> None:
    group = on_node_b.seat.reservation.group_id
    assert group in live_groups() and launched(on_node_b.launch_id)
    status = on_node_b.stop(5.0)
    assert status is not None and not isinstance(status, NodeLost)
    assert on_node_b.stop() is status  # idempotent
    assert not launched(on_node_b.launch_id)
    assert group not in live_groups()
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(on_node_b.seat.actor.poll.remote(), timeout=10)


def test_a_server_too_big_for_any_node_is_refused_before_anything_starts(two_nodes: TwoNodes, tmp_path: Path) -> None:
    before = set(ray.util.placement_group_table())
    runner = RayRunner(two_nodes.cluster, SimulatorRunner())
    with pytest.raises(PlacementRefused) as err:
        runner.start(sim_config(tmp_path, "--tp-size", "4", "--pp-size", "2"), 0, tmp_path / "big.log")
    assert "needs 8 GPUs per node (tp 4 x pp 2 x dp 1 / nnodes 1); the largest node" in str(err.value)
    assert "has 2 GPUs" in str(err.value)
    assert set(ray.util.placement_group_table()) == before  # not even a placement group was made
    assert not (tmp_path / "big.log").exists()


@ray.remote(num_cpus=1)
class _Hog:
    def ready(self) -> bool:
        return True


def test_an_unsatisfiable_placement_fails_within_its_deadline_naming_what_is_missing(
        two_nodes: TwoNodes, tmp_path: Path) -> None:
    hog = _Hog.options(resources={NODE_B: 0.01}).remote()  # holds node_b's only CPU
    try:
        ray.get(hog.ready.remote(), timeout=30)
        before = live_groups()
        runner = RayRunner(two_nodes.cluster, SimulatorRunner(), RayOptions(ray_resources=((NODE_B, 0.01),)))
        started = time.monotonic()
        with pytest.raises(PlacementTimeout) as err:
            runner.start(sim_config(tmp_path), 0, tmp_path / "x.log", deadline=started + 2.0)
        # Within its 2 s deadline plus the time to remove the group and read what is free (Ray calls, slow on a
        # busy runner): far from the 60 s start-up timeout, which is what a deadline not kept would show.
        assert 2.0 <= time.monotonic() - started < 30.0
        node_b = two_nodes.node(NODE_B)
        text = str(err.value)
        assert "Ray did not place the server within 2.0 s: asked for 1 bundle of {CPU 1, node_b 0.01, GPU 1}" in text
        assert f"{node_b.address} (node {node_b.node_id[:8]}): missing CPU 1 (asked 1, free 0)" in text
        assert "missing node_b 0.01 (asked 0.01, free 0)" in text  # node_a never has node_b
        assert err.value.phase == "waiting for Ray to place the server"
        assert live_groups() == before
    finally:
        ray.kill(hog)


def test_a_loopback_host_is_refused_and_its_reservation_given_back(two_nodes: TwoNodes, tmp_path: Path) -> None:
    before = live_groups()
    runner = RayRunner(two_nodes.cluster, SimulatorRunner())
    with pytest.raises(Exception, match="listens on loopback cannot be reached from the driver") as err:
        runner.start(sim_config(tmp_path, "--host", "127.0.0.1"), 0, tmp_path / "lo.log")
    assert "LaunchConfig.args" in str(err.value)
    assert live_groups() == before


def test_host_memory_is_the_node_s_and_an_unused_reservation_is_given_back(two_nodes: TwoNodes, tmp_path: Path) -> None:
    before = live_groups()
    runner = RayRunner(two_nodes.cluster, ProcessRunner(), RayOptions(ray_resources=((NODE_A, 0.01),)))
    config = sim_config(tmp_path)
    memory = runner.host_memory(config)
    node_a = two_nodes.node(NODE_A)
    assert memory.available_bytes > 0
    assert memory.source.endswith(f"of Ray node {node_a.address} (node {node_a.node_id[:8]})")
    assert len(live_groups() - before) == 1  # held for the start that would follow
    runner.close()
    assert live_groups() == before
    sim = RayRunner(two_nodes.cluster, SimulatorRunner())
    assert sim.host_memory(sim_config(tmp_path, "--sim-host-memory-gb", "64")).source == \
        SimulatorRunner().host_memory(sim_config(tmp_path, "--sim-host-memory-gb", "64")).source


def _sleeper(marker: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            env={**os.environ, RAY_OWNER_ENV: marker})


def test_the_sweep_kills_an_orphan_of_a_dead_owner_and_spares_a_live_one(
        two_nodes: TwoNodes, on_node_b: RayProcess) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    me = psutil.Process()
    orphan = _sleeper(ray_owner_marker("01000000", "deadrun0", gone.pid, time.time() - 60))
    alive = _sleeper(ray_owner_marker("02000000", "liverun0", me.pid, me.create_time()))
    try:
        wait_for(lambda: all(psutil.Process(p.pid).environ().get(RAY_OWNER_ENV) for p in (orphan, alive)),
                 what="both sleepers started")
        # A node's sweep task waits for a Ray worker process to start; on a loaded 2-core CI machine that
        # took over the 15 s default once, and the late task killed the orphan after its report was given up.
        swept = two_nodes.cluster.sweep(timeout_s=120)
        assert not any(line.startswith("could not sweep") for line in swept), swept
        assert orphan.wait(timeout=15) is not None
        assert any(f"pid {orphan.pid} (left by Ray job 01000000, run deadrun0" in line for line in swept), swept
        assert alive.poll() is None
        assert not any(f"pid {alive.pid} " in line or f"pid {on_node_b.pid} " in line for line in swept), swept
        assert launched(on_node_b.launch_id) and on_node_b.exit_status() is None  # a live run's server
    finally:
        for proc in (orphan, alive):
            proc.kill()
            proc.wait()


DRIVER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.ray import RayRunner, connect
    from pytest_sglang.server.runner import SimulatorRunner

    cluster = connect(sys.argv[1], sweep=False)
    config = LaunchConfig(runner="simulator", args=tuple(sys.argv[3:]), startup_timeout_s=60)
    proc = RayRunner(cluster, SimulatorRunner()).start(config, 0, Path(sys.argv[2]))
    print(proc.launch_id, proc.seat.reservation.group_id, proc.url, flush=True)
    time.sleep(600)
""")


def test_a_sigkilled_driver_leaves_no_server_and_no_placement_group(two_nodes: TwoNodes, tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", DRIVER, two_nodes.address, str(tmp_path / "d.log"), *FAST],
                          stdout=subprocess.PIPE, text=True) as driver:
        try:
            assert driver.stdout is not None
            launch_id, group, url = driver.stdout.readline().split()
            wait_for(lambda: healthy(url), what="GET /health -> 200 of the driver's server")
            assert launched(launch_id) and group in live_groups()
        finally:
            driver.kill()  # SIGKILL: no atexit, no cleanup of ours runs
    wait_for(lambda: not launched(launch_id), timeout_s=60, what="the server dying with its driver")
    wait_for(lambda: group not in live_groups(), timeout_s=60, what="Ray removing the driver's placement group")


def test_a_lost_node_takes_its_server_along_and_says_so(two_nodes: TwoNodes, tmp_path: Path) -> None:
    # A node of its own: losing it (raylet SIGKILLed) must not cost the module's nodes.
    node_c = two_nodes.ray_cluster.add_node(num_cpus=1, resources={"node_c": 1}, object_store_memory=OBJECT_STORE)
    two_nodes.ray_cluster.wait_for_nodes()
    runner = RayRunner(two_nodes.cluster, SimulatorRunner(), RayOptions(ray_resources=(("node_c", 0.01),)))
    proc = runner.start(sim_config(tmp_path, "--device", "cpu"), 0, tmp_path / "c.log")
    try:
        wait_for(lambda: healthy(proc.url), what="GET /health -> 200 on node_c")
        two_nodes.ray_cluster.remove_node(node_c, allow_graceful=False)
        wait_for(lambda: not launched(proc.launch_id), what="the server dying with its node")
        wait_for(lambda: proc.exit_status() is not None, what="exit_status after the node was lost")
        status = proc.exit_status()
        assert isinstance(status, NodeLost) and status.kind == "node-gone"
        assert status.describe().startswith(f"node {proc.seat.node} left the Ray cluster")
    finally:
        proc.stop(2.0)
