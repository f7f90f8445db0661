"""Ray's own output in the driver (its log records, the raylet's messages) goes to the run's file, not to pytest's.

In subprocesses: routing is once per process, and Ray's logger level depends on what the process did before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# What ray.cluster_utils.Cluster (this suite's fixtures, Ray's own tests) logs when it finds an earlier
# cluster's address file: an INFO line of the ``ray`` logger, written by Ray's own handler to stderr.
OVERWRITE = textwrap.dedent("""
    import sys
    from pathlib import Path
    import ray._private.utils as utils

    if sys.argv[1] == "route":
        from pytest_sglang.server.ray import driver_log
        driver_log.route(Path(sys.argv[2]) / "ray-driver.log")
    utils.write_ray_address("10.9.9.9:6379", temp_dir=sys.argv[2])
    utils.write_ray_address("10.9.9.10:6379", temp_dir=sys.argv[2])
""")


@pytest.mark.parametrize("route", ["route", "ray's default"])
def test_ray_s_log_lines_go_to_the_driver_log(tmp_path: Path, route: str) -> None:
    done = subprocess.run([sys.executable, "-c", OVERWRITE, route, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=True)
    said = done.stdout + done.stderr
    if route == "route":
        assert "Overwriting previous Ray address" not in said, said
        assert "Overwriting previous Ray address (10.9.9.9:6379)" in (tmp_path / "ray-driver.log").read_text()
    else:  # what the routing is for: Ray prints it to the process's own stderr
        assert "Overwriting previous Ray address (10.9.9.9:6379)" in done.stderr
