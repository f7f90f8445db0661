"""``connect("auto")`` without RAY_ADDRESS starts a Ray of its own and ``close()`` stops it.

In a subprocess: a process joins one Ray cluster, and this one must not disturb the module cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import json, time
    import psutil, ray
    from pytest_sglang.server.ray import connect

    cluster = connect("auto", timeout_s=120)
    me = psutil.Process()
    ray_procs = [p for p in me.children(recursive=True) if "gcs_server" in p.name() or "raylet" in p.name()]
    nodes = cluster.nodes()
    cluster.close()
    cluster.close()  # idempotent
    deadline = time.monotonic() + 30
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ray_procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p.pid for p in ray_procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    print(json.dumps({"started": cluster.started, "nodes": len(nodes), "ray_procs": len(ray_procs),
                      "left": left, "connected": ray.is_initialized()}))
""")


def test_auto_without_ray_address_starts_a_local_ray_that_close_stops() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["started"] is True and result["nodes"] == 1  # its own Ray, not the machine's latest one
    assert result["ray_procs"] >= 2  # a GCS and a raylet were started for this run...
    assert result["left"] == [] and result["connected"] is False  # ...and close() stopped them
